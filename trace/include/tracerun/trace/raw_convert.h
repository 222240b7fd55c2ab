// Raw shard -> SQLite shard: replays what a traced process appended to its raw shard
// (core/raw_shard.h) through the same ShardWriter the process would have run, so the shard, the
// merge and every reader are those of the in-process writer. Runs off the training's path: in
// the process once it stops, or in the launcher for a process that never got there (killed).
// Does not merge, and never modifies the raw file.
#pragma once

#include <cstdint>
#include <string>

#include "tracerun/trace/error.h"

namespace tracerun::trace {

struct RawConversion {
  uint64_t records = 0;    // records replayed into the shard
  uint64_t cut_bytes = 0;  // bytes after the last whole block, dropped (a kill or a full disk)
  uint64_t dropped = 0;    // records the process dropped (rings full, or a write that failed)
  bool ended = false;      // the process closed the raw file; otherwise the shard is incomplete
};

// Writes the SQLite shard `dbPath` (replaced if it exists) from the raw shard `rawPath`. A file cut
// inside a block keeps every whole block before it: the stats table gets raw_truncated_bytes
// (warning), and a file its process never closed gives a shard with meta complete = '0', which
// the merge marks merge_incomplete_shard as for any cut shard. Throws TraceError naming the file
// when it is not a raw shard or the shard cannot be written.
//
// The shard is written in place of the one at `dbPath` (a placeholder's room is the conversion's
// first room) with its journal in memory, so converting needs no disk space beyond the shard
// (docs/trace-format.md, "A full disk"). A conversion that fails (a full disk) leaves there a
// shard holding what it had committed, marked incomplete, and the raw file as it was: the raw file
// stays the record until a conversion has succeeded, and the merge reads it in the shard's place.
RawConversion convertRawShard(const std::string& rawPath, const std::string& dbPath);

// "<shard>.raw": where a process writing raw keeps the records of the shard `dbPath`.
std::string rawShardPath(const std::string& dbPath);

// True when the shard `dbPath` is a closed one (meta complete = '1'): a SHARD.raw beside it then
// holds nothing the shard lacks and is not read in its place. Either its conversion finished and
// the process died before removing it, or it is an older run's, left at the same path by a
// killed process and outlived by a shard written since (TRACERUN_WRITER=sqlite). A shard that is
// missing, unreadable or incomplete (a placeholder, a failed conversion) gives false.
bool rawIsLeftover(const std::string& dbPath);
// "<shard>.raw-reserve": the disk space the raw writer holds for the conversion while it records
// (core/raw_shard_writer.h); whoever converts a raw shard its process left removes it first.
std::string rawReservePath(const std::string& dbPath);

}  // namespace tracerun::trace
