// Hand-built traces for the analysis tests: the test lists spans (with args), memory events and
// flows per rank with exact times; the builder writes them through the real path (core::Session
// buffers -> ShardWriter per rank -> mergeShards) so the analyses read an ordinary trace file.
// Not a generator of random data (tests/e2e/fixture_trace.h is) and no clocks: times are given.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/error.h"

namespace tracerun::testing {

struct BSpan {
  // Thread name; "async" puts the span on the rank's async track, "async:NAME" on an async
  // track named NAME.
  std::string track = "main";
  std::string name;
  core::Category category = core::Category::kOp;
  int64_t start = 0, end = 0;
  int depth = 0;
  std::vector<std::pair<std::string, int64_t>> args = {};  // three a record, as the capture
  std::string detail = {};
  int64_t seq = -1;
};

struct BMemory {
  int64_t ts = 0;
  uint64_t ptr = 0;
  int64_t bytes = 0;  // > 0 allocation, < 0 free
  core::MemoryCategory category = core::MemoryCategory::kUnknown;
  std::string op, scope;
  int device_type = 0, device_index = -1;
};

struct BFlow {
  core::FlowKind kind = core::FlowKind::kForwardBackward;
  std::string src_track = "main", dst_track = "main";
  int64_t src_ts = 0, dst_ts = 0;
};

// A point event on the main thread's track, and a counter sample (counter tracks are per name).
struct BInstant {
  int64_t ts = 0;
  std::string name;
  int64_t value = 0;
};
struct BCounter {
  int64_t ts = 0;
  std::string name;
  double value = 0;
};

struct BStat {
  std::string name;
  int64_t value = 0;
  trace::Severity severity = trace::Severity::kInfo;
};

class TraceBuilder {
 public:
  explicit TraceBuilder(int ranks = 1) : ranks_(static_cast<size_t>(ranks)) {}

  void span(int rank, BSpan s) { at(rank).spans.push_back(std::move(s)); }
  void memory(int rank, BMemory m) { at(rank).memory.push_back(std::move(m)); }
  void flow(int rank, BFlow f) { at(rank).flows.push_back(std::move(f)); }
  void stat(int rank, BStat s) { at(rank).stats.push_back(std::move(s)); }
  void instant(int rank, BInstant i) { at(rank).instants.push_back(std::move(i)); }
  void counter(int rank, BCounter c) { at(rank).counters.push_back(std::move(c)); }
  // Builder rank `rank` is RANK `rank_in_attempt` of `attempt` (a restarted job's run) of
  // `world_size` ranks; the merge numbers it as trace-format.md's "Attempts" says. Unset: attempt
  // 0, RANK = the builder's rank, world size = the builder's ranks.
  void attempt(int rank, int attempt, int rank_in_attempt, int world_size) {
    at(rank).attempt = attempt;
    at(rank).rank_in_attempt = rank_in_attempt;
    at(rank).world_size = world_size;
  }

  // Writes rank shards into `dir` and merges them into dir/run.db; returns its path. Times given
  // to the builder come back from the reader shifted by offset() (the file's own origin).
  std::string write(const std::string& dir);
  int64_t offset() const { return offset_; }

 private:
  struct Rank {
    std::vector<BSpan> spans;
    std::vector<BMemory> memory;
    std::vector<BFlow> flows;
    std::vector<BStat> stats;
    std::vector<BInstant> instants;
    std::vector<BCounter> counters;
    int attempt = 0, rank_in_attempt = -1, world_size = 0;  // attempt(): -1, 0 when unset
  };
  Rank& at(int rank) {
    if (static_cast<size_t>(rank) >= ranks_.size()) ranks_.resize(static_cast<size_t>(rank) + 1);
    return ranks_[static_cast<size_t>(rank)];
  }
  std::vector<Rank> ranks_;
  int64_t offset_ = 0;
};

// A fresh scratch directory for one test (under TMPDIR).
std::string scratchDir(const std::string& name);

}  // namespace tracerun::testing
