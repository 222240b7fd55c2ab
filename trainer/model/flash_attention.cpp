// FlashAttention's forward and backward over tiles (see flash_attention.h).
//
// Sections: tiles and masks · forward · backward · the autograd function · CUDA (libtorch 2.x)
#include "model/flash_attention.h"

#include <tracerun/torch_compat.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace gpttrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// --- tiles and masks

// A tile of query rows [i0, i0 + rows) against key columns [j0, j0 + cols).
struct Tile {
  int64_t i0, rows, j0, cols;
};

// Query i sees key j when j <= i + offset (offset = the prefix length). A tile is skipped when no
// query in it sees any of its keys, and needs a mask when some query misses some key.
bool visible(const Tile& t, int64_t offset) {
  return t.j0 <= t.i0 + t.rows - 1 + offset;
}
bool needsMask(const Tile& t, int64_t offset) {
  return t.j0 + t.cols - 1 > t.i0 + offset;
}

// Scaled scores of a tile with -inf where the query does not see the key: [BH, rows, cols], fp32.
at::Tensor tileScores(const at::Tensor& q_tile, const at::Tensor& k_tile, double scale,
                      const Tile& t, int64_t offset) {
  at::Tensor s = at::bmm(q_tile, k_tile.transpose(1, 2)).mul_(scale);
  if (needsMask(t, offset)) {
    // Column c of row r is hidden when j0 + c > i0 + r + offset: the diagonal j0 - i0 - offset + 1.
    at::Tensor hidden =
        at::ones({t.rows, t.cols}, s.options().dtype(at::kBool)).triu(t.i0 + offset - t.j0 + 1);
    s.masked_fill_(hidden, -std::numeric_limits<float>::infinity());
  }
  return s;
}

at::Tensor rowsOf(const at::Tensor& x, int64_t start, int64_t n) {
  return x.narrow(1, start, n);
}

// --- forward

// Fills out [BH, S, D] and lse [BH, S] (fp32): for each block of query rows, the running maximum
// m, the running sum l of exp(s - m) and the unnormalised output, rescaled as new key blocks
// raise the maximum.
void forwardTiles(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, FlashBlocks bs,
                  at::Tensor& out, at::Tensor& lse) {
  const int64_t s = q.size(1), keys = k.size(1), offset = keys - s;
  const double scale = 1.0 / std::sqrt(double(q.size(2)));
  for (int64_t i0 = 0; i0 < s; i0 += bs.q) {
    const int64_t rows = std::min(bs.q, s - i0);
    const at::Tensor q_tile = rowsOf(q, i0, rows).to(at::kFloat);
    at::Tensor m, l, acc;
    for (int64_t j0 = 0; j0 < keys; j0 += bs.k) {
      const Tile t{i0, rows, j0, std::min(bs.k, keys - j0)};
      if (!visible(t, offset)) break;  // later key blocks are hidden too
      at::Tensor scores =
          tileScores(q_tile, rowsOf(k, j0, t.cols).to(at::kFloat), scale, t, offset);
      const at::Tensor v_tile = rowsOf(v, j0, t.cols).to(at::kFloat);
      if (!m.defined()) {  // the first block: every row sees key 0, so m is finite
        m = std::get<0>(scores.max(-1, true));
        at::Tensor p = scores.sub_(m).exp_();
        l = p.sum(-1, true);
        acc = at::bmm(p, v_tile);
        continue;
      }
      const at::Tensor m_new = at::maximum(m, std::get<0>(scores.max(-1, true)));
      const at::Tensor alpha = (m - m_new).exp_();
      at::Tensor p = scores.sub_(m_new).exp_();
      l.mul_(alpha).add_(p.sum(-1, true));
      acc.mul_(alpha).baddbmm_(p, v_tile);
      m = m_new;
    }
    rowsOf(out, i0, rows).copy_(acc.div_(l));
    lse.narrow(1, i0, rows).copy_(m.add_(l.log_()).squeeze(-1));
  }
}

// --- backward

