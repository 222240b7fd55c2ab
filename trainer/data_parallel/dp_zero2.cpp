// ZeRO stage 2 over the DP group, eager: as ZeRO-1 (flat parameters, sharded optimizer states),
// and each rank keeps only its shard of the gradients. A bucket's full gradient buffer is
// allocated when its first gradient is about to be accumulated (AccumulateGrad pre-hook), reduce-
// scattered as soon as every member's gradient is in -- in every microbatch's backward, not only
// the last --, its slice added to the rank's shard and the buffer freed; one reduction in flight
// at a time. Full gradients thus live only for about a bucket. With one DP rank nothing is
// reduced: the buffers are kept for the step and sliced in finish(). It does not step.
#include "data_parallel/dp_strategy.h"

#include <torch/csrc/autograd/engine.h>

#include <optional>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

class Zero2 final : public DataParallelStrategy {
 public:
  Zero2(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : DataParallelStrategy(params, dp, BucketLayout{bucket_bytes, dp->size, dp->rank, false}),
        eager_(dp_->size > 1),
        in_flight_(buckets_.size()) {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      GradBucket& b = buckets_[i];
      buckets_.flattenParams(b);
      b.grad_shard = at::zeros({b.shard_size}, buckets_.options(b));
      in_flight_[i].arrived.assign(b.members.size(), false);
      if (!eager_) buckets_.allocateGrads(b, buckets_.options(b));
    }
    if (eager_) {
      hooks_ = std::make_unique<AccumulateHooks>(
          params, [this](size_t param) { ensureFlat(buckets_[buckets_.bucketOf(param)]); },
          [this](size_t param) { arrived(param); });
    }
  }

  int zeroStage() const override { return 2; }
  ZeroMemoryModel memoryModel() const override { return {false, true, true}; }

  void beginStep() override {
    for (size_t i = 0; i < buckets_.size(); ++i) {
      GradBucket& b = buckets_[i];
      TORCH_CHECK(!b.work, "beginStep while a reduction is in flight");
      b.grad_shard.zero_();
      b.pending = b.members.size();
      if (eager_) {  // the full buffer is allocated when the bucket's first gradient arrives
        in_flight_[i].arrived.assign(b.members.size(), false);
        in_flight_[i].arrived_count = 0;
      } else if (b.flat.defined()) {
        b.flat.zero_();
      } else {
        buckets_.allocateGrads(b, b.grad_shard.options());
      }
    }
  }

