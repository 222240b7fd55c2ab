// The update of this rank's shard of a gradient bucket, shared by ZeRO's sharded optimizer
// (optimizer_sharded.cpp) and the offload optimizer (offload_optimizer.cpp): which pieces of which
// parameters a shard holds, and AdamW (or SGD) over them, piece by piece with each parameter's own
// weight decay; and the checkpoint names of a shard's states, which both give them. Not the
// gradient steps before it (sums, norm, clipping) nor where the states live.
#pragma once

#include "optim/optimizer.h"

#include <torch/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gpttrain {

class GradBuckets;
class ParamSet;

// A piece of one parameter inside this rank's shard of a bucket.
struct ShardSegment {
  size_t param;
  int64_t shard_offset;  // first element in the shard
  int64_t param_offset;  // first element in the (flattened) parameter
  int64_t length;
};

// Each bucket's segments on this rank, in bucket order.
std::vector<std::vector<ShardSegment>> shardSegments(const GradBuckets& buckets);

// Whose roundings a host update follows: the host's own (adamwUpdate), or those of libtorch's CUDA
// kernels (adamwUpdateAsCuda), for the offloaded states of parameters on a GPU, which the same
// layout without offload updates there.
enum class UpdateArithmetic { kHost, kCudaKernels };

// One bucket shard's update: p (the shard's values being updated) from grad, both [shard_size];
// AdamW with moments m and v (the same layout) when config.adamw, else SGD (m, v unused). `adamw`
// is the step-wide part (adamwStep); its decay is set per parameter here. kCudaKernels needs
// contiguous fp32 host tensors.
void updateShard(const std::vector<ShardSegment>& segments, at::Tensor& p, const at::Tensor& grad,
                 at::Tensor& m, at::Tensor& v, const ParamSet& params,
                 const OptimizerConfig& config, double lr, AdamwStep& adamw,
                 UpdateArithmetic arithmetic = UpdateArithmetic::kHost);

// The checkpoint names of every bucket shard's states, one owner for both optimizers so that a
// checkpoint saved with --offload-optimizer loads without it and back (and re-cuts at another DP
// size: checkpoint.h treats "zero.*" as shards): master weights "zero.master.<bucket>" (kept with
// bf16-mixed only), moments "zero.exp_avg.<bucket>" and "zero.exp_avg_sq.<bucket>" (AdamW only).
// An empty vector: that state is not kept.
std::vector<std::pair<std::string, at::Tensor>> namedShardStates(
    const std::vector<at::Tensor>& master, const std::vector<at::Tensor>& exp_avg,
    const std::vector<at::Tensor>& exp_avg_sq);

}  // namespace gpttrain
