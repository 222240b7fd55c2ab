// gpttrain's configuration: every command-line flag (DESIGN.md's contract) in one value, its
// parser, and the layout checks. It does not touch libtorch or the environment.
#pragma once

#include <tracerun/schedule/kind.h>

#include <optional>
#include <string>

namespace gpttrain {

struct TrainConfig {
  // Layout.
  int tp = 1;
  int pp = 1;
  int zero = 0;
  bool sp = false;
  tracerun::schedule::ScheduleKind schedule = tracerun::schedule::ScheduleKind::kOneFOneB;
  int vp = 1;
  // Batch.
  int global_batch = 8;
  int micro_batch = 1;
  // Model.
  int layers = 2;
  int hidden = 64;
  int heads = 4;
  int seq_len = 32;
  int vocab = 256;
  double dropout = 0.1;
  // --precision: "fp32"; "bf16-autocast" (the forward under bf16 autocast, parameters, gradients
  // and optimizer states fp32; --bf16 says the same); "bf16-mixed" (FSDP/Megatron mixed precision:
  // bf16 working parameters and gradients, fp32 master weights and AdamW moments in the optimizer,
  // the forward under the same autocast).
  std::string precision = "fp32";
  bool bf16 = false;  // the forward runs under bf16 autocast (both bf16 precisions)
  std::string recompute = "none";
  // Optimisation.
  int steps = 10;
  long long seed = 1234;
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double min_lr = -1.0;     // < 0: lr / 10
  int warmup = -1;          // < 0: steps / 10
  int lr_decay_steps = -1;  // < 0: steps
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double eps = 1e-8;
  double clip_grad = 1.0;  // <= 0: no clipping
  // Data and evaluation.
  std::string data = "synthetic";
  double val_fraction = 0.1;
  int eval_interval = 0;  // 0: never
  int eval_iters = 4;
  // Checkpoints.
  std::string save;
  int save_interval = 0;  // 0: only after the last step
  std::string load;
  // Output and diagnostics.
  std::string log_json;
  std::string dump_grads;  // write the full gradients of step 1 here (rank 0)
  // Write the initial parameters and every step's batch to this directory (single process only;
  // the reference model of tests/trainer/reference_gpt.py reads them).
  std::string dump_init;
  std::string dry_run_costs;
  // PipeDream-2BW's update rule without a pipeline: step b's gradient is computed on the weights
  // of the step before, and applied to the current ones (schedule_2bw.h, weight_versions.h).
  bool delayed_update = false;
  int threads = 0;  // 0: 1 per rank when ranks share the machine, else libtorch's default
  std::string backend = "gloo";  // process groups: gloo, or nccl (a libtorch with CUDA only)
  std::string device;            // "cpu" or "cuda"; empty: cuda with --backend nccl, else cpu
  double bucket_mb = 4.0;
  bool quiet = false;  // no start line and no per-step lines (the end-of-run summary stays)

  bool mixedPrecision() const { return precision == "bf16-mixed"; }
  int dpSize(int world) const { return world / (tp * pp); }
  int microbatches(int world) const { return global_batch / (micro_batch * dpSize(world)); }
  // --device as given, or what --backend implies: "cpu" or "cuda" (cuda device LOCAL_RANK).
  std::string deviceType() const {
    if (!device.empty()) return device;
    return backend == "nccl" ? "cuda" : "cpu";
  }
};

// Parses argv into `config`. Returns an exit code when the program should stop now (0 after
// --help; 2 after an unknown flag or bad value, having printed one line to stderr).
std::optional<int> parseArgs(int argc, char** argv, TrainConfig& config);

// Parses --dry-run-costs "F_MS,B_MS[,W_MS]" (all >= 0; *weight_ms -1 when W is not given).
// Returns false when malformed.
bool parseDryRunCosts(const std::string& text, double* forward_ms, double* backward_ms,
                      double* weight_ms);

// Empty when `config` can run on `world` ranks; else one line naming the problem.
std::string layoutError(const TrainConfig& config, int world);

}  // namespace gpttrain
