// The statistics view's tables (stats_tables.h): built once when a query's result arrives, never
// per frame. No ImGui here.
#include "views/stats_tables.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "tracerun/trace/format.h"

namespace tracerun::viewer {
namespace {

StatsCell textCell(const std::string& s) {
  return {s, s, 0, false};
}
StatsCell countCell(int64_t n) {
  return {trace::formatCount(n), std::to_string(n), static_cast<double>(n), true};
}
StatsCell nsCell(int64_t ns) {
  return {trace::formatDuration(static_cast<double>(ns)), std::to_string(ns),
          static_cast<double>(ns), true};
}
StatsCell bytesCell(int64_t b) {
  return {trace::formatBytes(static_cast<double>(b)), std::to_string(b), static_cast<double>(b),
          true};
}
// known false: "?" (no group size); hostCall: "-" (NCCL's enqueue time gives no bandwidth).
StatsCell gbpsCell(double v, bool known = true, bool hostCall = false) {
  if (hostCall) return {"-", "", -1, true};
  if (!known) return {"?", "", -1, true};
  char b[48], r[48];
  std::snprintf(b, sizeof b, "%.3f GB/s", v);
  std::snprintf(r, sizeof r, "%.6g", v);
  return {b, r, v, true};
}
StatsCell rankListCell(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : " ") + std::to_string(r);
  return textCell(s);
}

const std::string& nameOf(const std::vector<std::string>& names, core::StringId id) {
  static const std::string kNone;
  return id < names.size() ? names[id] : kNone;
}

std::vector<std::string> opColumns() {
  return {"name",   "category", "count",  "total_ns", "self_ns", "mean_ns",
          "min_ns", "max_ns",   "p50_ns", "p95_ns",   "ranks"};
}

void addOpRow(StatsTable& t, const std::string& name, core::Category c, int64_t count,
              int64_t total, int64_t self, const trace::analysis::NameStats* scan, int ranks) {
  t.rows.push_back({textCell(name), textCell(core::categoryName(c)), countCell(count),
                    nsCell(total), nsCell(self), nsCell(count > 0 ? total / count : 0),
                    scan ? nsCell(scan->min_ns) : textCell(""),
                    scan ? nsCell(scan->max_ns) : textCell(""),
                    scan ? nsCell(scan->p50_ns) : textCell(""),
                    scan ? nsCell(scan->p95_ns) : textCell(""), countCell(ranks)});
}

void sortByTotalDesc(StatsTable& t) {
  std::stable_sort(t.rows.begin(), t.rows.end(), [](const auto& a, const auto& b) {
    if (a[3].key != b[3].key) return a[3].key > b[3].key;
    return a[0].text < b[0].text;
  });
}

std::string csvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

}  // namespace

