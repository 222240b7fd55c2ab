// One rank's training loop (see trainer.h).
//
// Sections: construction · one step · dry run · evaluation · gradient dump · output · checkpoints ·
// memory accounting
#include "trainer.h"

#include "checkpoint/checkpoint.h"
#include "model/frozen.h"
#include "model/model_compute.h"
#include "pipeline/chimera.h"
#include "pipeline/dry_run.h"
#include "pipeline/weight_versions.h"

#include <tracerun/annotate.h>
#include <tracerun/core/memory_dtype.h>

#include <sys/resource.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

// The process's peak resident set (Linux: ru_maxrss in KiB).
long peakRssKiB() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

ModelConfig modelConfig(const TrainConfig& c) {
  ModelConfig m;
  m.layers = c.layers;
  m.hidden = c.hidden;
  m.heads = c.heads;
  m.seq_len = c.seq_len;
  m.vocab = c.vocab;
  m.dropout = c.dropout;
  m.sp = c.sp;
  m.seed = static_cast<uint64_t>(c.seed);
  m.bf16 = c.bf16;
  m.recompute = c.recompute == "full"        ? ModelConfig::Recompute::kFull
                : c.recompute == "selective" ? ModelConfig::Recompute::kSelective
                                             : ModelConfig::Recompute::kNone;
  m.lora.rank = c.lora_rank;
  m.lora.alpha = c.lora_alpha;
  m.lora.targets = c.lora_targets;
  m.lora.init_b_normal = c.lora_init_b == "normal";
  m.prompt_tokens = c.prompt_tuning;
  m.prefix_tokens = c.prefix_tuning;
  m.flash = c.attention == "flash";
  m.flash_blocks = FlashBlocks{c.flash_block_q, c.flash_block_k};
  return m;
}

OptimizerConfig optimizerConfig(const TrainConfig& c) {
  OptimizerConfig o{c.optimizer == "adamw", c.beta1,           c.beta2, c.eps,
                    c.weight_decay,         c.mixedPrecision()};
  o.offload = c.offload_optimizer;
  return o;
}

ScheduleConfig scheduleConfig(const TrainConfig& c) {
  ScheduleConfig s;
  s.lr = c.lr;
  s.min_lr = c.min_lr >= 0 ? c.min_lr : c.lr / 10;
  s.warmup = c.warmup >= 0 ? c.warmup : c.steps / 10;
  s.decay_steps = c.lr_decay_steps >= 0 ? c.lr_decay_steps : c.steps;
  return s;
}

TokenSource makeSource(const TrainConfig& c) {
  if (c.data == "synthetic") return TokenSource::synthetic(c.vocab, uint64_t(c.seed));
  return TokenSource::fromFile(c.data, c.val_fraction, c.seq_len, uint64_t(c.seed));
}

PipelineShape pipelineShape(const TrainConfig& c, int world) {
  return PipelineShape{c.pp, c.vp, c.microbatches(world)};
}

// The checkpoint to resume from: --load, or, in a process the launcher restarted
// (TORCHELASTIC_RESTART_COUNT > 0), --save when it holds a complete checkpoint (DIR/latest is
// written only after every rank saved); empty: start fresh.
std::string resumeDir(const TrainConfig& c) {
  if (!c.load.empty() || c.save.empty()) return c.load;
  const char* restarts = std::getenv("TORCHELASTIC_RESTART_COUNT");
  if (restarts == nullptr || std::strtol(restarts, nullptr, 10) <= 0) return "";
  return std::filesystem::exists(c.save + "/latest") ? c.save : "";
}

// Names the dtype of each model-state memory category in the trace (allocations carry bytes, not
// dtypes): one empty user scope "memory_dtype:<category>=<dtype>" each, which `tracerun report`
// shows. Temporaries and activations mix dtypes and are not named.
void annotateMemoryDtypes(const TrainConfig& c) {
  const char* params = c.mixedPrecision() ? "bf16" : "fp32";
  const std::pair<const char*, const char*> named[] = {
      {"parameter", params}, {"gradient", params}, {"optimizer_state", "fp32"}};
  for (const auto& [category, dtype] : named) {
    const std::string name = std::string(vocab::scope::kMemoryDtypePrefix) + category + "=" + dtype;
    tracerun::Scope scope(name.c_str());
  }
}

