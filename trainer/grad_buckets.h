// Data parallelism: every parameter's gradient lives in a flat bucket buffer; when a bucket's
// last gradient has been accumulated during the last microbatch's backward, its reduction over DP
// (an average) is launched from the autograd hook, overlapping the rest of backward.
// With ZeRO (stage >= 1) each bucket is padded to a multiple of the DP size and split in equal
// shards, one per DP rank, and the parameters live in a flat buffer of the same layout (each
// parameter a view of it); stage >= 2 reduce-scatters instead of all-reducing and keeps only
// this rank's shard. Stage 2 (with DP > 1) allocates a bucket's full gradient buffer when its first
// gradient arrives, reduce-scatters it as soon as every member's gradient has been accumulated (in
// every microbatch's backward, not only the last), adds the result to the shard and frees the
// buffer: full gradients live only from a bucket's first gradient to the end of its reduction
// (at the latest the end of that backward). Stage 3 (FSDP full shard) also
// keeps only this rank's shard of the parameters: each transformer layer is one bucket (a unit),
// gathered before its forward and its backward and freed after (ParamUnits), the next unit's
// gather prefetched; the rest (embedding, final LayerNorm: the root) is gathered for a whole step.
// It does not update parameters (see optimizer.h, zero_optimizer.h) or know about TP.
#pragma once

#include "collectives.h"
#include "param_units.h"
#include "params.h"

#include <map>
#include <optional>

#include <memory>

namespace gpttrain {

class GradBuckets : public ParamUnits {
 public:
  // One parameter's place in a bucket.
  struct Member {
    size_t param;    // index in the ParamSet
    int64_t offset;  // first element in the bucket's flat buffers
    int64_t numel;
    std::vector<int64_t> shape;
  };
  struct Bucket {
    at::Tensor flat;         // gradients [padded]; undefined between finish() and zero() (stage 2)
    at::Tensor params;       // parameters [padded] (stage >= 1)
    at::Tensor grad_shard;   // stage >= 2: this rank's reduced slice [shard_size]
    at::Tensor param_shard;  // stage 3: this rank's slice of the parameters [shard_size]
    int unit = -1;           // stage 3: the transformer layer it holds; -1: root
    c10::intrusive_ptr<c10d::Work> gather_work;  // stage 3: a prefetched all-gather
    std::vector<std::vector<at::Tensor>> gather_out;
    int64_t numel = 0, padded = 0, shard_begin = 0, shard_size = 0;
    std::vector<Member> members;
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
    // Stage 2 (eager): the full buffer whose reduction is in flight (flat is then already free
    // for the next gradients), the native reduce-scatter's output, and which members' gradients
    // the current flat holds.
    at::Tensor reducing, reduced;
    std::vector<bool> arrived;
    size_t arrived_count = 0;
  };

  // Buckets are filled in reverse registration order (about the order backward produces them)
  // up to `bucket_bytes` each; the tied embedding ("embedding.word.weight") gets a bucket of its
  // own so that its shards line up between the first and last pipeline stage. Hooks are
  // registered only when dp->size > 1. zero_stage 0..2 (stage 3 shards parameters elsewhere and
  // uses stage 2's buckets).
  GradBuckets(ParamSet& params, GroupPtr dp, int64_t bucket_bytes, int zero_stage);
  ~GradBuckets() override;
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Zeroes every gradient (stage 2: allocates the full buffers again); call before a step's first
  // microbatch.
  void zero();
  // Whether the coming backward is the step's last microbatch (stages 0, 1: only then are
  // reductions launched; stage 2 reduces in every microbatch).
  void setLastMicrobatch(bool last);
  // After the last backward: launches what is left (parameters without gradient) and waits for
  // every bucket's reduction. Gradients are then averaged over DP: in full (stage 0, 1) or in this
  // rank's shard only (stage 2, whose full buffers are freed).
  void finish();

  // This rank's slice of a bucket's reduced gradient (stage >= 1).
  at::Tensor gradShard(size_t bucket);
  // The full averaged gradient of a parameter (stage >= 1: all-gathered from the shards, which
  // alone receive the later SP / tied-embedding sums and clipping -- a collective over DP: every
  // DP rank must call it in the same order).
  at::Tensor fullGrad(size_t param);

  // Stage 3 (ParamUnits): see param_units.h.
  void gather(int layer, bool backward) override;
  void release(int layer) override;
  void reduceGrads(int layer) override;
  // Stage 3: gather the root buckets' parameters for a step (or an evaluation); release them.
  void gatherRoot();
  void releaseRoot();

  std::vector<Bucket>& buckets() { return buckets_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }
  // Parameters in all buckets (psi of this model-parallel rank), also while sharded.
  int64_t numel() const;
  // Bytes of parameters held now (stage 3: shards plus whatever is gathered).
  int64_t parameterBytes() const;
  size_t numBuckets() const { return buckets_.size(); }
  int zeroStage() const { return zero_stage_; }
  // Bytes of gradient buffers held now.
  int64_t gradientBytes() const;
  // Bucket reductions launched so far from autograd hooks (overlapping backward) and from
  // finish() (after backward). With every parameter used, all come from hooks.
  int64_t launchedDuringBackward() const { return launched_in_backward_; }
  int64_t launchedAfterBackward() const { return launched_after_backward_; }

 private:
  void markReady(size_t param);
  void launchReady();
  // Stage 2 (eager): a member's gradient is about to be accumulated / has been.
  void ensureFlat(Bucket& b);
  void arrived(size_t param);
  void launchShardReduce(size_t bucket);
  void completeShardReduce();
  void attachGrads(Bucket& b);
  void startGather(Bucket& b);
  void finishGather(Bucket& b);
  void releaseBucket(Bucket& b);
  void completeUnitReduce();

  ParamSet& params_;
  GroupPtr dp_;
  int zero_stage_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;       // parameter index -> bucket
  std::map<int, size_t> unit_bucket_;   // stage 3: layer -> bucket
  std::optional<size_t> pending_unit_;  // stage 3: the unit whose reduction is in flight
  bool eager_ = false;                  // stage 2 with DP > 1: reduce-scatter every microbatch
  std::vector<size_t> member_of_;       // parameter index -> its index in its bucket's members
  std::optional<size_t> reducing_;      // stage 2: the bucket whose reduction is in flight
  size_t next_launch_ = 0;
  bool last_microbatch_ = true;
  bool in_finish_ = false;
  int64_t launched_in_backward_ = 0;
  int64_t launched_after_backward_ = 0;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::vector<const torch::autograd::FunctionPreHook*> pre_hooks_;  // per accumulator (stage 2)
};

}  // namespace gpttrain
