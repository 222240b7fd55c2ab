// Prefix tuning's keys and values (see prefix.h).
#include "model/prefix.h"

#include <tracerun/annotate.h>

namespace gpttrain {

namespace {
constexpr const char* kSuffix = ".attn.prefix";
}

bool isPrefixParameter(const std::string& name) {
  const std::string suffix = kSuffix;
  return name.rfind("layers.", 0) == 0 && name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

PrefixKv::PrefixKv(ParamSet& params, int layer, int tokens, int64_t hidden, double stddev)
    : tokens_(tokens),
      prefix_(params.add("layers." + std::to_string(layer) + kSuffix, {2, tokens, hidden}, 2,
                         Init::kNormal, stddev)),
      path_(std::string(tracerun::vocab::module_path::kLayers) + "." + std::to_string(layer) + "." +
            tracerun::vocab::module_path::kAttn + "." + tracerun::vocab::module_path::kPrefix),
      logical_(2 * tokens * hidden),
      shard_(params.tpSize() > 1 ? params.tpRank() : -1) {}

std::pair<at::Tensor, at::Tensor> PrefixKv::prepend(const at::Tensor& k, const at::Tensor& v,
                                                    int64_t batch, int64_t local_heads) const {
  // A module of its own, like LoRA's adapters, so tracedot model shows its trainable count.
  namespace vocab = tracerun::vocab;
  tracerun::ModuleScope scope(
      path_.c_str(), vocab::module_type::kPrefixTuning, prefix_.numel(), shard_,
      {{vocab::arg::kLogical, logical_}, {vocab::arg::kTrainable, logical_}});
  const int64_t head_dim = k.size(2);
  auto expand = [&](const at::Tensor& part) {  // [P, heads * D] -> [batch * heads, P, D]
    return part.view({tokens_, local_heads, head_dim})
        .permute({1, 0, 2})
        .unsqueeze(0)
        .expand({batch, local_heads, tokens_, head_dim})
        .reshape({batch * local_heads, tokens_, head_dim})
        .to(k.scalar_type());
  };
  return {at::cat({expand(prefix_[0]), k}, 1), at::cat({expand(prefix_[1]), v}, 1)};
}

}  // namespace gpttrain
