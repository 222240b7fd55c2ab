// ZeRO stage 1 over the DP group: gradients are all-reduced in full as in plain DDP (once per step,
// from the last microbatch's hooks, in bucket order); each rank keeps optimizer states for its
// shard of every bucket only. Parameters are views of flat bucket buffers with the gradients'
// padded layout, so a shard of a bucket is a shard of parameters, gradients and moments alike;
// after the update of a shard, every rank's shards are all-gathered. It does not step (see
// optimizer_sharded.h).
#include "data_parallel/dp_strategy.h"

namespace gpttrain {
namespace {

class Zero1 final : public DataParallelStrategy {
 public:
  Zero1(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : DataParallelStrategy(params, dp, BucketLayout{bucket_bytes, dp->size, dp->rank, false}) {
    for (GradBucket& b : buckets_.all()) {
      buckets_.flattenParams(b);
      buckets_.allocateGrads(b, buckets_.options(b));
    }
    if (dp_->size > 1) {
      hooks_ = std::make_unique<AccumulateHooks>(params, nullptr,
                                                 [this](size_t param) { onGradient(param); });
    }
  }

  int zeroStage() const override { return 1; }
  ZeroMemoryModel memoryModel() const override { return {false, false, true}; }

  void beginStep() override { buckets_.beginInOrderStep(); }
  void finish() override { buckets_.finishInOrder(*dp_); }

  at::Tensor fullGrad(size_t param) override {
    const size_t b = buckets_.bucketOf(param);
    return gatherFullGrad(*dp_, buckets_[b], gradShard(b), param);
  }
  at::Tensor gradShard(size_t bucket) override {
    GradBucket& b = buckets_[bucket];
    return b.flat.narrow(0, b.shard_begin, b.shard_size);
  }
  at::Tensor paramShard(size_t bucket) override {
    GradBucket& b = buckets_[bucket];
    return b.params.narrow(0, b.shard_begin, b.shard_size);
  }
  void shardUpdated(size_t bucket, const at::Tensor& shard) override {
    allGatherParams(*dp_, buckets_[bucket], bucket, shard);
  }

  int64_t parameterBytes() const override { return buckets_.flatParameterBytes(); }
  NamedTensors bufferTensors() const override {
    NamedTensors out;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      out.emplace_back("bucket." + std::to_string(i) + ".flat", buckets_[i].flat);
      out.emplace_back("bucket." + std::to_string(i) + ".params", buckets_[i].params);
    }
    return out;
  }

 private:
  // AccumulateGrad post-hook: only the last microbatch's gradients launch reductions.
  void onGradient(size_t param) {
    if (!last_microbatch_) return;
    buckets_.gradientInOrder(*dp_, param);
  }

  std::unique_ptr<AccumulateHooks> hooks_;  // last: removed before the buckets go
};

}  // namespace

std::unique_ptr<DataParallelStrategy> makeZero1(ParamSet& params, GroupPtr dp,
                                                int64_t bucket_bytes) {
  return std::make_unique<Zero1>(params, std::move(dp), bucket_bytes);
}

}  // namespace gpttrain
