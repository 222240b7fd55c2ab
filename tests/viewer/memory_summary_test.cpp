// The stored per-category memory summary (trace/analysis/memory_summary.h) that the memory view
// reads: on hand-built traces (1 and 3 ranks, two devices, rows in time order and shuffled), the
// series read from the merged file's tables against a brute-force replay of every memory event
// (levels after each event, pixel columns at several widths), against the replayed summary, and
// the peaks against analyzeMemory's; a file without the tables (and one with a damaged row) falls
// back to the replay. Not the view's drawing (memory_view_test.cpp).
#include <sqlite3.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>

#include "analysis_builder.h"
#include "temp_dir.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/analysis/memory_summary.h"
#include "tracerun/trace/error.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;
namespace an = tracerun::trace::analysis;
using core::MemoryCategory;

namespace {

// A trace with forward/backward phases and ops, and `events` memory events per rank on a CPU and
// a CUDA device: tagged and untagged blocks, addresses reused while live (unrecorded frees), frees
// of blocks never seen. `shuffled`: the events are handed to the writer in a random order (so the
// file's rowid order is not time order; ties in time keep the writer's order, as for any reader).
std::string makeTrace(const std::string& dir, int ranks, int events, bool shuffled, uint64_t seed) {
  testing::TraceBuilder tb(ranks);
  std::mt19937_64 rng(seed);
  for (int rank = 0; rank < ranks; ++rank) {
    int64_t t = 1000;
    for (int step = 0; step < 4; ++step) {
      const int64_t f0 = t, f1 = t + 60000, b1 = t + 120000;
      tb.span(rank, {"main", "forward", core::Category::kPhase, f0, f1, 0});
      tb.span(rank, {"main", "backward", core::Category::kPhase, f1, b1, 0});
      for (int64_t o = f0; o + 900 < b1; o += 1000) {
        tb.span(rank, {"main", "aten::mm", core::Category::kOp, o, o + 900, 1});
      }
      t = b1 + 5000;
    }
    std::vector<testing::BMemory> rows;
    std::vector<std::pair<uint64_t, int>> live;  // ptr, device
    int64_t ts = 1000;
    for (int i = 0; i < events; ++i) {
      ts += static_cast<int64_t>(rng() % 120);
      const int dev = static_cast<int>(rng() % 3 == 0);
      if (live.empty() || rng() % 100 < 55) {
        const uint64_t ptr = 0x1000 + (rng() % 500) * 0x100;
        const int64_t bytes = 64 * static_cast<int64_t>(1 + rng() % 5000);
        const auto cat = static_cast<MemoryCategory>(rng() % 7);
        rows.push_back(
            {ts, ptr, bytes, cat, i % 3 ? "aten::mm" : "aten::empty", "scope", dev, dev ? 0 : -1});
        live.emplace_back(ptr, dev);
      } else {
        const size_t k = rng() % live.size();
        rows.push_back({ts, live[k].first, -1, MemoryCategory::kUnknown, "", "", live[k].second,
                        live[k].second ? 0 : -1});
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      if (i % 300 == 0) {  // a block allocated before the capture
        rows.push_back({ts, 0xdead0000 + static_cast<uint64_t>(i), -1, MemoryCategory::kUnknown, "",
                        "", 0, -1});
      }
    }
    if (shuffled) std::shuffle(rows.begin(), rows.end(), rng);
    for (auto& r : rows) tb.memory(rank, std::move(r));
  }
  return tb.write(dir);
}

void checkSame(const an::MemorySeries& a, const an::MemorySeries& b) {
  CHECK(a.rank == b.rank);
  CHECK(a.device_type == b.device_type);
  CHECK(a.device_index == b.device_index);
  CHECK(a.ts == b.ts);
  CHECK(a.delta == b.delta);
  CHECK(a.stack == b.stack);
  CHECK(a.block_start == b.block_start);
  CHECK(a.block_lo == b.block_lo);
  CHECK(a.block_hi == b.block_hi);
  CHECK(a.peak_bytes == b.peak_bytes);
  CHECK(a.peak_ts_ns == b.peak_ts_ns);
  CHECK(a.at_peak == b.at_peak);
}

void sqlExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO(sql << ": " << (err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("memory summary: the stored series equal a brute-force replay of every event",
          "[viewer][memory][summary]") {
  for (const auto& [ranks, shuffled] :
       std::vector<std::pair<int, bool>>{{1, false}, {3, false}, {1, true}, {3, true}}) {
    INFO(ranks << " ranks, rows " << (shuffled ? "shuffled" : "in time order"));
    testing::TempDir dir("memsum");
    const std::string db = makeTrace(dir.path.string(), ranks, 2500, shuffled, 11 + ranks);
    const auto reader = trace::TraceReader::open(db);
    REQUIRE(reader.meta(an::kMemorySummaryMetaKey) == an::kMemorySummaryVersion);
    const auto stored = an::storedMemorySummary(reader);
    REQUIRE(stored.has_value());
    CHECK(stored->stored);
    an::MemoryOptions mo;
    mo.keep_categories = true;
    const an::MemoryAnalysis ma = an::analyzeMemory(reader, mo);
    CHECK(stored->categories == ma.categories);
    REQUIRE(stored->series.size() == ma.devices.size());
    REQUIRE(stored->series.size() == static_cast<size_t>(2 * ranks));
    const an::MemoryCategorySummary replayed = an::replayMemorySummary(reader);
    CHECK_FALSE(replayed.stored);
    REQUIRE(replayed.series.size() == stored->series.size());
    for (size_t i = 0; i < stored->series.size(); ++i) {
      const an::MemorySeries& s = stored->series[i];
      INFO("rank " << s.rank << " device " << s.device_type << ":" << s.device_index);
      checkSame(s, replayed.series[i]);
      // The report's own numbers (memory.cpp's replay pass, not memory_live's).
      const an::DeviceMemory& d = ma.devices[i];
      REQUIRE(d.rank == s.rank);
      REQUIRE(d.device_type == s.device_type);
      CHECK(s.peak_bytes == d.peak_bytes);
      CHECK(s.peak_ts_ns == d.peak_ts_ns);
      CHECK(s.at_peak == d.at_peak);
      const auto steps =
          replayLevels(reader, s.rank, s.device_type, s.device_index, ma.categories.at(s.rank));
      REQUIRE(steps.size() == s.size());
      REQUIRE(steps.size() > 3 * an::MemorySeries::kBlock);
      bool same = true;
      for (size_t k = 0; k < steps.size() && same; ++k) {
        same = steps[k].ts == s.ts[k] && steps[k].levels == s.levelsAfter(k + 1);
      }
      CHECK(same);
      const double a = double(steps.front().ts), b = double(steps.back().ts);
      for (const auto& [t0, t1, w] : std::vector<std::tuple<double, double, size_t>>{
               {a - 100, b + 100, 1600},
               {a, b, 977},
               {a + (b - a) * 0.21, a + (b - a) * 0.64, 333},
               {a + (b - a) * 0.5, a + (b - a) * 0.5 + 300, 61},
               {a, b, 2}}) {
        checkMemoryColumns(s, steps, t0, t1, w);
      }
    }
    // The view's device: the report's primary one.
    for (const auto& [rank, cats] : ma.categories) {
      const an::MemorySeries* p = stored->primary(rank);
      REQUIRE(p != nullptr);
      CHECK(p->device_type == ma.primary(rank)->device_type);
      CHECK(p->device_index == ma.primary(rank)->device_index);
      // One rank alone reads the same.
      const auto one = an::storedMemorySummary(reader, rank);
      REQUIRE(one.has_value());
      REQUIRE(one->series.size() == 2);
      checkSame(*one->primary(rank), *p);
      CHECK(one->categories.at(rank) == cats);
    }
  }
}

TEST_CASE("memory summary: a file without it (or with a damaged row) replays the events",
          "[viewer][memory][summary]") {
  testing::TempDir dir("memsum-old");
  const std::string db = makeTrace(dir.path.string(), 2, 1500, true, 5);
  const std::string old = (dir.path / "old.db").string();
  std::filesystem::copy_file(db, old);
  // As merge wrote traces before the summary existed.
  sqlExec(old,
          "DROP TABLE memory_category_blocks; DROP TABLE memory_category_allocations; "
          "DELETE FROM meta WHERE key = 'memory_category_summary'");
  const auto withTables = trace::TraceReader::open(db);
  const an::MemoryCategorySummary want = an::memorySummary(withTables);
  REQUIRE(want.stored);
  {
    const auto reader = trace::TraceReader::open(old);
    CHECK_FALSE(an::storedMemorySummary(reader).has_value());
    const an::MemoryCategorySummary got = an::memorySummary(reader);
    CHECK_FALSE(got.stored);
    REQUIRE(got.series.size() == want.series.size());
    for (size_t i = 0; i < got.series.size(); ++i) checkSame(got.series[i], want.series[i]);
    CHECK(got.categories == want.categories);
  }
  // Written afterwards (writeMemorySummary: what merge does): stored again, the same rows.
  an::writeMemorySummary(old);
  {
    const auto reader = trace::TraceReader::open(old);
    const an::MemoryCategorySummary got = an::memorySummary(reader);
    CHECK(got.stored);
    REQUIRE(got.series.size() == want.series.size());
    for (size_t i = 0; i < got.series.size(); ++i) checkSame(got.series[i], want.series[i]);
  }
  // A damaged block (its events cut short, then its end levels off by one byte): the stored read
  // names the table; the view's read replays.
  for (const char* damage :
       {"UPDATE memory_category_blocks SET events = substr(events, 1, 5) WHERE block = 1",
        "UPDATE memory_category_blocks SET count = count - 1 WHERE block = 2 AND rank = 1"}) {
    INFO(damage);
    const std::string bad = (dir.path / "bad.db").string();
    std::filesystem::remove(bad);
    std::filesystem::copy_file(db, bad);
    sqlExec(bad, damage);
    const auto reader = trace::TraceReader::open(bad);
    CHECK_THROWS_WITH(an::storedMemorySummary(reader),
                      Catch::Contains("memory_category_blocks") && Catch::Contains("damaged"));
    const an::MemoryCategorySummary got = an::memorySummary(reader);
    CHECK_FALSE(got.stored);
    REQUIRE(got.series.size() == want.series.size());
    for (size_t i = 0; i < got.series.size(); ++i) checkSame(got.series[i], want.series[i]);
  }
}

// Not run by CI ([.]): times on a large trace (docs/performance.md, "traceview's memory view"):
//   TRACERUN_MEMSUM_TRACE=t.db viewer_memory_tests "[.memsum-bench]"
TEST_CASE("memory summary: read and live-set times on a large trace", "[.memsum-bench]") {
  const char* path = std::getenv("TRACERUN_MEMSUM_TRACE");
  REQUIRE(path != nullptr);
  const auto reader = trace::TraceReader::open(path);
  using Clock = std::chrono::steady_clock;
  const auto ms = [](Clock::time_point a) {
    return std::chrono::duration<double, std::milli>(Clock::now() - a).count();
  };
  for (int rank : {0, 3}) {
    auto t = Clock::now();
    const auto stored = an::storedMemorySummary(reader, rank);
    const double read = ms(t);
    REQUIRE(stored.has_value());
    const an::MemorySeries* p = stored->primary(rank);
    REQUIRE(p != nullptr);
    t = Clock::now();
    const auto replayed = an::replayMemorySummary(reader, rank);
    const double replay = ms(t);
    for (const int64_t at : {p->ts[p->size() / 10], p->peak_ts_ns, p->ts.back()}) {
      t = Clock::now();
      const auto live = an::liveAt(reader, rank, at, stored->categories.at(rank), 500);
      WARN("rank " << rank << ": stored summary " << read << " ms, replayed " << replay
                   << " ms; liveAt(t = " << at << ", 500 modules) " << ms(t) << " ms, "
                   << live.size() << " blocks");
    }
  }
}
