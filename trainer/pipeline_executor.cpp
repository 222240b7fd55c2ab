// The pipeline executor (see pipeline_executor.h): one switch over the action kinds.
#include "pipeline_executor.h"

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

PipelineStepStats runPipelineStep(const std::vector<Action>& actions, Group& pp,
                                  const std::vector<int64_t>& activation_shape,
                                  torch::Device device, PipelineCompute& compute) {
  PipelineStepStats stats;
  std::map<std::pair<int, int>, Slot> slots;
  std::vector<c10::intrusive_ptr<c10d::Work>> sends;
  const int64_t bytes = [&] {
    int64_t n = 4;
    for (int64_t d : activation_shape) n *= d;
    return n;
  }();
  int live = 0;
  // Receives posted ahead, by action index; next_post: the next action to consider posting.
  std::map<size_t, PostedRecv> posted;
  size_t next_post = 0;
  auto postAhead = [&](size_t current) {
    size_t ahead = 0;
    for (const auto& entry : posted) ahead += entry.first >= current;
    while (next_post < actions.size() && ahead < kRecvLookahead + 1) {
      const Action& a = actions[next_post];
      if (isRecv(a)) {
        posted.emplace(next_post, postRecv(pp, activation_shape, device, a.peer, a.tag));
        ++ahead;
      }
      ++next_post;
    }
  };
  for (size_t index = 0; index < actions.size(); ++index) {
    const Action& a = actions[index];
    if (a.kind == ActionKind::kApplyUpdate) {
      tracerun::PhaseScope phase(
          vocab::phase::kOptimizer,
          {{vocab::arg::kStage, pp.rank}, {vocab::arg::kWeightVersion, a.microbatch + 2}});
      compute.applyUpdate(a.microbatch);
      continue;
    }
    Slot& slot = slots[{a.chunk, a.microbatch}];
    const int64_t stage = pp.rank;  // annotated: the pipeline rank; with chunk, the virtual stage
    const int64_t peer = a.peer >= 0 ? pp.global_ranks[a.peer] : -1;
    switch (a.kind) {
      case ActionKind::kRecvForward:
      case ActionKind::kRecvBackward: {
        tracerun::Scope scope(actionName(a.kind), {{vocab::arg::kPeer, peer},
                                                   {vocab::arg::kBytes, bytes},
                                                   {vocab::arg::kMicrobatch, a.microbatch},
                                                   {vocab::arg::kChunk, a.chunk}});
        postAhead(index);
        auto it = posted.find(index);
        const int64_t start = nowNs();
        it->second.work->wait();
        stats.recv_wait_ns += nowNs() - start;
        at::Tensor t = it->second.take();  // on the compute device
        posted.erase(it);
        if (a.kind == ActionKind::kRecvForward) {
          slot.input = t.requires_grad_(true);
        } else {
          slot.grad = t;
        }
        break;
      }
      case ActionKind::kSendForward:
      case ActionKind::kSendBackward: {
        tracerun::Scope scope(actionName(a.kind), {{vocab::arg::kPeer, peer},
                                                   {vocab::arg::kBytes, bytes},
                                                   {vocab::arg::kMicrobatch, a.microbatch},
                                                   {vocab::arg::kChunk, a.chunk}});
        const at::Tensor& t =
            a.kind == ActionKind::kSendForward ? slot.output.detach() : slot.input_grad;
        sends.push_back(sendAsync(pp, t, a.peer, a.tag));
        // A long list (2bw runs many steps in one) lets finished sends and their buffers go.
        while (sends.size() > 1 && sends.front()->isCompleted()) {
          sends.front()->wait();
          sends.erase(sends.begin());
        }
        // After a split B the slot lives on until its W.
        if (a.kind == ActionKind::kSendBackward && !slot.output.defined()) {
          slots.erase({a.chunk, a.microbatch});
        }
        break;
      }
      case ActionKind::kForward: {
        std::optional<tracerun::PhaseScope> phase;
        if (const int64_t version = compute.weightVersion(a.microbatch); version >= 0) {
          phase.emplace(vocab::phase::kForward, Args{{vocab::arg::kStage, stage},
                                                     {vocab::arg::kChunk, a.chunk},
                                                     {vocab::arg::kMicrobatch, a.microbatch},
                                                     {vocab::arg::kWeightVersion, version}});
        } else {
          phase.emplace(vocab::phase::kForward, Args{{vocab::arg::kStage, stage},
                                                     {vocab::arg::kChunk, a.chunk},
                                                     {vocab::arg::kMicrobatch, a.microbatch}});
        }
        const int64_t start = nowNs();
        slot.output = compute.forward(a.chunk, a.microbatch, slot.input);
        stats.compute_ns += nowNs() - start;
        stats.max_in_flight = std::max(stats.max_in_flight, ++live);
        break;
      }
      case ActionKind::kBackward: {
        std::optional<tracerun::PhaseScope> phase;
        if (const int64_t version = compute.weightVersion(a.microbatch); version >= 0) {
          phase.emplace(vocab::phase::kBackward, Args{{vocab::arg::kStage, stage},
                                                      {vocab::arg::kChunk, a.chunk},
                                                      {vocab::arg::kMicrobatch, a.microbatch},
                                                      {vocab::arg::kWeightVersion, version}});
        } else {
          phase.emplace(vocab::phase::kBackward, Args{{vocab::arg::kStage, stage},
                                                      {vocab::arg::kChunk, a.chunk},
                                                      {vocab::arg::kMicrobatch, a.microbatch}});
        }
        const int64_t start = nowNs();
        slot.input_grad =
            compute.backward(a.chunk, a.microbatch, slot.input, slot.output, slot.grad);
        stats.compute_ns += nowNs() - start;
        --live;
        slot.output = at::Tensor();
        slot.grad = at::Tensor();
        if (a.chunk == 0 && pp.rank == 0) slots.erase({a.chunk, a.microbatch});  // sends nothing
        break;
      }
      case ActionKind::kBackwardInput: {
        tracerun::PhaseScope phase(vocab::phase::kBackwardInput,
                                   {{vocab::arg::kStage, stage},
                                    {vocab::arg::kChunk, a.chunk},
                                    {vocab::arg::kMicrobatch, a.microbatch}});
        const int64_t start = nowNs();
        slot.input_grad =
            compute.backwardInput(a.chunk, a.microbatch, slot.input, slot.output, slot.grad);
        stats.compute_ns += nowNs() - start;
        break;
      }
      case ActionKind::kBackwardWeight: {
        tracerun::PhaseScope phase(vocab::phase::kBackwardWeight,
                                   {{vocab::arg::kStage, stage},
                                    {vocab::arg::kChunk, a.chunk},
                                    {vocab::arg::kMicrobatch, a.microbatch}});
        const int64_t start = nowNs();
        compute.backwardWeight(a.chunk, a.microbatch, slot.input, slot.output, slot.grad);
        stats.compute_ns += nowNs() - start;
        --live;
        slots.erase({a.chunk, a.microbatch});  // its gradient was sent after B
        break;
      }
      case ActionKind::kApplyUpdate:  // run before the switch
        break;
    }
  }
  {
    tracerun::Scope scope(vocab::scope::kPipelineSendWait,
                          {{vocab::arg::kSends, static_cast<int64_t>(sends.size())}});
    for (auto& work : sends) work->wait();
  }
  return stats;
}

}  // namespace gpttrain
