// A bucket shard's segments, update and state names (see shard_update.h).
#include "optim/shard_update.h"

#include "data_parallel/grad_buckets.h"
#include "model/params.h"

#include <algorithm>
#include <initializer_list>

namespace gpttrain {

std::vector<std::vector<ShardSegment>> shardSegments(const GradBuckets& buckets) {
  std::vector<std::vector<ShardSegment>> out;
  for (size_t i = 0; i < buckets.size(); ++i) {
    const GradBucket& b = buckets[i];
    std::vector<ShardSegment> segments;
    const int64_t begin = b.shard_begin, end = b.shard_begin + b.shard_size;
    for (const auto& m : b.members) {
      const int64_t lo = std::max(begin, m.offset), hi = std::min(end, m.offset + m.numel);
      if (lo < hi) segments.push_back(ShardSegment{m.param, lo - begin, lo - m.offset, hi - lo});
    }
    out.push_back(std::move(segments));
  }
  return out;
}

void updateShard(const std::vector<ShardSegment>& segments, at::Tensor& p, const at::Tensor& grad,
                 at::Tensor& m, at::Tensor& v, const ParamSet& params,
                 const OptimizerConfig& config, double lr, AdamwStep& adamw,
                 UpdateArithmetic arithmetic) {
  const bool asCuda = arithmetic == UpdateArithmetic::kCudaKernels;
  if (asCuda) {
    for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&p, &grad, &m, &v}) {
      TORCH_CHECK(
          !t->defined() || (t->is_cpu() && t->scalar_type() == at::kFloat && t->is_contiguous()),
          "updateShard: the CUDA kernels' arithmetic runs on contiguous fp32 host tensors");
    }
  }
  for (const ShardSegment& s : segments) {
    at::Tensor piece = p.narrow(0, s.shard_offset, s.length);
    at::Tensor g = grad.narrow(0, s.shard_offset, s.length);
    if (!config.adamw) {
      if (asCuda) {
        sgdUpdateAsCuda(piece.data_ptr<float>(), g.data_ptr<float>(), s.length, lr);
      } else {
        piece.add_(g, -lr);
      }
      continue;
    }
    adamw.decay = adamwDecay(config, lr, params.entries()[s.param].decay);
    at::Tensor m_piece = m.narrow(0, s.shard_offset, s.length);
    at::Tensor v_piece = v.narrow(0, s.shard_offset, s.length);
    if (asCuda) {
      adamwUpdateAsCuda(piece.data_ptr<float>(), g.data_ptr<float>(), m_piece.data_ptr<float>(),
                        v_piece.data_ptr<float>(), s.length, adamw);
    } else {
      adamwUpdate(piece, g, m_piece, v_piece, adamw);
    }
  }
}

std::vector<std::pair<std::string, at::Tensor>> namedShardStates(
    const std::vector<at::Tensor>& master, const std::vector<at::Tensor>& exp_avg,
    const std::vector<at::Tensor>& exp_avg_sq) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t b = 0; b < master.size(); ++b) {
    out.emplace_back("zero.master." + std::to_string(b), master[b]);
  }
  for (size_t b = 0; b < exp_avg.size(); ++b) {
    out.emplace_back("zero.exp_avg." + std::to_string(b), exp_avg[b]);
    out.emplace_back("zero.exp_avg_sq." + std::to_string(b), exp_avg_sq[b]);
  }
  return out;
}

}  // namespace gpttrain
