// The statistics view (issue 17, point 5): range statistics against a brute-force scan of the
// reader's spans on a generated trace; the tables' CSV text; and, on a traced gpttrain run, the
// view's --dump-view tables against `tracerun report --json` (and a brute-force scan for the
// columns the report lacks), with a screenshot that is not blank.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "e2e_common.h"
#include "fixture_trace.h"
#include "temp_dir.h"
#include "tracerun/trace/analysis/range_stats.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"
#include "views/stats_tables.h"

using namespace tracerun;
using namespace tracerun::viewertest;
using nlohmann::json;
namespace ta = tracerun::trace::analysis;

namespace {

struct Brute {
  int64_t count = 0, total = 0, self = 0, min = 0, max = 0, p50 = 0, p95 = 0;
  std::set<int> ranks;
};
using Key = std::pair<core::StringId, int>;

int64_t nearest(std::vector<int64_t> v, double p) {
  std::sort(v.begin(), v.end());
  const auto k = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::max<size_t>(k, 1) - 1];
}

// The definitions of range_stats.h, the slow way: every span of the chosen ranks from
// forEachSpan, children found by containment at depth + 1 on the same track.
struct BruteResult {
  std::map<Key, Brute> names;
  std::map<int, ta::RankRangeStats> ranks;
  int64_t spans = 0;
};
// withSelf = false skips the (quadratic) children sum: self stays 0.
BruteResult bruteForce(const trace::TraceReader& reader, const ta::RangeQuery& q,
                       bool withSelf = true) {
  BruteResult out;
  std::map<Key, std::vector<int64_t>> durs;
  for (const auto& t : reader.tracks()) {
    if (!q.ranks.empty() && std::count(q.ranks.begin(), q.ranks.end(), t.rank) == 0) continue;
    std::vector<trace::SpanRow> all;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) { all.push_back(s); });
    auto& rs = out.ranks[t.rank];
    rs.rank = t.rank;
    for (const auto& s : all) {
      if (s.start_ns < q.t0 || s.end_ns() > q.t1) continue;
      int64_t children = 0;
      for (const auto& c : all) {
        if (withSelf && c.depth == s.depth + 1 && c.start_ns >= s.start_ns &&
            c.end_ns() <= s.end_ns()) {
          children += c.dur_ns;
        }
      }
      Brute& b = out.names[{s.name, static_cast<int>(s.category)}];
      ++b.count;
      b.total += s.dur_ns;
      b.self += std::max<int64_t>(0, s.dur_ns - children);
      b.ranks.insert(t.rank);
      durs[{s.name, static_cast<int>(s.category)}].push_back(s.dur_ns);
      ++out.spans;
      ++rs.spans;
      rs.total_ns += s.dur_ns;
      if (s.depth == 0) rs.busy_ns += s.dur_ns;
    }
  }
  for (auto& [k, v] : durs) {
    Brute& b = out.names[k];
    b.min = *std::min_element(v.begin(), v.end());
    b.max = *std::max_element(v.begin(), v.end());
    b.p50 = nearest(v, 0.50);
    b.p95 = nearest(v, 0.95);
  }
  return out;
}

void checkEqual(const ta::RangeStats& got, const BruteResult& want) {
  CHECK(got.spans == want.spans);
  REQUIRE(got.names.size() == want.names.size());
  for (const auto& n : got.names) {
    const auto it = want.names.find({n.name, static_cast<int>(n.category)});
    REQUIRE(it != want.names.end());
    const Brute& b = it->second;
    INFO("name " << n.name << " category " << static_cast<int>(n.category));
    CHECK(n.count == b.count);
    CHECK(n.total_ns == b.total);
    CHECK(n.self_ns == b.self);
    CHECK(n.min_ns == b.min);
    CHECK(n.max_ns == b.max);
    CHECK(n.p50_ns == b.p50);
    CHECK(n.p95_ns == b.p95);
    CHECK(n.ranks == static_cast<int>(b.ranks.size()));
  }
  for (size_t i = 1; i < got.names.size(); ++i) {
    CHECK(got.names[i - 1].total_ns >= got.names[i].total_ns);
  }
  REQUIRE(got.ranks.size() == want.ranks.size());
  for (const auto& r : got.ranks) {
    const auto& w = want.ranks.at(r.rank);
    CHECK(r.spans == w.spans);
    CHECK(r.total_ns == w.total_ns);
    CHECK(r.busy_ns == w.busy_ns);
  }
}

