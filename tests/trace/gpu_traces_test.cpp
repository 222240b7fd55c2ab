// GPU analyses against a brute-force scan of real H100 traces: every number of analyzeGpu
// recomputed here straight from the file with SQL (the sqlite3 API, not trace/'s reader) and
// naive loops (a coverage sweep instead of interval merging, HTA's regular expression instead of
// gpuKindOf, LAG() for consecutive kernels). Traces: the committed one-rank NCCL trace
// (tests/data/gpu/), and every .db under $TRACERUN_GPU_TRACES or /work/shared/gpu-traces when
// present (a clone without them checks the committed one only). Also Kineto's kernel census of
// the nanoGPT run: our demangled names are torch.profiler's. And the communication analysis's
// per-rank numbers where a rank's communication is NCCL's (its kernels, by the same sweep).
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "tracerun/core/kernel_name.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/gpu.h"
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/analysis/report_json.h"
#include "tracerun/trace/analysis/report_text.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::trace::analysis;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> traceFiles() {
  std::vector<std::string> out = {std::string(TRACERUN_SOURCE_DIR) +
                                  "/tests/data/gpu/nccl_one_rank_h100.db"};
  const char* env = std::getenv("TRACERUN_GPU_TRACES");
  const fs::path dir = env ? fs::path(env) : fs::path("/work/shared/gpu-traces");
  std::error_code ec;
  if (fs::is_directory(dir, ec)) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".db") out.push_back(e.path().string());
    }
  }
  return out;
}

struct Row {
  int rank = 0, device = 0;
  int64_t track = 0, stream = 0, start = 0, end = 0, launch = INT64_MIN;
  int category = 0;
  std::string name;
};

// Runs `sql` on the file at `path` (read-only, with SQLite's own API), calling `row` for each
// result row.
template <class OnRow>
void query(const std::string& path, const char* sql, OnRow row) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
  while (sqlite3_step(st) == SQLITE_ROW) row(st);
  sqlite3_finalize(st);
  sqlite3_close(db);
}

// Every kernel / memcpy span on a "cuda:D stream S" track, with its op -> kernel flow's source.
std::vector<Row> scan(const std::string& path) {
  const char* sql =
      "SELECT t.rank, t.name, t.id, s.start_ns, s.start_ns + s.dur_ns, s.category, n.value, f.l "
      "FROM spans s JOIN tracks t ON t.id = s.track JOIN strings n ON n.id = s.name "
      "LEFT JOIN (SELECT dst_track, dst_ts_ns, max(src_ts_ns) AS l FROM flows WHERE kind = 2 "
      "GROUP BY 1, 2) f ON f.dst_track = s.track AND f.dst_ts_ns = s.start_ns "
      "WHERE t.name GLOB 'cuda:[0-9]* stream [0-9]*' AND s.category IN (6, 7)";
  std::vector<Row> rows;
  query(path, sql, [&](sqlite3_stmt* st) {
    Row r;
    r.rank = sqlite3_column_int(st, 0);
    const std::string track = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    long long d = 0, s = 0;
    REQUIRE(std::sscanf(track.c_str(), "cuda:%lld stream %lld", &d, &s) == 2);
    r.device = static_cast<int>(d);
    r.stream = s;
    r.track = sqlite3_column_int64(st, 2);
    r.start = sqlite3_column_int64(st, 3);
    r.end = sqlite3_column_int64(st, 4);
    r.category = sqlite3_column_int(st, 5);
    r.name = reinterpret_cast<const char*>(sqlite3_column_text(st, 6));
    if (sqlite3_column_type(st, 7) != SQLITE_NULL) r.launch = sqlite3_column_int64(st, 7);
    rows.push_back(std::move(r));
  });
  return rows;
}

