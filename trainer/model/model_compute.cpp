// The model's forward and backward for the pipeline executor (see model_compute.h).
#include "model/model_compute.h"

#include <tracerun/annotate.h>

#include <optional>

namespace gpttrain {
namespace {

// Input [S, B] and target [S, B] token ids of the `b` samples from `first_index`, on `device`
// (drawn into a CPU tensor, then moved).
std::pair<at::Tensor, at::Tensor> samples(const TokenSource& source, Split split,
                                          uint64_t first_index, int b, int s,
                                          torch::Device device) {
  at::Tensor tokens = at::empty({b, s + 1}, at::kLong);  // host memory: written by the source
  int64_t* data = tokens.data_ptr<int64_t>();
  for (int i = 0; i < b; ++i) source.sample(split, first_index + i, s, data + i * (s + 1));
  return {tokens.narrow(1, 0, s).t().contiguous().to(device),
          tokens.narrow(1, 1, s).t().contiguous().to(device)};
}

}  // namespace

ModelCompute::ModelCompute(std::vector<GptStage>& chunks, const TrainConfig& config,
                           const TokenSource& source, Split split, uint64_t batch_index,
                           int dp_rank, int microbatches, DropoutRng* rng, DataParallelStrategy* dp)
    : chunks_(chunks),
      config_(config),
      source_(source),
      split_(split),
      batch_index_(batch_index),
      dp_rank_(dp_rank),
      microbatches_(microbatches),
      rng_(rng),
      dp_(dp) {}

at::Tensor ModelCompute::forward(int chunk, int microbatch, const at::Tensor& input) {
  GptStage& stage = chunks_[chunk];
  at::Tensor x = input, targets;
  if (stage.first() || stage.last()) {
    const uint64_t first = sampleIndex(batch_index_, config_.global_batch, dp_rank_, microbatches_,
                                       config_.micro_batch, microbatch, 0);
    auto [tokens, target] =
        samples(source_, split_, first, config_.micro_batch, config_.seq_len, stage.device());
    if (stage.first()) x = tokens;
    targets = target;
  }
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kActivation);
  std::optional<tracerun::compat::AutocastGuard> autocast;  // CPU or CUDA autocast
  if (config_.bf16) autocast.emplace(stage.device().type(), at::kBFloat16);
  // Pipeline messages travel as fp32 (sendAsync / recv); with bf16 working parameters a later
  // stage computes on bf16 again (exact: the values were bf16), as layer_norm wants one dtype.
  if (!stage.first() && config_.mixedPrecision()) x = x.to(at::kBFloat16);
  // zb-h1's first stage: its B stops at the embedded input (split_backward.h), kept until then.
  const bool keep_embedded =
      stage.first() && !stage.last() && rng_ != nullptr && config_.schedule == ScheduleKind::kZbH1;
  at::Tensor embedded;
  at::Tensor out = stage.forward(x, targets, rng_, keep_embedded ? &embedded : nullptr);
  if (keep_embedded) embedded_[{chunk, microbatch}] = embedded;
  if (stage.last()) {
    // The same double sum as adding each loss's item() in turn (fp32 -> double is exact), kept on
    // the device; a per-step temporary of 8 bytes.
    tracerun::MemoryTag sum_tag(tracerun::MemoryCategory::kTemporary);
    const at::Tensor loss = out.detach().to(at::kDouble);
    loss_sum_ = loss_sum_.defined() ? loss_sum_ + loss : loss;
  }
  return out;
}

double ModelCompute::lossSum() const {
  return loss_sum_.defined() ? loss_sum_.item<double>() : 0.0;
}

void ModelCompute::markLastMicrobatch(int chunk, int microbatch) {
  // Chimera: each chunk's own last microbatch (down: m-1-p/2, up: m-1) completes its gradients.
  const int last_of_chunk =
      microbatches_ - 1 -
      (config_.schedule == ScheduleKind::kChimera && chunk == 0 ? config_.pp / 2 : 0);
  dp_->setLastMicrobatch(microbatch == last_of_chunk);
}

at::Tensor ModelCompute::backward(int chunk, int microbatch, const at::Tensor& input,
                                  const at::Tensor& output, const at::Tensor& grad) {
  markLastMicrobatch(chunk, microbatch);
  if (grad.defined()) {
    torch::autograd::backward({output}, {grad});
  } else {
    (output / microbatches_).backward();
  }
  return input.defined() ? input.grad() : at::Tensor();
}

at::Tensor ModelCompute::backwardInput(int chunk, int microbatch, const at::Tensor& input,
                                       const at::Tensor& output, const at::Tensor& grad) {
  // The first stage has no input gradient to send, but its B still runs down to the embedded
  // input, so that its W holds only weight gradients, as on every other stage.
  at::Tensor boundary = input;
  if (auto it = embedded_.find({chunk, microbatch}); it != embedded_.end()) {
    if (!boundary.defined()) boundary = it->second;
    embedded_.erase(it);
  }
  if (!boundary.defined()) return at::Tensor();
  const at::Tensor seed = grad.defined() ? grad : at::full_like(output, 1.0 / microbatches_);
  auto split = std::make_unique<SplitBackward>(output, boundary);
  at::Tensor boundary_grad = split->backwardInput(output, seed, boundary);
  splits_[{chunk, microbatch}] = std::move(split);
  return input.defined() ? boundary_grad : at::Tensor();
}

void ModelCompute::backwardWeight(int chunk, int microbatch, const at::Tensor& input,
                                  const at::Tensor& output, const at::Tensor& grad) {
  auto it = splits_.find({chunk, microbatch});
  if (it != splits_.end()) {
    markLastMicrobatch(chunk, microbatch);
    const bool done = it->second->backwardWeight();
    splits_.erase(it);
    if (done) return;
  }
  // A graph that cannot be split (or B did nothing): one full backward of the retained graph; the
  // weights' gradients accumulate and the DP hooks fire as in backward().
  backward(chunk, microbatch, input, output, grad);
}

}  // namespace gpttrain