// Fine-tuning: one "fine_tuning" phase with the frozen and trainable parameter counts of this rank,
// from which trace/'s memory closed form adds the frozen base (memory_live.h).
void annotateFineTuning(const ParamSet& params) {
  int64_t frozen = 0, trainable = 0;
  for (const auto& e : params.frozenEntries()) frozen += e.tensor.numel();
  for (const auto& e : params.entries()) trainable += e.tensor.numel();
  tracerun::PhaseScope scope(vocab::phase::kFineTuning,
                             {{vocab::arg::kFrozen, frozen}, {vocab::arg::kParams, trainable}});
}

// The activation closed form's inputs (docs/trainer.md, "Activation memory" and "Flash attention"),
// recorded only for the runs that form covers: one pipeline stage, no recomputation, dropout 0,
// fp32, no fine-tuning. trace/'s activation_form.h turns them into the memory view's lines.
void annotateActivationShape(const TrainConfig& c, int tp) {
  if (c.pp != 1 || c.recompute != "none" || c.dropout != 0 || c.mixedPrecision() ||
      c.fineTuning()) {
    return;
  }
  {
    tracerun::PhaseScope shape(vocab::phase::kActivationShape,
                               {{vocab::arg::kSeqLen, c.seq_len},
                                {vocab::arg::kMicroBatch, c.micro_batch},
                                {vocab::arg::kHidden, c.hidden},
                                {vocab::arg::kHeads, c.heads}});
  }
  tracerun::PhaseScope layout(vocab::phase::kActivationLayout,
                              {{vocab::arg::kAttention, c.attention == "flash" ? 1 : 0},
                               {vocab::arg::kLayers, c.layers},
                               {vocab::arg::kTp, tp},
                               {vocab::arg::kSp, c.sp ? 1 : 0}});
}

// Parameters, gradient buffers and optimizer states are allocated under their memory category.
// Chunk c of pipeline rank r is virtual stage c * p + r with layers / (p * v) layers.
std::vector<GptStage> makeChunks(ParamSet& params, const TrainConfig& c, const PipelineShape& s,
                                 const ProcessGroups& g) {
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
  if (c.schedule == ScheduleKind::kChimera)
    return makeChimeraChunks(params, modelConfig(c), c.layers, s.stages, g);
  const int per_stage = c.layers / s.virtualStages();
  std::vector<GptStage> chunks;
  for (int chunk = 0; chunk < s.chunks; ++chunk) {
    const int stage = chunk * s.stages + g.coords.pp;
    chunks.emplace_back(params, modelConfig(c), g.tp, stage * per_stage, per_stage, stage == 0,
                        stage == s.virtualStages() - 1);
  }
  // The last stage's copy of the tied embedding: its gradient is summed with the first stage's,
  // and it is counted once (on the first stage) in the gradient norm.
  if (s.stages > 1 && g.coords.pp == s.stages - 1) {
    for (auto& e : params.entries()) {
      if (e.name == "embedding.word.weight") e.duplicate = true;
    }
  }
  return chunks;
}

}  // namespace

// --- construction