// Length of the union of intervals by a coverage sweep: +1 at starts, -1 at ends.
int64_t covered(const std::vector<const Row*>& rows) {
  std::vector<std::pair<int64_t, int>> ev;
  for (const Row* r : rows) {
    ev.emplace_back(r->start, +1);
    ev.emplace_back(r->end, -1);
  }
  std::sort(ev.begin(), ev.end());
  int64_t n = 0;
  int depth = 0;
  for (size_t i = 0; i < ev.size(); ++i) {
    depth += ev[i].second;
    if (depth > 0 && i + 1 < ev.size()) n += ev[i + 1].first - ev[i].first;
  }
  return n;
}

// HTA's patterns, once per distinct name (std::regex on long demangled names is slow).
std::string kindOf(const Row& r) {
  if (r.category == 7) return "memory";
  static const std::regex comm("(^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*)");
  static std::map<std::string, std::string> seen;
  auto it = seen.find(r.name);
  if (it == seen.end()) {
    const bool c = std::regex_search(core::demangleKernelName(r.name), comm);
    it = seen.emplace(r.name, c ? "comm" : "compute").first;
  }
  return it->second;
}

int64_t nearestRank(std::vector<int64_t> v, double q) {
  std::sort(v.begin(), v.end());
  const auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::max<size_t>(k, 1) - 1];
}

// HTA's rule, written out: host wait / kernel wait / other.
void classify(int64_t gap, bool hostWait, int64_t threshold, GpuIdle& idle) {
  if (gap <= 0) return;
  (hostWait ? idle.host_wait_ns : gap < threshold ? idle.kernel_wait_ns : idle.other_ns) += gap;
}

void checkDevice(const GpuDevice& d, const std::vector<const Row*>& rows, const GpuOptions& o) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const Row* r : rows) {
    lo = std::min(lo, r->start);
    hi = std::max(hi, r->end);
  }
  CHECK(d.start_ns == lo);
  CHECK(d.window_ns == hi - lo);
  CHECK(d.busy_ns == covered(rows));
  CHECK(d.idle_ns == hi - lo - covered(rows));
  std::map<std::string, std::vector<const Row*>> byKind;
  for (const Row* r : rows) byKind[kindOf(*r)].push_back(r);
  CHECK(d.compute_ns == covered(byKind["compute"]));
  CHECK(d.comm_ns == covered(byKind["comm"]));
  CHECK(d.memory_ns == covered(byKind["memory"]));
  // |A ∩ B| = |A| + |B| - |A ∪ B|.
  std::vector<const Row*> both = byKind["compute"];
  both.insert(both.end(), byKind["comm"].begin(), byKind["comm"].end());
  CHECK(d.comm_compute_overlap_ns ==
        covered(byKind["compute"]) + covered(byKind["comm"]) - covered(both));
  // Per stream, consecutive activities in start order (HTA's prev_end_ts).
  std::map<int64_t, std::vector<const Row*>> byStream;
  for (const Row* r : rows) byStream[r->stream].push_back(r);
  REQUIRE(d.streams.size() == byStream.size());
  size_t i = 0;
  for (auto& [stream, v] : byStream) {
    std::sort(v.begin(), v.end(), [](const Row* a, const Row* b) { return a->start < b->start; });
    GpuIdle idle;
    for (size_t k = 1; k < v.size(); ++k) {
      const bool host = v[k]->launch != INT64_MIN && v[k]->launch > v[k - 1]->end;
      classify(v[k]->start - v[k - 1]->end, host, o.kernel_wait_ns, idle);
    }
    const GpuStream& s = d.streams[i++];
    CHECK(s.stream == stream);
    CHECK(s.activities == static_cast<int64_t>(v.size()));
    CHECK(s.idle.host_wait_ns == idle.host_wait_ns);
    CHECK(s.idle.kernel_wait_ns == idle.kernel_wait_ns);
    CHECK(s.idle.other_ns == idle.other_ns);
    // Queue length: at each launch, the activities launched by then and not yet started.
    int64_t qmax = 0;
    for (const Row* a : v) {
      if (a->launch == INT64_MIN) continue;
      int64_t n = 0;
      for (const Row* b : v)
        n += b->launch != INT64_MIN && b->launch <= a->launch && b->start > a->launch;
      qmax = std::max(qmax, n);
    }
    CHECK(s.queue_max == qmax);
  }
  CHECK(d.idle.total() == d.idle_ns);
  std::vector<int64_t> delays;
  for (const Row* r : rows) {
    if (r->launch != INT64_MIN) delays.push_back(std::max<int64_t>(0, r->start - r->launch));
  }
  CHECK(d.launch.count == static_cast<int64_t>(delays.size()));
  if (!delays.empty()) {
    CHECK(d.launch.p50_ns == nearestRank(delays, 0.5));
    CHECK(d.launch.p95_ns == nearestRank(delays, 0.95));
    CHECK(d.launch.max_ns == *std::max_element(delays.begin(), delays.end()));
    CHECK(d.launch.outliers == std::count_if(delays.begin(), delays.end(),
                                             [&](int64_t x) { return x > o.launch_outlier_ns; }));
  }
}