// CSV as the tables write it, one vector of fields per line (quotes handled).
std::vector<std::vector<std::string>> parseCsv(const std::string& text) {
  std::vector<std::vector<std::string>> lines(1);
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      lines.back().push_back(field);
      field.clear();
    } else if (c == '\n') {
      lines.back().push_back(field);
      field.clear();
      lines.emplace_back();
    } else {
      field += c;
    }
  }
  if (lines.back().empty()) lines.pop_back();
  return lines;
}

// --dump-view's text: "scope S" lines, then per table "table NAME" and its CSV. Returns
// scope -> table -> rows (header first).
using Dump = std::map<std::string, std::map<std::string, std::vector<std::vector<std::string>>>>;
Dump parseDump(const std::string& text) {
  Dump d;
  std::istringstream in(text);
  std::string line, scope, table, csv;
  auto flush = [&] {
    if (!table.empty()) d[scope][table] = parseCsv(csv);
    csv.clear();
  };
  while (std::getline(in, line)) {
    if (line.rfind("scope ", 0) == 0) {
      flush();
      table.clear();
      scope = line.substr(6);
    } else if (line.rfind("table ", 0) == 0) {
      flush();
      table = line.substr(6);
    } else {
      csv += line + "\n";
    }
  }
  flush();
  return d;
}

