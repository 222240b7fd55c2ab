// The optimizer of plain data parallelism (and of one process): every rank holds AdamW moments for
// its full parameters and steps them from .grad(); the SP, tied-embedding and norm steps are
// tp_grads.h's. No DP communication: the strategy has averaged the gradients already. With master
// weights (bf16-mixed) it updates an fp32 copy of every parameter and rounds it into the parameter,
// from the gradients widened to fp32 one gradient bucket at a time (one cast per bucket, not one
// per parameter: issue 32's launch-bound steps).
#include "optim/optimizer.h"

#include "data_parallel/grad_buckets.h"
#include "parallel/tp_grads.h"

namespace gpttrain {
namespace {

class ReplicatedOptimizer final : public Optimizer {
 public:
  ReplicatedOptimizer(ParamSet& params, const GradBuckets& buckets, const OptimizerConfig& config)
      : params_(params), buckets_(buckets), config_(config) {
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
    if (master_.empty()) {
      for (size_t i = 0; i < entries.size(); ++i) update(i, gradFor(i, updated(i)), adamw, lr);
      return;
    }
    // Master weights: each bucket's gradients widened at once, the temporary freed after its
    // members' updates (a parameter's update does not depend on the order).
    std::vector<bool> done(entries.size(), false);
    for (const GradBucket& b : buckets_.all()) {
      const std::vector<at::Tensor> wide = widenedGrads(b);
      for (size_t k = 0; k < b.members.size(); ++k) {
        const size_t i = b.members[k].param;
        update(i, wide.empty() ? gradFor(i, updated(i)) : wide[k], adamw, lr);
        done[i] = true;
      }
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (!done[i]) update(i, gradFor(i, updated(i)), adamw, lr);
    }
  }

  // Parameter i's update from gradient g (in the dtype of the tensor it updates).
  void update(size_t i, const at::Tensor& g, AdamwStep& adamw, double lr) {
    auto& entries = params_.entries();
    at::Tensor& p = updated(i);
    if (!config_.adamw) {
      p.add_(g, -lr);
    } else {
      adamw.decay = adamwDecay(config_, lr, entries[i].decay);
      adamwUpdate(p, g, exp_avg_[i], exp_avg_sq_[i], adamw);
    }
    if (!master_.empty()) entries[i].tensor.copy_(p);  // rounded to bf16 once
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

  // Master weights: bucket b's gradients widened to fp32 by one cast of its flat buffer, as views
  // of that temporary in member order -- the values gradFor gives, exactly (a cast is elementwise).
  // Empty when the bucket holds no flat buffer, it is already fp32, or some member's gradient is
  // not its view of the buffer (then gradFor, per parameter).
  std::vector<at::Tensor> widenedGrads(const GradBucket& b) {
    if (master_.empty() || !b.flat.defined() || b.flat.scalar_type() == at::kFloat) return {};
    const auto* base = static_cast<const char*>(b.flat.data_ptr());
    for (const BucketMember& m : b.members) {
      const at::Tensor& g = params_.entries()[m.param].tensor.grad();
      if (!g.defined() || g.scalar_type() != b.flat.scalar_type() || !g.is_contiguous() ||
          g.data_ptr() != base + m.offset * b.flat.element_size() || g.numel() != m.numel) {
        return {};
      }
    }
    at::Tensor wide;
    {
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
      wide = b.flat.to(at::kFloat);
    }
    std::vector<at::Tensor> out;
    for (const BucketMember& m : b.members) {  // one as_strided each, no narrow + view
      std::vector<int64_t> strides(m.shape.size(), 1);
      for (size_t d = m.shape.size(); d-- > 1;) strides[d - 1] = strides[d] * m.shape[d];
      out.push_back(wide.as_strided(m.shape, strides, m.offset));
    }
    return out;
  }

  // step()'s AdamW on CUDA: the same update as multi-tensor kernels (adamwUpdateMany).
  void stepMany(const AdamwStep& adamw, double lr) {
    auto& entries = params_.entries();
    std::vector<at::Tensor> wide(entries.size());
    for (const GradBucket& b : buckets_.all()) {
      std::vector<at::Tensor> views = widenedGrads(b);
      for (size_t k = 0; k < views.size(); ++k) wide[b.members[k].param] = std::move(views[k]);
    }
    std::vector<at::Tensor> p, g;
    std::vector<double> decay;
    for (size_t i = 0; i < entries.size(); ++i) {
      p.push_back(updated(i));
      g.push_back(wide[i].defined() ? wide[i] : gradFor(i, p.back()));
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
  const GradBuckets& buckets_;  // the strategy's: where the gradients live
  OptimizerConfig config_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  std::vector<at::Tensor> master_;  // fp32 master weights (bf16-mixed), per parameter
};

}  // namespace

std::unique_ptr<Optimizer> makeReplicatedOptimizer(ParamSet& params, const GradBuckets& buckets,
                                                   const OptimizerConfig& config) {
  return std::make_unique<ReplicatedOptimizer>(params, buckets, config);
}

}  // namespace gpttrain
