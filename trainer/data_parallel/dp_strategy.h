// The data-parallel strategy: how gradients are reduced over the DP group and what each DP rank
// keeps of parameters, gradients and optimizer states (plain DDP, ZeRO-1, eager ZeRO-2, ZeRO-3),
// behind one interface; one file per strategy (dp_plain.cpp, dp_zero1.cpp, dp_zero2.cpp,
// dp_zero3.cpp) and a factory. It does not update parameters (optimizer.h) or know about TP/PP.
//
// A step, as the trainer drives it (every DP rank in the same order):
//   beginStep(); gatherRoot();
//   per microbatch: setLastMicrobatch(m == M - 1); backward (the strategy's hooks may reduce)
//   finish(); releaseRoot();   // gradients now averaged over DP: in full, or this rank's shard
//   the optimizer: gradShard / paramShard / shardUpdated per bucket (sharded optimizers)
#pragma once

#include "data_parallel/grad_buckets.h"
#include "data_parallel/param_units.h"
#include "model/params.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpttrain {

// ZeRO's memory model (Rajbhandari et al. 2020): which of the three fp32 AdamW categories a rank
// holds as 1/N of the whole between steps (else in full).
struct ZeroMemoryModel {
  bool parameters_sharded = false;
  bool gradients_sharded = false;
  bool optimizer_states_sharded = false;
  // Bytes a rank holds for psi parameters over n DP ranks, without padding: 4 bytes a parameter,
  // 4 a gradient, 8 of AdamW moments, each divided by n when sharded (16Ψ, 8Ψ + 8Ψ/N,
  // 4Ψ + 12Ψ/N, 16Ψ/N for stages 0-3).
  double parameterBytes(double psi, int n) const { return 4 * psi / (parameters_sharded ? n : 1); }
  double gradientBytes(double psi, int n) const { return 4 * psi / (gradients_sharded ? n : 1); }
  double optimizerStateBytes(double psi, int n) const {
    return 8 * psi / (optimizer_states_sharded ? n : 1);
  }
};

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class DataParallelStrategy {
 public:
  virtual ~DataParallelStrategy() = default;

  // --- identity
  virtual int zeroStage() const = 0;
  virtual ZeroMemoryModel memoryModel() const = 0;

  // --- the step
  // Zeroes every gradient (and resets the launch order); call before a step's first microbatch.
  virtual void beginStep() = 0;
  // Whether the coming backward is the step's last microbatch.
  void setLastMicrobatch(bool last) { last_microbatch_ = last; }
  // Parameters held for a whole step or evaluation (ZeRO-3's root unit); no-ops elsewhere.
  virtual void gatherRoot() {}
  virtual void releaseRoot() {}
  // The per-layer gather / free / reduce interface the model calls (ZeRO-3), or null.
  virtual ParamUnits* paramUnits() { return nullptr; }
  // After the last backward: launches what is left (parameters without gradient) and waits for
  // every reduction. Gradients are then averaged over DP: in full, or in this rank's shards only.
  virtual void finish() = 0;
  // After the optimizer's update of step `step` (1-based): decentralized SGD averages weights
  // with its peer here (dp_decentralized.cpp); a no-op elsewhere.
  virtual void afterOptimizerStep(int step) { (void)step; }

  // --- gradients and shards (sharded optimizers, optimizer_sharded.h)
  // The full averaged gradient of a parameter (sharded strategies: all-gathered from the shards,
  // which alone receive the later SP / tied-embedding sums and clipping -- a collective over DP:
  // every DP rank must call it in the same order).
  virtual at::Tensor fullGrad(size_t param) = 0;
  // This rank's slice of a bucket's reduced gradient, and of its parameters (what a sharded
  // optimizer updates); shardUpdated(bucket, paramShard(bucket)) makes the update visible where
  // the strategy holds full parameters (ZeRO-1/2: all-gather). Strategies without shards throw.
  virtual at::Tensor gradShard(size_t bucket) = 0;
  virtual at::Tensor paramShard(size_t bucket) = 0;
  virtual void shardUpdated(size_t bucket, const at::Tensor& shard) = 0;

  // --- what it holds
  const GradBuckets& buckets() const { return buckets_; }
  // Parameters in all buckets (psi of this model-parallel rank), also while sharded.
  int64_t numel() const { return buckets_.numel(); }
  size_t numBuckets() const { return buckets_.size(); }
  // Bytes of parameters and of gradient buffers held now.
  virtual int64_t parameterBytes() const = 0;
  virtual int64_t gradientBytes() const { return buckets_.gradientBytes(); }
  // Its buffers, named "bucket.<b>.<flat|params|grad_shard|param_shard>" (device checks).
  virtual NamedTensors bufferTensors() const = 0;
  // The parameters a checkpoint holds: "param.<name>" for each, or what replaces them.
  virtual NamedTensors checkpointParameters();
  // Bucket reductions launched so far from autograd hooks (overlapping backward) and after
  // backward. With every parameter used, stages 0-2 launch all from hooks.
  int64_t launchedDuringBackward() const { return buckets_.launchedDuringBackward(); }
  int64_t launchedAfterBackward() const { return buckets_.launchedAfterBackward(); }

 protected:
  DataParallelStrategy(ParamSet& params, GroupPtr dp, const BucketLayout& layout)
      : dp_(std::move(dp)), buckets_(params, layout) {}
  DataParallelStrategy(const DataParallelStrategy&) = delete;
  DataParallelStrategy& operator=(const DataParallelStrategy&) = delete;
  ParamSet& params() { return buckets_.params(); }
  // Throws std::logic_error: this strategy keeps no shards.
  [[noreturn]] void noShards(const char* what) const;

  GroupPtr dp_;
  GradBuckets buckets_;
  bool last_microbatch_ = true;
};

