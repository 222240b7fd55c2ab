// range_stats_bench: the statistics view's range query (trace/analysis/range_stats.h) on a
// generated trace, over a window holding about 1M spans: rangeStats on one reader and
// rangeStatsParallel on 2 threads, against TraceReader::spans over the same tracks and window (the
// rows alone, the baseline). Medians of --repeat runs; asserts nothing. Built by default, never
// run by CI. Results: docs/performance.md.
//
//   range_stats_bench [--spans N] [--window-spans W] [--tracks T] [--repeat R] [--dir DIR] [--keep]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "nested_step.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/analysis/range_stats.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
double ms(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// `tracks` threads, each with steps of 4 phases (depth 1) of 50 modules (depth 2) of 3-5 ops
// (depth 3, 200 ns - 20 us, 40 op names), pushed children first as capture pushes them. The
// threads share one time axis. Returns the spans written.
int64_t writeTrace(const std::string& path, int64_t target, int tracks) {
  core::Session session;
  trace::ShardOptions o;
  o.path = path;
  o.summaries = true;
  trace::ShardWriter writer(session, o);
  writer.start();
  std::vector<core::StringId> names;
  for (const char* n : {"step", "forward", "backward", "optimizer", "Block.attn", "Block.mlp"}) {
    names.push_back(session.strings().intern(n));
  }
  std::vector<core::StringId> ops;
  for (int i = 0; i < 40; ++i)
    ops.push_back(session.strings().intern("aten::op" + std::to_string(i)));
  std::atomic<int64_t> written{0};
  const int64_t perTrack = target / tracks;
  // One producer thread per track (a thread's first threadBuffer call registers its track).
  auto produce = [&](int k) {
    auto& buf = session.threadBuffer(("worker " + std::to_string(k)).c_str());
    std::mt19937_64 rng(static_cast<uint64_t>(k) + 1);
    int64_t mine = 0;
    auto push = [&](int64_t start, int64_t end, uint16_t depth, core::StringId name) {
      core::SpanRecord r;
      r.name = name;
      r.start_ns = start;
      r.end_ns = end;
      r.depth = depth;
      r.id = buf.nextId();
      while (!buf.ring.tryPush(core::Record::from(r))) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      ++mine;
    };
    int64_t t = 1'000'000;
    while (mine < perTrack) {
      bench::pushNestedStep(
          t, rng, names, [&](std::mt19937_64& r) { return ops[r() % ops.size()]; }, push);
    }
    written += mine;
  };
  std::vector<std::thread> threads;
  for (int k = 0; k < tracks; ++k) threads.emplace_back(produce, k);
  for (auto& th : threads) th.join();
  writer.close();
  return written.load();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t spans = 2'000'000, window = 1'000'000;
  int tracks = 4, repeat = 7;
  std::string dir = "/tmp";
  bool keep = false;
  CLI::App app{"range_stats_bench: the statistics view's range query over ~1M spans."};
  app.add_option("--spans", spans, "spans in the generated trace")
      ->check(CLI::Range(int64_t{10000}, int64_t{1} << 40));
  app.add_option("--window-spans", window, "spans the queried window should hold")
      ->check(CLI::Range(int64_t{1000}, int64_t{1} << 40));
  app.add_option("--tracks", tracks, "thread tracks")->check(CLI::Range(1, 256));
  app.add_option("--repeat", repeat, "runs per measurement (median)")->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "scratch folder for the file");
  app.add_flag("--keep", keep, "keep the file");
  CLI11_PARSE(app, argc, argv);
  try {
    const std::string path = dir + "/range_stats_bench.db";
    auto t0 = Clock::now();
    const int64_t n = writeTrace(path, spans, tracks);
    std::printf("trace: %lld spans on %d tracks, written in %.0f ms\n", static_cast<long long>(n),
                tracks, ms(t0, Clock::now()));
    const auto reader = trace::TraceReader::open(path);
    const auto [a, b] = reader.timeRange();
    // The window: the middle of the run, as wide as `window` spans (spans are spread evenly).
    const double share = std::min(1.0, static_cast<double>(window) / static_cast<double>(n));
    const auto len = static_cast<int64_t>(static_cast<double>(b - a) * share);
    trace::analysis::RangeQuery q;
    q.t0 = a + (b - a - len) / 2;
    q.t1 = q.t0 + len;

    std::vector<double> base, one, two;
    int64_t rows = 0, inside = 0;
    for (int r = 0; r < repeat; ++r) {
      t0 = Clock::now();
      rows = 0;
      for (const auto& t : reader.tracks())
        rows += static_cast<int64_t>(reader.spans(t.id, q.t0, q.t1).size());
      base.push_back(ms(t0, Clock::now()));
      t0 = Clock::now();
      inside = trace::analysis::rangeStats(reader, q).spans;
      one.push_back(ms(t0, Clock::now()));
      t0 = Clock::now();
      const auto p = trace::analysis::rangeStatsParallel(path, q, 2);
      two.push_back(ms(t0, Clock::now()));
      if (p.spans != inside) {
        std::fprintf(stderr, "range_stats_bench: 1 and 2 threads disagree (%lld vs %lld spans)\n",
                     static_cast<long long>(inside), static_cast<long long>(p.spans));
        return 1;
      }
    }
    std::printf("window: %lld ns, %lld spans overlapping, %lld inside\n",
                static_cast<long long>(len), static_cast<long long>(rows),
                static_cast<long long>(inside));
    std::printf("| query | median ms (of %d) | min ms | max ms |\n| --- | --- | --- | --- |\n",
                repeat);
    auto row = [](const char* what, const std::vector<double>& v) {
      std::printf("| %s | %.1f | %.1f | %.1f |\n", what, median(v),
                  *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
    };
    row("TraceReader::spans, every track (baseline)", base);
    row("rangeStats, 1 reader", one);
    row("rangeStatsParallel, 2 threads", two);
    if (!keep) fs::remove(path);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "range_stats_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
