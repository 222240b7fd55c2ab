// The conjugate autograd mappings of tensor and sequence parallelism (Megatron's mappings.py):
// each is a collective in forward whose backward is its dual. They own no parameters.
//
// "tp" = the last (hidden) dimension is split over the group; "seq" = dimension 0 (the sequence,
// activations are [seq, batch, hidden]) is split over the group. All are identities on a group of
// one rank.
#pragma once

#include "parallel/collectives.h"

namespace gpttrain {

// forward: identity;                 backward: all-reduce (sum) of the gradient.
at::Tensor copyToTp(const at::Tensor& x, const GroupPtr& g);
// forward: all-reduce (sum);         backward: identity.
at::Tensor reduceFromTp(const at::Tensor& x, const GroupPtr& g);
// forward: keep this rank's slice of the last dim;  backward: all-gather along the last dim.
at::Tensor scatterToTp(const at::Tensor& x, const GroupPtr& g);
// forward: all-gather along the last dim;           backward: keep this rank's slice.
at::Tensor gatherFromTp(const at::Tensor& x, const GroupPtr& g);
// forward: keep this rank's slice of dim 0;         backward: all-gather along dim 0.
at::Tensor scatterToSeq(const at::Tensor& x, const GroupPtr& g);
// forward: all-gather along dim 0;                  backward: reduce-scatter along dim 0.
at::Tensor gatherFromSeq(const at::Tensor& x, const GroupPtr& g);
// forward: reduce-scatter along dim 0;              backward: all-gather along dim 0.
at::Tensor reduceScatterToSeq(const at::Tensor& x, const GroupPtr& g);
// forward: all-gather x along dim 0, then x W^T + b, keeping only x's shard (Megatron's
// sequence-parallel linear); backward: all-gather again for dW, input gradient reduce-scattered.
at::Tensor linearGatherFromSeq(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, const GroupPtr& g);

}  // namespace gpttrain
