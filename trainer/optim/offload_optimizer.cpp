// ZeRO-Offload / ZeRO-Infinity's optimizer (--offload-optimizer cpu|nvme:DIR with ZeRO 1-3): the
// sharded optimizer's update (optimizer_sharded.cpp, which still does the gradient steps: SP and
// tied-embedding sums, the global norm, clipping), with the fp32 master weights and AdamW moments
// of this rank's shards in an offload store (offload_store.h) instead of on the device. Per bucket:
// the shard's states [master | exp_avg | exp_avg_sq] are updated on the CPU (in place in pinned
// memory, or in one of three swap buffers: the next bucket's states are read while this one is
// updated and the previous one's written back), the gradient shard is copied to the host and
// the updated master copied into the device's parameter shard. The same arithmetic, on the same
// values, as the sharded optimizer (on a GPU, the roundings its CUDA kernels make: shard_update.h):
// the losses are bit-equal. Checkpoints see the stored states
// under the sharded optimizer's names (namedShardStates), as tensors aliasing the store, so the
// two optimizers load each other's checkpoints, at another DP size too.
#include "data_parallel/dp_strategy.h"
#include "optim/offload_store.h"
#include "optim/optimizer.h"
#include "optim/shard_update.h"

#include <algorithm>

namespace gpttrain {
namespace {

class OffloadOptimizer final : public Optimizer {
 public:
  OffloadOptimizer(ParamSet& params, DataParallelStrategy& strategy, GroupPtr dp,
                   const OptimizerConfig& config)
      : params_(params),
        strategy_(strategy),
        config_(config),
        inner_(makeShardedOptimizer(params, strategy, dp, config)) {
    const GradBuckets& buckets = strategy_.buckets();
    std::vector<int64_t> floats;
    segments_ = shardSegments(buckets);
    for (size_t i = 0; i < buckets.size(); ++i) {
      const GradBucket& b = buckets[i];
      floats.push_back(b.shard_size * (config_.adamw ? 3 : 1));
    }
    const std::string dir = config_.offload.rfind("nvme:", 0) == 0 ? config_.offload.substr(5) : "";
    store_ =
        dir.empty()
            ? makePinnedStore(floats)
            : makeNvmeStore(dir, dp->global_ranks.empty() ? 0 : dp->global_ranks[dp->rank], floats);
    // Three swap buffers of the largest region (one updated, one read into, one written from),
    // counted as temporaries: they hold three buckets' states at a time, whatever psi is.
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
    const int64_t largest = floats.empty() ? 0 : *std::max_element(floats.begin(), floats.end());
    for (auto& s : staging_) s = at::zeros({largest}, at::kFloat);
    for (size_t i = 0; i < buckets.size(); ++i) {  // master = the shard's values, moments 0
      float* states = statesOf(i);
      std::fill(states, states + floats[i], 0.0f);
      at::Tensor master = at::from_blob(states, {buckets[i].shard_size}, at::kFloat);
      master.copy_(strategy_.paramShard(i));
      if (!store_->inPlace(i)) store_->writeAsync(i, states).get();
    }
  }

  void syncSequenceParallelGrads(Group& tp, bool sp) override {
    inner_->syncSequenceParallelGrads(tp, sp);
  }
  void syncTiedEmbeddingGrads(Group& embedding) override {
    inner_->syncTiedEmbeddingGrads(embedding);
  }
  double clipGradNorm(Group& tp, Group& pp, double max_norm) override {
    return inner_->clipGradNorm(tp, pp, max_norm);
  }

  void step(double lr) override {
    at::NoGradGuard no_grad;
    ++steps_;
    AdamwStep adamw = adamwStep(config_, lr, steps_);
    const size_t n = segments_.size();
    std::vector<std::future<void>> reads(n), writes(n);
    if (n > 0 && !store_->inPlace(0)) reads[0] = store_->readAsync(0, statesOf(0));
    for (size_t b = 0; b < n; ++b) {
      if (reads[b].valid()) reads[b].get();
      if (b + 1 < n && !store_->inPlace(b + 1)) {  // prefetch into the slot bucket b-2 used
        if (b >= 2 && writes[b - 2].valid()) writes[b - 2].get();
        reads[b + 1] = store_->readAsync(b + 1, statesOf(b + 1));
      }
      update(b, adamw, lr);
      if (!store_->inPlace(b)) writes[b] = store_->writeAsync(b, statesOf(b));
    }
    for (auto& w : writes) {
      if (w.valid()) w.get();
    }
    master_from_shard_ = false;
  }