Trainer::Trainer(const TrainConfig& config, ProcessGroups& groups, torch::Device device)
    : config_(config),
      groups_(groups),
      device_(device),
      microbatches_(config.microbatches(groups.grid.world())),
      kind_(config.schedule),
      shape_(pipelineShape(config, groups.grid.world())),
      actions_(buildSchedule(kind_, shape_, groups.coords.pp)),
      params_(uint64_t(config.seed), groups.coords.tp, groups.grid.tpSize(), device,
              config.mixedPrecision() ? at::kBFloat16 : at::kFloat),
      chunks_(makeChunks(params_, config, shape_, groups)),
      schedule_(scheduleConfig(config)),
      source_(makeSource(config)),
      rng_(makeDropoutRng(uint64_t(config.seed) + 7919ULL * uint64_t(groups.coords.pp),
                          groups.coords.tp, groups.coords.dp, device)) {
  if (config.fineTuning()) {  // LoRA, prompt and prefix tuning: only what they add trains
    freezeBaseParameters(params_, [](const ParamEntry& e) {
      return isLoraParameter(e.name) || isPromptParameter(e.name) || isPrefixParameter(e.name);
    });
  }
  {
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kGradient);
    strategy_ = makeDataParallelStrategy(
        params_, groups.dp,
        DataParallelOptions{config.zero, static_cast<int64_t>(config.bucket_mb * (1 << 20)),
                            config.dp_algorithm});
  }
  annotateMemoryDtypes(config);
  if (config.fineTuning()) annotateFineTuning(params_);
  annotateActivationShape(config, groups.tp->size);
  if (ParamUnits* units = strategy_->paramUnits()) {
    for (auto& chunk : chunks_) chunk.setParamUnits(units);
  }
  {
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kOptimizerState);
    optimizer_ = makeOptimizer(params_, *strategy_, groups.dp, optimizerConfig(config));
  }
  if (!config_.dry_run_costs.empty()) {
    parseDryRunCosts(config_.dry_run_costs, &dry_forward_ms_, &dry_backward_ms_, &dry_weight_ms_);
    if (dry_weight_ms_ < 0) {  // no W given: zb-h1 splits B in half, the others sleep B
      dry_weight_ms_ = kind_ == ScheduleKind::kZbH1 ? dry_backward_ms_ / 2 : 0.0;
      dry_backward_ms_ -= dry_weight_ms_;
    }
  }
  if (kind_ == ScheduleKind::kTwoBw || config_.delayed_update) {
    versions_ = std::make_unique<WeightVersions>(params_);
  }
  if (const std::string resume = resumeDir(config_); !resume.empty()) {
    CheckpointLayout layout{groups.grid.world(), config.tp,   config.pp,
                            config.vp,           config.zero, groups.rank};
    start_step_ = loadResume(resume, layout);
    if (versions_) versions_->resumeAt(start_step_);
  }
  if (groups_.rank == 0 && !config_.log_json.empty()) {
    log_json_ = std::fopen(config_.log_json.c_str(), start_step_ > 0 ? "a" : "w");
    if (log_json_ == nullptr) {
      throw std::runtime_error("cannot write --log-json file '" + config_.log_json + "'");
    }
  }
}

Trainer::~Trainer() {
  if (log_json_ != nullptr) std::fclose(log_json_);
}

int Trainer::run() {
  if (groups_.rank == 0 && !config_.quiet) {
    std::printf(
        "gpttrain: world %d = tp %d x pp %d x dp %d%s, schedule %s (v %d), %lld parameters on "
        "rank 0, %d microbatches of %d per step, %zu gradient buckets, start step %d%s\n",
        groups_.grid.world(), groups_.grid.tpSize(), groups_.grid.ppSize(), groups_.grid.dpSize(),
        config_.sp ? " (sp)" : "", scheduleName(kind_), shape_.chunks,
        static_cast<long long>(strategy_->numel()), microbatches_, config_.micro_batch,
        strategy_->numBuckets(), start_step_, dry_forward_ms_ >= 0 ? " (dry run)" : "");
    if (config_.attention == "flash") {  // which implementation (on CUDA: the kernel SDPA picks)
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
      const at::Tensor probe =
          at::empty({1, config_.seq_len, config_.hidden / config_.heads},
                    at::TensorOptions(device_).dtype(config_.bf16 ? at::kBFloat16 : at::kFloat));
      std::printf("gpttrain: attention flash: %s, tiles %d x %d\n",
                  flashKernelName(probe, probe, probe).c_str(), config_.flash_block_q,
                  config_.flash_block_k);
    }
    std::fflush(stdout);
  }
  for (int step = start_step_ + 1; step <= config_.steps; ++step) {
    if (kind_ == ScheduleKind::kTwoBw) {
      step = runTwoBwSegment(step);  // drains at the step that evaluates or saves
    } else {
      report(trainStep(step));
    }
    if (config_.eval_interval > 0 && step % config_.eval_interval == 0 &&
        source_.hasValidation(config_.seq_len)) {
      const double val = evaluate();
      if (groups_.rank == 0) {
        std::printf("step %d | val_loss %.6f\n", step, val);
        if (log_json_) std::fprintf(log_json_, "{\"step\":%d,\"val_loss\":%.9g}\n", step, val);
      }
    }
    const bool last = step == config_.steps;
    if (!config_.save.empty() &&
        (last || (config_.save_interval > 0 && step % config_.save_interval == 0))) {
      save(step);
    }
  }
  if (!config_.save_merged.empty()) saveMerged(config_.steps);
  if (groups_.rank == 0 && groups_.tp->size > 1) {  // also with --quiet: tests read it
    std::printf("gpttrain: collectives (tp group):");
    for (int i = 0; i < static_cast<int>(CollectiveImpl::kCount); ++i) {
      if (groups_.tp->counts[i] > 0) {
        std::printf(" %s=%lld", collectiveImplName(static_cast<CollectiveImpl>(i)),
                    static_cast<long long>(groups_.tp->counts[i]));
      }
    }
    std::printf("\n");
  }
  // Every rank (tests read each rank's log): what it held at the last optimizer step.
  if (config_.steps > start_step_ && dry_forward_ms_ < 0) {
    std::printf(
        "gpttrain: rank %d at the optimizer step holds parameters %lld B, gradients %lld B, "
        "optimizer states %lld B (zero %d, dp %d, psi %lld); peak RSS %ld KiB\n",
        groups_.rank, static_cast<long long>(at_optimizer_step_.parameters),
        static_cast<long long>(at_optimizer_step_.gradients),
        static_cast<long long>(at_optimizer_step_.optimizer_states), config_.zero, groups_.dp->size,
        static_cast<long long>(strategy_->numel()), peakRssKiB());
  }
  if (groups_.rank == 0 && config_.recompute != "none") {
    int64_t n = 0;
    for (const auto& chunk : chunks_) n += chunk.recomputedForwards();
    std::printf("gpttrain: recompute %s: forwards re-run in backward on rank 0: %lld\n",
                config_.recompute.c_str(), static_cast<long long>(n));
  }
  if (groups_.rank == 0 && groups_.dp->size > 1 && config_.zero >= 1) {
    std::printf("gpttrain: collectives (dp group):");
    for (int i = 0; i < static_cast<int>(CollectiveImpl::kCount); ++i) {
      if (groups_.dp->counts[i] > 0) {
        std::printf(" %s=%lld", collectiveImplName(static_cast<CollectiveImpl>(i)),
                    static_cast<long long>(groups_.dp->counts[i]));
      }
    }
    std::printf("\n");
  }
  if (groups_.rank == 0 && shape_.stages > 1) {
    std::printf(
        "gpttrain: pipeline: schedule %s, stages %d, chunks %d, microbatches %d, most in flight "
        "on rank 0: %d (promised %d)\n",
        scheduleName(kind_), shape_.stages, shape_.chunks, shape_.microbatches, max_in_flight_,
        inFlightBound(kind_, shape_, 0));
  }
  if (groups_.rank == 0 && groups_.dp->size > 1) {
    std::printf("gpttrain: dp bucket all-reduces launched during backward: %lld, after: %lld\n",
                static_cast<long long>(strategy_->launchedDuringBackward()),
                static_cast<long long>(strategy_->launchedAfterBackward()));
  }
  return 0;
}

