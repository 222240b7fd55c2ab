// writer_bench: ShardWriter throughput and bytes/event for N synthetic nested spans, beside a bare
// SQLite bulk insert of the same rows measured in the same run, then TraceReader's range query for
// one track's events in a window holding 1% of the trace. Prints a table; asserts nothing.
// Built by default, never run by CI. Results and the command: docs/performance.md.
//
//   writer_bench [--events N] [--tracks T] [--queries Q] [--dir DIR] [--repeat R]
//                [--chunk-rows C] [--keep]
//
// Sections: options · the synthetic workload · bare insert · writer · range queries · main
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tracerun/core/clock.h"
#include "tracerun/core/raw_shard_writer.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/raw_convert.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/schema.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;

namespace {

// ---------------------------------------------------------------------------------------------
// options

struct Options {
  int64_t events = 10'000'000;
  int tracks = 16;
  int queries = 300;
  int repeat = 1;
  size_t chunkRows = trace::ShardOptions{}.chunk_rows;
  std::string dir = "/tmp";
  bool keep = false;
  double rate = 0;  // > 0: the sustained-rate run only (records/s), see rateRun
  double seconds = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{
      "writer_bench: ShardWriter throughput and bytes/event beside a bare SQLite insert of "
      "the same rows, then the 1%-window range query on one track."};
  app.add_option("--events", o.events, "span events")
      ->check(CLI::Range(int64_t{1000}, std::numeric_limits<int64_t>::max()));
  app.add_option("--tracks", o.tracks, "thread tracks (producer threads)")
      ->check(CLI::PositiveNumber);
  app.add_option("--queries", o.queries, "random 1% windows queried")->check(CLI::PositiveNumber);
  app.add_option(
         "--rate", o.rate,
         "instead: one thread pushes this many records/s for --seconds into a capture-sized "
         "ring, drained by the SQLite writer and by the raw writer (drops, writer CPU)")
      ->check(CLI::PositiveNumber);
  app.add_option("--seconds", o.seconds, "length of the --rate run")->check(CLI::PositiveNumber);
  app.add_option("--repeat", o.repeat, "repetitions (medians are printed)")
      ->check(CLI::PositiveNumber);
  app.add_option("--chunk-rows", o.chunkRows, "spans per chunk in the writer")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", o.dir, "scratch folder for the files");
  app.add_flag("--keep", o.keep, "keep the files");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return o;
}

double seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double cpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         double(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

int64_t fileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : 0;
}

// ---------------------------------------------------------------------------------------------
// the synthetic workload: what capture of a training loop looks like on one thread

constexpr int kNames = 64;
constexpr int kDetails = 256;
constexpr int kRootsPerStep = 400;

// One span as capture emits it: at its end, children before parents.
struct GenSpan {
  int64_t start, end;
  uint64_t id, parent;
  int64_t seq;
  uint32_t name, detail;
  uint16_t depth;
  core::Category category;
};

// Emits `count` spans of one track in end order: steps (depth 0) of kRootsPerStep op trees (an op
// at depth 1 with 1-4 children, each with 0-3 grandchildren). ~40% carry a detail (shapes), ~30%
// an autograd sequence number. Deterministic per track. Ids come from `nextId`.
template <typename IdFn, typename EmitFn>
void generateTrack(int track, int64_t count, int64_t base, const std::vector<uint32_t>& names,
                   const std::vector<uint32_t>& details, IdFn nextId, EmitFn emit) {
  std::mt19937_64 rng(0x5eed + uint64_t(track));
  auto rand = [&](int64_t lo, int64_t hi) { return lo + int64_t(rng() % uint64_t(hi - lo + 1)); };
  int64_t t = base + track * 1013;
  int64_t emitted = 0;
  int64_t seq = 0;
  auto finish = [&](GenSpan& s) {
    s.detail = rand(0, 9) < 4 ? details[size_t(rand(0, kDetails - 1))] : 0;
    s.seq = rand(0, 9) < 3 ? seq++ : -1;
    emit(s);
    ++emitted;
  };
  while (emitted < count) {
    GenSpan step{t, 0, nextId(), 0, -1, names[0], 0, 0, core::Category::kPhase};
    t += rand(200, 800);
    for (int r = 0; r < kRootsPerStep && emitted < count - 1; ++r) {
      GenSpan root{t, 0, nextId(),           step.id, -1, names[size_t(rand(1, kNames - 1))],
                   0, 1, core::Category::kOp};
      t += rand(50, 300);
      const int64_t children = rand(1, 4);
      for (int64_t c = 0; c < children && emitted < count - 2; ++c) {
        GenSpan child{t, 0, nextId(),           root.id, -1, names[size_t(rand(1, kNames - 1))],
                      0, 2, core::Category::kOp};
        t += rand(20, 200);
        const int64_t grand = rand(0, 3);
        for (int64_t g = 0; g < grand && emitted < count - 3; ++g) {
          GenSpan leaf{t, 0, nextId(),           child.id, -1, names[size_t(rand(1, kNames - 1))],
                       0, 3, core::Category::kOp};
          t += rand(1000, 5000);
          leaf.end = t;
          finish(leaf);
          t += rand(20, 200);
        }
        t += rand(300, 3000);
        child.end = t;
        finish(child);
        t += rand(50, 300);
      }
      t += rand(100, 1000);
      root.end = t;
      finish(root);
      t += rand(100, 500);
    }
    t += rand(500, 2000);
    step.end = t;
    finish(step);
    t += rand(1000, 5000);
  }
}

struct Strings {
  std::vector<uint32_t> names, details;
};

Strings internStrings(core::StringTable& table) {
  Strings s;
  s.names.push_back(table.intern("ProfilerStep"));
  for (int i = 1; i < kNames; ++i) s.names.push_back(table.intern("aten::op_" + std::to_string(i)));
  for (int i = 0; i < kDetails; ++i) {
    s.details.push_back(table.intern("[[" + std::to_string(8 << (i % 6)) + ", " +
                                     std::to_string(64 + i) + "], [" + std::to_string(i) + "]]"));
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// bare insert: the same rows into a plain table, one prepared statement, 100k-row transactions

double threadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Result {
  double seconds = 0, cpu = 0;  // wall; CPU of the inserting thread(s) alone
  int64_t rows = 0, bytes = 0;
  uint64_t refused = 0;
};

void check(int rc, sqlite3* db, const char* what) {
  if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
    std::fprintf(stderr, "writer_bench: %s: %s\n", what, sqlite3_errmsg(db));
    std::exit(1);
  }
}

Result bareInsert(const Options& o, const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) ::unlink((path + suffix).c_str());
  core::StringTable table;
  const Strings strings = internStrings(table);
  // The rows are generated before the clock starts: this measures SQLite alone.
  struct Row {
    int64_t track, start, dur, packed, seq;
    uint32_t detail;
  };
  std::vector<Row> rows;
  rows.reserve(size_t(o.events));
  const int64_t origin = core::nowNs();
  const int64_t base = origin + 1000;
  for (int track = 0; track < o.tracks; ++track) {
    const int64_t count = o.events / o.tracks + (track < o.events % o.tracks ? 1 : 0);
    uint64_t ids = 0;
    generateTrack(
        track, count, base, strings.names, strings.details, [&] { return ++ids; },
        [&](const GenSpan& s) {
          rows.push_back({track + 1, s.start - origin, s.end - s.start,
                          trace::schema::packSpan(s.name, s.depth, uint8_t(s.category)), s.seq,
                          s.detail});
        });
  }
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpuSeconds();
  sqlite3* db = nullptr;
  check(sqlite3_open(path.c_str(), &db), db, "open");
  // The same pragmas and the same spans table as the shard writer (the schema's own CREATE
  // statements), so this is the ceiling for that configuration.
  check(sqlite3_exec(db, "PRAGMA journal_mode = WAL; PRAGMA synchronous = OFF", nullptr, nullptr,
                     nullptr),
        db, "pragmas");
  for (const auto& sql : trace::schema::createStatements()) {
    check(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), db, "create");
  }
  sqlite3_stmt* ins = nullptr;
  check(sqlite3_prepare_v2(db,
                           "INSERT INTO spans (id, track, start_ns, dur_ns, packed, detail, seq) "
                           "VALUES (?, ?, ?, ?, ?, ?, ?)",
                           -1, &ins, nullptr),
        db, "prepare");
  int64_t id = 0, inTxn = 0;
  check(sqlite3_exec(db, "BEGIN", nullptr, nullptr, nullptr), db, "begin");
  for (const Row& s : rows) {
    sqlite3_bind_int64(ins, 1, ++id);
    sqlite3_bind_int64(ins, 2, s.track);
    sqlite3_bind_int64(ins, 3, s.start);
    sqlite3_bind_int64(ins, 4, s.dur);
    sqlite3_bind_int64(ins, 5, s.packed);
    if (s.detail) {
      sqlite3_bind_int64(ins, 6, s.detail);
    } else {
      sqlite3_bind_null(ins, 6);
    }
    if (s.seq >= 0) {
      sqlite3_bind_int64(ins, 7, s.seq);
    } else {
      sqlite3_bind_null(ins, 7);
    }
    check(sqlite3_step(ins), db, "insert");
    sqlite3_reset(ins);
    if (++inTxn == 100'000) {
      check(sqlite3_exec(db, "COMMIT; BEGIN", nullptr, nullptr, nullptr), db, "commit");
      inTxn = 0;
    }
  }
  check(sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr), db, "commit");
  sqlite3_finalize(ins);
  check(sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE", nullptr,
                     nullptr, nullptr),
        db, "checkpoint");
  sqlite3_close(db);
  Result r;
  r.seconds = seconds(t0, std::chrono::steady_clock::now());
  r.cpu = cpuSeconds() - c0;
  r.rows = id;
  r.bytes = fileSize(path);
  return r;
}

