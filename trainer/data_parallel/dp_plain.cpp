// Plain data parallelism (DDP, ZeRO stage 0): every rank holds full parameters, gradients and
// optimizer states; gradients live in flat buckets, and each bucket's all-reduce (an average) is
// launched from the AccumulateGrad hooks, strictly in bucket order, as soon as the step's last
// microbatch has produced all its gradients, overlapping the rest of backward. No shards.
#include "data_parallel/dp_strategy.h"

namespace gpttrain {
namespace {

class PlainDdp final : public DataParallelStrategy {
 public:
  PlainDdp(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : DataParallelStrategy(params, std::move(dp), BucketLayout{bucket_bytes, 1, 0, false}) {
    for (GradBucket& b : buckets_.all()) buckets_.allocateGrads(b, buckets_.options(b));
    if (dp_->size > 1) {
      hooks_ = std::make_unique<AccumulateHooks>(params, nullptr,
                                                 [this](size_t param) { onGradient(param); });
    }
  }

  int zeroStage() const override { return 0; }
  ZeroMemoryModel memoryModel() const override { return {false, false, false}; }

  void beginStep() override { buckets_.beginInOrderStep(); }
  void finish() override { buckets_.finishInOrder(*dp_); }

  at::Tensor fullGrad(size_t param) override { return params().entries()[param].tensor.grad(); }
  at::Tensor gradShard(size_t) override { noShards("gradShard"); }
  at::Tensor paramShard(size_t) override { noShards("paramShard"); }
  void shardUpdated(size_t, const at::Tensor&) override { noShards("shardUpdated"); }

  int64_t parameterBytes() const override {  // the parameters' dtype is their gradients'
    int64_t bytes = 0;
    for (const GradBucket& b : buckets_.all()) bytes += b.numel * int64_t(b.flat.element_size());
    return bytes;
  }
  NamedTensors bufferTensors() const override {
    NamedTensors out;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      out.emplace_back("bucket." + std::to_string(i) + ".flat", buckets_[i].flat);
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

std::unique_ptr<DataParallelStrategy> makePlainDdp(ParamSet& params, GroupPtr dp,
                                                   int64_t bucket_bytes) {
  return std::make_unique<PlainDdp>(params, std::move(dp), bucket_bytes);
}

}  // namespace gpttrain
