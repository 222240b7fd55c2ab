// The optimizer interface the trainer steps (one per data-parallel strategy's memory model:
// replicated states, optimizer_replicated.cpp, or ZeRO-sharded ones, optimizer_sharded.cpp), the
// AdamW / SGD update they share and the warm-up + cosine learning-rate schedule. It does not
// reduce gradients over DP (dp_strategy.h).
#pragma once

#include "model/params.h"
#include "parallel/collectives.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpttrain {

struct ScheduleConfig {
  double lr = 1e-3;
  double min_lr = 1e-4;
  int warmup = 0;
  int decay_steps = 1;  // cosine horizon, counted from step 1
};

// Learning rate for optimizer step `step` (1-based): linear warm-up to lr over `warmup` steps,
// then cosine down to min_lr at `decay_steps`, min_lr after.
double learningRate(const ScheduleConfig& config, int step);

struct OptimizerConfig {
  bool adamw = true;  // false: SGD without momentum or weight decay
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.01;
  // Mixed precision (--precision bf16-mixed): the parameters the model computes with are bf16;
  // the optimizer keeps an fp32 master copy of what it updates (all of it, or its ZeRO shard),
  // updates that from the gradient widened to fp32, and rounds the result into the bf16 parameters.
  bool master_weights = false;
  // --offload-optimizer: "none", "cpu" or "nvme:DIR" (offload_optimizer.cpp; sharded states only).
  std::string offload = "none";
};

// One AdamW update of parameter p from gradient g with moments m and v, all four the same shape:
// p = p * decay - lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps), after m and v take in g.
// Contiguous fp32 CPU tensors take one fused pass (each buffer read and written once, 4 floats at a
// time); anything else the ATen ops, which stream the buffers some 22 times in all.
struct AdamwStep {
  double lr = 0.0;
  double decay = 1.0;  // 1 - lr * weight_decay, or 1 without weight decay
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double bias1 = 1.0, bias2 = 1.0;  // 1 - beta^step
};
void adamwUpdate(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v,
                 const AdamwStep& step);
// adamwUpdate's result as libtorch's CUDA kernels compute it when adamwUpdate runs its ATen ops on
// CUDA tensors, computed on the host over n contiguous floats: ZeRO-Offload's CPU update of states
// whose parameters live on a GPU, so that its floats are those of the same layout without offload.
// The kernels (PyTorch 1.10-2.x, aten/src/ATen/native/cuda) differ from the host's fused pass in
// two ways: nvcc contracts `a + alpha * x` into one fused multiply-add (add with alpha, addcmul's
// `a + alpha * (b * c)`, addcdiv's `a + alpha * (b / c)`), and a division by a host scalar is a
// multiplication by its float reciprocal (div_true_kernel_cuda).
void adamwUpdateAsCuda(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamwStep& step);
// SGD's p.add_(g, -lr) as the CUDA add kernel computes it (one fused multiply-add), on the host.
void sgdUpdateAsCuda(float* p, const float* g, int64_t n, double lr);
// adamwUpdate over many parameters at once, parameter i with decay[i] (step.decay is not read):
// the same operations in the same order, as multi-tensor (_foreach) ops, so a CUDA step launches
// about ten kernels for all of them instead of about ten per parameter (launch-bound steps: a
// nanoGPT-sized model has 76 parameters). For CUDA tensors; CPU tensors take adamwUpdate.
void adamwUpdateMany(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                     const std::vector<double>& decay, const AdamwStep& step);
// The step-wide part of AdamW's update number `step` (1-based) at learning rate lr; `decay` is left
// at 1: set it per parameter with adamwDecay.
AdamwStep adamwStep(const OptimizerConfig& config, double lr, int64_t step);
// 1 - lr * weight_decay for a parameter that takes weight decay (and a config that has it), else 1.
double adamwDecay(const OptimizerConfig& config, double lr, bool decays);

class DataParallelStrategy;

// The gradient steps after the DP reduction that depend on how gradients are held (in full or as
// ZeRO shards), and the update. Per step, in this order on every rank:
// syncSequenceParallelGrads, syncTiedEmbeddingGrads, clipGradNorm, step.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // With sp: the replicated parameters' gradients (each rank saw its sequence slice) summed over
  // TP, in one coalesced all-reduce.
  virtual void syncSequenceParallelGrads(Group& tp, bool sp) = 0;
  // With PP: the tied embedding's gradient summed between the first and last stage (`embedding`,
  // a no-op on a group of one).
  virtual void syncTiedEmbeddingGrads(Group& embedding) = 0;
  // Global L2 norm (TP shards summed, replicated parameters once, duplicates skipped, stages and
  // ZeRO shards summed); when max_norm > 0 and the norm exceeds it, every gradient is scaled by
  // max_norm / (norm + 1e-6). Returns the norm before clipping.
  virtual double clipGradNorm(Group& tp, Group& pp, double max_norm) = 0;
  // One update at learning rate lr (counts the step).
  virtual void step(double lr) = 0;

  // State, for checkpoints and memory accounting.
  virtual std::vector<std::pair<std::string, at::Tensor>> namedState() = 0;
  virtual int64_t stateBytes() const = 0;
  int64_t& stepCount() { return steps_; }

 protected:
  Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  int64_t steps_ = 0;
};

// The optimizer for `strategy`'s memory model: states sharded over `dp` as the strategy's buckets
// (ZeRO 1-3), or replicated. Call it under the optimizer-state memory tag.
std::unique_ptr<Optimizer> makeOptimizer(ParamSet& params, DataParallelStrategy& strategy,
                                         GroupPtr dp, const OptimizerConfig& config);

// The two, one per file; use makeOptimizer.
class GradBuckets;
// AdamW / SGD on every parameter's .grad() (each rank's full copy; no communication in step);
// `buckets` (the strategy's, outliving the optimizer) say where the gradients live.
std::unique_ptr<Optimizer> makeReplicatedOptimizer(ParamSet& params, const GradBuckets& buckets,
                                                   const OptimizerConfig& config);
// AdamW / SGD on this rank's shard of every bucket of `strategy` (moments for that shard only).
std::unique_ptr<Optimizer> makeShardedOptimizer(ParamSet& params, DataParallelStrategy& strategy,
                                                GroupPtr dp, const OptimizerConfig& config);
// The sharded optimizer's update with its states in pinned host memory or files (config.offload).
std::unique_ptr<Optimizer> makeOffloadOptimizer(ParamSet& params, DataParallelStrategy& strategy,
                                                GroupPtr dp, const OptimizerConfig& config);

}  // namespace gpttrain
