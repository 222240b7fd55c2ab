// ZeRO's optimizer over the data-parallel group (stages 1-3): each DP rank keeps AdamW moments for
// its shard of every gradient bucket only, updates that shard of the parameters and hands it back
// to the strategy (ZeRO-1/2 all-gather it; ZeRO-3 keeps only the shard). The gradient steps that
// must see shards live here too: SP sums over TP, the tied embedding's sum, the global norm and
// clipping. With master weights (bf16-mixed) it keeps an fp32 copy of its shards, updates that and
// rounds it into the bf16 shard. It does not reduce gradients or gather parameters for compute
// (dp_strategy.h).
#include "optim/optimizer.h"

#include "data_parallel/dp_strategy.h"
#include "optim/shard_update.h"

#include <algorithm>
#include <cmath>

namespace gpttrain {
namespace {

class ShardedOptimizer final : public Optimizer {
 public:
  ShardedOptimizer(ParamSet& params, DataParallelStrategy& strategy, GroupPtr dp,
                   const OptimizerConfig& config)
      : params_(params), strategy_(strategy), dp_(std::move(dp)), config_(config) {
    const GradBuckets& buckets = strategy_.buckets();
    segments_ = shardSegments(buckets);
    for (size_t i = 0; i < buckets.size(); ++i) {
      const GradBucket& b = buckets[i];
      // fp32 on the parameters' device (with master weights, the parameters are bf16)
      const auto options = buckets.options(b).dtype(at::kFloat);
      if (config_.offload != "none") continue;  // the offload optimizer keeps them elsewhere
      if (config_.master_weights) {             // the bf16 shard's values, exactly, as fp32
        master_.push_back(at::empty({b.shard_size}, options).copy_(strategy_.paramShard(i)));
      }
      if (config_.adamw) {
        exp_avg_.push_back(at::zeros({b.shard_size}, options));
        exp_avg_sq_.push_back(at::zeros({b.shard_size}, options));
      }
    }
  }

  void syncSequenceParallelGrads(Group& tp, bool sp) override {
    if (!sp || tp.size == 1) return;
    std::vector<at::Tensor> pieces;
    for (size_t b = 0; b < segments_.size(); ++b) {
      at::Tensor g = strategy_.gradShard(b);
      for (const ShardSegment& s : segments_[b]) {
        if (params_.entries()[s.param].split_dim < 0)
          pieces.push_back(g.narrow(0, s.shard_offset, s.length));
      }
    }
    if (pieces.empty()) return;  // the same on every TP rank: their layouts are equal
    at::Tensor flat = at::cat(pieces);
    allReduce(tp, flat);
    int64_t offset = 0;
    for (auto& piece : pieces) {
      piece.copy_(flat.narrow(0, offset, piece.numel()));
      offset += piece.numel();
    }
  }

  // The tied embedding's shard (its own bucket, aligned between first and last stage), summed.
  void syncTiedEmbeddingGrads(Group& embedding) override {
    if (embedding.size == 1) return;
    for (size_t b = 0; b < segments_.size(); ++b) {
      const auto& members = strategy_.buckets()[b].members;
      if (members.size() == 1 && params_.entries()[members[0].param].name == kTiedEmbeddingName) {
        at::Tensor g = strategy_.gradShard(b);
        allReduce(embedding, g);
      }
    }
  }

  double clipGradNorm(Group& tp, Group& pp, double max_norm) override {
    at::Tensor sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(params_.device()));
    for (size_t b = 0; b < segments_.size(); ++b) {
      at::Tensor g = strategy_.gradShard(b);
      for (const ShardSegment& s : segments_[b]) {
        const ParamEntry& e = params_.entries()[s.param];
        if (e.duplicate || (e.split_dim < 0 && tp.rank != 0)) continue;
        sum += g.narrow(0, s.shard_offset, s.length).to(at::kDouble).pow(2).sum();
      }
    }
    allReduce(tp, sum);
    allReduce(pp, sum);
    allReduce(*dp_, sum);
    const double norm = std::sqrt(sum.item<double>());
    if (max_norm > 0 && norm > max_norm) {
      const double scale = max_norm / (norm + 1e-6);
      for (size_t b = 0; b < segments_.size(); ++b) strategy_.gradShard(b).mul_(scale);
    }
    return norm;
  }

  // Updates this rank's shard of every bucket's parameters, each handed back to the strategy
  // (ZeRO-1/2: all-gathered over DP) before the next bucket's update.
  void step(double lr) override {
    at::NoGradGuard no_grad;
    ++steps_;
    AdamwStep adamw = adamwStep(config_, lr, steps_);
    for (size_t b = 0; b < segments_.size(); ++b) {
      at::Tensor shard = strategy_.paramShard(b);
      at::Tensor updated = master_.empty() ? shard : master_[b];
      at::Tensor grad = strategy_.gradShard(b);
      if (grad.scalar_type() != updated.scalar_type()) {
        tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
        grad = grad.to(updated.scalar_type());  // the bf16 gradient shard widened for the update
      }
      // The single process's update, on this rank's slices.
      at::Tensor m = config_.adamw ? exp_avg_[b] : at::Tensor();
      at::Tensor v = config_.adamw ? exp_avg_sq_[b] : at::Tensor();
      updateShard(segments_[b], updated, grad, m, v, params_, config_, lr, adamw);
      if (!master_.empty()) shard.copy_(updated);  // rounded to bf16 once
      strategy_.shardUpdated(b, shard);
    }
  }

  // This rank's shards' master weights and moments, named by namedShardStates.
  std::vector<std::pair<std::string, at::Tensor>> namedState() override {
    return namedShardStates(master_, exp_avg_, exp_avg_sq_);
  }

  int64_t stateBytes() const override {
    int64_t bytes = 0;
    for (const at::Tensor& m : master_) bytes += m.nbytes();
    for (size_t b = 0; b < exp_avg_.size(); ++b) {
      bytes += exp_avg_[b].nbytes() + exp_avg_sq_[b].nbytes();
    }
    return bytes;
  }

 private:
  ParamSet& params_;
  DataParallelStrategy& strategy_;
  GroupPtr dp_;
  OptimizerConfig config_;
  std::vector<std::vector<ShardSegment>> segments_;  // per bucket
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;     // per bucket, [shard_size]
  std::vector<at::Tensor> master_;                   // per bucket, [shard_size], fp32 (bf16-mixed)
};

}  // namespace

std::unique_ptr<Optimizer> makeShardedOptimizer(ParamSet& params, DataParallelStrategy& strategy,
                                                GroupPtr dp, const OptimizerConfig& config) {
  return std::make_unique<ShardedOptimizer>(params, strategy, std::move(dp), config);
}

}  // namespace gpttrain
