// ShardWriter: drains a core::Session's per-thread buffers into one SQLite shard (one per process
// / rank) on a background thread. Does not merge shards (merge.h) and never touches libtorch.
//
// Contract:
// - The constructor creates the file and the schema (or throws TraceError). start() launches the
//   drain thread; flush() drains and commits from any thread; close() stops the thread, drains
//   the rest, writes strings, tracks, aggregates, the span-chunk index, stats and indexes, and
//   marks the shard complete. close() is idempotent; the destructor calls it.
// - Storage layout (docs/trace-format.md): spans are written per track in chunks sorted by start
//   time, so every insert is an append; span_chunks indexes the chunks for range queries.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tracerun/core/session.h"
#include "tracerun/trace/error.h"

namespace tracerun::trace {

struct ShardOptions {
  std::string path;               // the shard file; replaced if it exists
  int rank = 0;
  int world_size = 1;
  std::string host;               // empty: gethostname()
  int64_t pid = 0;                // 0: getpid()
  int64_t clock_offset_ns = 0;    // this rank's clock minus rank 0's, applied at merge
  std::string command;            // the traced command line, for meta
  int flush_interval_ms = 20;     // how often the drain thread wakes up
  // Spans per track buffered before a chunk is written; 0: the chunk contract's size (256, see
  // docs/trace-format.md). Other sizes are for tests and benchmarks.
  size_t chunk_rows = 0;
  size_t transaction_rows = 100000;
  // Build the level-of-detail summaries (docs/trace-format.md) at close, for a shard that is a
  // final file. Off by default: the launcher merges shards, and merge builds them over the whole
  // run; a shard without them gets them built when a Timeline opens it.
  bool summaries = false;
  // The time origin (CLOCK_MONOTONIC ns) the shard's times are relative to; 0: when the writer is
  // made. Tests that must write byte-identical traces pin it.
  int64_t origin_ns = 0;
  // false: close() writes everything but leaves meta complete = '0', so the merge treats the
  // shard as cut (a shard converted from a raw file whose process never closed it).
  bool complete = true;
  // false: the rollback journal is kept in memory instead of a WAL beside the file, so writing the
  // shard needs no disk space beyond the shard itself. For a converter whose input stays until the
  // shard is whole (raw_convert.h): a process killed mid-transaction may leave the file damaged.
  bool wal = true;
};

struct WriterCounts {
  uint64_t spans = 0, args = 0, instants = 0, counters = 0, memory = 0, flows = 0;
  uint64_t unknown = 0;  // records of a kind this writer does not know
};

class ShardWriter {
 public:
  ShardWriter(core::Session& session, ShardOptions options);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void start();
  void flush();
  // One drain pass on the calling thread (no forced chunk write, no commit beyond the pass's own):
  // how a converter that fills the session's buffers itself empties them (raw_convert.h).
  void drain();
  void close();

  // A row for the stats table, written at close (name is unique per rank; the last value wins).
  void setStat(const std::string& name, int64_t value, Severity severity);
  void setMeta(const std::string& key, const std::string& value);

  WriterCounts counts() const;
  const std::string& path() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracerun::trace
