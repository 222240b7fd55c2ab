// Checkpoints: each rank saves what it holds (parameter shards, optimizer states -- ZeRO: its
// shards of them, offloaded or not --, dropout generators) to DIR/step_<S>/rank_<R>.pt, and rank 0 names the step
// in DIR/latest once every rank has saved (then removes older step folders). The data position and
// the learning rate follow from the step. Tensors are saved as CPU tensors and loaded onto the
// device of the tensors they are copied into. A checkpoint loads at another data-parallel size
// (elastic restarts, docs/trainer.md "Elastic resize"): replicated tensors come from a saved DP
// rank, ZeRO shards ("zero.*") are laid end to end over the saved DP ranks and re-cut; TP, PP, VP
// and the ZeRO stage must stay what they were.
#pragma once

#include "parallel/tp_layers.h"

#include <string>
#include <utility>
#include <vector>

namespace gpttrain {

struct CheckpointLayout {
  int world = 1;
  int tp = 1;
  int pp = 1;
  int vp = 1;
  int zero = 0;
  int rank = 0;
};

// Every tensor a rank saves, by a name stable across runs of the same layout.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Writes this rank's file (atomically: temporary name, then rename). Rank 0 writes DIR/latest
// only after the caller's barrier (see writeLatest) so a reader never sees a half checkpoint.
void saveCheckpoint(const std::string& dir, const CheckpointLayout& layout, int step,
                    const NamedTensors& tensors, int64_t optimizer_steps, const DropoutRng& rng);
void writeLatest(const std::string& dir, int step);

// Copies the saved values into `tensors` (same names and shapes), restores the optimizer's step
// count and the generators, and returns the step it was saved after. At another world size (only
// DP differs) it reads the saved ranks of this rank's tp, pp coordinates: replicated tensors and
// the generators from saved DP rank (dp mod DP_saved), each "zero.*" shard re-cut from all of
// them. Throws std::runtime_error naming the problem (missing files, another tp/pp/vp/zero, other
// names or shapes).
int loadCheckpoint(const std::string& dir, const CheckpointLayout& layout,
                   const NamedTensors& tensors, int64_t& optimizer_steps, DropoutRng& rng);

}  // namespace gpttrain
