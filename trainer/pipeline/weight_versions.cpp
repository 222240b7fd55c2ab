// Two weight versions per stage and the delayed update (see weight_versions.h).
#include "pipeline/weight_versions.h"

#include <tracerun/annotate.h>

namespace gpttrain {

WeightVersions::WeightVersions(ParamSet& params) : params_(params) {
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
  at::NoGradGuard no_grad;
  for (auto& e : params_.entries()) {
    // variable_data(): the parameter's storage under a tensor of its own, whose in-place writes
    // do not bump the parameter's autograd version counter.
    buffers_[0].push_back(e.tensor.variable_data());
    buffers_[1].push_back(e.tensor.detach().clone());
  }
}

void WeightVersions::use(int64_t batch) {
  auto& entries = params_.entries();
  for (size_t i = 0; i < entries.size(); ++i) entries[i].tensor.set_data(version(i, batch));
}

void WeightVersions::update(int64_t batch, const std::function<void()>& step) {
  auto& entries = params_.entries();
  std::vector<c10::VariableVersion> saved;
  {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < entries.size(); ++i) {
      version(i, batch).copy_(version(i, batch + 1));
      entries[i].tensor.set_data(version(i, batch));
      // The optimizer's in-place writes bump a fresh counter; the one batch b + 1's saved views
      // share is put back untouched afterwards.
      c10::TensorImpl* impl = entries[i].tensor.unsafeGetTensorImpl();
      saved.push_back(impl->version_counter());
      impl->set_version_counter(c10::VariableVersion(saved.back().current_version()));
    }
  }
  step();
  for (size_t i = 0; i < entries.size(); ++i) {
    entries[i].tensor.unsafeGetTensorImpl()->set_version_counter(std::move(saved[i]));
  }
}

NamedTensors WeightVersions::checkpointTensors(int64_t next_batch) {
  NamedTensors out;
  const auto& entries = params_.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    out.emplace_back("param." + entries[i].name, version(i, next_batch));
    out.emplace_back("param_next." + entries[i].name, version(i, next_batch + 1));
  }
  return out;
}

int64_t WeightVersions::extraBytes() const {
  int64_t bytes = 0;
  for (const at::Tensor& t : buffers_[1]) bytes += t.nbytes();
  return bytes;
}

}  // namespace gpttrain
