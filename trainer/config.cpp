// Command-line parsing (CLI11) and layout validation for gpttrain. Typos are rejected, never
// reinterpreted.
#include "config.h"

#include "pipeline/schedule.h"
#include "pipeline/schedule_2bw.h"

#include <CLI/CLI.hpp>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <vector>

namespace gpttrain {

namespace {

// CLI11's PositiveNumber/NonNegativeNumber name double's maximum (309 digits) as the bound; this
// says it in words: "--tp: must be a whole number >= 1, not '-3'". (tracerun's commands have the
// same check in their plumbing; gpttrain links nothing of tracerun but annotate.h.)
CLI::Validator atLeast(double min, bool whole, bool inclusive = true) {
  char bound[32];
  std::snprintf(bound, sizeof bound, "%g", min);
  const std::string what =
      std::string(whole ? "a whole number" : "a number") + (inclusive ? " >= " : " > ") + bound;
  auto check = [=](std::string& value) -> std::string {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && end != nullptr && *end == '\0' && errno == 0 &&
                        std::isfinite(v) && (!whole || v == std::floor(v));
    const bool inRange = inclusive ? v >= min : v > min;
    const std::string shown = value.size() > 40 ? value.substr(0, 40) + "..." : value;
    if (!number || !inRange) return "must be " + what + ", not '" + shown + "'";
    if (whole && v > INT_MAX) return "must be at most " + std::to_string(INT_MAX);
    return std::string();
  };
  return CLI::Validator(check, what, "AT_LEAST");
}

}  // namespace

std::optional<int> parseArgs(int argc, char** argv, TrainConfig& c) {
  CLI::App app{"gpttrain: a GPT with tensor, sequence and data parallelism on c10d"};
  app.set_version_flag("--version", std::string("gpttrain ") + TRACERUN_VERSION);
  app.option_defaults()->always_capture_default()->multi_option_policy(
      CLI::MultiOptionPolicy::TakeLast);  // a later flag overrides an earlier one
  app.add_option("--tp", c.tp, "tensor-parallel size")->check(atLeast(1, true));
  app.add_option("--pp", c.pp, "pipeline-parallel size")->check(atLeast(1, true));
  app.add_option("--zero", c.zero, "ZeRO stage 0-3")->check(CLI::Range(0, 3));
  app.add_flag("--sp", c.sp, "sequence parallelism (needs --tp > 1 to matter)");
  std::string schedule = scheduleName(c.schedule);
  app.add_option("--schedule", schedule, "pipeline schedule")
      ->check(CLI::IsMember(tracerun::schedule::scheduleWords()));
  app.add_option("--vp", c.vp, "virtual pipeline chunks per rank")->check(atLeast(1, true));
  app.add_option("--global-batch", c.global_batch, "samples per step")->check(atLeast(1, true));
  app.add_option("--micro-batch-size", c.micro_batch, "samples per microbatch")
      ->check(atLeast(1, true));
  app.add_option("--layers", c.layers, "transformer layers")->check(atLeast(1, true));
  app.add_option("--hidden", c.hidden, "hidden size")->check(atLeast(1, true));
  app.add_option("--heads", c.heads, "attention heads")->check(atLeast(1, true));
  app.add_option("--seq-len", c.seq_len, "tokens per sample")->check(atLeast(1, true));
  app.add_option("--vocab", c.vocab, "vocabulary size (>= 256 with --data FILE)")
      ->check(atLeast(1, true));
  app.add_option("--dropout", c.dropout, "dropout probability")->check(CLI::Range(0.0, 0.99));
  app.add_flag("--bf16", c.bf16, "the same as --precision bf16-autocast");
  auto* precision =
      app.add_option("--precision", c.precision,
                     "fp32; bf16-autocast (fp32 parameters); bf16-mixed (bf16 parameters and "
                     "gradients, fp32 master weights and AdamW states)")
          ->check(CLI::IsMember({"fp32", "bf16-autocast", "bf16-mixed"}));
  app.add_flag("--tf32", c.tf32,
               "fp32 matrix products in TF32 on CUDA (what nanoGPT's train.py sets); no effect on "
               "the CPU");
  app.add_option("--recompute", c.recompute, "activation recomputation")
      ->check(CLI::IsMember({"none", "full", "selective"}));
  app.add_option("--steps", c.steps, "optimizer steps (total, also when resuming)")
      ->check(atLeast(0, true));
  app.add_option("--seed", c.seed, "seed of weights, data order and dropout");
  app.add_option("--optimizer", c.optimizer, "optimizer")->check(CLI::IsMember({"adamw", "sgd"}));
  app.add_option("--lr", c.lr, "peak learning rate");
  app.add_option("--min-lr", c.min_lr, "final learning rate of the cosine (default lr/10)");
  app.add_option("--warmup", c.warmup, "linear warm-up steps (default steps/10)");
  app.add_option("--lr-decay-steps", c.lr_decay_steps, "cosine horizon (default --steps)");
  app.add_option("--weight-decay", c.weight_decay, "AdamW decoupled weight decay (matrices only)");
  app.add_option("--beta1", c.beta1, "AdamW beta1");
  app.add_option("--beta2", c.beta2, "AdamW beta2");
  app.add_option("--eps", c.eps, "AdamW epsilon");
  CLI::Option* clip = app.add_option(
      "--clip-grad", c.clip_grad,
      "global gradient-norm clip (<= 0: off; default 1.0, off under --schedule 2bw)");
  app.add_option("--data", c.data, "text file (byte-level tokens) or 'synthetic'");
  app.add_option("--val-fraction", c.val_fraction, "tail of the text file held out")
      ->check(CLI::Range(0.0, 0.5));
  app.add_option("--eval-interval", c.eval_interval, "validation every K steps (0: never)")
      ->check(atLeast(0, true));
  app.add_option("--eval-iters", c.eval_iters, "global batches per validation")
      ->check(atLeast(1, true));
  app.add_option("--save", c.save, "checkpoint directory");
  app.add_option("--save-interval", c.save_interval, "save every K steps (0: after the last)")
      ->check(atLeast(0, true));
  app.add_option("--load", c.load, "resume from this checkpoint directory");
  app.add_option("--log-json", c.log_json, "one JSON object per step (rank 0)");
  app.add_option("--dump-grads", c.dump_grads, "write step 1's full gradients here (rank 0)");
  app.add_option("--dump-init", c.dump_init,
                 "write the initial parameters and the batches to DIR (one process)");
  app.add_option("--dry-run-costs", c.dry_run_costs,
                 "F_MS,B_MS[,W_MS] (pipeline dry run; zb-h1 without W_MS: B split in half)");
  CLI::Option* lora_rank =
      app.add_option("--lora-rank", c.lora_rank, "LoRA adapters of rank R; the base model frozen")
          ->check(atLeast(1, true));
  CLI::Option* lora_alpha = app.add_option("--lora-alpha", c.lora_alpha,
                                           "LoRA scale numerator: dW = (A/R) B A (default R)")
                                ->check(atLeast(0, false, false));
  CLI::Option* lora_targets =
      app.add_option("--lora-targets", c.lora_targets, "linears with adapters (comma-separated)")
          ->delimiter(',')
          ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
          ->check(CLI::IsMember({"qkv", "proj", "fc1", "fc2"}));
  CLI::Option* lora_init_b =
      app.add_option("--lora-init-b", c.lora_init_b,
                     "zeros; normal (a testing aid: step 1 then differs from the base model)")
          ->check(CLI::IsMember({"zeros", "normal"}));
  CLI::Option* save_merged = app.add_option(
      "--save-merged", c.save_merged, "after the last step, a checkpoint with the adapters merged");
  app.add_option("--prompt-tuning", c.prompt_tuning,
                 "P trainable embeddings prepended to every sequence; the model frozen")
      ->check(atLeast(1, true));
  app.add_option("--prefix-tuning", c.prefix_tuning,
                 "P trainable keys and values per layer prepended in attention; the model frozen")
      ->check(atLeast(1, true));
  app.add_option("--attention", c.attention,
                 "standard; flash (FlashAttention's tiles and online softmax; --dropout 0)")
      ->check(CLI::IsMember({"standard", "flash"}));
  app.add_option("--flash-block-q", c.flash_block_q, "flash: query rows per tile")
      ->check(atLeast(1, true));
  app.add_option("--flash-block-k", c.flash_block_k, "flash: key columns per tile")
      ->check(atLeast(1, true));
  app.add_option("--threads", c.threads, "intra-op threads per rank (0: automatic)")
      ->check(atLeast(0, true));
  app.add_option("--backend", c.backend, "process groups: gloo, or nccl (libtorch with CUDA)")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  app.add_option("--device", c.device,
                 "cpu, or cuda (device LOCAL_RANK; default: cuda with --backend nccl, else cpu)")
      ->check(CLI::IsMember({"cpu", "cuda"}));
  app.add_option("--bucket-mb", c.bucket_mb, "data-parallel gradient bucket size in MiB")
      ->check(atLeast(0, false, false));
  app.add_option("--offload-optimizer", c.offload_optimizer,
                 "none; cpu (pinned host memory, update on the CPU; --device cuda); nvme:DIR "
                 "(states in files under DIR) -- ZeRO 1-3")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "none" || v == "cpu" || (v.rfind("nvme:", 0) == 0 && v.size() > 5)) return "";
            return "must be none, cpu or nvme:DIR, not '" + v + "'";
          },
          "none|cpu|nvme:DIR", "OFFLOAD"));
  app.add_option("--dp-algorithm", c.dp_algorithm,
                 "data-parallel algorithm: allreduce; bytegrad (8-bit compressed, Bagua); "
                 "decentralized (peer weight averaging, Bagua) -- the last two with --zero 0")
      ->check(CLI::IsMember({"allreduce", "bytegrad", "decentralized"}));
  app.add_flag("--delayed-update", c.delayed_update,
               "2bw's update rule in any layout: W(t+1) = W(t) - lr * grad f(W(t-1))");
  app.add_flag("--quiet", c.quiet, "no per-step lines on stdout");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "gpttrain: %s (see --help)\n", e.what());
    return 2;
  }
  c.schedule = parseScheduleKind(schedule);  // one of its words: checked above
  for (CLI::Option* o : {lora_alpha, lora_targets, lora_init_b, save_merged}) {
    if (o->count() > 0 && lora_rank->count() == 0) {
      std::fprintf(stderr, "gpttrain: %s needs --lora-rank (see --help)\n", o->get_name().c_str());
      return 2;
    }
  }
  if (c.lora_alpha < 0) c.lora_alpha = c.lora_rank;
  // --bf16 is --precision bf16-autocast; with another --precision it says two things at once.
  if (c.bf16 && precision->count() > 0 && c.precision != "bf16-autocast") {
    std::fprintf(stderr,
                 "gpttrain: --bf16 (bf16 autocast) contradicts --precision %s: give one of them "
                 "(see --help)\n",
                 c.precision.c_str());
    return 2;
  }
  if (c.bf16) c.precision = "bf16-autocast";
  c.bf16 = c.precision != "fp32";
  // 2bw has no global norm to clip by (it would be a barrier across stages at every update): its
  // default is no clip, and only a clip the user asks for is refused (schedule_2bw.cpp).
  if (c.schedule == ScheduleKind::kTwoBw && clip->count() == 0) c.clip_grad = 0.0;
  return std::nullopt;
}

