// Plain data parallelism (DDP, ZeRO stage 0): every rank holds full parameters, gradients and
// optimizer states; gradients live in flat buckets, and each bucket's all-reduce (an average) is
// launched from the AccumulateGrad hooks, strictly in bucket order, as soon as the step's last
// microbatch has produced all its gradients, overlapping the rest of backward. No shards.
#include "data_parallel/dp_strategy.h"

namespace gpttrain {
namespace {

class PlainDdp final : public ReplicatedStrategy {
 public:
  PlainDdp(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : ReplicatedStrategy(params, std::move(dp), BucketLayout{bucket_bytes, 1, 0, false}) {
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