// --- one step

std::vector<int64_t> Trainer::activationShape() const {
  const bool sp = config_.sp && config_.tp > 1;
  return {sp ? config_.seq_len / config_.tp : config_.seq_len, config_.micro_batch, config_.hidden};
}

double Trainer::lastStageAverage(double value) {
  // Chimera: the up pipeline's last stage is on rank 0; ranks without a last stage add 0.
  const bool last = kind_ == ScheduleKind::kChimera || groups_.coords.pp == shape_.stages - 1;
  // One pipeline stage and one DP rank: nothing to sum, and no host-device round trip per step.
  if (groups_.pp->size == 1 && groups_.dp->size == 1) return last ? value : 0.0;
  at::Tensor t = at::tensor({last ? value : 0.0}, at::kDouble).to(device_);
  allReduce(*groups_.pp, t);
  allReduce(*groups_.dp, t);
  return t.item<double>() / groups_.dp->size;
}

StepResult Trainer::trainStep(int step) {
  if (dry_forward_ms_ >= 0) return dryRunStep(step);
  const auto start = std::chrono::steady_clock::now();
  tracerun::Step step_scope(step);
  strategy_->beginStep();
  strategy_->gatherRoot();
  ModelCompute compute(chunks_, config_, source_, Split::kTrain, uint64_t(step - 1),
                       groups_.coords.dp, microbatches_, &rng_, strategy_.get());
  if (versions_) versions_->use(step - 1);  // --delayed-update: batch b on version V_b
  const PipelineStepStats stats =
      runPipelineStep(actions_, *groups_.pp, activationShape(), device_, compute);
  max_in_flight_ = std::max(max_in_flight_, stats.max_in_flight);
  {
    tracerun::PhaseScope phase(vocab::phase::kGradSync,
                               {{vocab::arg::kDp, groups_.dp->size},
                                {vocab::arg::kTp, groups_.tp->size},
                                {vocab::arg::kZero, config_.zero},
                                {vocab::arg::kParams, strategy_->numel()}});
    strategy_->finish();
    strategy_->releaseRoot();
    optimizer_->syncSequenceParallelGrads(*groups_.tp, config_.sp);
    if (kind_ == ScheduleKind::kChimera) {
      syncChimeraGrads(params_, *groups_.mirror);
    } else {
      optimizer_->syncTiedEmbeddingGrads(*groups_.embedding);
    }
  }
  if (step == start_step_ + 1 && !config_.dump_grads.empty()) dumpGrads(config_.dump_grads);
  StepResult r;
  r.step = step;
  r.lr = learningRate(schedule_, step);
  {
    tracerun::PhaseScope phase(vocab::phase::kOptimizer);
    if (step == config_.steps) at_optimizer_step_ = memoryAccount();
    auto update = [&] {
      r.grad_norm = optimizer_->clipGradNorm(*groups_.tp, *groups_.pp, config_.clip_grad);
      optimizer_->step(r.lr);
      strategy_->afterOptimizerStep(step);  // decentralized SGD: weights averaged with a peer
    };
    if (versions_) {
      versions_->update(step - 1, update);  // V_{b+2} = V_{b+1} - update(grad f(V_b))
    } else {
      update();
    }
  }
  r.loss = lastStageAverage(compute.lossSum() / microbatches_);
  r.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.tokens_per_s = double(config_.global_batch) * config_.seq_len / (r.ms / 1000.0);
  return r;
}

