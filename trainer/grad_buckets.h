// Data parallelism: every parameter's gradient lives in a flat bucket buffer; when a bucket's
// last gradient has been accumulated during the last microbatch's backward, its all-reduce (an
// average over DP) is launched from the autograd hook, overlapping the rest of backward.
// It does not touch parameters or know about TP (see tp_grads.h).
#pragma once

#include "collectives.h"
#include "params.h"

#include <memory>

namespace gpttrain {

class GradBuckets {
 public:
  // Buckets are filled in reverse registration order (about the order backward produces them)
  // up to `bucket_bytes` each. Hooks are registered only when dp->size > 1.
  GradBuckets(ParamSet& params, GroupPtr dp, int64_t bucket_bytes);
  ~GradBuckets();
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // Zeroes every gradient; call before a step's first microbatch.
  void zero();
  // Whether the coming backward is the step's last (only then are all-reduces launched).
  void setLastMicrobatch(bool last);
  // After the last backward: launches what is left (parameters without gradient) and waits
  // for every bucket's all-reduce. Gradients are then averaged over DP.
  void finish();

  size_t numBuckets() const { return buckets_.size(); }
  // Bucket all-reduces launched so far from autograd hooks (overlapping backward) and from
  // finish() (after backward). With every parameter used, all come from hooks.
  int64_t launchedDuringBackward() const { return launched_in_backward_; }
  int64_t launchedAfterBackward() const { return launched_after_backward_; }

 private:
  struct Bucket {
    at::Tensor flat;
    std::vector<size_t> params;
    size_t pending = 0;
    c10::intrusive_ptr<c10d::Work> work;
  };
  void markReady(size_t param);
  void launchReady();

  ParamSet& params_;
  GroupPtr dp_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;  // parameter index -> bucket
  size_t next_launch_ = 0;
  bool last_microbatch_ = true;
  bool in_finish_ = false;
  int64_t launched_in_backward_ = 0;
  int64_t launched_after_backward_ = 0;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
};

}  // namespace gpttrain
