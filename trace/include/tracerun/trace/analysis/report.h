// The report: every analysis of a trace gathered once (pipeline bubbles, memory peaks by category,
// top ops from the precomputed aggregates, communication, lost-data stats), printable as tables
// or as one JSON object (docs/report.md lists its keys). Shared by `tracerun report` and anything
// else that wants the same numbers; does no I/O of its own beyond the reader.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/pipeline.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct ReportOptions {
  size_t top_ops = 15;
  size_t top_allocations = 5;
};

struct OpRow {
  std::string name;
  core::Category category = core::Category::kOp;
  int64_t count = 0, total_ns = 0, self_ns = 0;
  int ranks = 0;  // ranks that ran it
};

struct Report {
  std::string path;
  int world_size = 0;
  std::vector<RankInfo> ranks;
  int steps = 0;             // most "step" spans on one rank
  int64_t step_mean_ns = 0;  // mean step length over all ranks' step spans
  EventCounts counts;
  PipelineAnalysis pipeline;
  MemoryAnalysis memory;
  int64_t op_spans = 0, op_names = 0;  // op and autograd-node spans, distinct names
  std::vector<OpRow> top_ops;          // by self time, summed over ranks
  CommAnalysis comm;
  std::vector<StatRow> stats;
  int64_t dropped_events = 0;
  std::vector<std::string> lost;  // one line per stat with severity error ("rank 1: x = 3")
};

// Every row of the report's ops table (op and autograd-node spans summed over ranks from the
// aggregates; not only the top N), by name then category. The one rule for "ops": the report, the
// compare view and the statistics view use it; `every_category` keeps the other categories'
// names too (phases, comm, user scopes), summed the same way.
std::vector<OpRow> opTotals(const TraceReader& reader, bool every_category = false);

Report buildReport(const TraceReader& reader, const ReportOptions& options = {});
// Tables for people. `reader` resolves names (the one the report was built from).
std::string reportText(const Report& report, const TraceReader& reader);
// One JSON object (invalid UTF-8 in names replaced, never an error).
std::string reportJson(const Report& report, const TraceReader& reader, int indent = 2);

}  // namespace tracerun::trace::analysis
