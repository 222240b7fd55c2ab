// timeline_bench: Timeline::draw (what to draw for one track at 2,000 px) on a generated trace of N
// nested spans, against TraceReader::spans over the same window (the baseline, same run), at zooms
// from the whole run to 1/10,000 of it; plus what the summaries cost (build time, rows). Prints a
// table; asserts nothing. Built by default, never run by CI. Results: docs/performance.md.
//
//   timeline_bench [--spans N] [--queries Q] [--dir DIR] [--keep]
#include <sqlite3.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "nested_step.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"
#include "tracerun/trace/timeline.h"

using namespace tracerun;
namespace fs = std::filesystem;

namespace {

struct Options {
  int64_t spans = 4'000'000;
  int queries = 30;
  std::string dir = "/tmp";
  bool keep = false;
};

using Clock = std::chrono::steady_clock;
double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Steps of 4 phases (depth 1), each of 50 modules (depth 2) of 3-5 ops (depth 3) of 200 ns - 20 us,
// pushed children first as capture pushes them. Returns the spans written.
int64_t writeTrace(const std::string& path, int64_t target) {
  core::Session session;
  trace::ShardOptions o;
  o.path = path;
  o.summaries = true;
  trace::ShardWriter writer(session, o);
  writer.start();
  auto& buf = session.threadBuffer("main");
  std::vector<core::StringId> names;
  for (const char* n : {"step", "forward", "backward", "optimizer", "Block.attn", "Block.mlp",
                        "aten::mm", "aten::add", "aten::softmax", "aten::layer_norm"}) {
    names.push_back(session.strings().intern(n));
  }
  std::mt19937_64 rng(1);
  int64_t written = 0;
  auto push = [&](int64_t start, int64_t end, uint16_t depth, core::StringId name) {
    core::SpanRecord r;
    r.name = name;
    r.start_ns = start;
    r.end_ns = end;
    r.depth = depth;
    r.id = buf.nextId();
    while (!buf.ring.tryPush(core::Record::from(r))) writer.flush();
    ++written;
  };
  int64_t t = 1'000'000;
  while (written < target) {
    bench::pushNestedStep(
        t, rng, names, [&](std::mt19937_64& r) { return names[6 + r() % 4]; }, push);
  }
  writer.close();
  return written;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"timeline_bench: Timeline::draw against TraceReader::spans over the same window."};
  app.add_option("--spans", o.spans, "spans in the generated trace")
      ->check(CLI::Range(int64_t{10000}, int64_t{1} << 40));
  app.add_option("--queries", o.queries, "random windows per zoom")->check(CLI::PositiveNumber);
  app.add_option("--dir", o.dir, "scratch folder for the files");
  app.add_flag("--keep", o.keep, "keep the files");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    const std::string path = o.dir + "/timeline_bench.db";
    const std::string older = o.dir + "/timeline_bench_older.db";
    auto t0 = Clock::now();
    const int64_t n = writeTrace(path, o.spans);
    auto t1 = Clock::now();
    const double writeMs = ms(t0, t1);

    // The summaries' own cost: an "older" copy without them, built by Timeline::open.
    fs::copy_file(path, older, fs::copy_options::overwrite_existing);
    {
      sqlite3* db = nullptr;
      sqlite3_open(older.c_str(), &db);
      sqlite3_exec(db,
                   "DROP TABLE span_lod; DROP TABLE span_lod_depths; DROP TABLE name_buckets; "
                   "DROP TABLE memory_devices; DELETE FROM meta WHERE key = 'summaries'; VACUUM",
                   nullptr, nullptr, nullptr);
      sqlite3_close(db);
    }
    t0 = Clock::now();
    { trace::Timeline built = trace::Timeline::open(older); }
    t1 = Clock::now();
    const double buildMs = ms(t0, t1);
    const auto withBytes = fs::file_size(path), withoutBytes = fs::file_size(older);
    int64_t lodRows = 0;
    {
      sqlite3* db = nullptr;
      sqlite3_open(path.c_str(), &db);
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(db, "SELECT count(*) FROM span_lod", -1, &st, nullptr);
      if (sqlite3_step(st) == SQLITE_ROW) lodRows = sqlite3_column_int64(st, 0);
      sqlite3_finalize(st);
      sqlite3_close(db);
    }

    trace::Timeline tl = trace::Timeline::open(path);
    const auto& reader = tl.reader();
    const auto [lo, hi] = reader.timeRange();
    const int64_t track = tl.trackDepths().front().track;
    std::printf("timeline_bench: %lld spans on one thread track, depths 0-%d, %.3f s of trace\n",
                static_cast<long long>(n), tl.maxDepth(track), double(hi - lo) / 1e9);
    std::printf(
        "write (ShardWriter, close included): %.0f ms; summaries alone (Timeline::open of "
        "a copy without them): %.0f ms = %.0f%% of the write\n",
        writeMs, buildMs, 100.0 * buildMs / writeMs);
    std::printf(
        "file: %.1f MB with summaries, %.1f MB without (+%.1f%%); span_lod rows: %lld "
        "(%.3f per span)\n\n",
        double(withBytes) / 1e6, double(withoutBytes) / 1e6,
        100.0 * (double(withBytes) - double(withoutBytes)) / double(withoutBytes),
        static_cast<long long>(lodRows), double(lodRows) / double(n));

    std::printf(
        "| window | ns/px | spans in window | draw items | draw ms | reader.spans ms | "
        "ratio | summaries |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    std::mt19937_64 rng(7);
    const int64_t span = hi - lo;
    for (int64_t divisor : {1, 10, 100, 1000, 10000}) {
      const int64_t len = span / divisor;
      std::vector<double> drawMs, readMs, items, spans;
      bool summaries = true;
      for (int q = 0; q < o.queries; ++q) {
        trace::DrawRequest req;
        req.track = track;
        req.t0 =
            lo +
            (divisor == 1 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(span - len)));
        req.t1 = req.t0 + len;
        req.ns_per_px = double(len) / 2000.0;
        // Alternated, so drift in the machine's speed hits both alike.
        auto a = Clock::now();
        const auto list = tl.draw(req);
        auto b = Clock::now();
        const auto rows = reader.spans(track, req.t0, req.t1);
        auto c = Clock::now();
        drawMs.push_back(ms(a, b));
        readMs.push_back(ms(b, c));
        items.push_back(double(list.items.size()));
        spans.push_back(double(rows.size()));
        summaries = summaries && list.from_summaries;
      }
      std::printf("| 1/%lld | %.0f | %.0f | %.0f | %.2f | %.2f | %.1fx | %s |\n",
                  static_cast<long long>(divisor), double(len) / 2000.0, median(spans),
                  median(items), median(drawMs), median(readMs),
                  median(readMs) / std::max(median(drawMs), 1e-6), summaries ? "yes" : "no");
    }
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    std::printf("\nmedians of %d random windows per row at 2,000 px; peak RSS %.0f MB\n", o.queries,
                double(ru.ru_maxrss) / 1024.0);
    if (!o.keep) {
      fs::remove(path);
      fs::remove(older);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "timeline_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
