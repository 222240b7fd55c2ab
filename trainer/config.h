// gpttrain's configuration: every command-line flag (DESIGN.md's contract) in one value, its
// parser, and the layout checks. It does not touch libtorch or the environment.
#pragma once

#include <tracerun/schedule/kind.h>

#include <optional>
#include <string>
#include <vector>

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
  bool tf32 = false;  // --tf32: float32 matmul precision "high" (TF32 tensor cores on CUDA)
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
  // Parameter-efficient fine-tuning (issue 32; docs/trainer.md "LoRA", "Prompt tuning"): the base
  // model frozen, only what these add trains. --lora-rank R > 0: LoRA adapters of rank R, scaled
  // by lora_alpha / R (lora_alpha < 0: R, a scale of 1), on the linears named in lora_targets;
  // lora_init_b "normal" is a testing aid (B not zero at step 1). --save-merged DIR: the final
  // weights with the adapters merged, as a plain (non-LoRA) checkpoint's parameters.
  // --prompt-tuning P > 0: P trainable input embeddings prepended to every sequence.
  int lora_rank = 0;
  double lora_alpha = -1.0;
  std::vector<std::string> lora_targets{"qkv", "proj", "fc1", "fc2"};
  std::string lora_init_b = "zeros";
  std::string save_merged;
  int prompt_tuning = 0;
  // --prefix-tuning P > 0: P trainable key and value vectors per layer prepended inside attention
  // (model/prefix.h; docs/trainer.md "Prefix tuning").
  int prefix_tuning = 0;
  bool fineTuning() const { return lora_rank > 0 || prompt_tuning > 0 || prefix_tuning > 0; }
  // --attention standard|flash: flash runs FlashAttention's tiles (model/flash_attention.h;
  // docs/trainer.md "Flash attention"), --flash-block-q query rows by --flash-block-k keys a tile.
  // Attention dropout has no tiled form here: flash needs --dropout 0.
  std::string attention = "standard";
  int flash_block_q = 64;
  int flash_block_k = 64;
  // PipeDream-2BW's update rule without a pipeline: step b's gradient is computed on the weights
  // of the step before, and applied to the current ones (schedule_2bw.h, weight_versions.h).
  bool delayed_update = false;
  int threads = 0;  // 0: 1 per rank when ranks share the machine, else libtorch's default
  std::string backend = "gloo";  // process groups: gloo, or nccl (a libtorch with CUDA only)
  std::string device;            // "cpu" or "cuda"; empty: cuda with --backend nccl, else cpu
  double bucket_mb = 4.0;
  // --offload-optimizer (issue 31): "none"; "cpu" (ZeRO-Offload: fp32 master weights and AdamW
  // moments in pinned host memory, the update on the CPU; --device cuda only); "nvme:DIR"
  // (ZeRO-Infinity: the same states in files under DIR, streamed per bucket). ZeRO 1-3 only.
  std::string offload_optimizer = "none";
  // --dp-algorithm (issue 31, Bagua's): "allreduce" (the strategy's own reduction); "bytegrad"
  // (8-bit min/max-compressed scatter-reduce + all-gather); "decentralized" (weights averaged
  // with one ring-shifting peer per step, no gradient reduction). Both others need --zero 0.
  std::string dp_algorithm = "allreduce";
  bool quiet = false;  // no start line and no per-step lines (the end-of-run summary stays)

  bool mixedPrecision() const { return precision == "bf16-mixed"; }
  // The directory of --offload-optimizer nvme:DIR, or "" for none / cpu.
  std::string offloadDir() const {
    return offload_optimizer.rfind("nvme:", 0) == 0 ? offload_optimizer.substr(5) : "";
  }
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
