// Gradient steps that depend on tensor parallelism, run after backward and the DP all-reduce:
// summing the partial gradients sequence parallelism leaves on replicated parameters, and the
// global gradient norm (each shard once, each replicated parameter once) with clipping.
#pragma once

#include "collectives.h"
#include "params.h"

namespace gpttrain {

// With sp, a replicated parameter (LayerNorm, row-parallel bias, position table) only saw this
// rank's sequence slice: all-reduce those gradients over TP (one coalesced all-reduce).
void syncSequenceParallelGrads(ParamSet& params, Group& tp, bool sp);

// Global L2 norm of all gradients of the model (TP shards summed, replicated parameters counted
// once, DP replicas not at all -- their gradients are equal after the all-reduce). When
// max_norm > 0 and the norm exceeds it, scales every gradient by max_norm / (norm + 1e-6).
// Returns the norm before clipping.
double clipGradNorm(ParamSet& params, Group& tp, double max_norm);

}  // namespace gpttrain
