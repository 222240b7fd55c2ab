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