// ---------------------------------------------------------------------------------------------
// writer: producer threads push into a Session; ShardWriter drains it to a shard

Result writerRun(const Options& o, const std::string& path) {
  core::Session session;  // default ring capacity, as capture uses
  const Strings strings = internStrings(session.strings());
  std::atomic<uint64_t> refused{0};
  std::atomic<int64_t> producerCpuNs{0};
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpuSeconds();
  trace::ShardOptions opt;
  opt.path = path;
  opt.command = "writer_bench";
  opt.chunk_rows = o.chunkRows;
  trace::ShardWriter writer(session, opt);
  writer.start();
  const int64_t base = core::nowNs() + 1000;
  std::vector<std::thread> producers;
  for (int track = 0; track < o.tracks; ++track) {
    const int64_t count = o.events / o.tracks + (track < o.events % o.tracks ? 1 : 0);
    producers.emplace_back([&, track, count] {
      core::ThreadBuffer& buf = session.threadBuffer(("producer " + std::to_string(track)).c_str());
      generateTrack(
          track, count, base, strings.names, strings.details, [&] { return buf.nextId(); },
          [&](const GenSpan& g) {
            core::SpanRecord s;
            s.category = g.category;
            s.depth = g.depth;
            s.name = g.name;
            s.start_ns = g.start;
            s.end_ns = g.end;
            s.id = g.id;
            s.parent = g.parent;
            s.seq = g.seq;
            s.detail = g.detail;
            const auto rec = core::Record::from(s);
            // A full ring means the writer is behind: wait for it (the refusal is counted by the
            // ring as a drop; here it is retried, so nothing is lost).
            while (!buf.ring.tryPush(rec)) {
              refused.fetch_add(1, std::memory_order_relaxed);
              std::this_thread::sleep_for(std::chrono::milliseconds(1));
            }
          });
      producerCpuNs.fetch_add(int64_t(threadCpuSeconds() * 1e9));
    });
  }
  for (auto& p : producers) p.join();
  writer.close();
  Result r;
  r.seconds = seconds(t0, std::chrono::steady_clock::now());
  // Process CPU minus what the producers used: the writer thread (plus the main thread's waiting).
  r.cpu = cpuSeconds() - c0 - double(producerCpuNs.load()) * 1e-9;
  r.rows = int64_t(writer.counts().spans);
  r.bytes = fileSize(path);
  r.refused = refused.load();
  return r;
}