// A dry run's step: the schedule with sleeping compute, started after a barrier of the pipeline
// group. A stage's idle fraction is 1 - (its compute time) / (the step's time), on the dry run's
// virtual clock (dry_run.h: every rank starts the step at 0, the step ends when the last rank's
// last action does), so it does not depend on the machine's load. The same fraction on the wall
// clock (from pipeline rank 0's start to the last rank's end, on the host's one monotonic clock)
// is logged beside it. No closing barrier: its latency would count as idle time.
StepResult Trainer::dryRunStep(int step) {
  tracerun::Step step_scope(step);
  DryRunCompute compute(dry_forward_ms_, dry_backward_ms_, dry_weight_ms_, shape_,
                        groups_.coords.pp, activationShape(), device_);
  at::Tensor sync = at::zeros({1}, at::TensorOptions().device(device_));
  allReduce(*groups_.pp, sync);
  auto nowMs = [] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  const double start = nowMs();
  const PipelineStepStats stats =
      runPipelineStep(actions_, *groups_.pp, activationShape(), device_, compute);
  const double end = nowMs();
  StepResult r;
  r.step = step;
  const DryRunTimes times = gatherDryRunTimes(start, end, stats, compute);
  r.ms = times.wall_ms;
  r.tokens_per_s = double(config_.global_batch) * config_.seq_len / (r.ms / 1000.0);
  r.stage_idle = times.idle;
  r.stage_idle_wall = times.idle_wall;
  return r;
}

// Every pipeline rank's wall-clock start and end, compute time and virtual clock, gathered; the
// idle fraction of each stage on both clocks.
DryRunTimes Trainer::gatherDryRunTimes(double start_ms, double end_ms,
                                       const PipelineStepStats& stats,
                                       const DryRunCompute& compute) {
  const at::Tensor mine = at::tensor({start_ms, end_ms, stats.compute_ns / 1e6,
                                      compute.virtualEndNs() / 1e6, compute.virtualBusyNs() / 1e6},
                                     at::kDouble);
  const at::Tensor all =
      allGather(*groups_.pp, mine.view({1, 5}).to(device_), 0).to(at::kCPU).contiguous();
  DryRunTimes t;
  t.wall_ms = all.select(1, 1).max().item<double>() - all[0][0].item<double>();
  const double virtual_ms = all.select(1, 3).max().item<double>();
  for (int k = 0; k < all.size(0); ++k) {
    t.idle.push_back(1.0 - all[k][4].item<double>() / virtual_ms);
    t.idle_wall.push_back(1.0 - all[k][2].item<double>() / t.wall_ms);
  }
  return t;
}

// --- evaluation