// A strategy that keeps every gradient in full flat buckets and no shards (plain DDP and Bagua's
// algorithms): the full gradient is the parameter's own .grad, the shard calls throw, and what it
// holds is its buckets' flat buffers.
class ReplicatedStrategy : public DataParallelStrategy {
 public:
  at::Tensor fullGrad(size_t param) override { return params().entries()[param].tensor.grad(); }
  at::Tensor gradShard(size_t) override { noShards("gradShard"); }
  at::Tensor paramShard(size_t) override { noShards("paramShard"); }
  void shardUpdated(size_t, const at::Tensor&) override { noShards("shardUpdated"); }
  int64_t parameterBytes() const override;  // the parameters' dtype is their gradients'
  NamedTensors bufferTensors() const override;

 protected:
  using DataParallelStrategy::DataParallelStrategy;
};

struct DataParallelOptions {
  int zero_stage = 0;              // 0 (plain DDP) .. 3
  int64_t bucket_bytes = 4 << 20;  // --bucket-mb
  // --dp-algorithm with stage 0: "allreduce" (plain DDP), "bytegrad", "decentralized".
  std::string algorithm = "allreduce";
};

// The strategy of `options.zero_stage` over `dp` for `params`. Call it under the gradient memory
// tag (tracerun::MemoryCategory::kGradient): gradient buffers are allocated here; flat parameters
// are tagged as parameters inside. Throws std::invalid_argument for a stage it does not know.
std::unique_ptr<DataParallelStrategy> makeDataParallelStrategy(ParamSet& params, GroupPtr dp,
                                                               const DataParallelOptions& options);

// The strategies, one per file; use the factory.
std::unique_ptr<DataParallelStrategy> makePlainDdp(ParamSet& params, GroupPtr dp,
                                                   int64_t bucket_bytes);
std::unique_ptr<DataParallelStrategy> makeZero1(ParamSet& params, GroupPtr dp,
                                                int64_t bucket_bytes);
std::unique_ptr<DataParallelStrategy> makeZero2(ParamSet& params, GroupPtr dp,
                                                int64_t bucket_bytes);
std::unique_ptr<DataParallelStrategy> makeZero3(ParamSet& params, GroupPtr dp,
                                                int64_t bucket_bytes);
// Bagua's algorithms (stage 0): 8-bit compressed gradients (dp_bytegrad.cpp), and peer weight
// averaging without gradient reduction (dp_decentralized.cpp).
std::unique_ptr<DataParallelStrategy> makeByteGrad(ParamSet& params, GroupPtr dp,
                                                   int64_t bucket_bytes);
std::unique_ptr<DataParallelStrategy> makeDecentralized(ParamSet& params, GroupPtr dp,
                                                        int64_t bucket_bytes);
// Decentralized SGD's peer of DP rank `rank` (of an even n) at step `step` (symmetric).
int decentralizedPeer(int rank, int n, int step);

}  // namespace gpttrain
