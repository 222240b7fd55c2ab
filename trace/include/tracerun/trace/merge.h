// Merging per-rank shards into one trace file, on rank 0's clock. Never modifies the shards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tracerun/trace/error.h"

namespace tracerun::trace {

// A stats row the caller adds for one shard's rank (e.g. how its clock offset was measured).
struct MergeStat {
  std::string name;
  int64_t value = 0;
  Severity severity = Severity::kInfo;
};

struct MergeInput {
  std::string path;
  // Overrides the clock offset stored in the shard when set (the launcher measures offsets
  // through the store and may know better than the rank did).
  bool has_offset = false;
  int64_t clock_offset_ns = 0;
  // Written to the merged stats table under the shard's rank (added to a row of the same name).
  std::vector<MergeStat> stats{};
  // The run of the job the shard belongs to (a restart, an elastic round: 0, 1, ...). Shards of
  // several attempts go into one file (schema: ranks.attempt, the attempts table): the last
  // attempt's ranks keep their numbers, an earlier attempt's are numbered after them, and the
  // time axis is the first attempt's rank 0's clock.
  int attempt = 0;
};

struct MergeOptions {
  std::string output;  // replaced if it exists; written to output + ".tmp" then renamed
  // Called with (shards done, shards total) for progress output; may be empty.
  std::function<void(size_t, size_t)> progress;
};

// What the merge took from one shard.
struct ShardOutcome {
  std::string path;
  int rank = -1;                  // -1 when it could not be read
  bool readable = false;          // opened and merged
  bool complete = false;          // its writer closed it (meta complete = 1)
  int64_t unreadable_tables = 0;  // tables skipped because they could not be read
  std::string problem;            // why it could not be read
  // SHARD.raw beside it (records its process never converted: raw_convert.h) could not be
  // converted: why. Those records are not in the output; the raw file is left as it was.
  std::string raw_problem;
};

struct MergeResult {
  std::vector<ShardOutcome> shards;  // in the caller's order
  // Why the memory tab's stored summary (analysis/memory_summary.h) was not written, or empty.
  // Optional data: the trace is whole without it (traceview then replays the memory events).
  std::string memory_summary_error;
  // Every shard was closed by its writer and everything in it is in the output.
  bool whole() const;
};

// Throws TraceError naming the shard and the problem; a missing or incomplete shard is an error
// unless allow_incomplete, in which case it is merged as far as it is readable and a stat row
// with severity error records what was missing. So is a SHARD.raw beside a shard that cannot be
// converted: with allow_incomplete the shard is merged without those records and
// ShardOutcome::raw_problem says why (the callers keep the raw file and say so). A failure to write
// the output is always an error, and leaves no output: on a full disk (or a refused write) the
// message says how much room the merge needs ("<output>: not enough space for the merged trace: it
// needs about ...").
MergeResult mergeShards(const std::vector<MergeInput>& shards, const MergeOptions& options,
                        bool allow_incomplete = false);

// Where a shard's attempt is written down: the N of the directory `attemptN` holding it (the
// launcher's OUTPUT.shards/attemptN/rankR.db, a node's received/nodeK/attemptN/rankR.db); -1 when
// its directory is not named so. The launcher's merges and `tracerun merge --attempts` both read
// it.
int attemptOfShard(const std::string& path);

}  // namespace tracerun::trace
