// Prefix tuning (Li & Liang 2021; P-Tuning v2, Liu et al. 2022): P trainable key and value vectors
// per layer, prepended inside attention to the keys and values the layer computes; every position
// attends to them (no causal mask on the prefix's columns). TP splits them by heads, as the QKV
// projection splits its output. It does not freeze the model (frozen.h) and does not mask
// (model.cpp builds the [S, P + S] mask; flash_attention.h takes P leading keys).
#pragma once

#include "model/params.h"

#include <string>
#include <utility>

namespace gpttrain {

// Whether `name` is a prefix-tuning parameter ("layers.<i>.attn.prefix").
bool isPrefixParameter(const std::string& name);

class PrefixKv {
 public:
  // Registers "layers.<layer>.attn.prefix" [2, tokens, hidden] (keys, then values; the last
  // dimension heads x head_dim, split over TP by heads), drawn from (seed, name) with `stddev`.
  PrefixKv(ParamSet& params, int layer, int tokens, int64_t hidden, double stddev);
  // k, v [batch * local_heads, S, head_dim] (batch outer) -> [batch * local_heads, P + S,
  // head_dim]: this rank's heads' prefix keys / values, the same for every sample, then k / v.
  std::pair<at::Tensor, at::Tensor> prepend(const at::Tensor& k, const at::Tensor& v, int64_t batch,
                                            int64_t local_heads) const;
  int tokens() const { return tokens_; }

 private:
  int tokens_;
  at::Tensor prefix_;  // [2, P, hidden / tp]
  std::string path_;   // the module path, "layers.<i>.attn.prefix"
  int64_t logical_;    // 2 x P x hidden: the whole prefix over TP
  int64_t shard_;      // this rank's TP index when split, else -1
};

}  // namespace gpttrain
