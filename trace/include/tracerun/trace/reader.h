// TraceReader: the only way dot/, viewer/, the report and exports read a trace (a merged run.db or
// a single shard), with Timeline (timeline.h) on top of it for interactive readers. Loads strings
// at open; everything else is queried on demand. Read-only.
//
// Open checks, each failing with a TraceError naming the file: not an SQLite file, truncated
// (file shorter than the page count in its header), not a tracerun trace (no meta table / wrong
// magic), schema version newer than this build, incomplete shard (writer never closed). Any later
// SQLite error (a corrupted page) is also turned into a TraceError, never a crash.
//
// Times are nanoseconds relative to the file's origin (meta origin_ns, CLOCK_MONOTONIC of rank 0).
//
// Threading: a TraceReader (one SQLite connection, reused statements) is used by one thread at a
// time; open one per thread to read in parallel. fn callbacks may call back into the reader.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/core/tracks.h"
#include "tracerun/trace/error.h"

namespace tracerun::trace {

struct RankInfo {
  int rank = 0;
  std::string host;
  int64_t pid = 0;
  int64_t clock_offset_ns = 0;
  int64_t start_ns = 0, end_ns = 0;  // first and last event
  int attempt = 0;                   // the restart or elastic round it belonged to (attempts)
  int attempt_rank = 0;              // its RANK in that attempt (= rank in the last attempt)
};

// One run of the job in the file (a restart or an elastic round starts another); a file written
// before attempts were stored, or a shard, has one: attempt 0 of meta world_size.
struct AttemptInfo {
  int attempt = 0;
  int world_size = 0;
  int64_t start_ns = 0, end_ns = 0;  // its first event and last event end
};

struct TrackRow {
  int64_t id = 0;
  int rank = 0;
  core::TrackKind kind = core::TrackKind::kThread;
  int64_t tid = 0;
  std::string name;
  int64_t event_count = 0;
  int64_t longest_span_ns = 0;
};

struct SpanRow {
  int64_t id = 0;
  int64_t track = 0;
  int64_t start_ns = 0, dur_ns = 0;
  int depth = 0;
  core::Category category = core::Category::kOp;
  core::StringId name = 0, detail = 0;
  int64_t seq = -1;
  // start + duration, saturated at the int64 limits (a damaged file may hold any two values).
  int64_t end_ns() const {
    int64_t end = 0;
    if (!__builtin_add_overflow(start_ns, dur_ns, &end)) return end;
    return dur_ns > 0 ? INT64_MAX : INT64_MIN;
  }
};

struct ArgRow {
  int64_t span = 0;
  core::StringId key = 0;
  int64_t value = 0;
};

struct InstantRow {
  int64_t track = 0, ts_ns = 0;
  core::Category category = core::Category::kUser;
  core::StringId name = 0, detail = 0;
  int64_t value = 0;
};

struct CounterRow {
  int64_t track = 0, ts_ns = 0;
  double value = 0;
};

struct MemoryRow {
  int rank = 0;
  int64_t ts_ns = 0;
  int device_type = 0, device_index = -1;
  uint64_t ptr = 0;
  int64_t bytes = 0, total = 0;
  core::MemoryCategory category = core::MemoryCategory::kUnknown;
  core::StringId op = 0, scope = 0;
};

struct FlowRow {
  core::FlowKind kind = core::FlowKind::kOther;
  int64_t src_track = 0, src_ts_ns = 0, dst_track = 0, dst_ts_ns = 0;
};

struct AggregateRow {
  int rank = 0;
  core::StringId name = 0;
  core::Category category = core::Category::kOp;
  int64_t count = 0, total_ns = 0, self_ns = 0;
};

struct StatRow {
  int rank = 0;
  std::string name;
  int64_t value = 0;
  Severity severity = Severity::kInfo;
};

struct EventCounts {
  int64_t spans = 0, args = 0, instants = 0, counters = 0, memory = 0, flows = 0;
};

class TraceReader {
 public:
  static TraceReader open(const std::string& path);
  ~TraceReader();
  TraceReader(TraceReader&&) noexcept;
  TraceReader& operator=(TraceReader&&) noexcept;

  const std::string& path() const;
  int schemaVersion() const;
  std::string meta(const std::string& key) const;  // "" when absent
  const std::string& str(core::StringId id) const;  // "" for an unknown id
  size_t stringCount() const;

  // In rank order: the last attempt's ranks first (see AttemptInfo).
  std::vector<RankInfo> ranks() const;
  // In attempt order, at least one.
  std::vector<AttemptInfo> attempts() const;
  std::vector<TrackRow> tracks() const;
  EventCounts counts() const;
  std::pair<int64_t, int64_t> timeRange() const;  // first start, last end over all events

  // Spans of one track overlapping [t0, t1], ordered by start (then depth).
  std::vector<SpanRow> spans(int64_t track, int64_t t0, int64_t t1) const;
  // Every span of a track in start order, streamed (for analyses and exports).
  void forEachSpan(int64_t track, const std::function<void(const SpanRow&)>& fn) const;
  std::vector<ArgRow> args(int64_t span) const;
  // All arguments of a track's spans, ordered by span id (one query instead of one per span).
  std::vector<ArgRow> argsOfTrack(int64_t track) const;
  // The arguments of the spans `ids` (ascending, distinct), ordered by span id, then as stored:
  // argsOfTrack's rows of those spans, reading only the id ranges around them (for analyses that
  // pick a few spans of a long track).
  std::vector<ArgRow> argsOfSpans(const std::vector<int64_t>& ids) const;
  std::vector<InstantRow> instants(int64_t track, int64_t t0, int64_t t1) const;
  std::vector<CounterRow> counters(int64_t track, int64_t t0, int64_t t1) const;
  std::vector<MemoryRow> memory(int rank, int64_t t0, int64_t t1) const;
  // The same rows streamed, in the same order (time, then the order they were recorded), without
  // holding them all: for analyses over traces with millions of memory events.
  void forEachMemory(int rank, int64_t t0, int64_t t1,
                     const std::function<void(const MemoryRow&)>& fn) const;
  std::vector<FlowRow> flows() const;
  std::vector<AggregateRow> aggregates() const;
  std::vector<StatRow> stats() const;

  // PRAGMA quick_check over the whole file; throws TraceError naming the first problem.
  void quickCheck() const;

  // Runs fn inside one read transaction: its queries share one snapshot and one file lock instead
  // of locking and checking the file once per statement (a pass over every span of a large trace
  // runs tens of thousands of statements). Inside another such call, just runs fn.
  void inOneReadTransaction(const std::function<void()>& fn) const;

 private:
  class Impl;
  explicit TraceReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracerun::trace
