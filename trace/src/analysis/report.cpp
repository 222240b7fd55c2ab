// The report's building (see report.h): runs the analyses over one shared span pass and resolves
// names into one plain Report. Formats nothing: report_text.cpp and report_json.cpp write it.
#include "tracerun/trace/analysis/report.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "span_consumers.h"
#include "span_pass.h"
#include "span_select.h"  // satAdd
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/format.h"  // device names

namespace tracerun::trace::analysis {

namespace {

void addOps(const TraceReader& reader, const ReportOptions& o, Report& r) {
  const core::StringId stepName = [&] {
    for (size_t i = 1; i < reader.stringCount(); ++i) {
      if (reader.str(static_cast<core::StringId>(i)) == vocab::phase::kStep)
        return static_cast<core::StringId>(i);
    }
    return core::StringId{0};
  }();
  int64_t stepSpans = 0, stepTotal = 0;
  std::map<int, int64_t> stepsPerRank;
  for (const AggregateRow& a : reader.aggregates()) {
    if (stepName != 0 && a.name == stepName && a.category == core::Category::kPhase) {
      stepsPerRank[a.rank] = satAdd(stepsPerRank[a.rank], a.count);
      stepSpans = satAdd(stepSpans, a.count);
      stepTotal = satAdd(stepTotal, a.total_ns);
    }
  }
  for (const auto& [rank, n] : stepsPerRank) {
    r.steps = static_cast<int>(std::clamp<int64_t>(n, r.steps, INT32_MAX));
  }
  r.step_mean_ns = stepSpans > 0 ? stepTotal / stepSpans : 0;
  std::vector<OpRow> rows = opTotals(reader);
  std::set<std::string> names;
  for (const OpRow& row : rows) {
    names.insert(row.name);
    r.op_spans = satAdd(r.op_spans, row.count);
  }
  r.op_names = static_cast<int64_t>(names.size());
  const size_t k = std::min(o.top_ops, rows.size());
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(k), rows.end(),
                    [](const OpRow& a, const OpRow& b) {
                      return a.self_ns != b.self_ns ? a.self_ns > b.self_ns : a.name < b.name;
                    });
  rows.resize(k);
  r.top_ops = std::move(rows);
}

ReportDevice namedDevice(const DeviceMemory& d, const TraceReader& reader) {
  ReportDevice out;
  out.memory = d;
  out.device = deviceName(d.device_type, d.device_index);  // "cpu", "cuda:0"
  for (const LiveAllocation& a : d.largest_at_peak) {
    out.largest_at_peak.push_back(
        {a.bytes, a.ts_ns, a.category, a.tag, reader.str(a.op), reader.str(a.scope)});
  }
  return out;
}

// The memory analysis' devices named and each rank's devices grouped, its primary first.
void addMemory(const TraceReader& reader, Report& r) {
  r.memory_dtypes = memoryDtypes(reader);
  std::set<int> ranks;
  for (const DeviceMemory& d : r.memory.devices) {
    r.memory_devices.push_back(namedDevice(d, reader));
    ranks.insert(d.rank);
  }
  for (int rank : ranks) {
    const DeviceMemory* primary = r.memory.primary(rank);
    ReportRankMemory m;
    m.rank = rank;
    for (size_t i = 0; i < r.memory.devices.size(); ++i) {
      const DeviceMemory& d = r.memory.devices[i];
      if (&d == primary) {
        m.primary = i;
      } else if (d.rank == rank) {
        m.others.push_back(i);
      }
    }
    r.memory_ranks.push_back(std::move(m));
  }
}

// The pipeline's critical path (pipelineCriticalPath's choice of step: the second recorded step
// when there are two or more, else the first) from the pass's actions.
PipelineCriticalPath criticalPathOf(PipelineSpans& pipeline) {
  const int replica = 0;
  const PipelineStepActions first = pipeline.stepActions(-1, replica);
  if (first.steps.empty()) return {};
  const int step = first.steps.size() > 1 ? first.steps[1] : first.steps[0];
  PipelineStepActions sa = pipeline.stepActions(step, replica);
  if (!sa.found) return {};
  PipelineCriticalPath p = criticalPathOfActions(std::move(sa.actions));
  p.step = step;
  p.replica = replica;
  return p;
}

// The span-reading analyses over one pass: every track's spans are read once, rank by rank (each
// rank's tracks in id order, as the analyses' own passes read them), and each rank's memory
// events right after its tracks, so only one rank's memory context is held at a time.
void runAnalyses(const TraceReader& reader, const ReportOptions& o, Report& r) {
  PipelineSpans pipeline(reader);
  CommSpans comm(reader);
  std::map<int, std::vector<TrackRow>> byRank;
  for (TrackRow& t : reader.tracks()) byRank[t.rank].push_back(std::move(t));
  std::set<int> memoryRanks;
  for (const RankInfo& info : r.ranks) {
    memoryRanks.insert(info.rank);
    byRank[info.rank];  // a rank without tracks still has its memory events analysed
  }
  MemoryOptions mo;
  mo.timeline_points = 0;
  mo.top_allocations = o.top_allocations;
  for (const auto& [rank, tracks] : byRank) {
    std::unique_ptr<MemorySpans> memory;
    if (memoryRanks.count(rank)) memory = std::make_unique<MemorySpans>(reader, rank);
    runSpanPass(reader, tracks, {&pipeline, &comm, memory.get()});
    if (memory) memory->analyze(mo, r.memory);
  }
  r.pipeline = pipeline.analysis();
  if (r.pipeline.present) r.critical_path = criticalPathOf(pipeline);
  r.comm = comm.analysis();
}

}  // namespace

