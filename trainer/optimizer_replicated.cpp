// The optimizer of plain data parallelism (and of one process): every rank holds AdamW moments for
// its full parameters and steps them from .grad(); the SP, tied-embedding and norm steps are
// tp_grads.h's. No DP communication: the strategy has averaged the gradients already.
#include "optimizer.h"

#include "tp_grads.h"

namespace gpttrain {
namespace {

class ReplicatedOptimizer final : public Optimizer {
 public:
  ReplicatedOptimizer(ParamSet& params, const OptimizerConfig& config)
      : params_(params), config_(config) {
    if (!config_.adamw) return;
    for (auto& e : params_.entries()) {
      exp_avg_.push_back(at::zeros_like(e.tensor, e.tensor.options().requires_grad(false)));
      exp_avg_sq_.push_back(at::zeros_like(e.tensor, e.tensor.options().requires_grad(false)));
    }
  }

  void syncSequenceParallelGrads(Group& tp, bool sp) override {
    gpttrain::syncSequenceParallelGrads(params_, tp, sp);
  }
  void syncTiedEmbeddingGrads(Group& embedding) override {
    gpttrain::syncTiedEmbeddingGrads(params_, embedding);
  }
  double clipGradNorm(Group& tp, Group& pp, double max_norm) override {
    return gpttrain::clipGradNorm(params_, tp, pp, max_norm);
  }

  void step(double lr) override {
    at::NoGradGuard no_grad;
    ++steps_;
    auto& entries = params_.entries();
    if (!config_.adamw) {
      for (auto& e : entries) e.tensor.add_(e.tensor.grad(), -lr);
      return;
    }
    AdamwStep adamw = adamwStep(config_, lr, steps_);
    for (size_t i = 0; i < entries.size(); ++i) {
      adamw.decay = adamwDecay(config_, lr, entries[i].decay);
      adamwUpdate(entries[i].tensor, entries[i].tensor.grad(), exp_avg_[i], exp_avg_sq_[i], adamw);
    }
  }

  // "exp_avg.<param>" and "exp_avg_sq.<param>" (AdamW only).
  std::vector<std::pair<std::string, at::Tensor>> namedState() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < exp_avg_.size(); ++i) {
      out.emplace_back("exp_avg." + params_.entries()[i].name, exp_avg_[i]);
      out.emplace_back("exp_avg_sq." + params_.entries()[i].name, exp_avg_sq_[i]);
    }
    return out;
  }

  int64_t stateBytes() const override {
    int64_t bytes = 0;
    for (size_t i = 0; i < exp_avg_.size(); ++i) {
      bytes += exp_avg_[i].nbytes() + exp_avg_sq_[i].nbytes();
    }
    return bytes;
  }

 private:
  ParamSet& params_;
  OptimizerConfig config_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
};

}  // namespace

std::unique_ptr<Optimizer> makeReplicatedOptimizer(ParamSet& params,
                                                   const OptimizerConfig& config) {
  return std::make_unique<ReplicatedOptimizer>(params, config);
}

}  // namespace gpttrain
