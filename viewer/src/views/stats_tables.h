// The statistics view's tables as data (no ImGui): ops, collectives and ranks, for the whole run
// (the report's numbers plus percentiles from a scan) or for a range selection (range_stats.h);
// their CSV text and the view's --dump-view text. Not the drawing (stats_view.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/gpu.h"
#include "tracerun/trace/analysis/range_stats.h"
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {

struct StatsCell {
  std::string text;  // what the table shows (trace/format.h)
  std::string raw;   // what CSV holds: the plain number (ns, bytes, GB/s) or the text
  double key = 0;    // sort key of numeric cells
  bool numeric = false;
};

struct StatsTable {
  std::string name;  // "ops", "collectives", "ranks", "kernels"
  std::vector<std::string> columns;
  std::vector<std::vector<StatsCell>> rows;
  // CSV (RFC 4180: fields with , " or a line break quoted, quotes doubled), header line first,
  // rows in the order `order` gives (indexes into rows; empty: as stored).
  std::string csv(const std::vector<size_t>& order = {}) const;
};

// Everything the whole-run tables need, computed off the UI thread.
struct WholeRunStats {
  trace::analysis::Report report;
  std::vector<trace::analysis::OpRow> totals;  // report.h's opTotals over every category
  std::map<int, int64_t> spans_per_rank;       // spans in the aggregates
  trace::analysis::RangeStats scan;            // every span of every rank: min, max, p50, p95
  std::vector<std::string> names;              // by StringId (the reader's strings)
  trace::analysis::GpuAnalysis gpu;            // the kernel table (empty without GPU records)
};
WholeRunStats computeWholeRun(const trace::TraceReader& reader,
                              const std::atomic<bool>* cancel = nullptr);

// ops: name, category, count, total_ns, self_ns, mean_ns, min_ns, max_ns, p50_ns, p95_ns, ranks.
// Whole run: count, total and self are the report's (the trace's aggregates summed over ranks),
// min/max/p50/p95 come from the scan. Rows by total, descending. A fourth table, kernels (name,
// kind, count, total_ns, mean_ns, min_ns, p50_ns, max_ns, ranks: analyzeGpu's kernel table, the
// report's), when the trace has kernels, copies or sets.
std::vector<StatsTable> wholeRunTables(const WholeRunStats& s);
std::vector<StatsTable> rangeTables(const trace::analysis::RangeStats& r,
                                    const std::vector<std::string>& names);

// The --dump-view text: per table "table NAME" then its CSV, tables in order.
std::string statsDumpText(const std::string& scope, const std::vector<StatsTable>& tables);

}  // namespace tracerun::viewer
