// The training loop of one rank: microbatches with gradient accumulation, the DP/SP gradient
// reductions, clipping, the optimizer step, logging, validation and checkpoints. It runs one
// pipeline stage that owns the whole model (pipeline schedules: issue 5).
#pragma once

#include "config.h"
#include "data.h"
#include "grad_buckets.h"
#include "model.h"
#include "optimizer.h"
#include "process_groups.h"

#include <cstdio>
#include <memory>

namespace gpttrain {

struct StepResult {
  int step = 0;
  double loss = 0.0;  // mean over the global batch's tokens
  double lr = 0.0;
  double grad_norm = 0.0;
  double ms = 0.0;
  double tokens_per_s = 0.0;
};

class Trainer {
 public:
  // Builds the model shard, optimizer and data source; loads --load if given. Throws
  // std::runtime_error on bad input (data file, checkpoint).
  Trainer(const TrainConfig& config, ProcessGroups& groups);
  ~Trainer();
  // Trains from the current step to config.steps; returns the process exit code.
  int run();

 private:
  StepResult trainStep(int step);
  double evaluate();
  // Input [S, B] and target [S, B] token ids of one microbatch.
  std::pair<at::Tensor, at::Tensor> microbatch(Split split, uint64_t first_index) const;
  void dumpGrads(const std::string& path);
  void report(const StepResult& r);
  void save(int step);
  void barrier();

  TrainConfig config_;
  ProcessGroups& groups_;
  int microbatches_;
  GptStage stage_;
  std::unique_ptr<GradBuckets> buckets_;
  Optimizer optimizer_;
  ScheduleConfig schedule_;
  TokenSource source_;
  DropoutRng rng_;
  int start_step_ = 0;
  std::FILE* log_json_ = nullptr;
};

}  // namespace gpttrain
