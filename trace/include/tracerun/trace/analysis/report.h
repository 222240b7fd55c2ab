// The report: every analysis of a trace gathered once (pipeline bubbles, memory peaks by category,
// top ops from the precomputed aggregates, communication, lost-data stats) into one plain Report,
// names resolved, so that its writers (report_text.h, report_json.h; docs/report.md lists the
// JSON keys) only format it. Shared by `tracerun report` and anything else that wants the same
// numbers; formats nothing and does no I/O of its own beyond the reader.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/critical_path.h"
#include "tracerun/trace/analysis/gpu.h"
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

// The memory categories the report shows, in its column order ("other" last).
inline constexpr std::array<core::MemoryCategory, 7> kReportCategories = {
    core::MemoryCategory::kParameter,      core::MemoryCategory::kGradient,
    core::MemoryCategory::kOptimizerState, core::MemoryCategory::kActivation,
    core::MemoryCategory::kTemporary,      core::MemoryCategory::kInput,
    core::MemoryCategory::kOther};

// An allocation live at a device's peak, its op and scope named.
struct ReportAllocation {
  int64_t bytes = 0;
  int64_t ts_ns = 0;
  core::MemoryCategory category = core::MemoryCategory::kOther;
  core::MemoryCategory tag = core::MemoryCategory::kUnknown;
  std::string op, scope;
};

// One device's memory as the report shows it: the analysis' numbers, the device's name ("cpu",
// "cuda:0") and its largest allocations at the peak, named.
struct ReportDevice {
  DeviceMemory memory;
  std::string device;
  std::vector<ReportAllocation> largest_at_peak;
};

// One rank's memory: the device its report shows (MemoryAnalysis::primary) and its others, as
// indexes into Report::memory_devices.
struct ReportRankMemory {
  int rank = 0;
  size_t primary = 0;
  std::vector<size_t> others;
};

struct Report {
  std::string path;
  int world_size = 0;
  std::string traced_ranks;  // meta traced_ranks (`tracerun --ranks`): "" when every rank was
  std::vector<RankInfo> ranks;
  // Restarts and elastic rounds, at least one.
  std::vector<AttemptInfo> attempts;
  int steps = 0;             // most "step" spans on one rank
  int64_t step_mean_ns = 0;  // mean step length over all ranks' step spans
  EventCounts counts;
  PipelineAnalysis pipeline;
  PipelineCriticalPath critical_path;  // of the pipeline's default step; found false without one
  MemoryAnalysis memory;               // the analysis, as the viewer reads it
  std::vector<ReportDevice> memory_devices;          // memory.devices, by rank then device, named
  std::vector<ReportRankMemory> memory_ranks;        // by rank, ranks with memory events only
  std::map<std::string, std::string> memory_dtypes;  // memoryDtypes; empty when none named
  int64_t op_spans = 0, op_names = 0;                // op and autograd-node spans, distinct names
  std::vector<OpRow> top_ops;                        // by self time, summed over ranks
  CommAnalysis comm;
  std::vector<double> comm_overlap;  // per comm.ranks row: overlap_ns / comm_ns; -1 without comm
  GpuAnalysis gpu;                   // present() only with kernel or copy spans on GPU streams
  std::vector<StatRow> stats;
  int64_t dropped_events = 0;
  std::vector<std::string> lost;  // one line per stat with severity error ("rank 1: x = 3")
};

// Every row of the report's ops table (op and autograd-node spans summed over ranks from the
// aggregates; not only the top N), by name then category. The one rule for "ops": the report, the
// compare view and the statistics view use it; `every_category` keeps the other categories'
// names too (phases, comm, user scopes), summed the same way.
std::vector<OpRow> opTotals(const TraceReader& reader, bool every_category = false);

// Runs the analyses and resolves every name the writers show.
Report buildReport(const TraceReader& reader, const ReportOptions& options = {});

}  // namespace tracerun::trace::analysis
