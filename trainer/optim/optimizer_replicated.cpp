// The optimizer of plain data parallelism (and of one process): every rank holds AdamW moments for
// its full parameters and steps them from .grad(); the SP, tied-embedding and norm steps are
// tp_grads.h's. No DP communication: the strategy has averaged the gradients already. With master
// weights (bf16-mixed) it updates an fp32 copy of every parameter and rounds it into the parameter.
#include "optim/optimizer.h"

#include "parallel/tp_grads.h"

namespace gpttrain {
namespace {

class ReplicatedOptimizer final : public Optimizer {
 public:
  ReplicatedOptimizer(ParamSet& params, const OptimizerConfig& config)
      : params_(params), config_(config) {
    for (auto& e : params_.entries()) {
      const auto options = e.tensor.options().dtype(at::kFloat).requires_grad(false);
      if (config_.master_weights) {  // the bf16 values, exactly, as fp32
        master_.push_back(at::empty(e.tensor.sizes(), options).copy_(e.tensor.detach()));
      }
      if (!config_.adamw) continue;
      exp_avg_.push_back(at::zeros(e.tensor.sizes(), options));
      exp_avg_sq_.push_back(at::zeros(e.tensor.sizes(), options));
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
    AdamwStep adamw = adamwStep(config_, lr, steps_);
    if (config_.adamw && !entries.empty() && entries[0].tensor.is_cuda()) {
      stepMany(adamw, lr);
      return;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      at::Tensor& p = updated(i);
      const at::Tensor g = gradFor(i, p);
      if (!config_.adamw) {
        p.add_(g, -lr);
      } else {
        adamw.decay = adamwDecay(config_, lr, entries[i].decay);
        adamwUpdate(p, g, exp_avg_[i], exp_avg_sq_[i], adamw);
      }
      if (!master_.empty()) entries[i].tensor.copy_(p);  // rounded to bf16 once
    }
  }

  // The tensor step() updates for parameter i: its fp32 master weight, or the parameter itself.
  at::Tensor& updated(size_t i) {
    return master_.empty() ? params_.entries()[i].tensor : master_[i];
  }

  // Parameter i's gradient in the dtype of `p`, the tensor it updates (bf16 gradients are widened
  // for the fp32 master update, a temporary).
  at::Tensor gradFor(size_t i, const at::Tensor& p) {
    const at::Tensor& g = params_.entries()[i].tensor.grad();
    if (g.scalar_type() == p.scalar_type()) return g;
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
    return g.to(p.scalar_type());
  }

  // step()'s AdamW on CUDA: the same update as multi-tensor kernels (adamwUpdateMany).
  void stepMany(const AdamwStep& adamw, double lr) {
    auto& entries = params_.entries();
    std::vector<at::Tensor> p, g;
    std::vector<double> decay;
    for (size_t i = 0; i < entries.size(); ++i) {
      p.push_back(updated(i));
      g.push_back(gradFor(i, p.back()));
      decay.push_back(adamwDecay(config_, lr, entries[i].decay));
    }
    adamwUpdateMany(p, g, exp_avg_, exp_avg_sq_, decay, adamw);
    for (size_t i = 0; i < master_.size(); ++i) entries[i].tensor.copy_(master_[i]);
  }

  // "exp_avg.<param>" and "exp_avg_sq.<param>" (AdamW only), "master.<param>" (master weights).
  std::vector<std::pair<std::string, at::Tensor>> namedState() override {
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (size_t i = 0; i < master_.size(); ++i) {
      out.emplace_back("master." + params_.entries()[i].name, master_[i]);
    }
    for (size_t i = 0; i < exp_avg_.size(); ++i) {
      out.emplace_back("exp_avg." + params_.entries()[i].name, exp_avg_[i]);
      out.emplace_back("exp_avg_sq." + params_.entries()[i].name, exp_avg_sq_[i]);
    }
    return out;
  }

  int64_t stateBytes() const override {
    int64_t bytes = 0;
    for (const at::Tensor& m : master_) bytes += m.nbytes();
    for (size_t i = 0; i < exp_avg_.size(); ++i) {
      bytes += exp_avg_[i].nbytes() + exp_avg_sq_[i].nbytes();
    }
    return bytes;
  }

 private:
  ParamSet& params_;
  OptimizerConfig config_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  std::vector<at::Tensor> master_;  // fp32 master weights (bf16-mixed), per parameter
};

}  // namespace

std::unique_ptr<Optimizer> makeReplicatedOptimizer(ParamSet& params,
                                                   const OptimizerConfig& config) {
  return std::make_unique<ReplicatedOptimizer>(params, config);
}

}  // namespace gpttrain
