// The recomputing autograd function (see recompute.h).
#include "model/recompute.h"

#include <tracerun/annotate.h>
#include <tracerun/torch_compat.h>

#include <optional>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs to re-run the forward exactly.
struct Closure : torch::CustomClassHolder {
  const char* what = "";
  int64_t index = 0;
  std::function<at::Tensor(const at::Tensor&)> fn;
  DropoutRng* rng = nullptr;
  at::Tensor replicated_state, sharded_state;  // generators before the forward
  bool autocast = false;
  std::shared_ptr<int64_t> count;
  RecomputeHooks hooks;
};

void call(const std::function<void()>& f) {
  if (f) f();
}

// Restores `closure`'s generator states for the re-run, and the current ones after it.
class RngRewind {
 public:
  explicit RngRewind(Closure& c) : rng_(c.rng) {
    if (rng_ == nullptr) return;
    replicated_ = rng_->replicated.get_state();
    sharded_ = rng_->sharded.get_state();
    rng_->replicated.set_state(c.replicated_state);
    rng_->sharded.set_state(c.sharded_state);
  }
  ~RngRewind() {
    if (rng_ == nullptr) return;
    rng_->replicated.set_state(replicated_);
    rng_->sharded.set_state(sharded_);
  }
  RngRewind(const RngRewind&) = delete;
  RngRewind& operator=(const RngRewind&) = delete;

 private:
  DropoutRng* rng_;
  at::Tensor replicated_, sharded_;
};

struct RecomputeFn : torch::autograd::Function<RecomputeFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input,
                            c10::intrusive_ptr<Closure> closure) {
    ctx->save_for_backward({input});
    ctx->saved_data["closure"] = c10::IValue::make_capsule(closure);
    call(closure->hooks.before_forward);
    at::Tensor out = closure->fn(input);  // grad mode is off here: nothing inside is kept
    call(closure->hooks.after_forward);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto closure =
        c10::static_intrusive_pointer_cast<Closure>(ctx->saved_data["closure"].toCapsule());
    at::Tensor input = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Tensor output;
    call(closure->hooks.before_rerun);
    {
      tracerun::PhaseScope phase(vocab::phase::kRecomputeForward,
                                 {{closure->what, closure->index}});
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kActivation);
      RngRewind rewind(*closure);
      std::optional<tracerun::compat::AutocastGuard> autocast;  // on the device it computes on
      if (closure->autocast) autocast.emplace(input.device().type(), at::kBFloat16);
      at::AutoGradMode grad_mode(true);
      output = closure->fn(input);
      if (closure->count) ++*closure->count;
    }
    torch::autograd::backward({output}, {grads[0]});
    call(closure->hooks.after_backward);
    return {input.grad(), at::Tensor()};
  }
};

}  // namespace

at::Tensor recomputed(const char* what, int64_t index, const at::Tensor& input,
                      std::function<at::Tensor(const at::Tensor&)> fn, DropoutRng* rng,
                      bool bf16_autocast, std::shared_ptr<int64_t> count, RecomputeHooks hooks) {
  if (!at::GradMode::is_enabled()) {
    call(hooks.before_forward);
    at::Tensor out = fn(input);
    call(hooks.after_forward);
    return out;
  }
  auto closure = c10::make_intrusive<Closure>();
  closure->what = what;
  closure->index = index;
  closure->fn = std::move(fn);
  closure->rng = rng;
  if (rng != nullptr) {
    closure->replicated_state = rng->replicated.get_state();
    closure->sharded_state = rng->sharded.get_state();
  }
  closure->autocast = bf16_autocast;
  closure->count = std::move(count);
  closure->hooks = std::move(hooks);
  // Fine-tuning freezes everything below the first adapter, so the input may need no gradient
  // while the parameters inside do: a leaf that does keeps the function in the graph (its own
  // gradient is dropped), as torch.utils.checkpoint's reentrant variant would need.
  if (!input.requires_grad())
    return RecomputeFn::apply(input.detach().requires_grad_(true), closure);
  return RecomputeFn::apply(input, closure);
}

}  // namespace gpttrain