std::vector<OpRow> opTotals(const TraceReader& reader, bool every_category) {
  struct Acc {
    int64_t count = 0, total = 0, self = 0;
    std::set<int> ranks;
  };
  std::map<std::pair<core::StringId, int>, Acc> ops;
  for (const AggregateRow& a : reader.aggregates()) {
    if (!every_category && a.category != core::Category::kOp &&
        a.category != core::Category::kBackward)
      continue;
    Acc& acc = ops[{a.name, static_cast<int>(a.category)}];
    acc.count = satAdd(acc.count, a.count);
    acc.total = satAdd(acc.total, a.total_ns);
    acc.self = satAdd(acc.self, a.self_ns);
    acc.ranks.insert(a.rank);
  }
  std::vector<OpRow> rows;
  rows.reserve(ops.size());
  for (const auto& [key, acc] : ops) {
    OpRow row;
    row.name = reader.str(key.first);
    row.category = static_cast<core::Category>(key.second);
    row.count = acc.count;
    row.total_ns = acc.total;
    row.self_ns = acc.self;
    row.ranks = static_cast<int>(acc.ranks.size());
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const OpRow& x, const OpRow& y) {
    return std::tie(x.name, x.category) < std::tie(y.name, y.category);
  });
  return rows;
}

Report buildReport(const TraceReader& reader, const ReportOptions& options) {
  Report r;
  r.path = reader.path();
  r.ranks = reader.ranks();
  r.attempts = reader.attempts();
  try {
    r.world_size = std::stoi(reader.meta("world_size"));
  } catch (const std::exception&) {
    r.world_size = static_cast<int>(r.ranks.size());
  }
  r.traced_ranks = reader.meta("traced_ranks");
  r.counts = reader.counts();
  r.stats = reader.stats();
  for (const StatRow& s : r.stats) {
    if (s.name == "dropped_events") r.dropped_events = satAdd(r.dropped_events, s.value);
    if (s.severity == Severity::kError) {
      r.lost.push_back("rank " + std::to_string(s.rank) + ": " + s.name + " = " +
                       std::to_string(s.value));
    }
  }
  addOps(reader, options, r);
  reader.inOneReadTransaction([&] { runAnalyses(reader, options, r); });
  addMemory(reader, r);
  for (const RankCommStats& s : r.comm.ranks) {
    r.comm_overlap.push_back(s.comm_ns > 0 ? double(s.overlap_ns) / double(s.comm_ns) : -1.0);
  }
  r.gpu = analyzeGpu(reader);
  return r;
}

}  // namespace tracerun::trace::analysis