void checkKernels(const GpuAnalysis& g, const std::vector<Row>& rows) {
  std::map<std::string, std::vector<int64_t>> byName;
  for (const Row& r : rows) byName[core::demangleKernelName(r.name)].push_back(r.end - r.start);
  REQUIRE(g.kernels.size() == byName.size());
  for (size_t i = 0; i < g.kernels.size(); ++i) {
    const GpuKernelRow& k = g.kernels[i];
    INFO(k.name);
    REQUIRE(byName.count(k.name) == 1);
    const std::vector<int64_t>& v = byName[k.name];
    int64_t total = 0;
    for (int64_t x : v) total += x;
    CHECK(k.count == static_cast<int64_t>(v.size()));
    CHECK(k.total_ns == total);
    CHECK(k.min_ns == *std::min_element(v.begin(), v.end()));
    CHECK(k.max_ns == *std::max_element(v.begin(), v.end()));
    CHECK(k.p50_ns == nearestRank(v, 0.5));
    if (i > 0) CHECK(g.kernels[i - 1].total_ns >= k.total_ns);
  }
}

}  // namespace

TEST_CASE("gpu traces: every number against a brute-force scan of the H100 traces",
          "[analysis][gpu]") {
  for (const std::string& path : traceFiles()) {
    INFO(path);
    const std::vector<Row> rows = scan(path);
    REQUIRE(!rows.empty());
    const auto reader = trace::TraceReader::open(path);
    const GpuAnalysis g = analyzeGpu(reader);
    std::map<std::pair<int, int>, std::vector<const Row*>> byDevice;
    for (const Row& r : rows) byDevice[{r.rank, r.device}].push_back(&r);
    REQUIRE(g.devices.size() == byDevice.size());
    for (const GpuDevice& d : g.devices) checkDevice(d, byDevice.at({d.rank, d.device}), g.options);
    checkKernels(g, rows);
  }
}

TEST_CASE("gpu traces: a rank's NCCL communication and its overlap are its kernels' (brute force)",
          "[analysis][comm][gpu]") {
  for (const std::string& path : traceFiles()) {
    INFO(path);
    // The ranks that made NCCL data calls (their spans are enqueues), read straight from the file.
    std::set<int> callers;
    query(path,
          "SELECT DISTINCT t.rank, n.value FROM spans s JOIN tracks t ON t.id = s.track JOIN "
          "strings n ON n.id = s.name WHERE n.value GLOB 'nccl:*'",
          [&](sqlite3_stmt* st) {
            const std::string name = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
            if (vocab::nccl::isDataCall(name)) callers.insert(sqlite3_column_int(st, 0));
          });
    const std::vector<Row> rows = scan(path);
    const CommAnalysis a = analyzeComm(trace::TraceReader::open(path));
    for (const RankCommStats& r : a.ranks) {
      INFO("rank " << r.rank);
      std::vector<const Row*> comm, compute, both;
      for (const Row& k : rows) {
        if (k.rank != r.rank || k.category != 6) continue;  // kernels, not copies
        (kindOf(k) == "comm" ? comm : compute).push_back(&k);
        both.push_back(&k);
      }
      const bool kernels = callers.count(r.rank) != 0 && !comm.empty();
      CHECK(r.gpu_kernels == kernels);
      if (!kernels) continue;
      CHECK(r.comm_ns == covered(comm));
      CHECK(r.compute_ns == covered(compute));
      CHECK(r.overlap_ns == covered(comm) + covered(compute) - covered(both));
    }
    if (path.find("nccl_one_rank") != std::string::npos) CHECK_FALSE(callers.empty());
    // The recorded traces so far hold one NCCL rank, which copies instead of launching NCCL's
    // kernels: the GPU side is then checked by analysis_comm's closed forms only.
    if (std::none_of(a.ranks.begin(), a.ranks.end(),
                     [](const RankCommStats& r) { return r.gpu_kernels; }))
      WARN(path << ": no rank launched NCCL kernels; only the CPU rows are checked here");
  }
}

