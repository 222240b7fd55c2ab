// What every data-parallel strategy (dp_strategy.h) shares: the bucket layout (parameters grouped,
// last registered first, into flat buckets padded to a multiple of the shard count), the flat
// buffers and their views, the AccumulateGrad hooks, one bucket's reduction over DP and the
// in-bucket-order launch. It decides nothing about when to reduce or what to keep: that is the
// strategy's (dp_plain.cpp, dp_zero1.cpp, dp_zero2.cpp, dp_zero3.cpp). No optimizer, no TP.
#pragma once

#include "model/params.h"
#include "parallel/collectives.h"

#include <torch/csrc/autograd/function_hook.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gpttrain {

// The parameter whose copies on the first and last pipeline stage are summed: it gets a bucket of
// its own, so that its shards line up between the two stages.
constexpr const char* kTiedEmbeddingName = "embedding.word.weight";

// One parameter's place in a bucket.
struct BucketMember {
  size_t param;    // index in the ParamSet
  int64_t offset;  // first element in the bucket's flat buffers
  int64_t numel;
  std::vector<int64_t> shape;
};

// One bucket: its layout, and the buffers every strategy may hold (each says which it uses).
struct GradBucket {
  std::vector<BucketMember> members;
  int64_t numel = 0, padded = 0, shard_begin = 0, shard_size = 0;
  int unit = -1;          // per-unit layouts (ZeRO-3): the transformer layer it holds; -1: the root
  at::Tensor flat;        // full gradients [padded], when held
  at::Tensor params;      // flat parameters [padded] (ZeRO), when held
  at::Tensor grad_shard;  // this rank's reduced slice [shard_size] (ZeRO-2, ZeRO-3)
  c10::intrusive_ptr<c10d::Work> work;  // the bucket's reduction in flight
  size_t pending = 0;                   // members whose gradient of the last microbatch is not in
};

struct BucketLayout {
  int64_t bucket_bytes = 4 << 20;
  int shards = 1;         // buckets padded to a multiple of it and split in equal shards
  int shard_rank = 0;     // this rank's shard
  bool per_unit = false;  // one bucket per transformer layer ("layers.<i>."), kept whole
};

// The buckets of one ParamSet. Threading: one thread (the training loop's and autograd's, which
// runs the hooks on it for CPU tensors).
class GradBuckets {
 public:
  // Groups parameters, last registered first, into buckets of about bucket_bytes; the tied
  // embedding alone; with per_unit, a transformer layer's parameters never share a bucket with
  // another layer's and are never split. Allocates nothing.
  GradBuckets(ParamSet& params, const BucketLayout& layout);

  ParamSet& params() { return params_; }
  size_t size() const { return buckets_.size(); }
  GradBucket& operator[](size_t i) { return buckets_[i]; }
  const GradBucket& operator[](size_t i) const { return buckets_[i]; }
  std::vector<GradBucket>& all() { return buckets_; }
  const std::vector<GradBucket>& all() const { return buckets_; }
  size_t bucketOf(size_t param) const { return bucket_of_[param]; }
  size_t memberOf(size_t param) const { return member_of_[param]; }
  // Options of the bucket's parameters (without requires_grad): its buffers' dtype and device.
  at::TensorOptions options(const GradBucket& b) const;
  // Parameters in all buckets (psi of this model-parallel rank), also while sharded.
  int64_t numel() const;

  // The parameters become views of a new flat buffer b.params (counted as parameters).
  void flattenParams(GradBucket& b);
  // b.flat = zeros (under the caller's memory tag), and every member's .grad a view of it.
  void allocateGrads(GradBucket& b, const at::TensorOptions& options);
  void attachGrads(GradBucket& b);
  // The members' .grad let go of b.flat (which the caller frees or hands on).
  void detachGrads(const GradBucket& b);
  // Bytes of b.flat and b.grad_shard held now, over all buckets.
  int64_t gradientBytes() const;
  // Bytes of b.params held now, over all buckets.
  int64_t flatParameterBytes() const;

  // Averages b.flat over dp and launches its reduction into b.work, under a scope naming the
  // implementation: "dp_bucket_allreduce", or with scatter "dp_bucket_reduce_scatter[...]" (the
  // native one-buffer call writes b.grad_shard; Gloo's fallback all-reduces b.flat, the caller
  // keeps the slice). Counted as launched during or after backward.
  void launchReduction(Group& dp, size_t index, bool scatter, bool after_backward);
  // Full all-reduces launched strictly in bucket order (the same sequence on every DP rank), as
  // plain DDP and ZeRO-1 reduce: a step begins with zeroed flat gradients; each gradient of the
  // step's last microbatch that comes in launches every bucket from the next unlaunched one up to
  // the first still waiting for a member; after backward the rest are launched (members that got
  // no gradient) and every reduction is waited for.
  void beginInOrderStep();
  void gradientInOrder(Group& dp, size_t param);
  void finishInOrder(Group& dp);

  // Reductions launched so far from autograd hooks (overlapping backward) and after backward.
  int64_t launchedDuringBackward() const { return launched_in_backward_; }
  int64_t launchedAfterBackward() const { return launched_after_backward_; }
  void countLaunch(bool after_backward) {
    ++(after_backward ? launched_after_backward_ : launched_in_backward_);
  }

 private:
  ParamSet& params_;
  std::vector<GradBucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index -> bucket
  std::vector<size_t> member_of_;  // parameter index -> its index in its bucket's members
  size_t next_launch_ = 0;
  void launchReadyInOrder(Group& dp, bool after_backward);
  int64_t launched_in_backward_ = 0;
  int64_t launched_after_backward_ = 0;
};

// The full gradient of one parameter from the buckets' shards `shard` (one per DP rank, this
// rank's given): all-gathered over dp -- a collective: every DP rank calls it in the same order.
at::Tensor gatherFullGrad(Group& dp, const GradBucket& b, const at::Tensor& shard, size_t param);

// ZeRO-1/2 after the optimizer updated `shard`, this rank's slice of bucket `index`'s b.params:
// every rank's shards all-gathered into b.params (scope "zero_param_allgather"; nothing on a
// group of one).
void allGatherParams(Group& dp, GradBucket& b, size_t index, const at::Tensor& shard);

// AccumulateGrad hooks on every parameter of a ParamSet, removed when this object dies (the
// accumulators may outlive it). `before` (optional) runs before a parameter's gradient is
// accumulated, `after` once it has been; both get the parameter's index.
class AccumulateHooks {
 public:
  AccumulateHooks(ParamSet& params, std::function<void(size_t)> before,
                  std::function<void(size_t)> after);
  ~AccumulateHooks();
  AccumulateHooks(const AccumulateHooks&) = delete;
  AccumulateHooks& operator=(const AccumulateHooks&) = delete;

 private:
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> post_keys_;
  std::vector<const torch::autograd::FunctionPreHook*> pre_hooks_;  // per accumulator, or none
};

}  // namespace gpttrain
