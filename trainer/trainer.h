// The training loop of one rank: its model chunks run one pipeline schedule per step (through the
// executor, pipeline_executor.h), then the DP/SP/tied-embedding gradient reductions, clipping, the
// optimizer step, logging, validation and checkpoints. Without PP one chunk owns the whole model.
#pragma once

#include "checkpoint/checkpoint.h"
#include "config.h"
#include "data/data.h"
#include "data_parallel/dp_strategy.h"
#include "model/model.h"
#include "optim/optimizer.h"
#include "parallel/process_groups.h"
#include "pipeline/pipeline_executor.h"
#include "pipeline/schedule.h"

#include <cstdio>
#include <memory>

namespace gpttrain {

class WeightVersions;  // weight_versions.h (2bw, --delayed-update)

struct MemoryAccount {
  int64_t parameters = 0, gradients = 0, optimizer_states = 0;
};

struct StepResult {
  int step = 0;
  double loss = 0.0;  // mean over the global batch's tokens
  double lr = 0.0;
  double grad_norm = 0.0;
  double ms = 0.0;
  double tokens_per_s = 0.0;
  // Dry run: each pipeline stage's idle fraction (rank 0), on the dry run's virtual clock
  // (dry_run.h) and on the wall clock.
  std::vector<double> stage_idle, stage_idle_wall;
};

// A dry run's step (or 2bw's drained run) timed: the wall-clock span, each stage's idle fraction.
struct DryRunTimes {
  double wall_ms = 0;
  std::vector<double> idle, idle_wall;  // virtual clock, wall clock
};

class DryRunCompute;  // pipeline/dry_run.h

class Trainer {
 public:
  // Builds the model shard, optimizer and data source on `device` (parameters, gradient buckets,
  // optimizer states, dropout generators; batches and pipeline messages go there too); loads
  // --load if given. Throws std::runtime_error on bad input (data file, checkpoint).
  Trainer(const TrainConfig& config, ProcessGroups& groups, torch::Device device);
  ~Trainer();
  // Trains from the current step to config.steps; returns the process exit code.
  int run();
  torch::Device device() const { return device_; }
  // Every tensor the trainer holds between steps, named: parameters, the gradient buckets' buffers
  // (full, shard, flat parameters), optimizer states. All on device() (tests check that).
  NamedTensors heldTensors();
  const DropoutRng& dropoutRng() const { return rng_; }

 private:
  StepResult trainStep(int step);
  // --schedule 2bw (trainer_2bw.cpp): steps from `first_step` to the next drain point (checkpoint,
  // evaluation, end) as one continuous pipeline, reported; returns the last step run.
  int runTwoBwSegment(int first_step);
  friend class TwoBwCompute;
  StepResult dryRunStep(int step);
  // After a dry run's pipeline: every stage's times gathered over the pipeline group.
  DryRunTimes gatherDryRunTimes(double start_ms, double end_ms, const PipelineStepStats& stats,
                                const DryRunCompute& compute);
  double evaluate();
  // The shape of the activations (and gradients) exchanged between pipeline stages.
  std::vector<int64_t> activationShape() const;
  // `value` held by the last pipeline stage, averaged over DP (on every rank).
  double lastStageAverage(double value);
  void dumpGrads(const std::string& path);
  // Everything this rank checkpoints: parameters (their shards) and optimizer states.
  // With two weight versions, both: the one of batch `next_batch` and the next.
  NamedTensors checkpointTensors(int next_batch = 0);
  int64_t& optimizerSteps();
  // Fine-tuning's frozen base parameters ("param.<name>"; none otherwise).
  NamedTensors frozenTensors();
  // --load: the whole checkpoint, or (fine-tuning) only the base model's parameters from it.
  int loadResume(const std::string& dir, const CheckpointLayout& layout);
  void saveMerged(int step);
  // Bytes of parameters, gradients and optimizer states this rank holds now.
  MemoryAccount memoryAccount() const;
  void report(const StepResult& r);
  void save(int step);
  void barrier();

  TrainConfig config_;
  ProcessGroups& groups_;
  torch::Device device_;
  int microbatches_;
  ScheduleKind kind_;
  PipelineShape shape_;
  std::vector<Action> actions_;   // this rank's schedule for one step
  ParamSet params_;               // every parameter of this rank's chunks
  std::vector<GptStage> chunks_;  // model chunks (v with the interleaved schedule)
  std::unique_ptr<DataParallelStrategy> strategy_;  // DP reduction; what a rank keeps (ZeRO)
  std::unique_ptr<Optimizer> optimizer_;      // replicated or sharded, as the strategy keeps states
  std::unique_ptr<WeightVersions> versions_;  // 2bw and --delayed-update: two weight versions
  ScheduleConfig schedule_;
  TokenSource source_;
  DropoutRng rng_;
  int start_step_ = 0;
  int max_in_flight_ = 0;
  MemoryAccount at_optimizer_step_;  // measured just before the last optimizer step  // the most
                                     // microbatch-chunks this rank held, over all steps
  double dry_forward_ms_ = -1.0, dry_backward_ms_ = -1.0;  // --dry-run-costs; < 0: off
  double dry_weight_ms_ = 0.0;  // W (zb-h1's split backward; others sleep B + W in backward)
  std::FILE* log_json_ = nullptr;
};

}  // namespace gpttrain
