// What --schedule chimera needs beyond its action lists (schedule/chimera.h): each rank's two
// model chunks (down stage r, up stage p-1-r) and the end-of-step gradient sum of the two replicas
// of every stage. It does not schedule, and it does not apply the update.
#pragma once

#include "model/model.h"
#include "model/params.h"
#include "parallel/process_groups.h"

#include <vector>

namespace gpttrain {

// chunks[0] = stage r of the down pipeline, chunks[1] = stage p-1-r of the up pipeline, each of
// layers / p layers. Parameters are registered lowest stage first, so the two ranks of a mirror
// pair ({r, p-1-r}) list the same parameters in the same order. On ranks r >= p/2 every entry is
// marked `duplicate` (its mirror counts it in the gradient norm and the dumps); a rank holding
// both the first and the last stage keeps one tied embedding and renames the other copy
// "embedding.word.weight.head" (checkpoint names stay unique).
std::vector<GptStage> makeChimeraChunks(ParamSet& params, const ModelConfig& model, int layers,
                                        int stages, const ProcessGroups& groups);

// After the DP reduction: sums the tied embedding's two copies on a rank, then all-reduces every
// gradient of the rank over `mirror` (one flat buffer), so both replicas of a stage hold the
// gradient of all m microbatches.
void syncChimeraGrads(ParamSet& params, Group& mirror);

}  // namespace gpttrain
