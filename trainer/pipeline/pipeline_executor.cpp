// The pipeline executor (see pipeline_executor.h): one switch over the action kinds, one method
// per kind. Builds no schedule (schedule.h does) and computes nothing itself (PipelineCompute).
#include "pipeline/pipeline_executor.h"

#include <tracerun/annotate.h>

#include <chrono>
#include <map>
#include <optional>
#include <stdexcept>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;
using Args = std::initializer_list<tracerun::Arg>;

// What one (chunk, microbatch) holds between its actions; dropped after its backward.
struct Slot {
  at::Tensor input, output, grad, input_grad;
};

// Receives are posted this many receive actions ahead of the one being waited for, so a message
// can arrive while the rank still computes (each holds one activation-sized buffer).
constexpr size_t kRecvLookahead = 2;

bool isRecv(const Action& a) {
  return a.kind == ActionKind::kRecvForward || a.kind == ActionKind::kRecvBackward;
}

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

at::Tensor PipelineCompute::backwardInput(int, int, const at::Tensor&, const at::Tensor&,
                                          const at::Tensor&) {
  throw std::logic_error("this pipeline computation does not split its backward (zb-h1 only)");
}

void PipelineCompute::backwardWeight(int, int, const at::Tensor&, const at::Tensor&,
                                     const at::Tensor&) {
  throw std::logic_error("this pipeline computation does not split its backward (zb-h1 only)");
}

namespace {

// One step's run of one rank's action list: the slots, the receives posted ahead, the sends in
// flight and the clock; one method per action kind.
class StepRun {
 public:
  StepRun(const std::vector<Action>& actions, Group& pp,
          const std::vector<int64_t>& activation_shape, torch::Device device,
          PipelineCompute& compute)
      : actions_(actions),
        pp_(pp),
        shape_(activation_shape),
        device_(device),
        compute_(compute),
        bytes_(activationBytes(activation_shape)) {}

  PipelineStepStats run() {
    for (size_t index = 0; index < actions_.size(); ++index) runAction(index);
    waitForSends();
    return stats_;
  }

 private:
  static int64_t activationBytes(const std::vector<int64_t>& shape) {
    int64_t n = 4;
    for (int64_t d : shape) n *= d;
    return n;
  }

  void runAction(size_t index) {
    const Action& a = actions_[index];
    if (a.kind == ActionKind::kApplyUpdate) {
      applyUpdate(a);
      return;
    }
    Slot& slot = slots_[{a.chunk, a.microbatch}];
    const int64_t peer = a.peer >= 0 ? pp_.global_ranks[a.peer] : -1;
    switch (a.kind) {
      case ActionKind::kRecvForward:
      case ActionKind::kRecvBackward:
        receive(index, a, slot, peer);
        break;
      case ActionKind::kSendForward:
      case ActionKind::kSendBackward:
        send(a, slot, peer);
        break;
      case ActionKind::kForward:
        forward(a, slot);
        break;
      case ActionKind::kBackward:
        backward(a, slot);
        break;
      case ActionKind::kBackwardInput:
        backwardInput(a, slot);
        break;
      case ActionKind::kBackwardWeight:
        backwardWeight(a, slot);
        break;
      case ActionKind::kApplyUpdate:  // run before the switch
        break;
    }
  }

  void applyUpdate(const Action& a) {
    tracerun::PhaseScope phase(
        vocab::phase::kOptimizer,
        {{vocab::arg::kStage, pp_.rank}, {vocab::arg::kWeightVersion, a.microbatch + 2}});
    compute_.applyUpdate(a.microbatch);
  }

  // Posts the receives of the next actions until kRecvLookahead + 1 from `current` on are posted.
  void postAhead(size_t current) {
    size_t ahead = 0;
    for (const auto& entry : posted_) ahead += entry.first >= current;
    while (nextPost_ < actions_.size() && ahead < kRecvLookahead + 1) {
      const Action& a = actions_[nextPost_];
      if (isRecv(a)) {
        posted_.emplace(nextPost_, postRecv(pp_, shape_, device_, a.peer, a.tag));
        ++ahead;
      }
      ++nextPost_;
    }
  }

  void receive(size_t index, const Action& a, Slot& slot, int64_t peer) {
    tracerun::Scope scope(actionName(a.kind), {{vocab::arg::kPeer, peer},
                                               {vocab::arg::kBytes, bytes_},
                                               {vocab::arg::kMicrobatch, a.microbatch},
                                               {vocab::arg::kChunk, a.chunk}});
    postAhead(index);
    auto it = posted_.find(index);
    const int64_t start = nowNs();
    it->second.work->wait();
    stats_.recv_wait_ns += nowNs() - start;
    at::Tensor t = it->second.take();  // on the compute device
    posted_.erase(it);
    if (a.kind == ActionKind::kRecvForward) {
      slot.input = t.requires_grad_(true);
    } else {
      slot.grad = t;
    }
  }

