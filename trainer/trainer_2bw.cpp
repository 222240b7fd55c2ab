// The Trainer's PipeDream-2BW part (--schedule 2bw): runs the steps up to the next checkpoint or
// evaluation as one continuous pipeline (schedule_2bw.h) over two weight versions per stage
// (weight_versions.h), then reports their losses. The synchronous schedules are in trainer.cpp.
#include "model/model_compute.h"
#include "pipeline/dry_run.h"
#include "pipeline/schedule_2bw.h"
#include "pipeline/weight_versions.h"
#include "trainer.h"

#include <tracerun/annotate.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

double nowMs() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The index of the tied word embedding among this rank's parameters, or -1.
int tiedEmbedding(const ParamSet& params) {
  for (size_t i = 0; i < params.entries().size(); ++i) {
    if (params.entries()[i].name == "embedding.word.weight") return static_cast<int>(i);
  }
  return -1;
}

// A dry run's compute with 2bw's weight versions annotated (microbatch k is batch k / m's).
class VersionedDryRun final : public PipelineCompute {
 public:
  VersionedDryRun(DryRunCompute& inner, int m) : inner_(inner), m_(m) {}
  at::Tensor forward(int chunk, int k, const at::Tensor& input) override {
    return inner_.forward(chunk, k, input);
  }
  at::Tensor backward(int chunk, int k, const at::Tensor& input, const at::Tensor& output,
                      const at::Tensor& grad) override {
    return inner_.backward(chunk, k, input, output, grad);
  }
  int64_t weightVersion(int k) const override { return k / m_; }

 private:
  DryRunCompute& inner_;
  int m_;
};

}  // namespace

// What a 2bw list's actions compute on this rank. Microbatch k = b * m + j runs batch b's
// ModelCompute (its samples, its loss) on version V_b. The update of batch b: the DP/SP
// reductions, the tied embedding (below), the delayed AdamW step (WeightVersions::update), and the
// gradients zeroed for batch b + 1.
//
// The tied embedding without a barrier: the last stage sends its gradient of batch b to stage 0
// when it updates (its last backward of b comes before stage 0's), stage 0 adds it to its own and
// updates, then sends the embedding of V_{b+2} back; the last stage waits for it only before its
// first forward of batch b + 2, which needs stage 0's forward of b + 2 anyway (sent after that
// update). The last stage's own optimizer step of the embedding is overwritten by it.
class TwoBwCompute final : public PipelineCompute {
 public:
  TwoBwCompute(Trainer& t, int first_batch, int batches)
      : t_(t),
        first_batch_(first_batch),
        batches_(batches),
        m_(t.microbatches_),
        p_(t.shape_.stages),
        rank_(t.groups_.coords.pp),
        tied_(p_ > 1 && (rank_ == 0 || rank_ == p_ - 1) ? tiedEmbedding(t.params_) : -1) {}

  at::Tensor forward(int chunk, int k, const at::Tensor& input) override {
    const int b = k / m_;
    awaitTiedWeights(b);
    t_.versions_->use(b);
    return batch(b).forward(chunk, k % m_, input);
  }

  at::Tensor backward(int chunk, int k, const at::Tensor& input, const at::Tensor& output,
                      const at::Tensor& grad) override {
    const int b = k / m_;
    t_.versions_->use(b);
    return batch(b).backward(chunk, k % m_, input, output, grad);
  }

  int64_t weightVersion(int k) const override { return k / m_; }

  void applyUpdate(int b) override {
    {
      tracerun::PhaseScope phase(vocab::phase::kGradSync,
                                 {{vocab::arg::kDp, t_.groups_.dp->size},
                                  {vocab::arg::kTp, t_.groups_.tp->size},
                                  {vocab::arg::kZero, t_.config_.zero},
                                  {vocab::arg::kParams, t_.strategy_->numel()}});
      t_.strategy_->finish();
      t_.optimizer_->syncSequenceParallelGrads(*t_.groups_.tp, t_.config_.sp);
    }
    Group& pp = *t_.groups_.pp;
    const int local = b - first_batch_;
    if (tied_ >= 0 && rank_ == p_ - 1) {
      const at::Tensor& g = t_.params_.entries()[tied_].tensor.grad();
      sends_.push_back(
          sendAsync(pp, g.clone(), 0, twoBwTiedTag(t_.shape_, batches_, local, false)));
      pending_.emplace(b + 2, postRecv(pp, g.sizes(), t_.device_, 0,
                                       twoBwTiedTag(t_.shape_, batches_, local, true)));
    } else if (tied_ >= 0) {
      at::Tensor g = t_.params_.entries()[tied_].tensor.grad();
      at::Tensor other =
          recv(pp, g.sizes(), t_.device_, p_ - 1, twoBwTiedTag(t_.shape_, batches_, local, false));
      g.add_(other);
    }
    const double lr = learningRate(t_.schedule_, b + 1);
    if (b + 1 == t_.config_.steps) t_.at_optimizer_step_ = t_.memoryAccount();
    t_.versions_->update(b, [&] { t_.optimizer_->step(lr); });
    if (tied_ >= 0 && rank_ == 0) {
      sends_.push_back(sendAsync(pp, t_.versions_->version(tied_, b + 2).clone(), p_ - 1,
                                 twoBwTiedTag(t_.shape_, batches_, local, true)));
    }
    while (!sends_.empty() && sends_.front()->isCompleted()) {  // their buffers can go
      sends_.front()->wait();
      sends_.erase(sends_.begin());
    }
    losses_.push_back(batch(b).lossSum() / m_);
    computes_.erase(b);
    t_.strategy_->beginStep();  // zero the gradients for batch b + 1
  }