  // The stored states of every bucket, aliasing the store (a load writes into it): the master
  // weights with bf16-mixed (fp32 ones are the parameter shard's values, which the strategy
  // checkpoints: the next step re-reads them from the shard, as a load may have changed it) and
  // the moments, named as the sharded optimizer names its own.
  std::vector<std::pair<std::string, at::Tensor>> namedState() override {
    std::vector<at::Tensor> master, exp_avg, exp_avg_sq;
    const GradBuckets& buckets = strategy_.buckets();
    for (size_t b = 0; b < buckets.size(); ++b) {
      const int64_t size = buckets[b].shard_size;
      at::Tensor states = store_->view(b);  // [master | exp_avg | exp_avg_sq]
      if (config_.master_weights) master.push_back(states.narrow(0, 0, size));
      if (config_.adamw) {
        exp_avg.push_back(states.narrow(0, size, size));
        exp_avg_sq.push_back(states.narrow(0, 2 * size, size));
      }
    }
    master_from_shard_ = !config_.master_weights;
    return namedShardStates(master, exp_avg, exp_avg_sq);
  }
  int64_t stateBytes() const override { return 0; }  // on the device: none (store_ has them)

 private:
  // Bucket b's states: in place in the store, or its swap buffer.
  float* statesOf(size_t b) {
    float* p = store_->inPlace(b);
    return p != nullptr ? p : staging_[b % 3].data_ptr<float>();
  }

  void update(size_t b, AdamwStep& adamw, double lr) {
    const int64_t size = strategy_.buckets()[b].shard_size;
    float* states = statesOf(b);
    at::Tensor master = at::from_blob(states, {size}, at::kFloat);
    at::Tensor shard = strategy_.paramShard(b);
    if (master_from_shard_) master.copy_(shard);  // fp32: the same values, exactly
    at::Tensor grad = strategy_.gradShard(b);
    if (!grad.device().is_cpu() || grad.scalar_type() != at::kFloat) {
      tracerun::Scope scope("offload_grad_to_host",
                            {{"bucket", int64_t(b)}, {"bytes", int64_t(grad.nbytes())}});
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
      grad = grad.to(at::kCPU, at::kFloat);
    }
    {
      tracerun::Scope scope("offload_cpu_adamw",
                            {{"bucket", int64_t(b)}, {"bytes", size * int64_t(sizeof(float))}});
      // The sharded optimizer's update, on the host: [master | exp_avg | exp_avg_sq].
      at::Tensor m =
          config_.adamw ? at::from_blob(states + size, {size}, at::kFloat) : at::Tensor();
      at::Tensor v =
          config_.adamw ? at::from_blob(states + 2 * size, {size}, at::kFloat) : at::Tensor();
      // With the parameters on a GPU, the same layout without offload updates them there: the
      // host follows the CUDA kernels' roundings (adamwUpdateAsCuda), so the floats are those.
      updateShard(segments_[b], master, grad, m, v, params_, config_, lr, adamw,
                  shard.is_cuda() ? UpdateArithmetic::kCudaKernels : UpdateArithmetic::kHost);
    }
    {
      tracerun::Scope scope("offload_param_to_device",
                            {{"bucket", int64_t(b)}, {"bytes", int64_t(shard.nbytes())}});
      shard.copy_(master);  // exact for fp32; rounded once to bf16 with bf16-mixed
    }
    strategy_.shardUpdated(b, shard);
  }

  ParamSet& params_;
  DataParallelStrategy& strategy_;
  OptimizerConfig config_;
  std::unique_ptr<Optimizer> inner_;  // the gradient steps; holds no states (config_.offload)
  std::vector<std::vector<ShardSegment>> segments_;  // per bucket
  std::unique_ptr<OffloadStore> store_;
  at::Tensor staging_[3];  // swap buffers (files only)
  // fp32 after namedState: the next step takes the master weights from the parameter shards.
  bool master_from_shard_ = false;
};

}  // namespace

std::unique_ptr<Optimizer> makeOffloadOptimizer(ParamSet& params, DataParallelStrategy& strategy,
                                                GroupPtr dp, const OptimizerConfig& config) {
  return std::make_unique<OffloadOptimizer>(params, strategy, std::move(dp), config);
}

}  // namespace gpttrain
