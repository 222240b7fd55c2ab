// ZeRO stage 3 (FSDP full shard) over the DP group: between steps a rank holds only its shard of
// parameters, gradients and optimizer states. Each transformer layer is one bucket (a unit) that
// the model gathers before its forward and its recomputed backward and frees after (ParamUnits),
// the next unit's all-gather prefetched; a unit's gradients are reduce-scattered right after its
// backward (summed over microbatches, one in flight while the layer below runs). The root
// (embedding, position table, final LayerNorm) is gathered for a whole step and reduced after
// backward. It does not step, and does not decide when layers run (model.cpp, recompute.h).
#include "data_parallel/dp_strategy.h"

#include <map>
#include <optional>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

class Zero3 final : public DataParallelStrategy, public ParamUnits {
 public:
  Zero3(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : DataParallelStrategy(params, dp, BucketLayout{bucket_bytes, dp->size, dp->rank, true}),
        shards_(buckets_.size()) {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      GradBucket& b = buckets_[i];
      buckets_.flattenParams(b);
      b.grad_shard = at::zeros({b.shard_size}, buckets_.options(b));
      // A full gradient buffer allocated and freed at once: nothing needs it, but the traces
      // (gradient-tagged bytes at construction, and so the gradient peak the report shows) stay
      // those of the trainer before the strategies were split. Drop it together with that.
      buckets_.allocateGrads(b, buckets_.options(b));
      {
        tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
        shards_[i].param_shard = b.params.narrow(0, b.shard_begin, b.shard_size).clone();
      }
      if (b.unit >= 0) unit_bucket_[b.unit] = i;
      releaseBucket(i);
      b.flat = at::Tensor();
      buckets_.detachGrads(b);
    }
  }

  int zeroStage() const override { return 3; }
  ZeroMemoryModel memoryModel() const override { return {true, true, true}; }

  void beginStep() override {
    for (GradBucket& b : buckets_.all()) {
      TORCH_CHECK(!b.work, "beginStep while a reduction is in flight");
      b.grad_shard.zero_();
      if (b.unit >= 0) continue;  // units: full gradients exist only in their backward
      if (b.flat.defined()) {
        b.flat.zero_();
      } else {
        buckets_.allocateGrads(b, b.grad_shard.options());
      }
    }
  }