  void send(const Action& a, Slot& slot, int64_t peer) {
    tracerun::Scope scope(actionName(a.kind), {{vocab::arg::kPeer, peer},
                                               {vocab::arg::kBytes, bytes_},
                                               {vocab::arg::kMicrobatch, a.microbatch},
                                               {vocab::arg::kChunk, a.chunk}});
    const at::Tensor& t =
        a.kind == ActionKind::kSendForward ? slot.output.detach() : slot.input_grad;
    sends_.push_back(sendAsync(pp_, t, a.peer, a.tag));
    // A long list (2bw runs many steps in one) lets finished sends and their buffers go.
    while (sends_.size() > 1 && sends_.front()->isCompleted()) {
      sends_.front()->wait();
      sends_.erase(sends_.begin());
    }
    // After a split B the slot lives on until its W.
    if (a.kind == ActionKind::kSendBackward && !slot.output.defined()) {
      slots_.erase({a.chunk, a.microbatch});
    }
  }

  // Opens a forward or backward phase scope: (stage, chunk, microbatch), and the weight version
  // when the computation has one (2bw).
  void enterPhase(std::optional<tracerun::PhaseScope>& phase, const char* name, const Action& a) {
    const int64_t stage = pp_.rank;  // annotated: the pipeline rank; with chunk, the virtual stage
    if (const int64_t version = compute_.weightVersion(a.microbatch); version >= 0) {
      phase.emplace(name, Args{{vocab::arg::kStage, stage},
                               {vocab::arg::kChunk, a.chunk},
                               {vocab::arg::kMicrobatch, a.microbatch},
                               {vocab::arg::kWeightVersion, version}});
    } else {
      phase.emplace(name, Args{{vocab::arg::kStage, stage},
                               {vocab::arg::kChunk, a.chunk},
                               {vocab::arg::kMicrobatch, a.microbatch}});
    }
  }

  void forward(const Action& a, Slot& slot) {
    std::optional<tracerun::PhaseScope> phase;
    enterPhase(phase, vocab::phase::kForward, a);
    const int64_t start = nowNs();
    slot.output = compute_.forward(a.chunk, a.microbatch, slot.input);
    stats_.compute_ns += nowNs() - start;
    stats_.max_in_flight = std::max(stats_.max_in_flight, ++live_);
  }

  void backward(const Action& a, Slot& slot) {
    std::optional<tracerun::PhaseScope> phase;
    enterPhase(phase, vocab::phase::kBackward, a);
    const int64_t start = nowNs();
    slot.input_grad = compute_.backward(a.chunk, a.microbatch, slot.input, slot.output, slot.grad);
    stats_.compute_ns += nowNs() - start;
    --live_;
    slot.output = at::Tensor();
    slot.grad = at::Tensor();
    if (a.chunk == 0 && pp_.rank == 0) slots_.erase({a.chunk, a.microbatch});  // sends nothing
  }

  void backwardInput(const Action& a, Slot& slot) {
    tracerun::PhaseScope phase(vocab::phase::kBackwardInput,
                               {{vocab::arg::kStage, pp_.rank},
                                {vocab::arg::kChunk, a.chunk},
                                {vocab::arg::kMicrobatch, a.microbatch}});
    const int64_t start = nowNs();
    slot.input_grad =
        compute_.backwardInput(a.chunk, a.microbatch, slot.input, slot.output, slot.grad);
    stats_.compute_ns += nowNs() - start;
  }

  void backwardWeight(const Action& a, Slot& slot) {
    tracerun::PhaseScope phase(vocab::phase::kBackwardWeight,
                               {{vocab::arg::kStage, pp_.rank},
                                {vocab::arg::kChunk, a.chunk},
                                {vocab::arg::kMicrobatch, a.microbatch}});
    const int64_t start = nowNs();
    compute_.backwardWeight(a.chunk, a.microbatch, slot.input, slot.output, slot.grad);
    stats_.compute_ns += nowNs() - start;
    --live_;
    slots_.erase({a.chunk, a.microbatch});  // its gradient was sent after B
  }

  void waitForSends() {
    tracerun::Scope scope(vocab::scope::kPipelineSendWait,
                          {{vocab::arg::kSends, static_cast<int64_t>(sends_.size())}});
    for (auto& work : sends_) work->wait();
  }

  const std::vector<Action>& actions_;
  Group& pp_;
  const std::vector<int64_t>& shape_;
  torch::Device device_;
  PipelineCompute& compute_;
  const int64_t bytes_;
  PipelineStepStats stats_;
  std::map<std::pair<int, int>, Slot> slots_;
  std::vector<c10::intrusive_ptr<c10d::Work>> sends_;
  int live_ = 0;
  // Receives posted ahead, by action index; nextPost_: the next action to consider posting.
  std::map<size_t, PostedRecv> posted_;
  size_t nextPost_ = 0;
};

}  // namespace

PipelineStepStats runPipelineStep(const std::vector<Action>& actions, Group& pp,
                                  const std::vector<int64_t>& activation_shape,
                                  torch::Device device, PipelineCompute& compute) {
  return StepRun(actions, pp, activation_shape, device, compute).run();
}

}  // namespace gpttrain
