// One rank's training loop (see trainer.h).
//
// Sections: construction · one step · evaluation · gradient dump · output · checkpoints
#include "trainer.h"

#include "checkpoint.h"
#include "tp_grads.h"

#include <tracerun/annotate.h>

#include <chrono>
#include <optional>
#include <stdexcept>

namespace gpttrain {
namespace {

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
  return m;
}

OptimizerConfig optimizerConfig(const TrainConfig& c) {
  return OptimizerConfig{c.optimizer == "adamw", c.beta1, c.beta2, c.eps, c.weight_decay};
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

// Parameters, gradient buffers and optimizer states are allocated under their memory category.
GptStage makeStage(const TrainConfig& c, const GroupPtr& tp) {
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
  return GptStage(modelConfig(c), tp, 0, c.layers, true, true);
}

Optimizer makeOptimizer(ParamSet& params, const TrainConfig& c) {
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kOptimizerState);
  return Optimizer(params, optimizerConfig(c));
}

double scalarAverage(Group& g, double value) {
  at::Tensor t = at::tensor({value}, at::kDouble);
  allReduce(g, t);
  return t.item<double>() / g.size;
}

}  // namespace

// --- construction

Trainer::Trainer(const TrainConfig& config, ProcessGroups& groups)
    : config_(config),
      groups_(groups),
      microbatches_(config.microbatches(groups.grid.world())),
      stage_(makeStage(config, groups.tp)),
      optimizer_(makeOptimizer(stage_.params(), config)),
      schedule_(scheduleConfig(config)),
      source_(makeSource(config)),
      rng_(makeDropoutRng(uint64_t(config.seed), groups.coords.tp, groups.coords.dp)) {
  {
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kGradient);
    buckets_ = std::make_unique<GradBuckets>(stage_.params(), groups.dp,
                                             static_cast<int64_t>(config.bucket_mb * (1 << 20)));
  }
  if (!config_.load.empty()) {
    CheckpointLayout layout{groups.grid.world(), config.tp, config.pp, groups.rank};
    start_step_ = loadCheckpoint(config_.load, layout, stage_.params(), optimizer_, rng_);
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
        "gpttrain: world %d = tp %d x pp %d x dp %d%s, %lld parameters per TP rank, "
        "%d microbatches of %d per step, %zu gradient buckets, start step %d\n",
        groups_.grid.world(), groups_.grid.tpSize(), groups_.grid.ppSize(), groups_.grid.dpSize(),
        config_.sp ? " (sp)" : "", static_cast<long long>(stage_.params().numel()), microbatches_,
        config_.micro_batch, buckets_->numBuckets(), start_step_);
    std::fflush(stdout);
  }
  for (int step = start_step_ + 1; step <= config_.steps; ++step) {
    report(trainStep(step));
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
  if (groups_.rank == 0 && groups_.dp->size > 1) {
    std::printf("gpttrain: dp bucket all-reduces launched during backward: %lld, after: %lld\n",
                static_cast<long long>(buckets_->launchedDuringBackward()),
                static_cast<long long>(buckets_->launchedAfterBackward()));
  }
  return 0;
}

// --- one step

std::pair<at::Tensor, at::Tensor> Trainer::microbatch(Split split, uint64_t first_index) const {
  const int b = config_.micro_batch, s = config_.seq_len;
  at::Tensor tokens = at::empty({b, s + 1}, at::kLong);
  int64_t* data = tokens.data_ptr<int64_t>();
  for (int i = 0; i < b; ++i) source_.sample(split, first_index + i, s, data + i * (s + 1));
  return {tokens.narrow(1, 0, s).t().contiguous(), tokens.narrow(1, 1, s).t().contiguous()};
}