  void gatherRoot() override {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (buckets_[i].unit < 0) finishGather(i);
    }
  }
  void releaseRoot() override {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (buckets_[i].unit < 0) releaseBucket(i);
    }
  }
  ParamUnits* paramUnits() override { return this; }

  void finish() override {
    completeUnitReduce();
    if (dp_->size > 1) {  // the root's gradients, in bucket order (units were reduced already)
      for (size_t i = 0; i < buckets_.size(); ++i) {
        if (buckets_[i].unit < 0) {
          buckets_.launchReduction(*dp_, i, /*scatter=*/true, /*after_backward=*/true);
        }
      }
    }
    for (GradBucket& b : buckets_.all()) {
      if (b.work) b.work->wait();
      b.work.reset();
      if (!b.flat.defined()) continue;
      if (!dp_->native_base_collectives) {
        b.grad_shard.copy_(b.flat.narrow(0, b.shard_begin, b.shard_size));
      }
      // Free the full buffer: only the shard is kept until the optimizer step.
      b.flat = at::Tensor();
      buckets_.detachGrads(b);
    }
  }

  // --- ParamUnits (param_units.h)

  void gather(int layer, bool backward) override {
    auto it = unit_bucket_.find(layer);
    if (it == unit_bucket_.end()) return;
    GradBucket& b = buckets_[it->second];
    finishGather(it->second);
    if (backward) {  // the re-run's backward accumulates into full gradients
      if (pending_unit_ == it->second) completeUnitReduce();  // its buffer is about to be reused
      buckets_.allocateGrads(b, shards_[it->second].param_shard.options());
    }
    // Prefetch the unit this rank runs next: forward goes up the layers, backward down.
    auto next = unit_bucket_.find(backward ? layer - 1 : layer + 1);
    if (next != unit_bucket_.end()) startGather(next->second);
  }

  void release(int layer) override {
    auto it = unit_bucket_.find(layer);
    if (it != unit_bucket_.end()) releaseBucket(it->second);
  }

  void reduceGrads(int layer) override {
    auto it = unit_bucket_.find(layer);
    if (it == unit_bucket_.end()) return;
    completeUnitReduce();  // at most one layer's reduction in flight
    GradBucket& b = buckets_[it->second];
    tracerun::Scope scope(
        vocab::scope::kZero3ReduceScatter,
        {{vocab::arg::kUnit, b.unit}, {vocab::arg::kBytes, static_cast<int64_t>(b.flat.nbytes())}});
    b.flat.div_(dp_->size);
    buckets_.detachGrads(b);
    if (dp_->size > 1) {
      // Gloo: all-reduce, keep the slice. Completed while the layer below runs its backward.
      dp_->count(CollectiveImpl::kReduceScatterAllReduce);
      b.work = allReduceAsync(*dp_, b.flat);
    }
    pending_unit_ = it->second;
  }

  // --- shards

  at::Tensor fullGrad(size_t param) override {
    const size_t b = buckets_.bucketOf(param);
    return gatherFullGrad(*dp_, buckets_[b], gradShard(b), param);
  }
  at::Tensor gradShard(size_t bucket) override { return buckets_[bucket].grad_shard; }
  at::Tensor paramShard(size_t bucket) override { return shards_[bucket].param_shard; }
  void shardUpdated(size_t, const at::Tensor&) override {}  // the shard is all a rank keeps

  int64_t parameterBytes() const override {
    int64_t bytes = buckets_.flatParameterBytes();
    for (const Shard& s : shards_) bytes += s.param_shard.nbytes();
    return bytes;
  }
  NamedTensors bufferTensors() const override {
    NamedTensors out;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      const std::string prefix = "bucket." + std::to_string(i);
      out.emplace_back(prefix + ".flat", buckets_[i].flat);
      out.emplace_back(prefix + ".params", buckets_[i].params);
      out.emplace_back(prefix + ".grad_shard", buckets_[i].grad_shard);
      out.emplace_back(prefix + ".param_shard", shards_[i].param_shard);
    }
    return out;
  }
  // Only the shards exist between steps.
  NamedTensors checkpointParameters() override {
    NamedTensors out;
    for (size_t i = 0; i < shards_.size(); ++i) {
      out.emplace_back("zero.param_shard." + std::to_string(i), shards_[i].param_shard);
    }
    return out;
  }

 private:
  // Per bucket: this rank's slice of the parameters and a prefetched all-gather.
  struct Shard {
    at::Tensor param_shard;  // [shard_size]
    c10::intrusive_ptr<c10d::Work> gather_work;
    std::vector<std::vector<at::Tensor>> gather_out;
  };

  void startGather(size_t index) {
    GradBucket& b = buckets_[index];
    Shard& s = shards_[index];
    if (b.params.defined() || s.gather_work || dp_->size == 1) return;
    tracerun::Scope scope(vocab::scope::kZero3GatherStart,
                          {{vocab::arg::kUnit, b.unit},
                           {vocab::arg::kBytes, static_cast<int64_t>(s.param_shard.nbytes())}});
    const at::Tensor wire = wireView(*dp_, s.param_shard);  // bf16 on Gloo: its bytes
    s.gather_out.assign(1, {});
    for (int i = 0; i < dp_->size; ++i) s.gather_out[0].push_back(at::empty_like(wire));
    std::vector<at::Tensor> inputs{wire};
    dp_->count(CollectiveImpl::kAllGatherList);
    s.gather_work = dp_->pg->allgather(s.gather_out, inputs);
  }

  void finishGather(size_t index) {
    GradBucket& b = buckets_[index];
    Shard& s = shards_[index];
    if (b.params.defined()) return;
    if (dp_->size == 1) {
      b.params = s.param_shard;
    } else {
      startGather(index);
      tracerun::Scope scope(vocab::scope::kZero3GatherWait, {{vocab::arg::kUnit, b.unit}});
      s.gather_work->wait();
      s.gather_work.reset();
      b.params = fromWire(at::cat(s.gather_out[0]), s.param_shard.scalar_type());
      s.gather_out.clear();
    }
    at::NoGradGuard no_grad;
    for (const BucketMember& m : b.members) {
      params().entries()[m.param].tensor.set_data(
          b.params.narrow(0, m.offset, m.numel).view(m.shape));
    }
  }

  void releaseBucket(size_t index) {
    GradBucket& b = buckets_[index];
    at::NoGradGuard no_grad;
    for (const BucketMember& m : b.members) {
      at::Tensor& p = params().entries()[m.param].tensor;
      p.set_data(at::empty({0}, p.options().requires_grad(false)));
    }
    b.params = at::Tensor();
  }

  void completeUnitReduce() {
    if (!pending_unit_) return;
    GradBucket& b = buckets_[*pending_unit_];
    pending_unit_.reset();
    if (b.work) {
      tracerun::Scope scope(vocab::scope::kZero3ReduceWait, {{vocab::arg::kUnit, b.unit}});
      b.work->wait();
      b.work.reset();
    }
    b.grad_shard.add_(b.flat.narrow(0, b.shard_begin, b.shard_size));
    b.flat = at::Tensor();
  }

  std::vector<Shard> shards_;           // per bucket
  std::map<int, size_t> unit_bucket_;   // layer -> bucket
  std::optional<size_t> pending_unit_;  // the unit whose reduction is in flight
};

}  // namespace

std::unique_ptr<DataParallelStrategy> makeZero3(ParamSet& params, GroupPtr dp,
                                                int64_t bucket_bytes) {
  return std::make_unique<Zero3>(params, std::move(dp), bucket_bytes);
}

}  // namespace gpttrain
