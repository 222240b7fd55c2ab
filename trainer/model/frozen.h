// Parameter-efficient fine-tuning's frozen base model (--prefix-tuning, --lora-rank,
// --prompt-tuning): which parameters stop training. It does not create the trainable additions
// (prefix.h and the LoRA / prompt-tuning files do) and does not decide which names are trainable.
#pragma once

#include "model/params.h"

#include <functional>

namespace gpttrain {

// Moves every entry of params.entries() for which `trainable(entry)` is false into
// params.frozenEntries() with requires_grad false, keeping the order of both lists. Call it after
// the model is built and before the data-parallel strategy and the optimizer see `params`: they
// then hold no gradient buffer and no optimizer state for the frozen parameters.
void freezeBaseParameters(ParamSet& params,
                          const std::function<bool(const ParamEntry&)>& trainable);

}  // namespace gpttrain