double Trainer::evaluate() {
  tracerun::PhaseScope phase(vocab::phase::kValidation);
  at::NoGradGuard no_grad;
  const std::vector<Action> actions =
      kind_ == ScheduleKind::kChimera ? buildChimeraForwardOnlySchedule(shape_, groups_.coords.pp)
                                      : buildForwardOnlySchedule(shape_, groups_.coords.pp);
  strategy_->gatherRoot();
  double sum = 0.0;
  for (int i = 0; i < config_.eval_iters; ++i) {
    ModelCompute compute(chunks_, config_, source_, Split::kValidation, uint64_t(i),
                         groups_.coords.dp, microbatches_, nullptr, strategy_.get());
    runPipelineStep(actions, *groups_.pp, activationShape(), device_, compute);
    sum += compute.lossSum();
  }
  strategy_->releaseRoot();
  return lastStageAverage(sum / (double(microbatches_) * config_.eval_iters));
}

// --- gradient dump (tests compare it across layouts)

// Each pipeline stage's first TP/DP rank writes its stage's full (TP-gathered) gradients to
// PATH.stage<k>; rank 0 then merges them into PATH (the last stage's tied-embedding copy, whose
// gradient equals the first stage's, is left out).
void Trainer::dumpGrads(const std::string& path) {
  torch::serialize::OutputArchive out;
  for (size_t i = 0; i < params_.entries().size(); ++i) {
    const ParamEntry& e = params_.entries()[i];
    at::Tensor g = strategy_->fullGrad(i);
    if (e.split_dim >= 0) g = allGather(*groups_.tp, g, e.split_dim);
    if (!e.duplicate) out.write(e.name, g.to(at::kCPU).clone());
  }
  const std::string stage_path = path + ".stage" + std::to_string(groups_.coords.pp);
  if (groups_.coords.tp == 0 && groups_.coords.dp == 0) out.save_to(stage_path);
  barrier();
  if (groups_.rank != 0) return;
  torch::serialize::OutputArchive merged;
  for (int k = 0; k < shape_.stages; ++k) {
    const std::string part = path + ".stage" + std::to_string(k);
    torch::serialize::InputArchive in;
    in.load_from(part);
    for (const auto& key : in.keys()) {
      at::Tensor t;
      in.read(key, t);
      merged.write(key, t);
    }
  }
  merged.save_to(path);
  for (int k = 0; k < shape_.stages; ++k) {
    std::filesystem::remove(path + ".stage" + std::to_string(k));
  }
}

// --- output

void Trainer::report(const StepResult& r) {
  // step: the true step after a restart (the launcher's status line)
  tracerun::counter(vocab::counter::kStep, r.step);
  tracerun::counter(vocab::counter::kLoss, r.loss);
  tracerun::counter(vocab::counter::kLr, r.lr);
  tracerun::counter(vocab::counter::kGradNorm, r.grad_norm);
  tracerun::counter(vocab::counter::kTokensPerS, r.tokens_per_s);
  if (groups_.rank != 0) return;
  // zb-h1's closed form depends on the costs: (p-1)(F+B-W) / (m(F+B+W) + (p-1)(F+B-W)).
  const double closed_form =
      kind_ == ScheduleKind::kZbH1 && dry_forward_ms_ >= 0
          ? zbH1BubbleFraction(shape_, dry_forward_ms_, dry_backward_ms_, dry_weight_ms_)
          : idealBubbleFraction(kind_, shape_);
  for (size_t k = 0; k < r.stage_idle.size() && !config_.quiet; ++k) {
    std::printf("step %d | stage %zu idle %.4f (closed form %.4f; wall clock %.4f)\n", r.step, k,
                r.stage_idle[k], closed_form, r.stage_idle_wall[k]);
  }
  if (!config_.quiet) {
    std::printf("step %d/%d | loss %.6f | lr %.3e | grad_norm %.4f | %.0f tokens/s | %.1f ms\n",
                r.step, config_.steps, r.loss, r.lr, r.grad_norm, r.tokens_per_s, r.ms);
    std::fflush(stdout);
  }
  if (log_json_ != nullptr) {
    std::fprintf(log_json_,
                 "{\"step\":%d,\"loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,"
                 "\"tokens_per_s\":%.1f,\"ms\":%.3f}\n",
                 r.step, r.loss, r.lr, r.grad_norm, r.tokens_per_s, r.ms);
    for (size_t k = 0; k < r.stage_idle.size(); ++k) {
      std::fprintf(log_json_,
                   "{\"step\":%d,\"stage\":%zu,\"idle_fraction\":%.6f,\"closed_form\":%.6f,"
                   "\"wall_idle_fraction\":%.6f}\n",
                   r.step, k, r.stage_idle[k], closed_form, r.stage_idle_wall[k]);
    }
    std::fflush(log_json_);
  }
}