// Rows of a table as maps column -> value.
std::vector<std::map<std::string, std::string>> records(
    const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::map<std::string, std::string>> out;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::map<std::string, std::string> m;
    for (size_t c = 0; c < rows[0].size() && c < rows[i].size(); ++c) m[rows[0][c]] = rows[i][c];
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

TEST_CASE("range statistics equal a brute-force scan of the reader's spans", "[viewer][stats]") {
  testing::TempDir dir("stats-range");
  const auto g = makeFixture(dir.file("fx"), 3, 3, 120);
  const auto reader = trace::TraceReader::open(g.merged);
  const auto [a, b] = reader.timeRange();
  const int64_t len = b - a;

  std::vector<ta::RangeQuery> queries;
  queries.push_back({});                                          // everything
  queries.push_back({a + len / 4, a + len / 2, {0, 2}});          // a window over two ranks
  queries.push_back({a + len / 3, a + len / 3 + len / 50, {1}});  // a narrow one on one rank
  queries.push_back({a + len / 2, a + len / 2 - 1, {}});          // empty (t1 < t0)
  for (const auto& q : queries) {
    INFO("range [" << q.t0 << ", " << q.t1 << "] over " << q.ranks.size() << " ranks");
    const BruteResult want = bruteForce(reader, q);
    checkEqual(ta::rangeStats(reader, q), want);
    checkEqual(ta::rangeStatsParallel(g.merged, q, 3), want);
  }
  // The window queries found something to compare.
  CHECK(bruteForce(reader, queries[1]).spans > 100);

  // Over the whole run, self time by nesting equals the writer's self time by parent id.
  const auto all = ta::rangeStats(reader, {});
  std::map<Key, int64_t> aggSelf, aggCount;
  for (const auto& r : reader.aggregates()) {
    aggSelf[{r.name, static_cast<int>(r.category)}] += r.self_ns;
    aggCount[{r.name, static_cast<int>(r.category)}] += r.count;
  }
  REQUIRE(all.names.size() == aggSelf.size());
  for (const auto& n : all.names) {
    CHECK(n.self_ns == aggSelf[{n.name, static_cast<int>(n.category)}]);
    CHECK(n.count == aggCount[{n.name, static_cast<int>(n.category)}]);
  }
}

TEST_CASE("the statistics tables' CSV quotes names and keeps the shown order", "[viewer][stats]") {
  viewer::StatsTable t;
  t.name = "ops";
  t.columns = {"name", "count"};
  t.rows.push_back({{"aten::mm", "aten::mm", 0, false}, {"3", "3", 3, true}});
  t.rows.push_back({{"f(a, \"b\")", "f(a, \"b\")", 0, false}, {"1,000", "1000", 1000, true}});
  CHECK(t.csv() == "name,count\naten::mm,3\n\"f(a, \"\"b\"\")\",1000\n");
  CHECK(t.csv({1, 0}) == "name,count\n\"f(a, \"\"b\"\")\",1000\naten::mm,3\n");

  // The range tables' CSV: raw numbers (ns), one row per name, the stats' own values.
  ta::RangeStats r;
  ta::NameStats n;
  n.name = 1;
  n.category = core::Category::kBackward;
  n.count = 4;
  n.total_ns = 4000;
  n.self_ns = 2500;
  n.min_ns = 700;
  n.max_ns = 1500;
  n.p50_ns = 900;
  n.p95_ns = 1500;
  n.ranks = 2;
  r.names.push_back(n);
  r.ranks.push_back({3, 4, 4000, 1200});
  ta::RangeCollective c;
  c.op = "all_reduce";
  c.calls = 2;
  c.bytes = 4096;
  c.time_ns = 2048;
  c.group_size = 2;
  c.algbw_gbps = 2;
  c.busbw_gbps = 2;
  r.collectives.push_back(c);
  const auto tables = viewer::rangeTables(r, {"", "MulBackward0"});
  REQUIRE(tables.size() == 3);
  CHECK(tables[0].csv() ==
        "name,category,count,total_ns,self_ns,mean_ns,min_ns,max_ns,p50_ns,p95_ns,ranks\n"
        "MulBackward0,backward,4,4000,2500,1000,700,1500,900,1500,2\n");
  CHECK(tables[1].csv() ==
        "op,calls,bytes,time_ns,group_size,algbw_gbps,busbw_gbps\nall_reduce,2,4096,2048,2,2,2\n");
  CHECK(tables[2].csv() == "rank,spans,total_ns,busy_ns\n3,4,4000,1200\n");
  CHECK(viewer::statsDumpText("whole", tables).rfind("scope whole\ntable ops\nname,", 0) == 0);
}

TEST_CASE("the statistics view's CSV files hold the tables' numbers, in the shown order",
          "[viewer][stats][screenshot]") {
  testing::TempDir dir("stats-csv");
  const auto g = makeFixture(dir.file("fx"), 2, 2, 40);
  const std::string dump = dir.file("view.txt");
  runTraceviewOk({g.merged, "--view", "stats", "--view-option", "export-csv", "--screenshot",
                  dir.file("stats.png"), "--dump-view", dump},
                 dir.path.string());
  const Dump d = parseDump(e2e::readFile(dump));
  REQUIRE(d.count("whole"));
  // The files beside the trace, as the Export CSV buttons name them.
  const std::filesystem::path trace(g.merged);
  for (const char* name : {"ops", "collectives", "ranks"}) {
    INFO(name);
    const std::string file =
        (trace.parent_path() / (trace.stem().string() + ".stats-whole-" + name + ".csv")).string();
    REQUIRE(std::filesystem::exists(file));
    const auto rows = parseCsv(e2e::readFile(file));
    const auto& table = d.at("whole").at(name);
    REQUIRE(!rows.empty());
    CHECK(rows.front() == table.front());  // the header
    // The same rows (the file in the order shown, the dump in the table's own order).
    std::multiset<std::vector<std::string>> a(rows.begin() + 1, rows.end());
    std::multiset<std::vector<std::string>> b(table.begin() + 1, table.end());
    CHECK(a == b);
  }
  // The ops file: sorted as the table opens (total time, largest first), each row's numbers those
  // of a brute-force scan of the trace's spans.
  const std::string opsFile =
      (trace.parent_path() / (trace.stem().string() + ".stats-whole-ops.csv")).string();
  const auto ops = records(parseCsv(e2e::readFile(opsFile)));
  REQUIRE(ops.size() > 5);
  for (size_t i = 1; i < ops.size(); ++i) {
    CHECK(std::stoll(ops[i - 1].at("total_ns")) >= std::stoll(ops[i].at("total_ns")));
  }
  const auto reader = trace::TraceReader::open(g.merged);
  const BruteResult want = bruteForce(reader, {}, false);
  REQUIRE(ops.size() == want.names.size());
  for (const auto& row : ops) {
    INFO(row.at("name") << " " << row.at("category"));
    const Brute* b = nullptr;
    for (const auto& [key, x] : want.names) {
      if (reader.str(key.first) == row.at("name") &&
          core::categoryName(static_cast<core::Category>(key.second)) == row.at("category"))
        b = &x;
    }
    REQUIRE(b != nullptr);
    CHECK(std::stoll(row.at("count")) == b->count);
    CHECK(std::stoll(row.at("total_ns")) == b->total);
    CHECK(std::stoll(row.at("min_ns")) == b->min);
    CHECK(std::stoll(row.at("max_ns")) == b->max);
    CHECK(std::stoll(row.at("p50_ns")) == b->p50);
    CHECK(std::stoll(row.at("p95_ns")) == b->p95);
  }
}

TEST_CASE("a script: Shift+drag over one rank fills the statistics for that range",
          "[viewer][stats][script]") {
  testing::TempDir dir("stats-window");
  const auto g = makeFixture(dir.file("fx"), 2, 2, 60);
  const auto reader = trace::TraceReader::open(g.merged);
  const std::string layoutFile = dir.file("layout.txt"), dumpFile = dir.file("view.txt");
  const std::vector<std::string> args{g.merged, "--size", "1400x900"};
  std::vector<std::string> shot = args;
  shot.insert(shot.end(), {"--screenshot", dir.file("first.png"), "--dump-layout", layoutFile});
  runTraceviewOk(shot, dir.path.string());
  const Layout l = readLayout(layoutFile);

  // Shift+drag from 30% to 60% of the time area, inside rank 1's first thread row only.
  int64_t track = 0;
  for (const auto& t : reader.tracks())
    if (t.rank == 1 && t.kind == core::TrackKind::kThread && track == 0) track = t.id;
  REQUIRE(l.rows.count(track));
  const int y = static_cast<int>(l.rows.at(track).y + 3);
  REQUIRE(y < 850);  // on screen (1400x900)
  const int x0 = static_cast<int>(l.area_x + 0.3 * l.area_w);
  const int x1 = static_cast<int>(l.area_x + 0.6 * l.area_w);
  // Then the Statistics tab, where the layout dump puts its button (--script: no xdotool).
  REQUIRE(l.tabs.count("stats"));
  const Layout::Tab& tab = l.tabs.at("stats");
  const auto xy = [](double x, double yy) {
    return std::to_string(static_cast<int>(x)) + " " + std::to_string(static_cast<int>(yy));
  };
  const auto r = runScript(
      args,
      {"0 move " + xy(x0, y), "+1 keydown shift", "+1 drag " + xy(x0, y) + " " + xy(x1, y) + " 6",
       "+1 keyup shift", "+1 move " + xy(tab.x + tab.w / 2, tab.y + tab.h / 2), "+1 click",
       "+1 settle", "+0 dump-view " + dumpFile},
      dir.path.string(), "stats-script.txt");
  INFO(r.out);
  REQUIRE(r.out.find("range selected") != std::string::npos);
  REQUIRE(r.out.find("stats range") != std::string::npos);

  const Dump dump = parseDump(e2e::readFile(dumpFile));
  std::string scope;
  for (const auto& [k, v] : dump)
    if (k.rfind("range ", 0) == 0) scope = k;
  REQUIRE(!scope.empty());
  long long t0 = 0, t1 = 0;
  char ranks[32] = {};
  REQUIRE(std::sscanf(scope.c_str(), "range %lld %lld ranks %31s", &t0, &t1, ranks) == 3);
  CHECK(std::string(ranks) == "1");
  const double nsPerPx = (l.t1 - l.t0) / l.area_w;
  CHECK(std::abs(static_cast<double>(t0) - (l.t0 + (x0 - l.area_x) * nsPerPx)) < 3 * nsPerPx);
  CHECK(std::abs(static_cast<double>(t1) - (l.t0 + (x1 - l.area_x) * nsPerPx)) < 3 * nsPerPx);

  // The range's ops table is the brute-force scan of that range over rank 1.
  const BruteResult want = bruteForce(reader, {t0, t1, {1}});
  const auto ops = records(dump.at(scope).at("ops"));
  REQUIRE(ops.size() == want.names.size());
  REQUIRE(!ops.empty());
  for (const auto& row : ops) {
    bool found = false;
    for (const auto& [key, b] : want.names) {
      if (reader.str(key.first) != row.at("name") ||
          core::categoryName(static_cast<core::Category>(key.second)) != row.at("category"))
        continue;
      found = true;
      INFO(row.at("name"));
      CHECK(std::stoll(row.at("count")) == b.count);
      CHECK(std::stoll(row.at("total_ns")) == b.total);
      CHECK(std::stoll(row.at("self_ns")) == b.self);
      CHECK(std::stoll(row.at("min_ns")) == b.min);
      CHECK(std::stoll(row.at("max_ns")) == b.max);
      CHECK(std::stoll(row.at("p50_ns")) == b.p50);
      CHECK(std::stoll(row.at("p95_ns")) == b.p95);
    }
    CHECK(found);
  }
  const auto rk = records(dump.at(scope).at("ranks"));
  REQUIRE(rk.size() == 1);
  CHECK(rk[0].at("rank") == "1");
  CHECK(std::stoll(rk[0].at("spans")) == want.spans);
}

#ifdef GPTTRAIN_BIN

TEST_CASE("the statistics view shows the report's numbers on a traced gpttrain run",
          "[viewer][stats][screenshot]") {
  testing::TempDir dir("stats-gpt");
  const std::string db = dir.file("tp2.db");
  traceGpttrain(db, {"--nproc-per-node", "2"},
                {"--tp", "2", "--layers", "2", "--hidden", "64", "--heads", "4", "--seq-len", "32",
                 "--global-batch", "4", "--micro-batch-size", "4", "--steps", "2", "--quiet"});
  const json j = reportJson(db, {"--top", "1000000"});

  const std::string png = dir.file("stats.png"), dump = dir.file("stats.txt");
  runTraceviewOk(
      {db, "--view", "stats", "--screenshot", png, "--size", "1400x900", "--dump-view", dump},
      dir.path.string());
  const Dump d = parseDump(e2e::readFile(dump));
  REQUIRE(d.count("whole"));
  const auto ops = records(d.at("whole").at("ops"));
  const auto coll = records(d.at("whole").at("collectives"));
  const auto ranks = records(d.at("whole").at("ranks"));

  // ops: every op and autograd node of the report, with its count, total, self and ranks.
  std::map<std::pair<std::string, std::string>, std::map<std::string, std::string>> byKey;
  for (const auto& o : ops) byKey[{o.at("name"), o.at("category")}] = o;
  const json& top = j["ops"]["top"];
  REQUIRE(top.size() > 10);
  int64_t opRows = 0;
  for (const auto& o : ops) opRows += o.at("category") == "op" || o.at("category") == "backward";
  CHECK(opRows == static_cast<int64_t>(top.size()));
  for (const json& t : top) {
    const auto it = byKey.find({t["name"].get<std::string>(), t["category"].get<std::string>()});
    REQUIRE(it != byKey.end());
    INFO(t.dump());
    CHECK(std::stoll(it->second.at("count")) == t["count"].get<int64_t>());
    CHECK(std::stoll(it->second.at("total_ns")) == t["total_ns"].get<int64_t>());
    CHECK(std::stoll(it->second.at("self_ns")) == t["self_ns"].get<int64_t>());
    CHECK(std::stoi(it->second.at("ranks")) == t["ranks"].get<int>());
  }

  // The columns the report lacks (min, max, p50, p95) against the brute-force scan.
  const auto reader = trace::TraceReader::open(db);
  const BruteResult brute = bruteForce(reader, {}, false);
  for (const auto& [key, b] : brute.names) {
    const auto it = byKey.find(
        {reader.str(key.first), core::categoryName(static_cast<core::Category>(key.second))});
    REQUIRE(it != byKey.end());
    CHECK(std::stoll(it->second.at("min_ns")) == b.min);
    CHECK(std::stoll(it->second.at("max_ns")) == b.max);
    CHECK(std::stoll(it->second.at("p50_ns")) == b.p50);
    CHECK(std::stoll(it->second.at("p95_ns")) == b.p95);
  }

  // collectives: the report's comm analysis, row for row.
  const json& jc = j["comm"]["collectives"];
  REQUIRE(jc.size() > 0);
  REQUIRE(coll.size() == jc.size());
  for (size_t i = 0; i < jc.size(); ++i) {
    INFO(jc[i].dump());
    CHECK(coll[i].at("op") == jc[i]["op"].get<std::string>());
    CHECK(coll[i].at("via") == jc[i]["via"].get<std::string>());
    CHECK(std::stoll(coll[i].at("calls")) == jc[i]["calls"].get<int64_t>());
    CHECK(std::stoll(coll[i].at("bytes")) == jc[i]["bytes"].get<int64_t>());
    CHECK(std::stoll(coll[i].at("time_ns")) == jc[i]["time_ns"].get<int64_t>());
    CHECK(std::stod(coll[i].at("algbw_gbps")) == Approx(jc[i]["algbw_gbps"].get<double>()));
    if (!jc[i]["busbw_gbps"].is_null()) {
      CHECK(std::stod(coll[i].at("busbw_gbps")) == Approx(jc[i]["busbw_gbps"].get<double>()));
    }
  }

  // ranks: the report's per-rank communication and memory peak.
  const json& jr = j["comm"]["per_rank"];
  REQUIRE(ranks.size() == 2);
  for (const json& x : jr) {
    const auto& row = ranks.at(x["rank"].get<size_t>());
    CHECK(std::stoll(row.at("comm_ns")) == x["comm_ns"].get<int64_t>());
    CHECK(std::stoll(row.at("compute_ns")) == x["compute_ns"].get<int64_t>());
    CHECK(std::stoll(row.at("overlap_ns")) == x["overlap_ns"].get<int64_t>());
    CHECK(std::stoll(row.at("recv_wait_ns")) == x["recv_wait_ns"].get<int64_t>());
    CHECK(row.at("comm_on") == (x["measured_on"] == "gpu kernels" ? "GPU" : "CPU"));
  }
  for (const json& m : j["memory"]["per_rank"]) {
    CHECK(std::stoll(ranks.at(m["rank"].get<size_t>()).at("peak_bytes")) ==
          m["peak_bytes"].get<int64_t>());
  }

  // The first row is the name with the most total time (the table opens sorted by it).
  Key best{};
  int64_t bestTotal = -1;
  for (const auto& [key, b] : brute.names) {
    if (b.total > bestTotal) bestTotal = b.total, best = key;
  }
  CHECK(ops.front().at("name") == reader.str(best.first));

  const Png shot = loadPng(png);
  CHECK(shot.w == 1400);
  CHECK(shot.distinctColours() > 20);
}

#endif
