// Comparing two runs by name: each run's per-name totals (the report's ops table: op and
// autograd-node spans summed over ranks, from the precomputed aggregates, so the same numbers as
// `tracerun report --json`'s "ops") matched by name and category, with B - A. Not a timeline diff
// (traceview's compare view aligns the steps) and no I/O beyond the two readers.
// Threading: one call uses each reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct NameDiff {
  std::string name;
  core::Category category = core::Category::kOp;
  OpRow a, b;  // zeros (count 0) where the run has no such span
  int64_t countDiff() const { return b.count - a.count; }
  int64_t totalDiff() const { return b.total_ns - a.total_ns; }
  int64_t selfDiff() const { return b.self_ns - a.self_ns; }
  // B total / A total: 1 for equal totals, +inf when only B has time, 0 when only A has.
  double ratio() const;
};

struct RunComparison {
  // Every name of either run, by the absolute total difference (largest first), then the larger
  // total, then name and category.
  std::vector<NameDiff> rows;
};

RunComparison compareRuns(const TraceReader& a, const TraceReader& b);
// The same from two runs' opTotals (report.h) (for callers that already hold them).
RunComparison compareTotals(const std::vector<OpRow>& a, const std::vector<OpRow>& b);

}  // namespace tracerun::trace::analysis
