// Checkpoints: each rank saves what it holds (parameter shards, optimizer moments, dropout
// generators) to DIR/rank_<R>.pt, and rank 0 names the step in DIR/latest. The data position and
// the learning rate follow from the step. It does not reshard: load into the same layout.
#pragma once

#include "optimizer.h"
#include "params.h"
#include "tp_layers.h"

#include <string>

namespace gpttrain {

struct CheckpointLayout {
  int world = 1;
  int tp = 1;
  int pp = 1;
  int rank = 0;
};

// Writes this rank's file (atomically: temporary name, then rename). Rank 0 writes DIR/latest
// only after the caller's barrier (see writeLatest) so a reader never sees a half checkpoint.
void saveCheckpoint(const std::string& dir, const CheckpointLayout& layout, int step,
                    const ParamSet& params, Optimizer& optimizer, const DropoutRng& rng);
void writeLatest(const std::string& dir, int step);

// Restores this rank's state and returns the step it was saved after. Throws std::runtime_error
// naming the problem (missing files, another layout, other parameter names or shapes).
int loadCheckpoint(const std::string& dir, const CheckpointLayout& layout, ParamSet& params,
                   Optimizer& optimizer, DropoutRng& rng);

}  // namespace gpttrain
