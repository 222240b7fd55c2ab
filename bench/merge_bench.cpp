// merge_bench: trace::mergeShards on R synthetic rank shards of N events each (default 8 x 1M),
// beside a plain SQLite copy of the same shards' rows (ATTACH + INSERT INTO ... SELECT * into
// tables without keys or indexes) measured in the same run. The shards are written first by the
// real ShardWriter (its throughput is printed too): per rank a forward thread (op spans with
// shapes, allocations tagged activation/parameter/temporary), a backward thread (autograd spans,
// forward->backward flows, frees), "loss" counters, step spans with args, and a per-rank clock
// offset that the merge applies. Prints a table; asserts nothing. Built by default, never run by
// CI. Results and the command: docs/performance.md.
//
//   merge_bench [--ranks R] [--events N] [--repeat K] [--dir DIR] [--keep]
//
// Sections: options · the synthetic rank · writing shards · plain copy · merge · main
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tracerun/core/clock.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;

namespace {

// ---- options ------------------------------------------------------------------------------------

struct Options {
  int ranks = 8;
  int64_t events = 1'000'000;  // per rank: spans + memory + flows + counters (args not counted)
  int repeat = 3;
  std::string dir = "/tmp";
  bool keep = false;
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{
      "merge_bench: mergeShards on R synthetic rank shards (N events each) beside a plain "
      "SQLite ATTACH + INSERT ... SELECT copy of the same rows."};
  app.add_option("--ranks", o.ranks, "rank shards to merge")->check(CLI::PositiveNumber);
  app.add_option("--events", o.events, "events per shard")
      ->check(CLI::Range(int64_t{1000}, std::numeric_limits<int64_t>::max()));
  app.add_option("--repeat", o.repeat, "repetitions (medians are printed)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", o.dir, "scratch folder for the shards");
  app.add_flag("--keep", o.keep, "keep the files");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return o;
}

using SteadyClock = std::chrono::steady_clock;

double secondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

int64_t fileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void removeDb(const std::string& path) {
  for (const char* suffix : {"", "-journal", "-wal", "-shm", ".tmp"}) {
    ::unlink((path + suffix).c_str());
  }
}

// ---- the synthetic rank -------------------------------------------------------------------------

// Pushes a record, waiting while the writer drains a full ring (nothing is dropped).
template <typename T>
void push(core::ThreadBuffer& buf, const T& record) {
  const auto slot = core::Record::from(record);
  while (!buf.ring.tryPush(slot)) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

struct Names {
  std::vector<core::StringId> ops, backward, shapes;
  core::StringId step = 0, loss = 0, stepArg = 0;
};

Names internNames(core::StringTable& t) {
  Names n;
  for (int i = 0; i < 48; ++i) n.ops.push_back(t.intern("aten::op_" + std::to_string(i)));
  for (int i = 0; i < 48; ++i) n.backward.push_back(t.intern("OpBackward" + std::to_string(i)));
  for (int i = 0; i < 128; ++i) {
    n.shapes.push_back(
        t.intern("[[" + std::to_string(8 << (i % 5)) + ", " + std::to_string(64 + i) + "]]"));
  }
  n.step = t.intern("step");
  n.loss = t.intern("loss");
  n.stepArg = t.intern("step");
  return n;
}

// The rank's steps, laid out before any record is pushed so that two threads can emit them: per
// step kOpsPerStep forward ops (each with one allocation), then one backward node per op in
// reverse order (a flow from its op, the free of its allocation), then the step span, its args
// and a "loss" sample. ~40% spans, ~40% memory, ~20% flows, plus steps and counters.
constexpr int kOpsPerStep = 200;
constexpr int64_t kEventsPerStep = 5 * kOpsPerStep + 2;

struct Op {
  int64_t start, end, bwdStart, bwdEnd, bytes;
  uint64_t ptr;
  int name;
  core::StringId detail;
  core::MemoryCategory category;
};
struct Step {
  int64_t start, end;
  core::EventId id;
};

int64_t emitRank(core::Session& session, int rank, int64_t budget) {
  const Names n = internNames(session.strings());
  core::ThreadBuffer& fwd = session.threadBuffer("main");
  std::mt19937_64 rng(0xbe9c4 + static_cast<uint64_t>(rank));
  const int64_t steps = (budget + kEventsPerStep - 1) / kEventsPerStep;
  std::vector<Op> ops;
  std::vector<Step> stepRows;
  ops.reserve(static_cast<size_t>(steps * kOpsPerStep));
  int64_t t = core::nowNs();
  for (int64_t step = 0; step < steps; ++step) {
    const int64_t stepStart = t;
    const size_t first = ops.size();
    for (int i = 0; i < kOpsPerStep; ++i) {
      Op op{};
      op.start = t += 200 + static_cast<int64_t>(rng() % 800);
      op.end = t += 1000 + static_cast<int64_t>(rng() % 4000);
      op.bytes = int64_t{4096} << (rng() % 6);
      op.ptr = 0x7f0000000000ULL + static_cast<uint64_t>(ops.size()) * 64;
      op.name = i % static_cast<int>(n.ops.size());
      op.detail = rng() % 10 < 4 ? n.shapes[rng() % n.shapes.size()] : 0;
      op.category = i % 10 == 0  ? core::MemoryCategory::kParameter
                    : i % 3 == 0 ? core::MemoryCategory::kTemporary
                                 : core::MemoryCategory::kActivation;
      ops.push_back(op);
    }
    for (size_t k = ops.size(); k-- > first;) {
      ops[k].bwdStart = t += 100;
      ops[k].bwdEnd = t += 1500;
    }
    t += 500;
    stepRows.push_back({stepStart, t, fwd.nextId()});
  }

  // Autograd's thread: backward spans, flows from the forward ops, frees.
  std::thread backward([&] {
    core::ThreadBuffer& bwd = session.threadBuffer("autograd");
    for (int64_t step = 0; step < steps; ++step) {
      const size_t first = static_cast<size_t>(step * kOpsPerStep);
      for (size_t k = first + kOpsPerStep; k-- > first;) {
        const Op& op = ops[k];
        core::SpanRecord s;
        s.category = core::Category::kBackward;
        s.name = n.backward[static_cast<size_t>(op.name)];
        s.start_ns = op.bwdStart;
        s.end_ns = op.bwdEnd;
        s.id = bwd.nextId();
        push(bwd, s);
        core::FlowRecord f;
        f.flow = core::FlowKind::kForwardBackward;
        f.src_track = fwd.track;
        f.dst_track = bwd.track;
        f.src_ts_ns = op.start;
        f.dst_ts_ns = op.bwdStart;
        push(bwd, f);
        core::MemoryRecord m;
        m.category = op.category;
        m.ts_ns = op.bwdEnd - 10;
        m.ptr = op.ptr;
        m.bytes = -op.bytes;
        push(bwd, m);
      }
    }
  });
  // The main thread: forward ops and allocations, steps with their args, the loss counter.
  int64_t live = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const Step& row = stepRows[static_cast<size_t>(step)];
    for (size_t k = static_cast<size_t>(step * kOpsPerStep);
         k < static_cast<size_t>((step + 1) * kOpsPerStep); ++k) {
      const Op& op = ops[k];
      core::MemoryRecord m;
      m.category = op.category;
      m.op = n.ops[static_cast<size_t>(op.name)];
      m.ts_ns = op.start + 50;
      m.ptr = op.ptr;
      m.bytes = op.bytes;
      m.total = live += op.bytes;
      push(fwd, m);
      core::SpanRecord s;
      s.category = core::Category::kOp;
      s.depth = 1;
      s.name = n.ops[static_cast<size_t>(op.name)];
      s.start_ns = op.start;
      s.end_ns = op.end;
      s.id = fwd.nextId();
      s.parent = row.id;
      s.seq = static_cast<int64_t>(k);
      s.detail = op.detail;
      push(fwd, s);
    }
    live = 0;  // every allocation of the step is freed in its backward
    core::SpanRecord s;
    s.category = core::Category::kPhase;
    s.name = n.step;
    s.start_ns = row.start;
    s.end_ns = row.end;
    s.id = row.id;
    push(fwd, s);
    core::ArgsRecord a;
    a.count = 1;
    a.owner = row.id;
    a.args[0].key = n.stepArg;
    a.args[0].value = step + 1;
    push(fwd, a);
    core::CounterRecord c;
    c.name = n.loss;
    c.ts_ns = row.end;
    c.value = 10.0 / static_cast<double>(step + 1);
    push(fwd, c);
  }
  backward.join();
  return steps * kEventsPerStep;
}

// ---- writing shards -----------------------------------------------------------------------------

struct Shards {
  std::vector<std::string> paths;
  int64_t events = 0, bytes = 0;
  std::vector<double> writeSeconds;
};

// Rank r's clock reads r x 0.7 ms more than rank 0's: the merge must shift it back.
int64_t rankOffsetNs(int rank) {
  return int64_t{rank} * 700'000;
}

Shards writeShards(const Options& o) {
  Shards out;
  for (int rank = 0; rank < o.ranks; ++rank) {
    const std::string path = o.dir + "/merge_bench_rank" + std::to_string(rank) + ".db";
    removeDb(path);
    const auto t0 = SteadyClock::now();
    core::Session session;
    trace::ShardOptions opt;
    opt.path = path;
    opt.rank = rank;
    opt.world_size = o.ranks;
    opt.clock_offset_ns = rankOffsetNs(rank);
    opt.command = "merge_bench";
    trace::ShardWriter writer(session, opt);
    writer.start();
    out.events += emitRank(session, rank, o.events);
    writer.close();
    out.writeSeconds.push_back(secondsSince(t0));
    out.paths.push_back(path);
    out.bytes += fileSize(path);
    std::fprintf(stderr, "  rank %d: %.1f MB in %.2f s\n", rank, fileSize(path) / 1e6,
                 out.writeSeconds.back());
  }
  return out;
}

// ---- plain copy ---------------------------------------------------------------------------------

void exec(sqlite3* db, const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::fprintf(stderr, "merge_bench: %s: %s\n", sql.substr(0, 80).c_str(), err ? err : "?");
    sqlite3_free(err);
    std::exit(1);
  }
}