bool parseDryRunCosts(const std::string& text, double* forward_ms, double* backward_ms,
                      double* weight_ms) {
  std::vector<double> values;
  size_t pos = 0;
  while (true) {
    const size_t comma = text.find(',', pos);
    const std::string part = text.substr(pos, comma == std::string::npos ? comma : comma - pos);
    try {
      size_t used = 0;
      values.push_back(std::stod(part, &used));
      if (used != part.size() || !(values.back() >= 0)) return false;
    } catch (const std::exception&) {
      return false;
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (values.size() < 2 || values.size() > 3) return false;
  *forward_ms = values[0];
  *backward_ms = values[1];
  *weight_ms = values.size() == 3 ? values[2] : -1.0;
  return true;
}

namespace {

// The combinations LoRA and prompt tuning refuse (docs/trainer.md lists them); empty: none.
std::string fineTuningError(const TrainConfig& c) {
  if (!c.fineTuning()) return "";
  const std::string mode = c.lora_rank > 0       ? "--lora-rank"
                           : c.prompt_tuning > 0 ? "--prompt-tuning"
                                                 : "--prefix-tuning";
  if (c.prefix_tuning > 0 && (c.lora_rank > 0 || c.prompt_tuning > 0)) {
    return "--prefix-tuning and " +
           std::string(c.lora_rank > 0 ? "--lora-rank" : "--prompt-tuning") +
           " are two ways to fine-tune: give one of them";
  }
  if (c.lora_rank > 0 && c.prompt_tuning > 0) {
    return "--lora-rank and --prompt-tuning are two ways to fine-tune: give one of them";
  }
  if (!c.save_merged.empty() && c.zero == 3) {
    return "--save-merged needs --zero 0, 1 or 2 (ZeRO-3 holds only shards of the adapters)";
  }
  if (c.prompt_tuning > 0 && c.pp > 1) {
    return "--prompt-tuning needs --pp 1 (the prompt enters on the first stage and leaves before "
           "the loss on the last; pipeline stages would pass P + S positions)";
  }
  if (c.prompt_tuning > 0 && c.sp) {
    return "--prompt-tuning does not work with --sp (the prompt is prepended before the sequence "
           "is split): drop --sp";
  }
  if (c.schedule == ScheduleKind::kZbH1 || c.schedule == ScheduleKind::kTwoBw ||
      c.schedule == ScheduleKind::kChimera || c.delayed_update) {
    return mode + " supports the gpipe, 1f1b and interleaved schedules without --delayed-update";
  }
  return "";
}

}  // namespace

std::string layoutError(const TrainConfig& c, int world) {
  std::ostringstream out;
  double f_ms = 0, b_ms = 0, w_ms = 0;
  if (world % (c.tp * c.pp) != 0) {
    out << "WORLD_SIZE " << world << " is not divisible by tp x pp = " << c.tp * c.pp;
  } else if (c.layers % (c.pp * c.vp) != 0) {
    out << "--layers " << c.layers << " is not divisible by pp x vp = " << c.pp * c.vp;
  } else if (c.heads % c.tp != 0) {
    out << "--heads " << c.heads << " is not divisible by --tp " << c.tp;
  } else if (c.hidden % c.heads != 0) {
    out << "--hidden " << c.hidden << " is not divisible by --heads " << c.heads;
  } else if (c.vocab % c.tp != 0) {
    out << "--vocab " << c.vocab << " is not divisible by --tp " << c.tp
        << " (the embedding is split by vocabulary)";
  } else if (c.sp && c.seq_len % c.tp != 0) {
    out << "--seq-len " << c.seq_len << " is not divisible by --tp " << c.tp << " (needed by --sp)";
  } else if (c.global_batch % (c.micro_batch * c.dpSize(world)) != 0) {
    out << "--global-batch " << c.global_batch
        << " is not divisible by micro-batch size x DP = " << c.micro_batch << " x "
        << c.dpSize(world);
  } else if (c.data != "synthetic" && c.vocab < 256) {
    out << "--vocab " << c.vocab << " is below 256, but --data FILE uses byte tokens";
  } else if (c.vp > 1 && c.pp == 1) {
    out << "--vp " << c.vp << " needs --pp > 1";
  } else if (std::string e =
                 scheduleError(c.schedule, PipelineShape{c.pp, c.vp, c.microbatches(world)});
             !e.empty()) {
    out << e;
  } else if (std::string e2 = twoBwConfigError(c, world); !e2.empty()) {
    out << e2;
  } else if (c.schedule == ScheduleKind::kChimera && c.zero > 0) {
    out << "--schedule chimera needs --zero 0 (both replicas of a stage sum full gradients; "
           "ZeRO shards them)";
  } else if (!c.dump_init.empty() && world != 1) {
    out << "--dump-init needs a single process (WORLD_SIZE is " << world << "): run it alone";
  } else if (!c.dry_run_costs.empty() && !parseDryRunCosts(c.dry_run_costs, &f_ms, &b_ms, &w_ms)) {
    out << "--dry-run-costs '" << c.dry_run_costs
        << "' is not F_MS,B_MS or F_MS,B_MS,W_MS (numbers >= 0)";
  } else if (c.schedule == ScheduleKind::kZbH1 && c.recompute != "none") {
    out << "--schedule zb-h1 runs the backward in two passes (B, then W), which --recompute "
        << c.recompute << " would re-run twice: use --recompute none or another schedule";
  } else if (c.offload_optimizer != "none" && c.zero == 0) {
    out << "--offload-optimizer " << c.offload_optimizer
        << " needs --zero 1, 2 or 3 (it offloads the sharded optimizer states)";
  } else if (c.offload_optimizer == "cpu" && c.deviceType() != "cuda") {
    out << "--offload-optimizer cpu needs --device cuda (on the CPU the states are already in "
           "host memory): use nvme:DIR";
  } else if (c.dp_algorithm != "allreduce" && c.zero != 0) {
    out << "--dp-algorithm " << c.dp_algorithm << " needs --zero 0 (it replaces plain DDP's "
        << "gradient all-reduce; ZeRO shards gradients)";
  } else if (c.dp_algorithm == "bytegrad" && c.backend != "gloo") {
    out << "--dp-algorithm bytegrad compresses on the host and exchanges over Gloo: use --backend "
           "gloo";
  } else if (c.dp_algorithm == "decentralized" && c.dpSize(world) % 2 != 0 && c.dpSize(world) > 1) {
    out << "--dp-algorithm decentralized pairs data-parallel ranks: DP " << c.dpSize(world)
        << " must be even";
  } else if (c.dp_algorithm != "allreduce" && c.schedule == ScheduleKind::kChimera) {
    out << "--dp-algorithm " << c.dp_algorithm << " does not work with --schedule chimera";
  } else if (c.attention == "flash" && c.dropout > 0) {
    out << "--attention flash needs --dropout 0 (its tiles have no attention dropout that "
           "equals the standard path's; given "
        << c.dropout << ")";
  } else if (std::string e3 = fineTuningError(c); !e3.empty()) {
    out << e3;
  } else if (c.schedule == ScheduleKind::kZbH1 && c.zero == 3) {
    out << "--schedule zb-h1 does not work with --zero 3 (its layers regather and reduce in the "
           "one backward that zb-h1 splits): use --zero 0, 1 or 2";
  }
  return out.str();
}

}  // namespace gpttrain
