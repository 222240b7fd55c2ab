// Gradient steps that depend on model parallelism, run after backward and the DP all-reduce:
// summing the partial gradients sequence parallelism leaves on replicated parameters, summing the
// tied embedding's gradient between the first and last pipeline stage, and the global gradient
// norm (each shard once, each replicated parameter once, each stage once) with clipping.
#pragma once

#include "model/params.h"
#include "parallel/collectives.h"

namespace gpttrain {

// With sp, a replicated parameter (LayerNorm, row-parallel bias, position table) only saw this
// rank's sequence slice: all-reduce those gradients over TP (one coalesced all-reduce).
void syncSequenceParallelGrads(ParamSet& params, Group& tp, bool sp);

// With pipeline parallelism the first and last stage each hold "embedding.word.weight": sum its
// gradient over `embedding` (their group; a no-op on a group of one).
void syncTiedEmbeddingGrads(ParamSet& params, Group& embedding);

// Global L2 norm of all gradients of the model (TP shards summed, replicated parameters counted
// once, pipeline stages summed, duplicates skipped, DP replicas not at all -- their gradients are
// equal after the all-reduce). When max_norm > 0 and the norm exceeds it, scales every gradient
// by max_norm / (norm + 1e-6). Returns the norm before clipping.
double clipGradNorm(ParamSet& params, Group& tp, Group& pp, double max_norm);

}  // namespace gpttrain
