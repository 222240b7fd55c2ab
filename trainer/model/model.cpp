// GPT forward for one stage and one microbatch (see model.h).
#include "model/model.h"

#include "model/recompute.h"

#include <tracerun/annotate.h>

#include <cmath>
#include <limits>
#include <tuple>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

// The additive causal mask [s, s] (-inf above the diagonal): a buffer, neither parameter nor
// gradient, so its bytes are tagged "other" (the constructors run under the parameter tag).
// With `prefix` leading key columns every query sees: [s, prefix + s], -inf where key j > i +
// prefix.
at::Tensor causalMask(int64_t seq_len, int64_t prefix, torch::Device device) {
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kOther);
  return at::full({seq_len, prefix + seq_len}, -std::numeric_limits<float>::infinity(),
                  at::TensorOptions().device(device))
      .triu(1 + prefix);
}

constexpr double kInitStd = 0.02;

std::string layerName(int index, const char* part) {
  return "layers." + std::to_string(index) + "." + part;
}

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// qkv [S, B * heads, 3, head_dim] -> q, k, v as [B * heads, S, head_dim] strided views (batch and
// heads merge into one stride; bmm takes the row stride as its leading dimension, so nothing is
// copied). Backward copies the three gradients into one buffer in qkv's layout: autograd's own
// backward of select or unbind (zero-filled buffers and sums, or a cat of transposed tensors) takes
// about 5x as long.
struct SplitQkv : torch::autograd::Function<SplitQkv> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& qkv) {
    ctx->saved_data["sizes"] = qkv.sizes();
    return {qkv.select(2, 0).transpose(0, 1), qkv.select(2, 1).transpose(0, 1),
            qkv.select(2, 2).transpose(0, 1)};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& any = grads[0].defined()   ? grads[0]
                            : grads[1].defined() ? grads[1]
                                                 : grads[2];
    at::Tensor grad = at::empty(ctx->saved_data["sizes"].toIntVector(), any.options());
    for (int64_t i = 0; i < 3; ++i) {
      at::Tensor part = grad.select(2, i);
      if (grads[i].defined()) {
        part.copy_(grads[i].transpose(0, 1));
      } else {
        part.zero_();
      }
    }
    return {grad};
  }
};

// "f32[16,2,64]": dtype and shape, the dimension `dim` multiplied by `factor` (the global shape of
// a TP-split tensor).
std::string shapeText(const at::Tensor& x, int dim, int64_t factor) {
  const at::ScalarType t = x.scalar_type();
  std::string s = t == at::kFloat      ? "f32["
                  : t == at::kBFloat16 ? "bf16["
                  : t == at::kHalf     ? "f16["
                  : t == at::kLong     ? "i64["
                                       : std::string(c10::toString(t)) + "[";
  for (int64_t i = 0; i < x.dim(); ++i) {
    s += (i > 0 ? "," : "") + std::to_string(x.size(i) * (i == dim ? factor : 1));
  }
  return s + "]";
}

// A module scope's detail: its type and, only while tracerun captures, its input on this rank
// ("in=") and over the TP group when TP splits the input along `split_dim` ("global=").
class ScopeDetail {
 public:
  ScopeDetail(const char* type, const at::Tensor& x, int split_dim, int64_t tp) : type_(type) {
    if (!tracerun::capturing()) return;
    text_ = std::string(type) + " in=" + shapeText(x, -1, 1);
    if (split_dim >= 0 && tp > 1) text_ += " global=" + shapeText(x, split_dim, tp);
  }
  const char* c_str() const { return text_.empty() ? type_ : text_.c_str(); }

 private:
  const char* type_;
  std::string text_;
};

}  // namespace