std::vector<std::string> userTables(sqlite3* db, const std::string& schema) {
  std::vector<std::string> out;
  sqlite3_stmt* st = nullptr;
  const std::string sql = "SELECT name FROM " + schema +
                          ".sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'";
  sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr);
  while (sqlite3_step(st) == SQLITE_ROW) {
    out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)));
  }
  sqlite3_finalize(st);
  return out;
}

// The floor for moving these rows: every table of every shard appended with INSERT ... SELECT *
// into tables without keys or indexes (no id remapping, no time shift, no string merge), one
// transaction per shard, journal off.
double plainCopy(const Shards& shards, const std::string& output) {
  removeDb(output);
  const auto t0 = SteadyClock::now();
  sqlite3* db = nullptr;
  sqlite3_open(output.c_str(), &db);
  exec(db, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF");
  bool created = false;
  for (const auto& path : shards.paths) {
    exec(db, "ATTACH '" + path + "' AS s");
    exec(db, "BEGIN");
    for (const auto& table : userTables(db, "s")) {
      if (!created)
        exec(db, "CREATE TABLE main." + table + " AS SELECT * FROM s." + table + " WHERE 0");
      exec(db, "INSERT INTO main." + table + " SELECT * FROM s." + table);
    }
    created = true;
    exec(db, "COMMIT");
    exec(db, "DETACH s");
  }
  sqlite3_close(db);
  return secondsSince(t0);
}

// ---- merge --------------------------------------------------------------------------------------

double mergeOnce(const Shards& shards, const std::string& output) {
  removeDb(output);
  std::vector<trace::MergeInput> inputs;
  for (const auto& p : shards.paths) inputs.push_back({p, false, 0});  // offsets from the shards
  trace::MergeOptions mo;
  mo.output = output;
  const auto t0 = SteadyClock::now();
  trace::mergeShards(inputs, mo);
  return secondsSince(t0);
}

// The merged file holds every rank, and rank r's first step starts r x 0.7 ms earlier than
// written (its offset applied): a wrong merge would not be timed as a right one.
void checkMerged(const Options& o, const std::string& output) {
  const auto reader = trace::TraceReader::open(output);
  if (static_cast<int>(reader.ranks().size()) != o.ranks) {
    std::fprintf(stderr, "merge_bench: the merged file has %zu ranks, not %d\n",
                 reader.ranks().size(), o.ranks);
    std::exit(1);
  }
  for (const auto& r : reader.ranks()) {
    if (r.clock_offset_ns != rankOffsetNs(r.rank)) {
      std::fprintf(stderr, "merge_bench: rank %d's offset is %lld, not %lld\n", r.rank,
                   static_cast<long long>(r.clock_offset_ns),
                   static_cast<long long>(rankOffsetNs(r.rank)));
      std::exit(1);
    }
  }
}

}  // namespace