  void finish() override {
    if (!eager_) {  // one DP rank: the shard is the bucket
      for (GradBucket& b : buckets_.all()) {
        if (!b.flat.defined()) continue;
        b.grad_shard.copy_(b.flat.narrow(0, b.shard_begin, b.shard_size));
        b.flat = at::Tensor();
        buckets_.detachGrads(b);
      }
      return;
    }
    completeReduce();
    // Gradients no reduction took yet (a member that got none this microbatch): in bucket order,
    // the same on every DP rank.
    in_finish_ = true;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (buckets_[i].flat.defined()) launchReduce(i);
    }
    completeReduce();
    in_finish_ = false;
  }

  at::Tensor fullGrad(size_t param) override {
    const size_t b = buckets_.bucketOf(param);
    return gatherFullGrad(*dp_, buckets_[b], gradShard(b), param);
  }
  at::Tensor gradShard(size_t bucket) override { return buckets_[bucket].grad_shard; }
  at::Tensor paramShard(size_t bucket) override {
    GradBucket& b = buckets_[bucket];
    return b.params.narrow(0, b.shard_begin, b.shard_size);
  }
  void shardUpdated(size_t bucket, const at::Tensor& shard) override {
    allGatherParams(*dp_, buckets_[bucket], bucket, shard);
  }

  int64_t parameterBytes() const override { return buckets_.flatParameterBytes(); }
  int64_t gradientBytes() const override {
    int64_t bytes = buckets_.gradientBytes();
    for (const InFlight& f : in_flight_) {
      for (const at::Tensor* t : {&f.reducing, &f.reduced}) {
        if (t->defined()) bytes += t->nbytes();
      }
    }
    return bytes;
  }
  NamedTensors bufferTensors() const override {
    NamedTensors out;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      out.emplace_back("bucket." + std::to_string(i) + ".flat", buckets_[i].flat);
      out.emplace_back("bucket." + std::to_string(i) + ".params", buckets_[i].params);
      out.emplace_back("bucket." + std::to_string(i) + ".grad_shard", buckets_[i].grad_shard);
    }
    return out;
  }

 private:
  // Per bucket: the full buffer whose reduction is in flight (flat is then already free for the
  // next gradients), the native reduce-scatter's output, and which members' gradients the
  // current flat holds.
  struct InFlight {
    at::Tensor reducing, reduced;
    std::vector<bool> arrived;
    size_t arrived_count = 0;
  };

  // AccumulateGrad pre-hook: the gradient gets its place in the bucket's buffer, allocated now.
  void ensureFlat(GradBucket& b) {
    if (b.flat.defined()) return;
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kGradient);
    buckets_.allocateGrads(b, b.grad_shard.options());
  }

  // AccumulateGrad post-hook. A bucket is reduced when every member's gradient has been
  // accumulated since its last reduction (with interleaved chunks, members of two chunks: the
  // buffer may hold several microbatches of one chunk's), or when the last microbatch's gradient
  // of every member is in. The sequence of launches follows the order autograd runs the
  // accumulators, the same on every DP rank.
  void arrived(size_t param) {
    const size_t index = buckets_.bucketOf(param);
    GradBucket& b = buckets_[index];
    InFlight& f = in_flight_[index];
    const size_t m = buckets_.memberOf(param);
    if (!f.arrived[m]) {
      f.arrived[m] = true;
      ++f.arrived_count;
    }
    if (last_microbatch_ && b.pending > 0) --b.pending;
    if (f.arrived_count == b.members.size() || (last_microbatch_ && b.pending == 0)) {
      launchReduce(index);
    }
  }

  void launchReduce(size_t index) {
    GradBucket& b = buckets_[index];
    InFlight& f = in_flight_[index];
    if (!b.flat.defined()) return;
    completeReduce();  // one bucket's reduction in flight at a time
    const bool native = dp_->native_base_collectives;
    tracerun::Scope scope(native ? vocab::scope::kDpBucketReduceScatterBase
                                 : vocab::scope::kDpBucketReduceScatterAllReduce,
                          {{vocab::arg::kBucket, static_cast<int64_t>(index)},
                           {vocab::arg::kBytes, static_cast<int64_t>(b.flat.nbytes())}});
    // The gradients let go of the buffer: the next microbatch accumulates into a new one.
    buckets_.detachGrads(b);
    f.reducing = std::move(b.flat);
    b.flat = at::Tensor();
    f.arrived.assign(b.members.size(), false);
    f.arrived_count = 0;
    f.reducing.div_(dp_->size);
    if (native) {
      {
        tracerun::MemoryTag tag(tracerun::MemoryCategory::kGradient);
        f.reduced = at::empty({b.shard_size}, b.grad_shard.options());
      }
      dp_->count(CollectiveImpl::kReduceScatterBase);
      b.work = dp_->pg->_reduce_scatter_base(f.reduced, f.reducing);
    } else {
      // Gloo has no reduce-scatter: all-reduce, and keep this rank's slice.
      dp_->count(CollectiveImpl::kReduceScatterAllReduce);
      b.work = allReduceAsync(*dp_, f.reducing);
    }
    reducing_ = index;
    buckets_.countLaunch(in_finish_);
    // Free the full buffer at the end of this backward at the latest (not after the next forward).
    if (!in_finish_) {
      torch::autograd::Engine::get_default_engine().queue_callback([this] { completeReduce(); });
    }
  }

  void completeReduce() {
    if (!reducing_) return;
    GradBucket& b = buckets_[*reducing_];
    InFlight& f = in_flight_[*reducing_];
    if (b.work) {
      tracerun::Scope scope(vocab::scope::kDpBucketReduceWait,
                            {{vocab::arg::kBucket, static_cast<int64_t>(*reducing_)}});
      b.work->wait();
      b.work.reset();
    }
    reducing_.reset();
    at::NoGradGuard no_grad;
    b.grad_shard.add_(f.reduced.defined() ? f.reduced
                                          : f.reducing.narrow(0, b.shard_begin, b.shard_size));
    f.reducing = at::Tensor();
    f.reduced = at::Tensor();
  }

  const bool eager_;                 // more than one DP rank
  std::vector<InFlight> in_flight_;  // per bucket
  std::optional<size_t> reducing_;   // the bucket whose reduction is in flight
  bool in_finish_ = false;
  std::unique_ptr<AccumulateHooks> hooks_;  // last: removed before the buckets go
};

}  // namespace

std::unique_ptr<DataParallelStrategy> makeZero2(ParamSet& params, GroupPtr dp,
                                                int64_t bucket_bytes) {
  return std::make_unique<Zero2>(params, std::move(dp), bucket_bytes);
}

}  // namespace gpttrain