TransformerLayer::TransformerLayer(ParamSet& params, const ModelConfig& c, int index, GroupPtr tp)
    : config_(c),
      tp_(tp),
      index_(index),
      path_(std::string(vocab::module_path::kLayers) + "." + std::to_string(index)),
      attn_path_(path_ + "." + vocab::module_path::kAttn),
      mlp_path_(path_ + "." + vocab::module_path::kMlp),
      qkv_path_(attn_path_ + "." + vocab::module_path::kQkv),
      proj_path_(attn_path_ + "." + vocab::module_path::kProj),
      fc1_path_(mlp_path_ + "." + vocab::module_path::kFc1),
      fc2_path_(mlp_path_ + "." + vocab::module_path::kFc2),
      local_heads_(c.heads / tp->size),
      ln1_weight_(params.add(layerName(index, "ln1.weight"), {c.hidden}, -1, Init::kOnes)),
      ln1_bias_(params.add(layerName(index, "ln1.bias"), {c.hidden}, -1, Init::kZeros)),
      ln2_weight_(params.add(layerName(index, "ln2.weight"), {c.hidden}, -1, Init::kOnes)),
      ln2_bias_(params.add(layerName(index, "ln2.bias"), {c.hidden}, -1, Init::kZeros)),
      qkv_(params, layerName(index, "attn.qkv"), c.hidden, 3 * c.hidden, kInitStd, tp, c.sp,
           c.lora.forTarget("qkv")),
      proj_(params, layerName(index, "attn.proj"), c.hidden, c.hidden,
            kInitStd / std::sqrt(2.0 * c.layers), tp, c.sp, c.lora.forTarget("proj")),
      fc1_(params, layerName(index, "mlp.fc1"), c.hidden, 4 * c.hidden, kInitStd, tp, c.sp,
           c.lora.forTarget("fc1")),
      fc2_(params, layerName(index, "mlp.fc2"), 4 * c.hidden, c.hidden,
           kInitStd / std::sqrt(2.0 * c.layers), tp, c.sp, c.lora.forTarget("fc2")),
      // prompt tuning: attention sees the prompt's positions before the sequence's
      causal_mask_(causalMask(c.seq_len + c.prompt_tokens, c.prefix_tokens, params.device())) {
  if (c.prefix_tokens > 0) prefix_.emplace(params, index, c.prefix_tokens, c.hidden, kInitStd);
  for (const auto& e : params.entries()) {
    if (e.name.rfind(path_ + ".", 0) != 0) continue;
    const bool mlp =
        e.name.find(".mlp.") != std::string::npos || e.name.find(".ln2.") != std::string::npos;
    const int64_t local = e.tensor.numel(), logical = e.split_dim >= 0 ? local * tp->size : local;
    const std::pair<const std::string*, Count*> counts[] = {
        {&path_, mlp ? &mlp_params_ : &attn_params_},
        {&qkv_path_, &qkv_params_},
        {&proj_path_, &proj_params_},
        {&fc1_path_, &fc1_params_},
        {&fc2_path_, &fc2_params_}};
    for (auto [prefix, count] : counts) {
      if (e.name.rfind(*prefix + ".", 0) != 0) continue;
      count->local += local;
      count->logical += logical;
    }
  }
}

at::Tensor TransformerLayer::attention(const at::Tensor& qkv, DropoutRng* rng) const {
  if (config_.recompute != ModelConfig::Recompute::kSelective) return attentionCore(qkv, rng);
  return recomputed(
      vocab::arg::kAttentionCore, index_, qkv,
      [this, rng](const at::Tensor& t) { return attentionCore(t, rng); }, rewoundRng(rng),
      config_.bf16, recomputes_);
}

at::Tensor TransformerLayer::attentionCore(const at::Tensor& qkv, DropoutRng* rng) const {
  const int64_t s = qkv.size(0), b = qkv.size(1);
  const int64_t head_dim = config_.hidden / config_.heads;
  const int64_t batch_heads = b * local_heads_;
  variable_list qkv_heads = SplitQkv::apply(qkv.reshape({s, batch_heads, 3, head_dim}));
  const at::Tensor& q = qkv_heads[0];
  at::Tensor k = qkv_heads[1];
  at::Tensor v = qkv_heads[2];
  if (prefix_) std::tie(k, v) = prefix_->prepend(k, v, b, local_heads_);  // [B * heads, P + S, D]
  const int64_t keys = k.size(1);
  if (config_.flash) {
    // [B * heads, S, head_dim], a view of [S, B * heads, head_dim] (flash_attention.h): the
    // [S, B, heads * head_dim] result is a view too, and the projection saves the same tensor.
    return flashAttention(q, k, v, config_.flash_blocks)
        .view({b, local_heads_, s, head_dim})
        .permute({2, 0, 1, 3})
        .reshape({s, b, local_heads_ * head_dim});
  }
  // mask + scale * q k^T in one GEMM: the causal mask is additive (-inf above the diagonal) and
  // the scale rides on the GEMM's alpha, so the [B * heads, S, S] scores are written once and no
  // masked_fill or scaling pass (nor their backward) touches them.
  const at::Tensor mask = causal_mask_.narrow(0, 0, s).narrow(1, 0, keys);
  at::Tensor scores = at::baddbmm(mask, q, k.transpose(1, 2), /*beta=*/1.0,
                                  /*alpha=*/1.0 / std::sqrt(double(head_dim)));
  at::Tensor probs =
      dropout(at::softmax(scores, -1), config_.dropout, rng ? &rng->sharded : nullptr);
  // [B * heads, S, head_dim] -> [S, B, heads * head_dim]
  return at::bmm(probs, v)
      .view({b, local_heads_, s, head_dim})
      .permute({2, 0, 1, 3})
      .reshape({s, b, local_heads_ * head_dim});
}

