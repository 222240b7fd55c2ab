// Each schedule as data: for one pipeline rank, the ordered list of actions one training step runs
// (warm-up, steady state, cool-down), with or without the messages around them. The per-schedule
// specials live beside it (zb_h1.h, chimera.h, two_bw.h); running a list is replay.h.
#pragma once

#include <vector>

#include "tracerun/schedule/action.h"
#include "tracerun/schedule/kind.h"
#include "tracerun/schedule/shape.h"

namespace tracerun::schedule {

// Forwards this rank runs before its first backward (the warm-up), capped at m * v.
int warmUpForwards(ScheduleKind kind, const PipelineShape& shape, int rank);

// The most microbatch-chunks whose forward has run and whose backward has not, as the schedule
// promises it (GPipe m; 1F1B min(p - rank, m); interleaved warm-up + 1, capped at m * v; zb-h1
// min(p, m) until W; chimera read off its list).
int inFlightBound(ScheduleKind kind, const PipelineShape& shape, int rank);

// Only forward and backward actions, in this rank's order: warm-up, steady state, cool-down.
std::vector<Action> computeOrder(ScheduleKind kind, const PipelineShape& shape, int rank);

// computeOrder with communication: each forward preceded by its receive and followed by its send,
// each backward likewise, wherever the neighbouring virtual stage exists. 2bw: one batch
// (two_bw.h for several).
std::vector<Action> buildSchedule(ScheduleKind kind, const PipelineShape& shape, int rank);

// Forwards only (evaluation): microbatch by microbatch, chunk by chunk, with their messages.
std::vector<Action> buildForwardOnlySchedule(const PipelineShape& shape, int rank);

// The compute order with messages, on Megatron's layout (chunk c of rank r is virtual stage
// c * p + r): what buildSchedule adds to computeOrder, for lists built elsewhere (zb_h1.h).
std::vector<Action> withMessages(const std::vector<Action>& order, const PipelineShape& shape,
                                 int rank);

}  // namespace tracerun::schedule
