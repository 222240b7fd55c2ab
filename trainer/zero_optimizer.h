// ZeRO's optimizer over the data-parallel group (stages 1-3): each DP rank keeps AdamW moments
// for its shard of every gradient bucket only (grad_buckets.h), updates that shard of the flat
// parameters, then all-gathers the parameters over DP (stage 3: it does not; the shards are all
// it keeps). The gradient steps that must see shards
// live here too: SP sums over TP, the tied embedding's sum, the global norm and clipping.
// It does not reduce gradients or gather parameters for compute (GradBuckets does).
#pragma once

#include "grad_buckets.h"
#include "optimizer.h"

#include <string>
#include <utility>

namespace gpttrain {

class ShardedOptimizer {
 public:
  ShardedOptimizer(ParamSet& params, GradBuckets& buckets, GroupPtr dp,
                   const OptimizerConfig& config);

  // With sp: the replicated parameters' gradient pieces in this rank's shards, summed over TP.
  void syncSequenceParallelGrads(Group& tp, bool sp);
  // The tied embedding's shard (its own bucket, aligned between first and last stage), summed.
  void syncTiedEmbeddingGrads(Group& embedding);
  // Global norm from the shards (TP shards summed, replicated parameters once, duplicates
  // skipped, stages and DP shards summed); clips like clipGradNorm in tp_grads.h.
  double clipGradNorm(Group& tp, Group& pp, double max_norm);
  // Updates this rank's shard of every bucket's parameters, then all-gathers them over DP.
  void step(double lr);

  // Moments of this rank's shards, for checkpoints and memory accounting.
  std::vector<std::pair<std::string, at::Tensor>> namedState();
  int64_t& stepCount() { return steps_; }
  int64_t stateBytes() const;

 private:
  // A piece of one parameter inside this rank's shard of a bucket.
  struct Segment {
    size_t param;
    int64_t shard_offset;  // first element in the shard
    int64_t param_offset;  // first element in the (flattened) parameter
    int64_t length;
  };

  ParamSet& params_;
  GradBuckets& buckets_;
  GroupPtr dp_;
  OptimizerConfig config_;
  std::vector<std::vector<Segment>> segments_;    // per bucket
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;  // per bucket, [shard_size]
  int64_t steps_ = 0;
};

}  // namespace gpttrain
