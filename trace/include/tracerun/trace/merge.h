// Merging per-rank shards into one trace file, on rank 0's clock. Never modifies the shards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tracerun::trace {

struct MergeInput {
  std::string path;
  // Overrides the clock offset stored in the shard when set (the launcher measures offsets
  // through the store and may know better than the rank did).
  bool has_offset = false;
  int64_t clock_offset_ns = 0;
};

struct MergeOptions {
  std::string output;  // replaced if it exists; written to output + ".tmp" then renamed
  // Called with (shards done, shards total) for progress output; may be empty.
  std::function<void(size_t, size_t)> progress;
};

// Throws TraceError naming the shard and the problem; a missing or incomplete shard is an error
// unless allow_incomplete, in which case it is merged as far as it is readable and a stat row
// with severity error records what was missing.
void mergeShards(const std::vector<MergeInput>& shards, const MergeOptions& options,
                 bool allow_incomplete = false);

}  // namespace tracerun::trace
