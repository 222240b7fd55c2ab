// The end of a job that may hold several attempts (restarts: group.cpp; elastic rounds:
// elastic.cpp): every attempt's shards merged into ONE output, each shard as the attempt its
// directory names (OUTPUT.shards/attemptN/, received/nodeK/attemptN/: trace::attemptOfShard;
// trace/merge.h numbers the ranks and writes the attempts table), under the merge guard, with the
// loss report, and on failure one line whose `tracerun merge` command names every directory. Not
// the one-directory merges (launch.cpp, outer_launch.cpp), and it removes no shard: what goes and
// what stays is the caller's.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracerun/trace/merge.h"

namespace tracerun::launcher {

class Supervisor;

// Appends `paths` (shards in attemptN directories) to `inputs`, each with the attempt its
// directory names and, when given, the clock offset of the node that ran it (the launcher's
// measurement overrides the shard's own). A path outside an attemptN directory is a bug: it throws
// std::logic_error.
void addAttemptShards(std::vector<trace::MergeInput>& inputs, const std::vector<std::string>& paths,
                      std::optional<int64_t> clockOffsetNs = std::nullopt);

struct AttemptsMerge {
  std::optional<trace::MergeResult> result;  // empty: not merged (said why; every shard stays)
  bool lost = false;  // merged, but a shard not whole (reportMergeLoss said so; they stay)
  std::vector<std::string> dirs;  // the directories holding the shards, in merge order
  // Merged with everything every shard held: the caller may remove the shards.
  bool whole() const { return result && !lost; }
};

// Merges `inputs` (non-empty; put in attempt order, then numeric rank order here) into `output`
// with allow_incomplete. Prints one line when the merge fails or loses part of a shard, naming
// every directory and the command that merges them by hand.
AttemptsMerge mergeAttempts(Supervisor& supervisor, std::vector<trace::MergeInput> inputs,
                            const std::string& output);

}  // namespace tracerun::launcher
