// ZeRO-1/2's sharded AdamW / SGD and the shard-wise gradient steps (see zero_optimizer.h).
#include "zero_optimizer.h"

#include <cmath>

namespace gpttrain {

ShardedOptimizer::ShardedOptimizer(ParamSet& params, GradBuckets& buckets, GroupPtr dp,
                                   const OptimizerConfig& config)
    : params_(params), buckets_(buckets), dp_(std::move(dp)), config_(config) {
  for (auto& b : buckets_.buckets()) {
    std::vector<Segment> segments;
    const int64_t begin = b.shard_begin, end = b.shard_begin + b.shard_size;
    for (const auto& m : b.members) {
      const int64_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.numel);
      if (lo < hi) segments.push_back(Segment{m.param, lo - begin, lo - m.offset, hi - lo});
    }
    segments_.push_back(std::move(segments));
    if (config_.adamw) {
      const auto options = b.params.defined() ? b.params.options() : b.param_shard.options();
      exp_avg_.push_back(at::zeros({b.shard_size}, options));
      exp_avg_sq_.push_back(at::zeros({b.shard_size}, options));
    }
  }
}

void ShardedOptimizer::syncSequenceParallelGrads(Group& tp, bool sp) {
  if (!sp || tp.size == 1) return;
  std::vector<at::Tensor> pieces;
  for (size_t b = 0; b < segments_.size(); ++b) {
    at::Tensor g = buckets_.gradShard(b);
    for (const Segment& s : segments_[b]) {
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

void ShardedOptimizer::syncTiedEmbeddingGrads(Group& embedding) {
  if (embedding.size == 1) return;
  for (size_t b = 0; b < segments_.size(); ++b) {
    const auto& members = buckets_.buckets()[b].members;
    if (members.size() == 1 &&
        params_.entries()[members[0].param].name == "embedding.word.weight") {
      at::Tensor g = buckets_.gradShard(b);
      allReduce(embedding, g);
    }
  }
}

double ShardedOptimizer::clipGradNorm(Group& tp, Group& pp, double max_norm) {
  at::Tensor sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(params_.device()));
  for (size_t b = 0; b < segments_.size(); ++b) {
    at::Tensor g = buckets_.gradShard(b);
    for (const Segment& s : segments_[b]) {
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
    for (size_t b = 0; b < segments_.size(); ++b) buckets_.gradShard(b).mul_(scale);
  }
  return norm;
}

void ShardedOptimizer::step(double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  AdamwStep adamw = adamwStep(config_, lr, steps_);
  auto& buckets = buckets_.buckets();
  for (size_t b = 0; b < buckets.size(); ++b) {
    const bool sharded = buckets[b].param_shard.defined();  // stage 3: no full parameters
    at::Tensor shard =
        sharded ? buckets[b].param_shard
                : buckets[b].params.narrow(0, buckets[b].shard_begin, buckets[b].shard_size);
    at::Tensor grad = buckets_.gradShard(b);
    for (const Segment& s : segments_[b]) {
      at::Tensor p = shard.narrow(0, s.shard_offset, s.length);
      at::Tensor g = grad.narrow(0, s.shard_offset, s.length);
      if (!config_.adamw) {
        p.add_(g, -lr);
        continue;
      }
      adamw.decay = adamwDecay(config_, lr, params_.entries()[s.param].decay);
      at::Tensor m = exp_avg_[b].narrow(0, s.shard_offset, s.length);
      at::Tensor v = exp_avg_sq_[b].narrow(0, s.shard_offset, s.length);
      adamwUpdate(p, g, m, v, adamw);  // the single process's update, on this rank's slices
    }
    if (dp_->size > 1 && !sharded) {
      tracerun::Scope scope(
          "zero_param_allgather",
          {{"bucket", static_cast<int64_t>(b)}, {"bytes", static_cast<int64_t>(shard.nbytes())}});
      buckets[b].params.copy_(allGather(*dp_, shard, 0));
    }
  }
}

std::vector<std::pair<std::string, at::Tensor>> ShardedOptimizer::namedState() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t b = 0; b < exp_avg_.size(); ++b) {
    out.emplace_back("zero.exp_avg." + std::to_string(b), exp_avg_[b]);
    out.emplace_back("zero.exp_avg_sq." + std::to_string(b), exp_avg_sq_[b]);
  }
  return out;
}

int64_t ShardedOptimizer::stateBytes() const {
  int64_t bytes = 0;
  for (size_t b = 0; b < exp_avg_.size(); ++b)
    bytes += exp_avg_[b].nbytes() + exp_avg_sq_[b].nbytes();
  return bytes;
}

}  // namespace gpttrain