// ---------------------------------------------------------------------------------------------
// range queries: one thread track, a window 1% of the trace wide, at random places

struct QueryResult {
  double medianMs = 0, p90Ms = 0, maxMs = 0;
  double meanRows = 0;
  int64_t windowNs = 0;
};

QueryResult rangeQueries(const Options& o, const std::string& path) {
  auto reader = trace::TraceReader::open(path);
  const auto [first, last] = reader.timeRange();
  std::vector<int64_t> threadTracks;
  for (const auto& t : reader.tracks()) {
    if (t.kind == core::TrackKind::kThread && t.event_count > 0) threadTracks.push_back(t.id);
  }
  QueryResult q;
  q.windowNs = (last - first) / 100;
  std::mt19937_64 rng(42);
  std::vector<double> ms;
  int64_t rows = 0;
  for (int i = 0; i < o.queries; ++i) {
    const int64_t track = threadTracks[rng() % threadTracks.size()];
    const int64_t t0 = first + int64_t(rng() % uint64_t(last - first - q.windowNs));
    const auto a = std::chrono::steady_clock::now();
    const auto spans = reader.spans(track, t0, t0 + q.windowNs);
    ms.push_back(seconds(a, std::chrono::steady_clock::now()) * 1e3);
    rows += int64_t(spans.size());
  }
  std::sort(ms.begin(), ms.end());
  q.medianMs = ms[ms.size() / 2];
  q.p90Ms = ms[ms.size() * 9 / 10];
  q.maxMs = ms.back();
  q.meanRows = double(rows) / double(o.queries);
  return q;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// ---------------------------------------------------------------------------------------------
// sustained rate: a producer paced at --rate records/s into one ring of the capture's size
// (CaptureConfig::ring_capacity, 2^18), drained every 10 ms (the capture's default) by either
// writer. Writer CPU = process CPU - producer thread CPU over the paced second(s).

struct RateResult {
  uint64_t pushed = 0, dropped = 0;
  double writerCpu = 0;                   // s, while the producer ran
  double seconds = 0;                     // the producer's wall time
  double closeSeconds = 0, closeCpu = 0;  // close (+ conversion for raw): after the run
};

double threadCpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

RateResult rateRun(const Options& o, bool raw, const std::string& path) {
  core::Session session(size_t{1} << 18);
  const core::StringId name = session.strings().intern("aten::add");
  std::unique_ptr<trace::ShardWriter> sqlite;
  std::unique_ptr<core::RawShardWriter> rawWriter;
  if (raw) {
    core::RawShardOptions ro;
    ro.path = trace::rawShardPath(path);
    ro.drain_interval_ms = 10;
    rawWriter = std::make_unique<core::RawShardWriter>(session, ro);
    rawWriter->start();
  } else {
    trace::ShardOptions so;
    so.path = path;
    so.flush_interval_ms = 10;
    sqlite = std::make_unique<trace::ShardWriter>(session, so);
    sqlite->start();
  }
  RateResult r;
  double producerCpu = 0;
  const double p0 = cpuSeconds();
  std::thread producer([&] {
    core::ThreadBuffer& b = session.threadBuffer("producer");
    const double c0 = threadCpu();
    const int64_t t0 = core::nowNs();
    const int64_t end = t0 + static_cast<int64_t>(o.seconds * 1e9);
    int64_t now = t0;
    while (now < end) {
      const auto due = static_cast<uint64_t>(double(now - t0) * o.rate * 1e-9);
      while (r.pushed < due) {
        core::SpanRecord sp;
        sp.name = name;
        sp.start_ns = now;
        sp.end_ns = now + 100;
        sp.id = b.nextId();
        b.ring.tryPush(core::Record::from(sp));
        ++r.pushed;
      }
      now = core::nowNs();
    }
    r.seconds = double(now - t0) * 1e-9;
    producerCpu = threadCpu() - c0;
  });
  producer.join();
  const double p1 = cpuSeconds();
  r.writerCpu = (p1 - p0) - producerCpu;
  r.dropped = session.dropped();
  const int64_t w0 = core::nowNs();
  if (raw) {
    rawWriter->close();
    trace::convertRawShard(rawWriter->path(), path);
    ::unlink(rawWriter->path().c_str());
  } else {
    sqlite->close();
  }
  r.closeSeconds = double(core::nowNs() - w0) * 1e-9;
  r.closeCpu = cpuSeconds() - p1;
  return r;
}

int rateMain(const Options& o) {
  const std::string shard = o.dir + "/writer_bench_rate.db";
  std::printf(
      "writer_bench --rate %.0f: one producer thread, %.1f s, ring 2^18 records, drained "
      "every 10 ms\n\n| run | writer | records | dropped | writer CPU s | writer CPU "
      "%% of a core | close+convert s | close+convert CPU s |\n| --- | --- | --- | --- | "
      "--- | --- | --- | --- |\n",
      o.rate, o.seconds);
  for (int run = 0; run < o.repeat; ++run) {
    for (const bool raw : {run % 2 == 1, run % 2 == 0}) {  // alternate which goes first
      const RateResult r = rateRun(o, raw, shard);
      std::printf("| %d | %s | %llu | %llu | %.3f | %.1f | %.2f | %.2f |\n", run + 1,
                  raw ? "raw" : "sqlite", (unsigned long long)r.pushed,
                  (unsigned long long)r.dropped, r.writerCpu, 100 * r.writerCpu / r.seconds,
                  r.closeSeconds, r.closeCpu);
      std::fflush(stdout);
      ::unlink(shard.c_str());
    }
  }
  return 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// main

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.rate > 0) {
    try {
      return rateMain(o);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "writer_bench: %s\n", e.what());
      return 1;
    }
  }
  const std::string bare = o.dir + "/writer_bench_bare.db";
  const std::string shard = o.dir + "/writer_bench_shard.db";
  std::printf("writer_bench: %lld span events on %d tracks (threads), %d run(s)\n",
              (long long)o.events, o.tracks, o.repeat);
  std::printf(
      "\n| run | bare insert ev/s | bare B/row | bare CPU s | writer ev/s | writer B/event | "
      "writer CPU s | ratio (wall) | ratio (CPU) | refused pushes |\n| --- | --- | --- | "
      "--- | --- | --- | --- | --- | --- | --- |\n");
  std::vector<double> bareRate, writerRate, ratio, cpuRatio, bytes, bareBytes;
  try {
    for (int run = 0; run < o.repeat; ++run) {
      const Result b = bareInsert(o, bare);
      const Result w = writerRun(o, shard);
      const double br = double(b.rows) / b.seconds;
      const double wr = double(w.rows) / w.seconds;
      bareRate.push_back(br);
      writerRate.push_back(wr);
      ratio.push_back(wr / br);
      bytes.push_back(double(w.bytes) / double(w.rows));
      bareBytes.push_back(double(b.bytes) / double(b.rows));
      cpuRatio.push_back(b.cpu / w.cpu);
      std::printf("| %d | %.2fM | %.1f | %.2f | %.2fM | %.1f | %.2f | %.2fx | %.2fx | %llu |\n",
                  run + 1, br / 1e6, bareBytes.back(), b.cpu, wr / 1e6, bytes.back(), w.cpu,
                  ratio.back(), cpuRatio.back(), (unsigned long long)w.refused);
      std::fflush(stdout);
    }
    std::printf("| median | %.2fM | %.1f | | %.2fM | %.1f | | %.2fx | %.2fx | |\n",
                median(bareRate) / 1e6, median(bareBytes), median(writerRate) / 1e6, median(bytes),
                median(ratio), median(cpuRatio));

    const QueryResult q = rangeQueries(o, shard);
    std::printf(
        "\nrange query, one thread track, window = 1%% of the trace (%.3f ms of trace "
        "time), %d random windows:\n",
        double(q.windowNs) / 1e6, o.queries);
    std::printf(
        "| median ms | p90 ms | max ms | spans returned (mean) | us per span returned |\n"
        "| --- | --- | --- | --- | --- |\n| %.3f | %.3f | %.3f | %.0f | %.3f |\n",
        q.medianMs, q.p90Ms, q.maxMs, q.meanRows, q.medianMs * 1e3 / q.meanRows);
    std::printf("\ntargets: ratio >= 0.80x: %s; bytes/event <= 40: %s; query median <= 1 ms: %s\n",
                median(ratio) >= 0.8 ? "met" : "MISSED", median(bytes) <= 40 ? "met" : "MISSED",
                q.medianMs <= 1.0 ? "met" : "MISSED");
  } catch (const trace::TraceError& e) {
    std::fprintf(stderr, "writer_bench: %s\n", e.what());
    return 1;
  }
  if (!o.keep) {
    ::unlink(bare.c_str());
    ::unlink(shard.c_str());
  }
  return 0;
}