  // After the list: the last stage's embedding of the two newest versions, every send done.
  void drain() {
    while (!pending_.empty()) awaitTiedWeights(pending_.begin()->first);
    for (auto& work : sends_) work->wait();
    sends_.clear();
  }

  // Per batch of the list, in order: the mean loss of its microbatches (last stage; 0 elsewhere).
  const std::vector<double>& losses() const { return losses_; }

 private:
  ModelCompute& batch(int b) {
    auto it = computes_.find(b);
    if (it == computes_.end()) {
      it = computes_
               .emplace(b, std::make_unique<ModelCompute>(
                               t_.chunks_, t_.config_, t_.source_, Split::kTrain, uint64_t(b),
                               t_.groups_.coords.dp, m_, &t_.rng_, t_.strategy_.get()))
               .first;
    }
    return *it->second;
  }

  void awaitTiedWeights(int b) {
    auto it = pending_.find(b);
    if (it == pending_.end()) return;
    it->second.work->wait();
    at::NoGradGuard no_grad;
    t_.versions_->version(tied_, b).copy_(it->second.take());
    pending_.erase(it);
  }

  Trainer& t_;
  int first_batch_, batches_, m_, p_, rank_;
  int tied_;  // the tied embedding's parameter index on the first and last stage, else -1
  std::map<int, std::unique_ptr<ModelCompute>> computes_;  // batches in flight
  std::map<int, PostedRecv> pending_;  // last stage: V_b's embedding from stage 0, by b
  std::vector<c10::intrusive_ptr<c10d::Work>> sends_;
  std::vector<double> losses_;
};

int Trainer::runTwoBwSegment(int first_step) {
  int last = config_.steps;
  auto drainAt = [&](int interval) {
    if (interval > 0) last = std::min(last, (first_step + interval - 1) / interval * interval);
  };
  if (source_.hasValidation(config_.seq_len)) drainAt(config_.eval_interval);
  if (!config_.save.empty()) drainAt(config_.save_interval);
  const int first_batch = first_step - 1, batches = last - first_step + 1;
  const std::vector<Action> actions =
      buildTwoBwSchedule(shape_, groups_.coords.pp, first_batch, batches);
  tracerun::Step step_scope(first_step);  // one span for the whole continuous pipeline
  if (dry_forward_ms_ >= 0) {
    DryRunCompute sleeps(dry_forward_ms_, dry_backward_ms_, dry_weight_ms_, shape_,
                         groups_.coords.pp, activationShape(), device_);
    VersionedDryRun compute(sleeps, microbatches_);
    at::Tensor sync = at::zeros({1}, at::TensorOptions().device(device_));
    allReduce(*groups_.pp, sync);
    const double start = nowMs();
    const PipelineStepStats stats =
        runPipelineStep(actions, *groups_.pp, activationShape(), device_, compute);
    const double end = nowMs();
    const DryRunTimes times = gatherDryRunTimes(start, end, stats, sleeps);
    const double ms = times.wall_ms;
    const double closed = twoBwFillFraction(shape_, batches);
    for (size_t k = 0; k < times.idle.size() && groups_.rank == 0; ++k) {
      std::printf(
          "steps %d-%d | stage %zu idle %.4f (closed form %.4f: 2bw fill (p-1)/(steps*m+p-1); "
          "wall clock %.4f)\n",
          first_step, last, k, times.idle[k], closed, times.idle_wall[k]);
      if (log_json_ != nullptr) {
        std::fprintf(log_json_,
                     "{\"first_step\":%d,\"last_step\":%d,\"stage\":%zu,\"idle_fraction\":%.6f,"
                     "\"closed_form\":%.6f,\"wall_idle_fraction\":%.6f}\n",
                     first_step, last, k, times.idle[k], closed, times.idle_wall[k]);
      }
    }
    for (int step = first_step; step <= last; ++step) {
      StepResult r;
      r.step = step;
      r.ms = ms / batches;
      r.tokens_per_s = double(config_.global_batch) * config_.seq_len / (r.ms / 1000.0);
      report(r);
    }
    return last;
  }
  const double start = nowMs();
  TwoBwCompute compute(*this, first_batch, batches);
  strategy_->beginStep();
  const PipelineStepStats stats =
      runPipelineStep(actions, *groups_.pp, activationShape(), device_, compute);
  compute.drain();
  max_in_flight_ = std::max(max_in_flight_, stats.max_in_flight);
  // The losses, now that the pipeline has drained: one reduction for the whole run.
  at::Tensor losses = at::tensor(compute.losses(), at::kDouble);
  if (groups_.coords.pp != shape_.stages - 1) losses.zero_();
  losses = losses.to(device_);
  allReduce(*groups_.pp, losses);
  allReduce(*groups_.dp, losses);
  losses = losses.to(at::kCPU) / groups_.dp->size;
  const double ms = (nowMs() - start) / batches;
  for (int step = first_step; step <= last; ++step) {
    StepResult r;
    r.step = step;
    r.loss = losses[step - first_step].item<double>();
    r.lr = learningRate(schedule_, step);
    r.ms = ms;
    r.tokens_per_s = double(config_.global_batch) * config_.seq_len / (r.ms / 1000.0);
    report(r);
  }
  // What the model is after the last update: the newest version (the one the next batch's update
  // starts from) for evaluation and for later steps to continue from.
  versions_->use(last + 1);
  return last;
}

}  // namespace gpttrain
