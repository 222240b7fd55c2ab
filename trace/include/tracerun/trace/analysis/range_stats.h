// Range statistics: per span name (and category) count, total, self, min, max, p50 and p95 over
// the spans of some ranks lying wholly inside a time range, plus per-rank totals and the
// collectives in it. For traceview's statistics view (a Shift+drag on the timeline) and its
// whole-run table; not the report's aggregates (those are per rank and name, without percentiles).
//
// Definitions (tests/viewer/stats_view_test.cpp holds them equal to a brute-force scan):
// - a span counts when start >= t0 and start + dur <= t1 (INSIDE, not merely overlapping: then
//   every child of a counted span is counted too, so self time is exact);
// - self = max(0, dur - the durations of its children), a child being a span of the same track at
//   depth + 1 enclosed by it (the most recent span of depth - 1 before it in span order);
// - p50 / p95: nearest rank, the value at position ceil(p * n) - 1 of the sorted durations.
// Threading: rangeStats uses `reader` from the calling thread only; rangeStatsParallel opens one
// TraceReader per thread on `path`.
#pragma once

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct RangeQuery {
  int64_t t0 = std::numeric_limits<int64_t>::min();
  int64_t t1 = std::numeric_limits<int64_t>::max();
  std::vector<int> ranks;  // empty: every rank
};

struct NameStats {
  core::StringId name = 0;
  core::Category category = core::Category::kOp;
  int64_t count = 0, total_ns = 0, self_ns = 0;
  int64_t min_ns = 0, max_ns = 0, p50_ns = 0, p95_ns = 0;
  int ranks = 0;  // ranks that have it in the range
};

struct RankRangeStats {
  int rank = 0;
  int64_t spans = 0;
  int64_t total_ns = 0;  // summed durations of every span
  int64_t busy_ns = 0;   // summed durations of depth-0 spans (a thread's busy time, per track)
};

// comm-category spans of the range, by normalizeCommName (comm.h) of their name, NCCL's set-up and
// group markers aside (vocab::nccl::isControlCall): each rank's span is one call (unlike
// CommAnalysis, which counts a group's call once).
struct RangeCollective {
  std::string op;
  int64_t calls = 0, bytes = 0, time_ns = 0;
  int group_size = 0;  // the "group_size" argument of its spans; 0 unknown or not one size
  // NCCL's host calls among them: their spans are the enqueues, so no bandwidth (0; comm.h)
  bool host_call_time = false;
  double algbw_gbps = 0, busbw_gbps = 0;
};

struct RangeStats {
  RangeQuery query;
  int64_t spans = 0;
  std::vector<NameStats> names;       // by total time, descending; ties by name id then category
  std::vector<RankRangeStats> ranks;  // every queried rank that has tracks, by rank
  std::vector<RangeCollective> collectives;  // by op
  bool cancelled = false;
};

// The nearest-rank percentile p (0 < p <= 1) of `values`, which it reorders; 0 when empty.
int64_t nearestRankPercentile(std::vector<int64_t>& values, double p);

RangeStats rangeStats(const TraceReader& reader, const RangeQuery& query,
                      const std::atomic<bool>* cancel = nullptr);
// The same numbers, the tracks split over `threads` readers of `path` (threads >= 1).
RangeStats rangeStatsParallel(const std::string& path, const RangeQuery& query, int threads,
                              const std::atomic<bool>* cancel = nullptr);

}  // namespace tracerun::trace::analysis