std::string StatsTable::csv(const std::vector<size_t>& order) const {
  std::string out;
  for (size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + csvField(columns[i]);
  out += "\n";
  const size_t n = order.empty() ? rows.size() : order.size();
  for (size_t k = 0; k < n; ++k) {
    const auto& row = rows[order.empty() ? k : order[k]];
    for (size_t i = 0; i < row.size(); ++i) out += (i ? "," : "") + csvField(row[i].raw);
    out += "\n";
  }
  return out;
}

WholeRunStats computeWholeRun(const trace::TraceReader& reader, const std::atomic<bool>* cancel) {
  WholeRunStats s;
  trace::analysis::ReportOptions o;
  o.top_ops = SIZE_MAX;  // every op: the table lists them all
  s.report = trace::analysis::buildReport(reader, o);
  s.totals = trace::analysis::opTotals(reader, /*every_category=*/true);
  for (const trace::AggregateRow& a : reader.aggregates()) s.spans_per_rank[a.rank] += a.count;
  s.scan = trace::analysis::rangeStats(reader, {}, cancel);
  s.gpu = trace::analysis::analyzeGpu(reader);
  s.names.reserve(reader.stringCount());
  for (size_t i = 0; i < reader.stringCount(); ++i) {
    s.names.push_back(reader.str(static_cast<core::StringId>(i)));
  }
  return s;
}

std::vector<StatsTable> wholeRunTables(const WholeRunStats& s) {
  std::vector<StatsTable> tables(3);
  // ops: the report's rule (opTotals), over every category.
  StatsTable& ops = tables[0];
  ops.name = "ops";
  ops.columns = opColumns();
  std::map<std::pair<std::string, int>, const trace::analysis::NameStats*> scanned;
  for (const auto& n : s.scan.names)
    scanned[{nameOf(s.names, n.name), static_cast<int>(n.category)}] = &n;
  for (const auto& t : s.totals) {
    auto it = scanned.find({t.name, static_cast<int>(t.category)});
    addOpRow(ops, t.name, t.category, t.count, t.total_ns, t.self_ns,
             it == scanned.end() ? nullptr : it->second, t.ranks);
  }
  sortByTotalDesc(ops);

  StatsTable& coll = tables[1];
  coll.name = "collectives";
  coll.columns = {"op",    "via",   "ranks",   "group_size", "group_source",
                  "calls", "bytes", "time_ns", "algbw_gbps", "busbw_gbps"};
  for (const auto& c : s.report.comm.collectives) {
    coll.rows.push_back({textCell(c.op), textCell(c.via), rankListCell(c.ranks),
                         c.group_size > 0 ? countCell(c.group_size) : textCell(""),
                         textCell(c.group_source), countCell(c.calls), bytesCell(c.bytes),
                         nsCell(c.time_ns), gbpsCell(c.algbw_gbps, true, c.host_call_time),
                         gbpsCell(c.busbw_gbps, c.group_size > 0, c.host_call_time)});
  }

  StatsTable& ranks = tables[2];
  ranks.name = "ranks";
  // comm_on: "CPU" (comm spans against leaf ops) or "GPU" (NCCL's kernels against the others).
  ranks.columns = {"rank",       "host",    "spans",        "comm_ns",   "compute_ns",
                   "overlap_ns", "comm_on", "recv_wait_ns", "peak_bytes"};
  std::map<int, int64_t> spans = s.spans_per_rank;
  for (const trace::RankInfo& r : s.report.ranks) {
    const trace::analysis::RankCommStats* c = nullptr;
    for (const auto& x : s.report.comm.ranks) {
      if (x.rank == r.rank) c = &x;
    }
    const auto* mem = s.report.memory.primary(r.rank);
    ranks.rows.push_back({countCell(r.rank), textCell(r.host), countCell(spans[r.rank]),
                          c ? nsCell(c->comm_ns) : textCell(""),
                          c ? nsCell(c->compute_ns) : textCell(""),
                          c ? nsCell(c->overlap_ns) : textCell(""),
                          textCell(c ? (c->gpu_kernels ? "GPU" : "CPU") : ""),
                          c ? nsCell(c->recv_wait_ns) : textCell(""),
                          mem ? bytesCell(mem->peak_bytes) : textCell("")});
  }
  if (!s.gpu.kernels.empty()) {
    StatsTable& k = tables.emplace_back();
    k.name = "kernels";
    k.columns = {"name",   "kind",   "count",  "total_ns", "mean_ns",
                 "min_ns", "p50_ns", "max_ns", "ranks"};
    for (const auto& r : s.gpu.kernels) {
      k.rows.push_back({textCell(r.name), textCell(trace::analysis::gpuKindName(r.kind)),
                        countCell(r.count), nsCell(r.total_ns), nsCell(r.mean_ns), nsCell(r.min_ns),
                        nsCell(r.p50_ns), nsCell(r.max_ns), countCell(r.ranks)});
    }
  }
  return tables;
}

std::vector<StatsTable> rangeTables(const trace::analysis::RangeStats& r,
                                    const std::vector<std::string>& names) {
  std::vector<StatsTable> tables(3);
  StatsTable& ops = tables[0];
  ops.name = "ops";
  ops.columns = opColumns();
  for (const auto& n : r.names) {
    addOpRow(ops, nameOf(names, n.name), n.category, n.count, n.total_ns, n.self_ns, &n, n.ranks);
  }
  sortByTotalDesc(ops);

  StatsTable& coll = tables[1];
  coll.name = "collectives";
  coll.columns = {"op", "calls", "bytes", "time_ns", "group_size", "algbw_gbps", "busbw_gbps"};
  for (const auto& c : r.collectives) {
    coll.rows.push_back({textCell(c.op), countCell(c.calls), bytesCell(c.bytes), nsCell(c.time_ns),
                         c.group_size > 0 ? countCell(c.group_size) : textCell(""),
                         gbpsCell(c.algbw_gbps, true, c.host_call_time),
                         gbpsCell(c.busbw_gbps, c.group_size > 0, c.host_call_time)});
  }

  StatsTable& ranks = tables[2];
  ranks.name = "ranks";
  ranks.columns = {"rank", "spans", "total_ns", "busy_ns"};
  for (const auto& x : r.ranks) {
    ranks.rows.push_back(
        {countCell(x.rank), countCell(x.spans), nsCell(x.total_ns), nsCell(x.busy_ns)});
  }
  return tables;
}

std::string statsDumpText(const std::string& scope, const std::vector<StatsTable>& tables) {
  std::string out = "scope " + scope + "\n";
  for (const StatsTable& t : tables) out += "table " + t.name + "\n" + t.csv();
  return out;
}

}  // namespace tracerun::viewer