at::Tensor TransformerLayer::forward(const at::Tensor& x, DropoutRng* rng) const {
  auto run = [this, rng](const at::Tensor& t) { return forwardLayer(t, rng); };
  if (units_ != nullptr) {
    ParamUnits* u = units_;
    const int i = index_;
    RecomputeHooks hooks{[u, i] { u->gather(i, false); }, [u, i] { u->release(i); },
                         [u, i] { u->gather(i, true); },
                         [u, i] {
                           u->reduceGrads(i);
                           u->release(i);
                         }};
    return recomputed(vocab::arg::kLayer, index_, x, run, rewoundRng(rng), config_.bf16,
                      recomputes_, std::move(hooks));
  }
  if (config_.recompute != ModelConfig::Recompute::kFull) return forwardLayer(x, rng);
  return recomputed(vocab::arg::kLayer, index_, x, run, rewoundRng(rng), config_.bf16, recomputes_);
}

DropoutRng* TransformerLayer::rewoundRng(DropoutRng* rng) const {
  return config_.dropout > 0.0 ? rng : nullptr;
}

at::Tensor TransformerLayer::forwardLayer(const at::Tensor& x, DropoutRng* rng) const {
  // Residual-stream dropout: sharded generator when sp splits the sequence over TP.
  at::Generator* residual_gen = nullptr;
  if (rng) residual_gen = config_.sp && tp_->size > 1 ? &rng->sharded : &rng->replicated;
  const std::vector<int64_t> norm_shape{config_.hidden};
  const int64_t shard = tp_->size > 1 ? tp_->rank : -1;
  // Module scopes: the parameters on this rank and over all TP shards ("logical"), how TP splits a
  // linear ("tp_col"/"tp_row": the weight dimension split), the ZeRO-3 unit (-1: none), the input
  // shapes (global too where TP splits them: the sequence under SP, the hidden dimension of a row-
  // parallel linear's input).
  const int64_t tp = tp_->size;
  const int seq_split = config_.sp && tp > 1 ? 0 : -1;
  tracerun::ModuleScope layer_scope(
      path_.c_str(), ScopeDetail(vocab::module_type::kTransformerLayer, x, seq_split, tp).c_str(),
      attn_params_.local + mlp_params_.local, shard,
      {{vocab::arg::kLogical, attn_params_.logical + mlp_params_.logical},
       {vocab::arg::kZeroUnit, units_ ? index_ : -1}});
  auto linear = [shard, tp](const auto& layer, const std::string& path, const char* type, Count n,
                            const char* split, int64_t dim, int input_split, const at::Tensor& in) {
    tracerun::ModuleScope scope(path.c_str(), ScopeDetail(type, in, input_split, tp).c_str(),
                                n.local, shard, {{vocab::arg::kLogical, n.logical}, {split, dim}});
    return layer.forward(in);
  };
  at::Tensor h;
  {
    tracerun::ModuleScope scope(
        attn_path_.c_str(),
        ScopeDetail(vocab::module_type::kParallelAttention, x, seq_split, tp).c_str(),
        attn_params_.local, shard, {{vocab::arg::kLogical, attn_params_.logical}});
    at::Tensor a = at::layer_norm(x, norm_shape, ln1_weight_, ln1_bias_, 1e-5);
    at::Tensor qkv = linear(qkv_, qkv_path_, vocab::module_type::kColumnParallelLinear, qkv_params_,
                            vocab::arg::kTpCol, 0, seq_split, a);
    at::Tensor proj = linear(proj_, proj_path_, vocab::module_type::kRowParallelLinear,
                             proj_params_, vocab::arg::kTpRow, 1, 2, attention(qkv, rng));
    h = x + dropout(proj, config_.dropout, residual_gen);
  }
  tracerun::ModuleScope scope(
      mlp_path_.c_str(), ScopeDetail(vocab::module_type::kParallelMLP, h, seq_split, tp).c_str(),
      mlp_params_.local, shard, {{vocab::arg::kLogical, mlp_params_.logical}});
  at::Tensor m = at::layer_norm(h, norm_shape, ln2_weight_, ln2_bias_, 1e-5);
  // Exact (erf) GELU, as torch.nn.GELU and Megatron's default: libtorch 1.13's CPU kernels for
  // the tanh approximation take about 3x as long, forward and backward.
  at::Tensor mlp =
      linear(fc2_, fc2_path_, vocab::module_type::kRowParallelLinear, fc2_params_,
             vocab::arg::kTpRow, 1, 2,
             at::gelu(linear(fc1_, fc1_path_, vocab::module_type::kColumnParallelLinear,
                             fc1_params_, vocab::arg::kTpCol, 0, seq_split, m)));
  return h + dropout(mlp, config_.dropout, residual_gen);
}

