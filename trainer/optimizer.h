// AdamW (decoupled weight decay on matrices only) and plain SGD over a ParamSet, and the
// warm-up + cosine learning-rate schedule. It steps local shards only; no communication.
#pragma once

#include "params.h"

#include <string>
#include <utility>

namespace gpttrain {

struct ScheduleConfig {
  double lr = 1e-3;
  double min_lr = 1e-4;
  int warmup = 0;
  int decay_steps = 1;  // cosine horizon, counted from step 1
};

// Learning rate for optimizer step `step` (1-based): linear warm-up to lr over `warmup` steps,
// then cosine down to min_lr at `decay_steps`, min_lr after.
double learningRate(const ScheduleConfig& config, int step);

struct OptimizerConfig {
  bool adamw = true;  // false: SGD without momentum or weight decay
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double weight_decay = 0.01;
};

// One AdamW update of parameter p from gradient g with moments m and v, all four the same shape:
// p = p * decay - lr / bias1 * m / (sqrt(v) / sqrt(bias2) + eps), after m and v take in g.
// Contiguous fp32 CPU tensors take one fused pass (each buffer read and written once, 4 floats at a
// time); anything else the ATen ops, which stream the buffers some 22 times in all.
struct AdamwStep {
  double lr = 0.0;
  double decay = 1.0;  // 1 - lr * weight_decay, or 1 without weight decay
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double bias1 = 1.0, bias2 = 1.0;  // 1 - beta^step
};
void adamwUpdate(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v,
                 const AdamwStep& step);
// The step-wide part of AdamW's update number `step` (1-based) at learning rate lr; `decay` is left
// at 1: set it per parameter with adamwDecay.
AdamwStep adamwStep(const OptimizerConfig& config, double lr, int64_t step);
// 1 - lr * weight_decay for a parameter that takes weight decay (and a config that has it), else 1.
double adamwDecay(const OptimizerConfig& config, double lr, bool decays);

class Optimizer {
 public:
  Optimizer(ParamSet& params, const OptimizerConfig& config);
  // One update of every parameter from its .grad(), at learning rate lr.
  void step(double lr);

  // State, for checkpoints: "exp_avg.<param>" and "exp_avg_sq.<param>" (AdamW only).
  std::vector<std::pair<std::string, at::Tensor>> namedState();
  int64_t& stepCount() { return steps_; }
  int64_t stateBytes() const;

 private:
  ParamSet& params_;
  OptimizerConfig config_;
  std::vector<at::Tensor> exp_avg_, exp_avg_sq_;
  int64_t steps_ = 0;
};

}  // namespace gpttrain