// ---- main ---------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) < 0) load[0] = -1;
  std::fprintf(stderr, "writing %d shards of %lld events in %s\n", o.ranks,
               static_cast<long long>(o.events), o.dir.c_str());
  const Shards shards = writeShards(o);
  const std::string merged = o.dir + "/merge_bench_merged.db";
  const std::string copied = o.dir + "/merge_bench_copy.db";

  std::vector<double> mergeS, copyS;
  for (int i = 0; i < o.repeat; ++i) {  // alternated, so load changes hit both alike
    mergeS.push_back(mergeOnce(shards, merged));
    copyS.push_back(plainCopy(shards, copied));
    std::fprintf(stderr, "  repetition %d: merge %.2f s, plain copy %.2f s\n", i + 1, mergeS.back(),
                 copyS.back());
  }
  checkMerged(o, merged);
  const double merge = median(mergeS), copy = median(copyS);
  const double writer = median(shards.writeSeconds) * o.ranks;
  const double mb = static_cast<double>(shards.bytes) / 1e6;
  const double ev = static_cast<double>(shards.events);

  std::printf(
      "merge_bench: %d shards x %lld events (%.0f events, %.1f MB of shards), median of "
      "%d, load average %.2f at start\n",
      o.ranks, static_cast<long long>(o.events), ev, mb, o.repeat, load[0]);
  std::printf("| what | s | events/s | MB/s (shard bytes) | vs plain copy |\n");
  std::printf("| --- | --- | --- | --- | --- |\n");
  std::printf("| mergeShards -> one trace | %.2f | %.2fM | %.1f | %.2fx the time |\n", merge,
              ev / merge / 1e6, mb / merge, merge / copy);
  std::printf("| plain copy (ATTACH + INSERT ... SELECT *, no keys) | %.2f | %.2fM | %.1f | 1 |\n",
              copy, ev / copy / 1e6, mb / copy);
  std::printf(
      "| ShardWriter, writing the %d shards (sum of medians) | %.2f | %.2fM | %.1f | "
      "%.2fx |\n",
      o.ranks, writer, ev / writer / 1e6, mb / writer, writer / copy);
  std::printf("merged file: %.1f MB; plain copy: %.1f MB\n", fileSize(merged) / 1e6,
              fileSize(copied) / 1e6);
  if (!o.keep) {
    for (const auto& p : shards.paths) removeDb(p);
    removeDb(merged);
    removeDb(copied);
  }
  return 0;
}
