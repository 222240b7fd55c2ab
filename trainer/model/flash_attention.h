// --attention flash: FlashAttention's algorithm (Dao et al., 2022) for gpttrain's causal
// self-attention. Tiles of queries and keys with an online softmax; the forward saves only its
// inputs (views of the QKV projection's output), its output and each row's log-sum-exp, and the
// backward recomputes every tile's probabilities from them. On the CPU our own tiled ATen code; on
// CUDA under libtorch 2.x, at::scaled_dot_product_attention. It does not do attention dropout (the
// trainer refuses --attention flash with --dropout > 0) and it does not project or split heads.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace gpttrain {

struct FlashBlocks {
  int64_t q = 64;  // query rows per tile (--flash-block-q)
  int64_t k = 64;  // key columns per tile (--flash-block-k)
};

// softmax(q k^T / sqrt(D) + causal mask) v for q [BH, S, D] and k, v [BH, P + S, D] (any
// strides): query i sees key j when j <= i + P (P leading keys, a prefix, are seen by every
// query; P = 0 is plain causal attention). Returns [BH, S, D] as the transposed view of a
// contiguous [S, BH, D] tensor, so that viewing it as [S, B, heads * D] copies nothing and the next
// linear saves the very tensor this function keeps for backward. Differentiable with respect to q,
// k and v; without grad mode nothing is saved.
at::Tensor flashAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          FlashBlocks blocks);

// The implementation flashAttention runs for tensors like `q`: "tiled-cpu" (ours), or on CUDA
// under libtorch 2.x the kernel at::scaled_dot_product_attention picks ("flash", "efficient",
// "math", ...).
std::string flashKernelName(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace gpttrain