TEST_CASE("gpu traces: the kernel table's names are torch.profiler's (Kineto's census)",
          "[analysis][gpu]") {
  const char* env = std::getenv("TRACERUN_GPU_TRACES");
  const fs::path dir = env ? fs::path(env) : fs::path("/work/shared/gpu-traces");
  const fs::path census = dir / "torchprof_census.json";
  const fs::path db = dir / "nanogpt_h100_ops_cuda.db";
  if (!fs::exists(census) || !fs::exists(db)) {
    WARN("no " << census << ": the census check is skipped");
    return;
  }
  std::ifstream in(census);
  const auto j = nlohmann::json::parse(in);
  const GpuAnalysis g = analyzeGpu(trace::TraceReader::open(db.string()));
  std::map<std::string, int64_t> ours;
  for (const GpuKernelRow& k : g.kernels) ours[k.name] = k.count;
  // The census counts 20 profiled steps; the trace holds those and 5 warm-up steps.
  REQUIRE(j.at("kernels").size() > 10);
  for (const auto& [name, count] : j.at("kernels").items()) {
    INFO(name);
    REQUIRE(ours.count(name) == 1);
    CHECK(ours[name] >= count.get<int64_t>());
  }
}

TEST_CASE("gpu traces: a damaged copy with extreme times is analysed, never a crash",
          "[analysis][gpu]") {
  const fs::path dir = fs::temp_directory_path() / "tracerun_gpu_damaged";
  fs::create_directories(dir);
  const fs::path copy = dir / "damaged.db";
  fs::copy_file(fs::path(TRACERUN_SOURCE_DIR) / "tests/data/gpu/nccl_one_rank_h100.db", copy,
                fs::copy_options::overwrite_existing);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(copy.c_str(), &db) == SQLITE_OK);
  const char* sql =
      "UPDATE spans SET start_ns = -9223372036854775807 WHERE id = (SELECT min(id) FROM spans "
      "WHERE category = 7);"
      "UPDATE spans SET dur_ns = 9223372036854775807 WHERE id = (SELECT max(id) FROM spans WHERE "
      "category = 7);"
      "UPDATE spans SET dur_ns = -5 WHERE id = (SELECT min(id) FROM spans WHERE category = 6);"
      "UPDATE flows SET src_ts_ns = 9223372036854775807 WHERE rowid = (SELECT min(rowid) FROM "
      "flows WHERE kind = 2);"
      "UPDATE flows SET src_ts_ns = -9223372036854775807 WHERE rowid = (SELECT max(rowid) FROM "
      "flows WHERE kind = 2);";
  REQUIRE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  const auto reader = trace::TraceReader::open(copy.string());
  const GpuAnalysis g = analyzeGpu(reader);
  REQUIRE(g.present());
  for (const GpuDevice& d : g.devices) {
    CHECK(d.busy_ns >= 0);
    CHECK(d.idle_ns >= 0);
    CHECK(d.launch.max_ns >= 0);
  }
  CallGraphOptions o;
  o.gpu_time = true;
  CHECK(buildCallGraph(reader, o).gpu_activities > 0);
  const Report r = buildReport(reader);
  CHECK_FALSE(reportText(r).empty());
  CHECK_FALSE(reportJson(r).empty());
  fs::remove_all(dir);
}
