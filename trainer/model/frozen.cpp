// freezeBaseParameters (see frozen.h).
#include "model/frozen.h"

namespace gpttrain {

void freezeBaseParameters(ParamSet& params,
                          const std::function<bool(const ParamEntry&)>& trainable) {
  std::vector<ParamEntry> kept;
  for (ParamEntry& e : params.entries()) {
    if (trainable(e)) {
      kept.push_back(std::move(e));
      continue;
    }
    e.tensor.set_requires_grad(false);
    e.tensor.mutable_grad().reset();
    params.frozenEntries().push_back(std::move(e));
  }
  params.entries() = std::move(kept);
}

}  // namespace gpttrain
