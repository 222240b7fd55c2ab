// A pipeline's shape (p stages, v model chunks per stage, m microbatches per step) and which shapes
// each schedule accepts. Conventions (Megatron's): chunk c on rank r is virtual stage c * p + r;
// virtual stage s feeds s + 1, so the last rank's chunk c feeds rank 0's chunk c + 1. Checks only:
// the action lists are action_lists.h.
#pragma once

#include <string>

#include "tracerun/schedule/kind.h"

namespace tracerun::schedule {

struct PipelineShape {
  int stages = 1;        // p
  int chunks = 1;        // v (1 unless interleaved)
  int microbatches = 1;  // m
  int virtualStages() const { return stages * chunks; }
};

// Empty when `shape` can run `kind`; else one line naming the problem in gpttrain's flags
// (interleaved needs m a multiple of p; v > 1 only with interleaved; 2bw m >= p; chimera an even
// p and m a multiple of it).
std::string scheduleError(ScheduleKind kind, const PipelineShape& shape);

}  // namespace tracerun::schedule
