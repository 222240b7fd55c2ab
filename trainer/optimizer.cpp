// AdamW / SGD steps and the learning-rate schedule (see optimizer.h).
#include "optimizer.h"

#include <algorithm>
#include <cmath>

namespace gpttrain {

double learningRate(const ScheduleConfig& c, int step) {
  if (c.warmup > 0 && step <= c.warmup) return c.lr * step / c.warmup;
  const int span = std::max(1, c.decay_steps - c.warmup);
  const double progress = std::clamp(double(step - c.warmup) / span, 0.0, 1.0);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(M_PI * progress));
}

Optimizer::Optimizer(ParamSet& params, const OptimizerConfig& config)
    : params_(params), config_(config) {
  if (!config_.adamw) return;
  for (auto& e : params_.entries()) {
    exp_avg_.push_back(at::zeros_like(e.tensor, e.tensor.options().requires_grad(false)));
    exp_avg_sq_.push_back(at::zeros_like(e.tensor, e.tensor.options().requires_grad(false)));
  }
}

void Optimizer::step(double lr) {
  at::NoGradGuard no_grad;
  ++steps_;
  auto& entries = params_.entries();
  if (!config_.adamw) {
    for (auto& e : entries) e.tensor.add_(e.tensor.grad(), -lr);
    return;
  }
  const double bias1 = 1.0 - std::pow(config_.beta1, double(steps_));
  const double bias2 = 1.0 - std::pow(config_.beta2, double(steps_));
  for (size_t i = 0; i < entries.size(); ++i) {
    at::Tensor& p = entries[i].tensor;
    const at::Tensor& g = p.grad();
    if (entries[i].decay && config_.weight_decay > 0) p.mul_(1.0 - lr * config_.weight_decay);
    exp_avg_[i].mul_(config_.beta1).add_(g, 1.0 - config_.beta1);
    exp_avg_sq_[i].mul_(config_.beta2).addcmul_(g, g, 1.0 - config_.beta2);
    at::Tensor denom = (exp_avg_sq_[i].sqrt() / std::sqrt(bias2)).add_(config_.eps);
    p.addcdiv_(exp_avg_[i], denom, -lr / bias1);
  }
}

std::vector<std::pair<std::string, at::Tensor>> Optimizer::namedState() {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (size_t i = 0; i < exp_avg_.size(); ++i) {
    out.emplace_back("exp_avg." + params_.entries()[i].name, exp_avg_[i]);
    out.emplace_back("exp_avg_sq." + params_.entries()[i].name, exp_avg_sq_[i]);
  }
  return out;
}

int64_t Optimizer::stateBytes() const {
  int64_t bytes = 0;
  for (size_t i = 0; i < exp_avg_.size(); ++i)
    bytes += exp_avg_[i].nbytes() + exp_avg_sq_[i].nbytes();
  return bytes;
}

}  // namespace gpttrain
