// The report (see report.h): gathers the analyses and prints them as tables or JSON.
//
// Sections: formatting helpers · building · text · JSON
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/format.h"  // durations, bytes, device names

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "span_select.h"
#include "tracerun/core/memory_dtype.h"
#include "tracerun/core/vocabulary.h"

namespace tracerun::trace::analysis {

namespace {

using core::MemoryCategory;

// ---------------------------------------------------------------------------------------------
// formatting helpers

std::string fmt(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char* f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  std::vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  return buf;
}

// Durations and bytes are spelled by trace/format.h, like every other command's.
std::string duration(double ns) {
  return formatDuration(ns);
}

std::string bytes(double b) {
  return formatBytes(b);
}

std::string percent(double f) {
  return fmt("%.1f%%", f * 100);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

std::string deviceName(const DeviceMemory& d) {
  return trace::deviceName(d.device_type, d.device_index);  // "cpu", "cuda:0"
}

const MemoryCategory kShown[] = {MemoryCategory::kParameter,      MemoryCategory::kGradient,
                                 MemoryCategory::kOptimizerState, MemoryCategory::kActivation,
                                 MemoryCategory::kTemporary,      MemoryCategory::kOther};

// ---------------------------------------------------------------------------------------------
// building

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
  try {
    r.world_size = std::stoi(reader.meta("world_size"));
  } catch (const std::exception&) {
    r.world_size = static_cast<int>(r.ranks.size());
  }
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
  r.pipeline = analyzePipeline(reader);
  MemoryOptions mo;
  mo.timeline_points = 0;
  mo.top_allocations = options.top_allocations;
  r.memory = analyzeMemory(reader, mo);
  r.comm = analyzeComm(reader);
  return r;
}

// ---------------------------------------------------------------------------------------------
// text

std::string reportText(const Report& r, const TraceReader& reader) {
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line(fmt("%s: %zu rank%s (world size %d), %d step%s (mean %s), %lld spans, %lld memory events",
           r.path.c_str(), r.ranks.size(), r.ranks.size() == 1 ? "" : "s", r.world_size, r.steps,
           r.steps == 1 ? "" : "s", duration(double(r.step_mean_ns)).c_str(),
           static_cast<long long>(r.counts.spans), static_cast<long long>(r.counts.memory)));

  // pipeline
  const PipelineAnalysis& p = r.pipeline;
  line("");
  if (!p.present) {
    line("pipeline: none (no forward/backward phases with more than one stage)");
  } else {
    line(fmt("pipeline: %s, p=%d stages, m=%d microbatches, v=%d, %zu replica%s, %d step%s",
             p.schedule.c_str(), p.stages, p.microbatches, p.virtual_stages, p.replicas.size(),
             p.replicas.size() == 1 ? "" : "s", p.steps, p.steps == 1 ? "" : "s"));
    line(fmt("  bubble: measured %s, closed form %s, modeled %s (median over steps)",
             percent(p.bubble_measured).c_str(), percent(p.bubble_theory).c_str(),
             percent(p.bubble_modeled).c_str()));
    if (!p.bubble_formula.empty()) line("  closed form: " + p.bubble_formula);
    line(fmt("  %-5s %-10s %12s %12s %12s %12s %12s %12s %7s %8s", "stage", "ranks", "window",
             "forward", "backward", "send", "recv wait", "idle", "bubble", "modeled"));
    for (const PipelineStage& s : p.per_stage) {
      line(fmt("  %-5d %-10s %12s %12s %12s %12s %12s %12s %7s %8s", s.stage,
               rankList(s.ranks).c_str(), duration(s.window_ns).c_str(),
               duration(s.forward_ns).c_str(), duration(s.backward_ns).c_str(),
               duration(s.send_ns).c_str(), duration(s.recv_wait_ns).c_str(),
               duration(s.idle_ns).c_str(), percent(s.bubble).c_str(),
               percent(s.modeled_bubble).c_str()));
    }
    line("  (per step and stage, averaged over steps and replicas)");
    for (const std::string& n : p.notes) line("  note: " + n);
  }

  // memory
  line("");
  line("memory: live bytes by category at each rank's peak");
  if (const auto dtypes = memoryDtypes(reader); !dtypes.empty()) {
    std::string named;
    for (const auto& [category, dtype] : dtypes) {
      named += (named.empty() ? "" : ", ") + category + " " + dtype;
    }
    line("  dtypes, as the program named them: " + named);
  }
  line(fmt("  %-4s %-7s %10s %10s %10s %10s %10s %10s %10s", "rank", "device", "peak", "parameter",
           "gradient", "optimizer", "activation", "temporary", "other"));
  for (const DeviceMemory& d : r.memory.devices) {
    std::string row =
        fmt("  %-4d %-7s %10s", d.rank, deviceName(d).c_str(), bytes(double(d.peak_bytes)).c_str());
    for (MemoryCategory c : kShown) row += fmt(" %10s", bytes(double(at(d.at_peak, c))).c_str());
    line(row);
  }
  for (int rank : {0}) {
    const DeviceMemory* d = r.memory.primary(rank);
    if (d == nullptr || d->largest_at_peak.empty()) continue;
    line(fmt("  largest live at rank %d's peak (%s, at %s):", rank, deviceName(*d).c_str(),
             duration(double(d->peak_ts_ns)).c_str()));
    for (const LiveAllocation& a : d->largest_at_peak) {
      line(fmt("    %10s  %-16s %-28s %s", bytes(double(a.bytes)).c_str(),
               core::memoryCategoryName(a.category), reader.str(a.op).c_str(),
               reader.str(a.scope).c_str()));
    }
  }
  if (r.memory.devices.empty()) line("  (no memory events)");

  // ops
  line("");
  line(fmt("ops: %lld spans of %lld ops and autograd nodes; top %zu by self time (all ranks)",
           static_cast<long long>(r.op_spans), static_cast<long long>(r.op_names),
           r.top_ops.size()));
  line(fmt("  %-44s %-8s %9s %12s %12s", "name", "kind", "count", "total", "self"));
  for (const OpRow& o : r.top_ops) {
    std::string name = o.name.size() > 44 ? o.name.substr(0, 41) + "..." : o.name;
    line(fmt("  %-44s %-8s %9lld %12s %12s", name.c_str(), core::categoryName(o.category),
             static_cast<long long>(o.count), duration(double(o.total_ns)).c_str(),
             duration(double(o.self_ns)).c_str()));
  }

  // comm
  line("");
  line("communication: collectives (bus bandwidth with nccl-tests' factors)");
  if (r.comm.collectives.empty()) line("  (none)");
  for (const CollectiveStats& c : r.comm.collectives) {
    const std::string group = c.group_size > 0
                                  ? "[" + rankList(c.ranks) + "] (" + c.group_source + ")"
                                  : "? (rank " + rankList(c.ranks) + ")";
    line(fmt("  %-14s %-22s calls %6lld  %10s  %12s  algbw %8.3f GB/s  busbw %s", c.op.c_str(),
             group.c_str(), static_cast<long long>(c.calls), bytes(double(c.bytes)).c_str(),
             duration(double(c.time_ns)).c_str(), c.algbw_gbps,
             c.group_size > 0 ? fmt("%8.3f GB/s", c.busbw_gbps).c_str() : "       -"));
    if (!c.via.empty()) line("      via " + c.via);
  }
  if (!r.comm.p2p.empty()) {
    line("  point-to-point (receive time split into waiting for the send and transferring)");
    line(fmt("  %-5s %-5s %-9s %8s %10s %12s %12s %12s", "src", "dst", "kind", "messages", "bytes",
             "recv", "wait", "transfer"));
    for (const PointToPointStats& s : r.comm.p2p) {
      line(fmt("  %-5s %-5s %-9s %8lld %10s %12s %12s %12s",
               s.src >= 0 ? std::to_string(s.src).c_str() : "?",
               s.dst >= 0 ? std::to_string(s.dst).c_str() : "?", s.kind.c_str(),
               static_cast<long long>(s.messages), bytes(double(s.bytes)).c_str(),
               duration(double(s.recv_ns)).c_str(), duration(double(s.wait_ns)).c_str(),
               duration(double(s.transfer_ns)).c_str()));
    }
  }
  line("  per rank: communication overlapped with computation (leaf ops)");
  line(fmt("  %-4s %12s %12s %12s %8s", "rank", "comm", "compute", "overlap", "of comm"));
  for (const RankCommStats& s : r.comm.ranks) {
    line(fmt("  %-4d %12s %12s %12s %8s", s.rank, duration(double(s.comm_ns)).c_str(),
             duration(double(s.compute_ns)).c_str(), duration(double(s.overlap_ns)).c_str(),
             s.comm_ns > 0 ? percent(double(s.overlap_ns) / double(s.comm_ns)).c_str() : "-"));
  }

  // stats
  line("");
  line(fmt("stats: dropped events %lld", static_cast<long long>(r.dropped_events)));
  for (const StatRow& s : r.stats) {
    if (s.severity == Severity::kInfo) continue;
    line(fmt("  rank %d %s = %lld (%s)", s.rank, s.name.c_str(), static_cast<long long>(s.value),
             severityName(s.severity)));
  }
  if (!r.lost.empty()) line("  the capture lost data: this report is incomplete");
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON

namespace {

using nlohmann::ordered_json;

ordered_json categories(const CategoryBytes& b) {
  ordered_json j = ordered_json::object();
  for (MemoryCategory c : kShown) j[core::memoryCategoryName(c)] = at(b, c);
  return j;
}

ordered_json deviceJson(const DeviceMemory& d, const TraceReader& reader) {
  ordered_json j;
  j["rank"] = d.rank;
  j["device"] = deviceName(d);
  j["peak_bytes"] = d.peak_bytes;
  j["peak_ts_ns"] = d.peak_ts_ns;
  j["by_category"] = categories(d.at_peak);
  j["category_peaks"] = categories(d.category_peaks);
  j["allocated"] = categories(d.allocated);
  j["live_at_end"] = d.live_at_end;
  j["allocations"] = d.allocations;
  j["frees"] = d.frees;
  j["unmatched_frees"] = d.unmatched_frees;
  j["inferred_activations"] = d.inferred_activations;
  j["inferred_temporaries"] = d.inferred_temporaries;
  j["largest_at_peak"] = ordered_json::array();
  for (const LiveAllocation& a : d.largest_at_peak) {
    j["largest_at_peak"].push_back({{"bytes", a.bytes},
                                    {"category", core::memoryCategoryName(a.category)},
                                    {"tag", core::memoryCategoryName(a.tag)},
                                    {"op", reader.str(a.op)},
                                    {"scope", reader.str(a.scope)},
                                    {"ts_ns", a.ts_ns}});
  }
  return j;
}

}  // namespace

std::string reportJson(const Report& r, const TraceReader& reader, int indent) {
  ordered_json j;
  j["path"] = r.path;
  j["ranks"] = r.ranks.size();
  j["world_size"] = r.world_size;
  j["steps"] = r.steps;
  j["step_mean_ns"] = r.step_mean_ns;
  j["events"] = {{"spans", r.counts.spans},       {"args", r.counts.args},
                 {"instants", r.counts.instants}, {"counters", r.counts.counters},
                 {"memory", r.counts.memory},     {"flows", r.counts.flows}};

  const PipelineAnalysis& p = r.pipeline;
  if (!p.present) {
    j["pipeline"] = nullptr;
  } else {
    ordered_json pj;
    pj["schedule"] = p.schedule;
    pj["stages"] = p.stages;
    pj["microbatches"] = p.microbatches;
    pj["virtual"] = p.virtual_stages;
    pj["bubble_measured"] = p.bubble_measured;
    pj["bubble_theory"] = p.bubble_theory;
    pj["bubble_formula"] = p.bubble_formula;
    pj["bubble_modeled"] = p.bubble_modeled;
    pj["steps"] = p.steps;
    pj["replicas"] = p.replicas;
    pj["per_stage"] = ordered_json::array();
    for (const PipelineStage& s : p.per_stage) {
      pj["per_stage"].push_back({{"stage", s.stage},
                                 {"ranks", s.ranks},
                                 {"window_ns", s.window_ns},
                                 {"forward_ns", s.forward_ns},
                                 {"backward_ns", s.backward_ns},
                                 {"send_ns", s.send_ns},
                                 {"recv_wait_ns", s.recv_wait_ns},
                                 {"idle_ns", s.idle_ns},
                                 {"bubble", s.bubble},
                                 {"bubble_modeled", s.modeled_bubble}});
    }
    pj["per_step"] = ordered_json::array();
    for (const PipelineStep& s : p.per_step) {
      pj["per_step"].push_back({{"step", s.step},
                                {"replica", s.replica},
                                {"start_ns", s.start_ns},
                                {"end_ns", s.end_ns},
                                {"bubble", s.bubble},
                                {"bubble_modeled", s.modeled_bubble}});
    }
    pj["unmatched_recvs"] = p.unmatched_recvs;
    pj["notes"] = p.notes;
    j["pipeline"] = pj;
  }

  ordered_json mj;
  mj["per_rank"] = ordered_json::array();
  std::set<int> ranks;
  for (const DeviceMemory& d : r.memory.devices) ranks.insert(d.rank);
  for (int rank : ranks) {
    const DeviceMemory* primary = r.memory.primary(rank);
    ordered_json pr = deviceJson(*primary, reader);
    pr["devices"] = ordered_json::array();
    for (const DeviceMemory& d : r.memory.devices) {
      if (d.rank == rank && &d != primary) pr["devices"].push_back(deviceJson(d, reader));
    }
    mj["per_rank"].push_back(pr);
  }
  // {"parameter": "bf16", ...}: only when the program named dtypes (memoryDtypes).
  if (const auto dtypes = memoryDtypes(reader); !dtypes.empty()) mj["dtypes"] = dtypes;
  j["memory"] = mj;

  ordered_json oj;
  oj["count"] = r.op_spans;
  oj["distinct"] = r.op_names;
  oj["top"] = ordered_json::array();
  for (const OpRow& o : r.top_ops) {
    oj["top"].push_back({{"name", o.name},
                         {"category", core::categoryName(o.category)},
                         {"count", o.count},
                         {"total_ns", o.total_ns},
                         {"self_ns", o.self_ns},
                         {"ranks", o.ranks}});
  }
  j["ops"] = oj;

  ordered_json cj;
  cj["collectives"] = ordered_json::array();
  for (const CollectiveStats& c : r.comm.collectives) {
    ordered_json x = {{"op", c.op},
                      {"via", c.via},
                      {"ranks", c.ranks},
                      {"group_size", c.group_size > 0 ? ordered_json(c.group_size) : nullptr},
                      {"group_source", c.group_source},
                      {"calls", c.calls},
                      {"bytes", c.bytes},
                      {"time_ns", c.time_ns},
                      {"algbw_gbps", c.algbw_gbps}};
    x["busbw_gbps"] = c.group_size > 0 ? ordered_json(c.busbw_gbps) : ordered_json(nullptr);
    cj["collectives"].push_back(x);
  }
  cj["p2p"] = ordered_json::array();
  for (const PointToPointStats& s : r.comm.p2p) {
    cj["p2p"].push_back({{"src", s.src >= 0 ? ordered_json(s.src) : nullptr},
                         {"dst", s.dst >= 0 ? ordered_json(s.dst) : nullptr},
                         {"kind", s.kind},
                         {"messages", s.messages},
                         {"bytes", s.bytes},
                         {"recv_ns", s.recv_ns},
                         {"wait_ns", s.wait_ns},
                         {"transfer_ns", s.transfer_ns},
                         {"matched", s.matched}});
  }
  cj["per_rank"] = ordered_json::array();
  for (const RankCommStats& s : r.comm.ranks) {
    cj["per_rank"].push_back({{"rank", s.rank},
                              {"comm_ns", s.comm_ns},
                              {"compute_ns", s.compute_ns},
                              {"overlap_ns", s.overlap_ns},
                              {"recv_ns", s.recv_ns},
                              {"recv_wait_ns", s.recv_wait_ns},
                              {"recv_transfer_ns", s.recv_transfer_ns},
                              {"unmatched_recvs", s.unmatched_recvs}});
  }
  j["comm"] = cj;

  ordered_json sj;
  sj["dropped_events"] = r.dropped_events;
  sj["lost_data"] = !r.lost.empty();
  sj["errors"] = r.lost;
  sj["rows"] = ordered_json::array();
  for (const StatRow& s : r.stats) {
    sj["rows"].push_back({{"rank", s.rank},
                          {"name", s.name},
                          {"value", s.value},
                          {"severity", severityName(s.severity)}});
  }
  j["stats"] = sj;
  return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace tracerun::trace::analysis
