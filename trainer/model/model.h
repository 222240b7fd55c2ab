// The GPT decoder (pre-LayerNorm blocks, causal self-attention, GELU MLP, final LayerNorm, output
// projection tied to the token embedding), split into what one pipeline stage owns. It runs one
// microbatch forward; it does not schedule microbatches or touch gradients.
#pragma once

#include "data_parallel/param_units.h"
#include "model/flash_attention.h"
#include "model/prefix.h"
#include "model/prompt_tuning.h"
#include "parallel/tp_layers.h"

#include <memory>
#include <optional>

namespace gpttrain {

struct ModelConfig {
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int seq_len = 32;
  int vocab = 256;
  double dropout = 0.0;
  bool sp = false;  // sequence parallelism around LayerNorm, dropout and residuals
  uint64_t seed = 1234;
  bool bf16 = false;  // forwards run under bf16 autocast (recomputation repeats it)
  // Activation recomputation: kFull re-runs each transformer layer from its input in backward;
  // kSelective only the attention core (QK^T, softmax, dropout, x V).
  enum class Recompute { kNone, kFull, kSelective } recompute = Recompute::kNone;
  LoraConfig lora;        // LoRA adapters on the linears (lora.h); off by default
  int prompt_tokens = 0;  // prompt tuning's prepended embeddings (prompt_tuning.h); 0: none
  // --attention flash: the attention core by flash_attention.h (dropout 0 only), in tiles of
  // flash_blocks; else the [B * heads, S, S] softmax of the standard path.
  bool flash = false;
  FlashBlocks flash_blocks;
  int prefix_tokens = 0;  // prefix tuning's keys and values per layer (prefix.h); 0: none
};

class TransformerLayer {
 public:
  TransformerLayer(ParamSet& params, const ModelConfig& config, int index, GroupPtr tp);
  // x: [S, B, H] (sp: [S/tp, B, H]) -> same shape.
  at::Tensor forward(const at::Tensor& x, DropoutRng* rng) const;
  // ZeRO-3: gather / free this layer's parameters through `units` (the layer is then always
  // recomputed in backward: nothing refers to the freed parameters between forward and backward).
  void setParamUnits(ParamUnits* units) { units_ = units; }

 private:
  at::Tensor forwardLayer(const at::Tensor& x, DropoutRng* rng) const;
  at::Tensor attention(const at::Tensor& qkv, DropoutRng* rng) const;
  at::Tensor attentionCore(const at::Tensor& qkv, DropoutRng* rng) const;
  // The generators a recomputation must rewind: none without dropout (nothing draws from them),
  // so no generator state (two CPU states: 10,112 bytes) is kept per recomputed call.
  DropoutRng* rewoundRng(DropoutRng* rng) const;

  ModelConfig config_;
  GroupPtr tp_;
  int index_;
  std::string path_, attn_path_, mlp_path_;  // module paths for trace scopes
  std::string qkv_path_, proj_path_, fc1_path_, fc2_path_;
  // Parameters of each traced module, on this rank and over all TP shards (trace scope arguments).
  struct Count {
    int64_t local = 0, logical = 0;
  };
  Count attn_params_, mlp_params_, qkv_params_, proj_params_, fc1_params_, fc2_params_;
  int local_heads_;
  at::Tensor ln1_weight_, ln1_bias_, ln2_weight_, ln2_bias_;
  ColumnParallelLinear qkv_;  // output layout [heads][q,k,v][head_dim]: heads split evenly
  RowParallelLinear proj_;
  ColumnParallelLinear fc1_;
  RowParallelLinear fc2_;
  // [S, P + S] additive (P prefix-tuning keys, 0 without): -inf where key j > query i + P, 0
  // elsewhere; on the parameters' device.
  at::Tensor causal_mask_;
  std::optional<PrefixKv> prefix_;  // --prefix-tuning
  std::shared_ptr<int64_t> recomputes_ = std::make_shared<int64_t>(0);
  ParamUnits* units_ = nullptr;

 public:
  // Forwards re-run in backward so far (recomputation).
  int64_t recomputedForwards() const { return *recomputes_; }
};

// The layers [first_layer, first_layer + num_layers) plus the embedding when `first` and the final
// LayerNorm, tied output projection and loss when `last`. Without pipeline parallelism one stage
// owns everything. With PP the last stage holds its own copy of the tied embedding
// ("embedding.word", initialised alike); the trainer sums its gradient with the first stage's.
// Parameters are registered in `params` (which must outlive the stage): one ParamSet may hold
// several stages (the chunks of an interleaved pipeline).
class GptStage {
 public:
  GptStage(ParamSet& params, const ModelConfig& config, GroupPtr tp, int first_layer,
           int num_layers, bool first, bool last);

  // input: tokens [S, B] (first stage) or hidden [S(/tp), B, H]; targets: [S, B] token ids (last
  // stage). Returns the mean loss over the microbatch's tokens (last stage) or the hidden state.
  // rng null: no dropout (evaluation). `embedded` (first stage): set to the hidden state the
  // embedding hands to the first layer (zb-h1's B stops there; split_backward.h).
  at::Tensor forward(const at::Tensor& input, const at::Tensor& targets, DropoutRng* rng,
                     at::Tensor* embedded = nullptr) const;

  const ModelConfig& config() const { return config_; }
  // Where its parameters, buffers and activations live (the ParamSet's device); inputs must be
  // there too.
  torch::Device device() const { return device_; }
  bool first() const { return position_.defined(); }
  int64_t recomputedForwards() const;
  void setParamUnits(ParamUnits* units);
  bool last() const { return last_; }

 private:
  ModelConfig config_;
  torch::Device device_;
  GroupPtr tp_;
  bool sp_;
  std::optional<VocabParallelEmbedding> embedding_;
  std::optional<PromptTuning> prompt_;  // --prompt-tuning (first stage = last stage)
  at::Tensor position_;
  std::vector<TransformerLayer> layers_;
  at::Tensor final_ln_weight_, final_ln_bias_;
  int64_t embedding_params_ = 0, head_params_ = 0;    // on this rank, for trace scopes
  int64_t embedding_logical_ = 0, head_logical_ = 0;  // over all TP shards
  bool last_;
};

}  // namespace gpttrain