GptStage::GptStage(ParamSet& params, const ModelConfig& c, GroupPtr tp, int first_layer,
                   int num_layers, bool first, bool last)
    : config_(c), device_(params.device()), tp_(tp), sp_(c.sp && tp->size > 1), last_(last) {
  const size_t first_entry = params.entries().size();
  if (first || last) {
    embedding_.emplace(params, "embedding.word", c.vocab, c.hidden, kInitStd, tp);
  }
  if (first) {
    position_ =
        params.add("embedding.position", {c.seq_len, c.hidden}, -1, Init::kNormal, kInitStd);
    if (c.prompt_tokens > 0) prompt_.emplace(params, c.prompt_tokens, c.hidden, kInitStd);
  }
  for (int i = first_layer; i < first_layer + num_layers; ++i) {
    layers_.emplace_back(params, c, i, tp);
  }
  if (last) {
    final_ln_weight_ = params.add("final_ln.weight", {c.hidden}, -1, Init::kOnes);
    final_ln_bias_ = params.add("final_ln.bias", {c.hidden}, -1, Init::kZeros);
  }
  for (size_t i = first_entry; i < params.entries().size(); ++i) {
    const ParamEntry& e = params.entries()[i];
    const int64_t local = e.tensor.numel(), logical = e.split_dim >= 0 ? local * tp->size : local;
    if (e.name.rfind("embedding.", 0) == 0) {
      embedding_params_ += local;
      embedding_logical_ += logical;
    }
    if (e.name.rfind("final_ln.", 0) == 0) {
      head_params_ += local;
      head_logical_ += logical;
    }
  }
}

at::Tensor GptStage::forward(const at::Tensor& input, const at::Tensor& targets, DropoutRng* rng,
                             at::Tensor* embedded) const {
  at::Tensor x = input;
  const int64_t shard = tp_->size > 1 ? tp_->rank : -1;
  if (position_.defined()) {
    tracerun::ModuleScope scope(
        vocab::module_path::kEmbedding,
        ScopeDetail(vocab::module_type::kVocabParallelEmbedding, input, -1, 1).c_str(),
        embedding_params_, shard,
        {{vocab::arg::kLogical, embedding_logical_}, {vocab::arg::kTpVocab, 0}});
    const int64_t s = input.size(0);
    at::Tensor partial = embedding_->forwardPartial(input);
    at::Tensor pos = position_.narrow(0, 0, s);
    if (sp_) {
      // Each rank adds its rows of the (replicated) position table: its gradient is partial
      // over TP and summed with the other sequence-parallel gradients after backward.
      const int64_t local = s / tp_->size;
      x = reduceScatterToSeq(partial, tp_) + pos.narrow(0, local * tp_->rank, local).unsqueeze(1);
    } else {
      x = reduceFromTp(partial, tp_) + pos.unsqueeze(1);
    }
    x = dropout(x, config_.dropout, rng ? (sp_ ? &rng->sharded : &rng->replicated) : nullptr);
    if (embedded != nullptr) *embedded = x;
  }
  if (prompt_) x = prompt_->prepend(x);  // a module of its own, after the embedding
  for (const auto& layer : layers_) x = layer.forward(x, rng);
  if (!last_) return x;
  if (prompt_) x = prompt_->strip(x);  // the loss is over the real tokens only
  // The tied output projection's weight is the embedding's (counted there).
  tracerun::ModuleScope scope(
      vocab::module_path::kHead,
      ScopeDetail(vocab::module_type::kLMHead, x, sp_ ? 0 : -1, tp_->size).c_str(), head_params_,
      shard, {{vocab::arg::kLogical, head_logical_}});
  at::Tensor h = at::layer_norm(x, {config_.hidden}, final_ln_weight_, final_ln_bias_, 1e-5);
  at::Tensor replicated = sp_ ? gatherFromSeq(h, tp_) : copyToTp(h, tp_);
  at::Tensor logits = at::matmul(replicated, embedding_->weight().t());
  at::Tensor losses =
      vocabParallelCrossEntropy(logits.reshape({-1, logits.size(-1)}).to(at::kFloat),  // fp32 loss
                                targets.reshape({-1}), tp_);  // also under bf16 autocast
  return losses.mean();
}

int64_t GptStage::recomputedForwards() const {
  int64_t n = 0;
  for (const auto& layer : layers_) n += layer.recomputedForwards();
  return n;
}

void GptStage::setParamUnits(ParamUnits* units) {
  for (auto& layer : layers_) layer.setParamUnits(units);
}

}  // namespace gpttrain
