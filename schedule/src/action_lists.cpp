// Building the per-rank action lists (see action_lists.h). Every schedule is the same three phases
// over "virtual microbatches" k in [0, m * v): warm-up forwards, a steady state of one forward and
// one backward, and cool-down backwards; schedules differ only in the warm-up length and in which
// (microbatch, chunk) the k-th forward and backward are.
#include "tracerun/schedule/action_lists.h"

#include <algorithm>

#include "tracerun/schedule/chimera.h"
#include "tracerun/schedule/two_bw.h"
#include "tracerun/schedule/zb_h1.h"

namespace tracerun::schedule {
namespace {

struct Slot {
  int microbatch;
  int chunk;
};

// Megatron's order: groups of p microbatches go through chunk 0, then chunk 1, ...; backwards
// visit the chunks in reverse. With v == 1 the k-th forward and backward are microbatch k.
Slot forwardSlot(const PipelineShape& s, int k) {
  const int group = s.stages * s.chunks;
  const int in_group = k % group;
  return Slot{(k / group) * s.stages + in_group % s.stages, in_group / s.stages};
}

Slot backwardSlot(const PipelineShape& s, int k) {
  Slot slot = forwardSlot(s, k);
  slot.chunk = s.chunks - 1 - slot.chunk;
  return slot;
}

Action compute(ActionKind kind, Slot slot) {
  return Action{kind, slot.microbatch, slot.chunk, -1, -1};
}

int totalSteps(const PipelineShape& s) {
  return s.microbatches * s.chunks;
}

void appendWarmUp(std::vector<Action>& out, const PipelineShape& s, int warmup) {
  for (int k = 0; k < warmup; ++k) out.push_back(compute(ActionKind::kForward, forwardSlot(s, k)));
}

void appendSteady(std::vector<Action>& out, const PipelineShape& s, int warmup) {
  for (int k = 0; k < totalSteps(s) - warmup; ++k) {
    out.push_back(compute(ActionKind::kForward, forwardSlot(s, warmup + k)));
    out.push_back(compute(ActionKind::kBackward, backwardSlot(s, k)));
  }
}

void appendCoolDown(std::vector<Action>& out, const PipelineShape& s, int warmup) {
  for (int k = totalSteps(s) - warmup; k < totalSteps(s); ++k) {
    out.push_back(compute(ActionKind::kBackward, backwardSlot(s, k)));
  }
}

// Tag of the message leaving virtual stage `from` for `microbatch` (forward: its activation,
// backward: the gradient of its input). Unique within a step.
int messageTag(bool forward, int from, int microbatch, const PipelineShape& s) {
  return (from * s.microbatches + microbatch) * 2 + (forward ? 0 : 1);
}

}  // namespace

int warmUpForwards(ScheduleKind kind, const PipelineShape& s, int rank) {
  int warmup = 0;
  switch (kind) {
    case ScheduleKind::kGpipe:
      warmup = totalSteps(s);
      break;
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kZbH1:
    case ScheduleKind::kTwoBw:  // per batch as 1F1B; the list over many batches: two_bw.h
      warmup = s.stages - rank - 1;
      break;
    case ScheduleKind::kInterleaved:
      warmup = (s.stages - rank - 1) * 2 + (s.chunks - 1) * s.stages;
      break;
    case ScheduleKind::kChimera:  // the forwards before the list's first backward
      for (const Action& a : chimeraComputeOrder(s, rank)) {
        if (a.kind == ActionKind::kBackward) break;
        ++warmup;
      }
      return warmup;
  }
  return std::min(warmup, totalSteps(s));
}

int inFlightBound(ScheduleKind kind, const PipelineShape& s, int rank) {
  if (kind == ScheduleKind::kZbH1) return std::min(s.stages, s.microbatches);  // until W
  if (kind == ScheduleKind::kChimera) {  // read off the list: p/2 + 1 (ends) to p (middle)
    int live = 0, most = 0;
    for (const Action& a : chimeraComputeOrder(s, rank)) {
      live += a.kind == ActionKind::kForward ? 1 : -1;
      most = std::max(most, live);
    }
    return most;
  }
  return std::min(warmUpForwards(kind, s, rank) + 1, totalSteps(s));
}

std::vector<Action> computeOrder(ScheduleKind kind, const PipelineShape& s, int rank) {
  if (kind == ScheduleKind::kZbH1) return zbH1ComputeOrder(s, rank);
  if (kind == ScheduleKind::kChimera) return chimeraComputeOrder(s, rank);
  const int warmup = warmUpForwards(kind, s, rank);
  std::vector<Action> out;
  appendWarmUp(out, s, warmup);
  appendSteady(out, s, warmup);
  appendCoolDown(out, s, warmup);
  return out;
}

// Each forward preceded by its receive and followed by its send; each backward likewise.
std::vector<Action> withMessages(const std::vector<Action>& order, const PipelineShape& s,
                                 int rank) {
  const int p = s.stages, last = s.virtualStages() - 1;
  const int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  std::vector<Action> out;
  for (const Action& a : order) {
    const int stage = a.chunk * p + rank;
    const int mb = a.microbatch;
    if (a.kind == ActionKind::kBackwardWeight) {
      out.push_back(a);  // no messages
    } else if (a.kind == ActionKind::kForward) {
      if (stage > 0) {
        out.push_back(Action{ActionKind::kRecvForward, mb, a.chunk, prev,
                             messageTag(true, stage - 1, mb, s)});
      }
      out.push_back(a);
      if (stage < last) {
        out.push_back(
            Action{ActionKind::kSendForward, mb, a.chunk, next, messageTag(true, stage, mb, s)});
      }
    } else {
      if (stage < last) {
        out.push_back(Action{ActionKind::kRecvBackward, mb, a.chunk, next,
                             messageTag(false, stage + 1, mb, s)});
      }
      out.push_back(a);
      if (stage > 0) {
        out.push_back(
            Action{ActionKind::kSendBackward, mb, a.chunk, prev, messageTag(false, stage, mb, s)});
      }
    }
  }
  return out;
}

std::vector<Action> buildSchedule(ScheduleKind kind, const PipelineShape& s, int rank) {
  if (kind == ScheduleKind::kTwoBw) return buildTwoBwSchedule(s, rank, 0, 1);
  if (kind == ScheduleKind::kChimera) return buildChimeraSchedule(s, rank);
  return withMessages(computeOrder(kind, s, rank), s, rank);
}

std::vector<Action> buildForwardOnlySchedule(const PipelineShape& s, int rank) {
  std::vector<Action> order;
  for (int mb = 0; mb < s.microbatches; ++mb) {
    for (int c = 0; c < s.chunks; ++c) order.push_back(Action{ActionKind::kForward, mb, c, -1, -1});
  }
  return withMessages(order, s, rank);
}

}  // namespace tracerun::schedule
