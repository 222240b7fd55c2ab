// Prompt tuning (Lester et al. 2021): P trainable input embeddings prepended to every sequence of
// a frozen model. The prompt enters after the token and position embeddings (it has no position
// of its own: the real tokens keep positions 0..S-1) and leaves before the final LayerNorm, so the
// loss is over the real tokens only. It does not freeze the model (frozen.h) and needs the whole
// model on one pipeline stage and no sequence parallelism (config.cpp refuses the others).
#pragma once

#include "model/params.h"

namespace gpttrain {

// Whether `name` is prompt tuning's parameter.
bool isPromptParameter(const std::string& name);

class PromptTuning {
 public:
  // Registers "prompt.embedding" [tokens, hidden], replicated over TP, drawn from (seed, name) with
  // the embedding's standard deviation `stddev`.
  PromptTuning(ParamSet& params, int tokens, int64_t hidden, double stddev);
  // [S, B, H] -> [P + S, B, H]: the prompt, the same for every sample, then x.
  at::Tensor prepend(const at::Tensor& x) const;
  // [P + S, B, H] -> [S, B, H]: the real tokens' positions.
  at::Tensor strip(const at::Tensor& x) const;
  int tokens() const { return tokens_; }
  int64_t numel() const { return prompt_.numel(); }

 private:
  int tokens_;
  at::Tensor prompt_;
};

}  // namespace gpttrain