// dq, dk, dv (zeroed, fp32, q's and k's shapes) from FlashAttention-2's backward: per tile
// P = exp(S - lse), dV += P^T dO, dP = dO V^T, dS = P * (dP - rowsum(dO * O)), dQ += scale dS K,
// dK += scale dS^T Q.
void backwardTiles(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const at::Tensor& out, const at::Tensor& lse, const at::Tensor& dout,
                   FlashBlocks bs, at::Tensor& dq, at::Tensor& dk, at::Tensor& dv) {
  const int64_t s = q.size(1), keys = k.size(1), offset = keys - s;
  const double scale = 1.0 / std::sqrt(double(q.size(2)));
  const at::Tensor dout32 = dout.to(at::kFloat);
  const at::Tensor delta = (dout32 * out.to(at::kFloat)).sum(-1, true);  // [BH, S, 1]
  for (int64_t i0 = 0; i0 < s; i0 += bs.q) {
    const int64_t rows = std::min(bs.q, s - i0);
    const at::Tensor q_tile = rowsOf(q, i0, rows).to(at::kFloat);
    const at::Tensor do_tile = rowsOf(dout32, i0, rows);
    const at::Tensor lse_tile = lse.narrow(1, i0, rows).unsqueeze(-1);
    const at::Tensor delta_tile = rowsOf(delta, i0, rows);
    at::Tensor dq_tile = rowsOf(dq, i0, rows);
    for (int64_t j0 = 0; j0 < keys; j0 += bs.k) {
      const Tile t{i0, rows, j0, std::min(bs.k, keys - j0)};
      if (!visible(t, offset)) break;
      const at::Tensor k_tile = rowsOf(k, j0, t.cols).to(at::kFloat);
      const at::Tensor v_tile = rowsOf(v, j0, t.cols).to(at::kFloat);
      at::Tensor p = tileScores(q_tile, k_tile, scale, t, offset).sub_(lse_tile).exp_();
      rowsOf(dv, j0, t.cols).baddbmm_(p.transpose(1, 2), do_tile);
      at::Tensor ds = at::bmm(do_tile, v_tile.transpose(1, 2)).sub_(delta_tile).mul_(p);
      dq_tile.baddbmm_(ds, k_tile, 1.0, scale);
      rowsOf(dk, j0, t.cols).baddbmm_(ds.transpose(1, 2), q_tile, 1.0, scale);
    }
  }
}

// --- the autograd function

struct TiledAttention : torch::autograd::Function<TiledAttention> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, int64_t block_q, int64_t block_k) {
    const int64_t bh = q.size(0), s = q.size(1), d = q.size(2);
    // [S, BH, D] storage seen as [BH, S, D]: the caller's [S, B, heads * D] is a view of it.
    at::Tensor out = at::empty({s, bh, d}, q.options()).transpose(0, 1);
    at::Tensor lse = at::empty({bh, s}, q.options().dtype(at::kFloat));
    forwardTiles(q, k, v, FlashBlocks{block_q, block_k}, out, lse);
    ctx->saved_data["block_q"] = block_q;
    ctx->saved_data["block_k"] = block_k;
    ctx->save_for_backward({q, k, v, out, lse});
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const FlashBlocks bs{ctx->saved_data["block_q"].toInt(), ctx->saved_data["block_k"].toInt()};
    const auto f32 = q.options().dtype(at::kFloat);
    at::Tensor dq = at::zeros(q.sizes(), f32), dk = at::zeros(k.sizes(), f32);
    at::Tensor dv = at::zeros(v.sizes(), f32);
    backwardTiles(q, k, v, out, lse, grads[0], bs, dq, dk, dv);
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), at::Tensor(),
            at::Tensor()};
  }
};

// --- CUDA (libtorch 2.x)

#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 0)
// Query i sees key j when j <= i + P: is_causal alone is that only for P = 0 (top-left aligned).
at::Tensor prefixMask(int64_t s, int64_t keys, const at::TensorOptions& options) {
  return at::ones({s, keys}, options.dtype(at::kBool)).tril(keys - s);
}
#endif

}  // namespace

at::Tensor flashAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          FlashBlocks blocks) {
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && k.size(1) >= q.size(1),
              "flashAttention: q [BH, S, D], k and v [BH, P + S, D]");
  TORCH_CHECK(blocks.q >= 1 && blocks.k >= 1, "flashAttention: block sizes must be >= 1");
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 0)
  if (q.is_cuda()) {
    // SDPA's flash and memory-efficient kernels take [B, H, S, D] only (3-D inputs fall back to
    // the math kernel, which materialises the s x s matrix): the BH rows become one batch's heads.
    const int64_t s = q.size(1), keys = k.size(1);
    const at::Tensor q4 = q.unsqueeze(0), k4 = k.unsqueeze(0), v4 = v.unsqueeze(0);
    if (keys == s) {
      return at::scaled_dot_product_attention(q4, k4, v4, {}, 0.0, /*is_causal=*/true).squeeze(0);
    }
    return at::scaled_dot_product_attention(q4, k4, v4, prefixMask(s, keys, q.options()), 0.0,
                                            false)
        .squeeze(0);
  }
#endif
  return TiledAttention::apply(q, k, v, blocks.q, blocks.k)[0];
}

std::string flashKernelName(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 0)
  if (q.is_cuda()) {
    const int64_t s = q.size(1), keys = k.size(1);
    // No mask is an empty optional: an optional holding an undefined tensor counts as a mask.
    const c10::optional<at::Tensor> mask =
        keys == s ? c10::optional<at::Tensor>() : prefixMask(s, keys, q.options());
    // sdp::SDPBackend: -1 error, 0 math, 1 flash_attention, 2 efficient_attention, 3 cudnn.
    switch (at::_fused_sdp_choice(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), mask, 0.0,
                                  keys == s)) {
      case 0:
        return "math";
      case 1:
        return "flash";
      case 2:
        return "efficient";
      case 3:
        return "cudnn";
      default:
        return "unknown";
    }
  }
#endif
  (void)k;
  (void)v;
  return q.is_cuda() ? "unavailable" : "tiled-cpu";
}

}  // namespace gpttrain
