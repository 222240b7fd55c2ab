// LoRA adapters on the tensor-parallel linears (see lora.h).
#include "model/lora.h"

#include <tracerun/annotate.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace gpttrain {

LoraConfig LoraConfig::forTarget(const std::string& target) const {
  LoraConfig c = *this;
  if (std::find(targets.begin(), targets.end(), target) == targets.end()) c.rank = 0;
  return c;
}

bool isLoraParameter(const std::string& name) {
  const auto ends = [&name](const std::string& tail) {
    return name.size() > tail.size() &&
           name.compare(name.size() - tail.size(), tail.size(), tail) == 0;
  };
  return ends(".lora_a") || ends(".lora_b");
}

LoraAdapter::LoraAdapter(ParamSet& params, const std::string& name, Kind kind, int64_t in_full,
                         int64_t out_full, const LoraConfig& config, GroupPtr tp, bool sp)
    : kind_(kind), scale_(config.scale()), tp_(std::move(tp)), sp_(sp) {
  const int64_t r = config.rank;
  // A as PEFT's default draws it in spirit (variance ~ 1 / fan-in); B zeros, so the adapted model
  // starts as the base model. The testing aid draws B small but non-zero.
  const double a_std = 1.0 / std::sqrt(double(in_full));
  const Init b_init = config.init_b_normal ? Init::kNormal : Init::kZeros;
  const bool column = kind == Kind::kColumn;
  a_ = params.add(name + ".lora_a", {r, in_full}, column ? -1 : 1, Init::kNormal, a_std);
  b_ = params.add(name + ".lora_b", {out_full, r}, column ? 0 : -1, b_init, 0.02);
  path_ = name + "." + tracerun::vocab::module_path::kLora;
  local_ = a_.numel() + b_.numel();
  logical_ = r * (in_full + out_full);
}

at::Tensor LoraAdapter::forward(const at::Tensor& x) const {
  // Column: x is replicated (sp: this rank's sequence shard), A replicated. u = x A^T is computed
  // in full on every rank; copyToTp's backward sums B's per-shard contributions to u's gradient
  // (sp: gatherFromSeq's reduce-scatter), so A's gradient is whole (sp: partial over the
  // sequence, summed with the other replicated parameters' after backward, tp_grads.h).
  // Row: x holds this rank's input columns, A its columns: u = x A^T is a partial sum over TP,
  // reduced as the base output is (sp: reduce-scattered along the sequence); B replicated.
  namespace vocab = tracerun::vocab;
  tracerun::ModuleScope scope(
      path_.c_str(), vocab::module_type::kLoraAdapter, local_, tp_->size > 1 ? tp_->rank : -1,
      {{vocab::arg::kLogical, logical_}, {vocab::arg::kTrainable, logical_}});
  at::Tensor u = at::linear(x, a_);
  if (kind_ == Kind::kColumn) {
    u = sp_ ? gatherFromSeq(u, tp_) : copyToTp(u, tp_);
  } else {
    u = sp_ ? reduceScatterToSeq(u, tp_) : reduceFromTp(u, tp_);
  }
  return at::linear(u * scale_, b_);
}

std::vector<std::pair<std::string, at::Tensor>> mergedBaseParameters(const ParamSet& params,
                                                                     double scale) {
  std::map<std::string, at::Tensor> by_name;
  for (const auto* list : {&params.entries(), &params.frozenEntries()}) {
    for (const ParamEntry& e : *list) by_name[e.name] = e.tensor;
  }
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto* list : {&params.entries(), &params.frozenEntries()}) {
    for (const ParamEntry& e : *list) {
      if (isLoraParameter(e.name)) continue;
      at::Tensor t = e.tensor.detach();
      const std::string suffix = ".weight";
      if (e.name.size() > suffix.size() &&
          e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
        const std::string base = e.name.substr(0, e.name.size() - suffix.size());
        auto a = by_name.find(base + ".lora_a"), b = by_name.find(base + ".lora_b");
        if (a != by_name.end() && b != by_name.end()) {
          t = t + scale * at::matmul(b->second.detach(), a->second.detach()).to(t.scalar_type());
        }
      }
      out.emplace_back(e.name, t);
    }
  }
  return out;
}

}  // namespace gpttrain