StepResult Trainer::trainStep(int step) {
  const auto start = std::chrono::steady_clock::now();
  tracerun::Step step_scope(step);
  buckets_->zero();
  double loss_sum = 0.0;
  for (int m = 0; m < microbatches_; ++m) {
    const uint64_t first = sampleIndex(uint64_t(step - 1), config_.global_batch, groups_.coords.dp,
                                       microbatches_, config_.micro_batch, m, 0);
    auto [input, target] = microbatch(Split::kTrain, first);
    at::Tensor loss;
    {
      tracerun::PhaseScope phase("forward", {{"microbatch", m}});
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kActivation);
      std::optional<tracerun::compat::CpuAutocastGuard> autocast;
      if (config_.bf16) autocast.emplace(at::kBFloat16);
      loss = stage_.forward(input, target, &rng_);
    }
    {
      tracerun::PhaseScope phase("backward", {{"microbatch", m}});
      buckets_->setLastMicrobatch(m == microbatches_ - 1);
      (loss / microbatches_).backward();
    }
    loss_sum += loss.item<double>();
  }
  {
    tracerun::PhaseScope phase("grad_sync", {{"dp", groups_.dp->size}, {"tp", groups_.tp->size}});
    buckets_->finish();
    syncSequenceParallelGrads(stage_.params(), *groups_.tp, config_.sp);
  }
  if (step == start_step_ + 1 && !config_.dump_grads.empty()) dumpGrads(config_.dump_grads);
  StepResult r;
  r.step = step;
  r.lr = learningRate(schedule_, step);
  {
    tracerun::PhaseScope phase("optimizer");
    r.grad_norm = clipGradNorm(stage_.params(), *groups_.tp, config_.clip_grad);
    optimizer_.step(r.lr);
  }
  r.loss = scalarAverage(*groups_.dp, loss_sum / microbatches_);
  r.ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  r.tokens_per_s = double(config_.global_batch) * config_.seq_len / (r.ms / 1000.0);
  return r;
}

// --- evaluation

double Trainer::evaluate() {
  tracerun::PhaseScope phase("validation");
  at::NoGradGuard no_grad;
  double sum = 0.0;
  for (int i = 0; i < config_.eval_iters; ++i) {
    for (int m = 0; m < microbatches_; ++m) {
      const uint64_t first = sampleIndex(uint64_t(i), config_.global_batch, groups_.coords.dp,
                                         microbatches_, config_.micro_batch, m, 0);
      auto [input, target] = microbatch(Split::kValidation, first);
      std::optional<tracerun::compat::CpuAutocastGuard> autocast;
      if (config_.bf16) autocast.emplace(at::kBFloat16);
      sum += stage_.forward(input, target, nullptr).item<double>();
    }
  }
  return scalarAverage(*groups_.dp, sum / (double(microbatches_) * config_.eval_iters));
}

// --- gradient dump (tests compare it across layouts)

void Trainer::dumpGrads(const std::string& path) {
  torch::serialize::OutputArchive out;
  for (auto& e : stage_.params().entries()) {
    at::Tensor g = e.tensor.grad();
    if (e.split_dim >= 0) g = allGather(*groups_.tp, g, e.split_dim);
    out.write(e.name, g.clone());
  }
  if (groups_.rank == 0) out.save_to(path);
}

// --- output

void Trainer::report(const StepResult& r) {
  tracerun::counter("loss", r.loss);
  tracerun::counter("lr", r.lr);
  tracerun::counter("grad_norm", r.grad_norm);
  tracerun::counter("tokens_per_s", r.tokens_per_s);
  if (groups_.rank != 0) return;
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
    std::fflush(log_json_);
  }
}

// --- checkpoints

void Trainer::barrier() {
  at::Tensor t = at::zeros({1});
  allReduce(*groups_.world, t);
}

void Trainer::save(int step) {
  CheckpointLayout layout{groups_.grid.world(), config_.tp, config_.pp, groups_.rank};
  saveCheckpoint(config_.save, layout, step, stage_.params(), optimizer_, rng_);
  barrier();
  if (groups_.rank == 0) writeLatest(config_.save, step);
}

}  // namespace gpttrain