// --- checkpoints

void Trainer::barrier() {
  at::Tensor t = at::zeros({1}, at::TensorOptions().device(device_));
  allReduce(*groups_.world, t);
}

void Trainer::save(int step) {
  CheckpointLayout layout{groups_.grid.world(), config_.tp,   config_.pp,
                          config_.vp,           config_.zero, groups_.rank};
  saveCheckpoint(config_.save, layout, step, checkpointTensors(step), optimizerSteps(), rng_);
  barrier();
  if (groups_.rank == 0) writeLatest(config_.save, step);
}

NamedTensors Trainer::checkpointTensors(int next_batch) {
  NamedTensors tensors =
      versions_ ? versions_->checkpointTensors(next_batch) : strategy_->checkpointParameters();
  for (auto& t : optimizer_->namedState()) tensors.push_back(std::move(t));
  for (auto& t : frozenTensors()) tensors.push_back(std::move(t));
  return tensors;
}

NamedTensors Trainer::frozenTensors() {
  NamedTensors tensors;
  for (auto& e : params_.frozenEntries()) tensors.emplace_back("param." + e.name, e.tensor);
  return tensors;
}

// Fine-tuning: a checkpoint this kind of run saved resumes it (adapters or prompt, their optimizer
// states, the frozen base); one without them (the base model's, or --save-merged's) gives the
// frozen parameters only, and training starts at step 1 from fresh adapters or prompt.
int Trainer::loadResume(const std::string& dir, const CheckpointLayout& layout) {
  try {
    return loadCheckpoint(dir, layout, checkpointTensors(), optimizerSteps(), rng_);
  } catch (const std::runtime_error& whole) {
    if (!config_.fineTuning()) throw;
    int64_t base_steps = 0;
    DropoutRng base_rng{rng_.replicated.clone(), rng_.sharded.clone()};
    try {
      loadCheckpoint(dir, layout, frozenTensors(), base_steps, base_rng);
    } catch (const std::runtime_error&) {
      throw whole;
    }
    if (groups_.rank == 0) {  // also with --quiet: what was loaded
      std::printf("gpttrain: fine-tuning the base model of %s from step 1\n", dir.c_str());
    }
    return 0;
  }
}

// --save-merged DIR: each rank's base parameters with the adapters merged (lora.h), as "param.*"
// tensors of a checkpoint at the last step, with no optimizer state.
void Trainer::saveMerged(int step) {
  CheckpointLayout layout{groups_.grid.world(), config_.tp,   config_.pp,
                          config_.vp,           config_.zero, groups_.rank};
  NamedTensors merged;
  for (auto& [name, t] : mergedBaseParameters(params_, config_.lora_alpha / config_.lora_rank)) {
    merged.emplace_back("param." + name, t);
  }
  saveCheckpoint(config_.save_merged, layout, step, merged, 0, rng_);
  barrier();
  if (groups_.rank == 0) writeLatest(config_.save_merged, step);
}

NamedTensors Trainer::heldTensors() {
  NamedTensors tensors;
  for (auto& e : params_.entries()) {
    tensors.emplace_back("param." + e.name, e.tensor);
    if (e.tensor.grad().defined()) tensors.emplace_back("grad." + e.name, e.tensor.grad());
  }
  for (auto& [name, t] : strategy_->bufferTensors()) {
    if (t.defined()) tensors.emplace_back(name, t);
  }
  for (auto& t : optimizer_->namedState()) tensors.push_back(std::move(t));
  for (auto& t : frozenTensors()) tensors.push_back(std::move(t));
  return tensors;
}

int64_t& Trainer::optimizerSteps() {
  return optimizer_->stepCount();
}

// --- memory accounting

MemoryAccount Trainer::memoryAccount() const {
  MemoryAccount a;
  a.parameters = strategy_->parameterBytes() + (versions_ ? versions_->extraBytes() : 0);
  for (const auto& e : params_.frozenEntries()) {  // fine-tuning's base: held, never trained
    a.parameters += e.tensor.numel() * static_cast<int64_t>(e.tensor.element_size());
  }
  a.gradients = strategy_->gradientBytes();
  a.optimizer_states = optimizer_->stateBytes();
  return a;
}

}  // namespace gpttrain
