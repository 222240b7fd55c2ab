// Prompt tuning's prepended embeddings (see prompt_tuning.h).
#include "model/prompt_tuning.h"

#include <tracerun/annotate.h>

namespace gpttrain {

namespace {
constexpr const char* kPromptName = "prompt.embedding";  // module path "prompt" (vocab.h)
}  // namespace

bool isPromptParameter(const std::string& name) {
  return name == kPromptName;
}

PromptTuning::PromptTuning(ParamSet& params, int tokens, int64_t hidden, double stddev)
    : tokens_(tokens),
      prompt_(params.add(kPromptName, {tokens, hidden}, -1, Init::kNormal, stddev)) {}

at::Tensor PromptTuning::prepend(const at::Tensor& x) const {
  namespace vocab = tracerun::vocab;
  const int64_t n = prompt_.numel();  // replicated: the same on every rank and over TP
  tracerun::ModuleScope scope(vocab::module_path::kPrompt, vocab::module_type::kPromptTuning, n, -1,
                              {{vocab::arg::kLogical, n}, {vocab::arg::kTrainable, n}});
  const at::Tensor prompt = prompt_.unsqueeze(1).expand({tokens_, x.size(1), x.size(2)});
  return at::cat({prompt.to(x.scalar_type()), x}, 0);
}

at::Tensor PromptTuning::strip(const at::Tensor& x) const {
  return x.narrow(0, tokens_, x.size(0) - tokens_);
}

}  // namespace gpttrain
