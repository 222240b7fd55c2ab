// Tensor-parallel layers and the vocab-parallel cross-entropy (see tp_layers.h).
#include "parallel/tp_layers.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>

namespace gpttrain {
namespace {

// A new generator of `device` seeded with `seed`. CUDA: a clone of the device's default generator,
// reseeded -- the same calls in libtorch 1.13 and 2.x, and no CUDA header or library (creating a
// CUDAGeneratorImpl directly needs torch_cuda). Every other device: a CPU generator.
at::Generator makeGenerator(torch::Device device, uint64_t seed) {
  if (device.is_cuda()) {
    at::Generator gen = at::globalContext().defaultGenerator(device).clone();
    gen.set_current_seed(seed);
    return gen;
  }
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

}  // namespace

DropoutRng makeDropoutRng(uint64_t seed, int tp_rank, int dp_rank, torch::Device device) {
  const uint64_t base = seed + 1009ULL * static_cast<uint64_t>(dp_rank);
  return DropoutRng{makeGenerator(device, base + 101),
                    makeGenerator(device, base + 2718 + tp_rank)};
}

namespace {

// x * keep * scale with `keep` a bool mask, which is all backward keeps (1 byte per element, as
// libtorch's native_dropout keeps it; x * float_mask would keep the float mask: 4 bytes).
struct MaskedScale : torch::autograd::Function<MaskedScale> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x,
                            const at::Tensor& keep, double scale) {
    ctx->save_for_backward({keep});
    ctx->saved_data["scale"] = scale;
    return x * keep * scale;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor keep = ctx->get_saved_variables()[0];
    return {grads[0] * ctx->saved_data["scale"].toDouble() * keep, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor dropout(const at::Tensor& x, double p, at::Generator* gen) {
  if (p <= 0.0 || gen == nullptr) return x;
  // Drawn straight into a bool tensor: ATen's bernoulli_ draws the same numbers for every dtype,
  // so the masks are those of a float draw.
  at::Tensor keep = at::empty_like(x, at::kBool).bernoulli_(1.0 - p, *gen);
  return MaskedScale::apply(x, keep, 1.0 / (1.0 - p));
}

ColumnParallelLinear::ColumnParallelLinear(ParamSet& params, const std::string& name, int64_t in,
                                           int64_t out_full, double stddev, GroupPtr tp, bool sp,
                                           const LoraConfig& lora)
    : tp_(std::move(tp)), sp_(sp) {
  weight_ = params.add(name + ".weight", {out_full, in}, 0, Init::kNormal, stddev);
  bias_ = params.add(name + ".bias", {out_full}, 0, Init::kZeros);
  if (lora.on()) {
    lora_ = LoraAdapter(params, name, LoraAdapter::Kind::kColumn, in, out_full, lora, tp_, sp);
  }
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) const {
  at::Tensor y = sp_ ? linearGatherFromSeq(x, weight_, bias_, tp_)  // keeps x's shard
                     : at::linear(copyToTp(x, tp_), weight_, bias_);
  return lora_.on() ? y + lora_.forward(x) : y;
}

RowParallelLinear::RowParallelLinear(ParamSet& params, const std::string& name, int64_t in_full,
                                     int64_t out, double stddev, GroupPtr tp, bool sp,
                                     const LoraConfig& lora)
    : tp_(std::move(tp)), sp_(sp) {
  weight_ = params.add(name + ".weight", {out, in_full}, 1, Init::kNormal, stddev);
  bias_ = params.add(name + ".bias", {out}, -1, Init::kZeros);
  if (lora.on()) {
    lora_ = LoraAdapter(params, name, LoraAdapter::Kind::kRow, in_full, out, lora, tp_, sp);
  }
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) const {
  at::Tensor y;
  if (tp_->size == 1) {
    // One rank: nothing to reduce, so the bias rides on the GEMM (addmm) instead of its own pass.
    y = at::linear(x, weight_, bias_);
  } else {
    at::Tensor partial = at::matmul(x, weight_.t());
    y = (sp_ ? reduceScatterToSeq(partial, tp_) : reduceFromTp(partial, tp_)) + bias_;
  }
  return lora_.on() ? y + lora_.forward(x) : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(ParamSet& params, const std::string& name,
                                               int64_t vocab, int64_t hidden, double stddev,
                                               GroupPtr tp)
    : tp_(std::move(tp)) {
  weight_ = params.add(name + ".weight", {vocab, hidden}, 0, Init::kNormal, stddev);
  const int64_t per_rank = vocab / tp_->size;
  vocab_start_ = per_rank * tp_->rank;
  vocab_end_ = vocab_start_ + per_rank;
}

at::Tensor VocabParallelEmbedding::forwardPartial(const at::Tensor& tokens) const {
  if (tp_->size == 1) return at::embedding(weight_, tokens);
  at::Tensor outside = (tokens < vocab_start_).logical_or(tokens >= vocab_end_);
  at::Tensor local = (tokens - vocab_start_).masked_fill(outside, 0);
  return at::embedding(weight_, local).masked_fill(outside.unsqueeze(-1), 0.0);
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// loss_i = log(sum_v exp(z_iv)) - z_i,target, with the sums over v split over TP. On one rank
// (tp 1) every target is local: no mask of outside targets, no stacked all-reduce of the two sums;
// the same values, 7 fewer small ops per forward (issue 32: launch-bound steps).
struct VocabParallelCrossEntropyFn : torch::autograd::Function<VocabParallelCrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits,
                            const at::Tensor& targets, GroupPtr tp) {
    Group& g = *tp;
    at::Tensor max = std::get<0>(logits.max(1)).contiguous();
    allReduce(g, max, ReduceOp::kMax);
    at::Tensor shifted = logits - max.unsqueeze(1);
    if (g.size == 1) {
      at::Tensor target_logit = shifted.gather(1, targets.unsqueeze(1)).squeeze(1);
      at::Tensor exp = shifted.exp();
      at::Tensor sum_exp = exp.sum(1);
      at::Tensor softmax = exp.div_(sum_exp.unsqueeze(1));
      ctx->save_for_backward({softmax, targets});  // no `outside`: every target is inside
      return sum_exp.log() - target_logit;
    }
    const int64_t local_vocab = logits.size(1);
    const int64_t start = local_vocab * g.rank;
    at::Tensor outside = (targets < start).logical_or(targets >= start + local_vocab);
    at::Tensor local_target = (targets - start).masked_fill(outside, 0);
    at::Tensor target_logit =
        shifted.gather(1, local_target.unsqueeze(1)).squeeze(1).masked_fill(outside, 0.0);
    at::Tensor exp = shifted.exp();
    // One all-reduce for both sums: [target logit; sum of exp] per row.
    at::Tensor sums = at::stack({target_logit, exp.sum(1)});
    allReduce(g, sums);
    at::Tensor sum_exp = sums[1];
    at::Tensor softmax = exp.div_(sum_exp.unsqueeze(1));
    ctx->save_for_backward({softmax, local_target, outside});
    return sum_exp.log() - sums[0];
  }

  // d loss_i / d z_iv = (softmax_iv - [v is the local target]) * grad_i. The product is taken out
  // of place (one pass over the [rows, vocab] softmax, no clone of it first), then each row's
  // target entry is rewritten as (softmax - 1) * grad (outside targets: (softmax - 0) * grad, the
  // value already there): the same roundings as adding -1 to the clone and scaling it.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const at::Tensor& softmax = saved[0];
    const at::Tensor index = saved[1].unsqueeze(1);
    const at::Tensor scale = grads[0].unsqueeze(1);
    at::Tensor at_target = softmax.gather(1, index);
    if (saved.size() > 2) {  // tp > 1: subtract 1 where the target is on this rank, 0 elsewhere
      at_target.sub_(saved[2].logical_not().to(at_target.scalar_type()).unsqueeze(1));
    } else {
      at_target.sub_(1.0);
    }
    at::Tensor grad = softmax * scale;
    grad.scatter_(1, index, at_target.mul_(scale));
    return {grad, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor vocabParallelCrossEntropy(const at::Tensor& logits, const at::Tensor& targets,
                                     const GroupPtr& tp) {
  return VocabParallelCrossEntropyFn::apply(logits, targets, tp);
}

}  // namespace gpttrain
