// Chimera (Li & Hoefler, SC'21) as data. Two pipelines of p stages in opposite directions: rank r
// holds chunk 0 = stage r of the down pipeline and chunk 1 = stage p-1-r of the up pipeline (so
// ranks r and p-1-r hold the same layers). Per unit of p microbatches the first p/2 go down, the
// rest up; the per-rank order is the authors' (Shigangli/Chimera), units directly concatenated. p
// even, m a multiple of p; its shape has chunks == 1 (the two chunks are its pipelines, not --vp).
#pragma once

#include <vector>

#include "tracerun/schedule/action.h"
#include "tracerun/schedule/shape.h"

namespace tracerun::schedule {

int chimeraStage(int stages, int rank, int chunk);  // the pipeline stage of that chunk
int chimeraChunk(int stages, int microbatch);       // 0: down pipeline, 1: up
int chimeraRank(int stages, int chunk, int stage);  // the rank holding (chunk, stage)
// Throws std::invalid_argument on a shape chimera cannot run.
std::vector<Action> chimeraComputeOrder(const PipelineShape& shape, int rank);
std::vector<Action> buildChimeraSchedule(const PipelineShape& shape, int rank);
std::vector<Action> buildChimeraForwardOnlySchedule(const PipelineShape& shape, int rank);

}  // namespace tracerun::schedule
