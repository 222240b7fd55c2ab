// ShardWriter + TraceReader round trip against an independent reference (the records the test
// generated, kept in vectors), plus the reader's errors on bad files. Not a speed test: see
// bench/writer_bench.cpp.
//
// Sections: helpers · generated workload · round trip · range queries · aggregates · stats ·
//           writer errors · reader errors
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "../support/temp_dir.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/schema.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;
using namespace tracerun::trace;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------------------------
// helpers

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("tracerun-wr") {}
};

void execSql(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(sql << ": " << msg);
  REQUIRE(rc == SQLITE_OK);
}

ShardOptions optionsFor(const std::string& path) {
  ShardOptions o;
  o.path = path;
  return o;
}

std::string openError(const std::string& path) {
  try {
    TraceReader::open(path);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// generated workload: what the producers pushed, kept independently of the writer

struct RefSpan {
  int64_t start = 0, end = 0;
  int depth = 0;
  core::Category category = core::Category::kOp;
  core::StringId name = 0, detail = 0;
  int64_t seq = -1;
  core::EventId id = 0, parent = 0;
  int64_t track = 0;
  std::vector<std::pair<core::StringId, int64_t>> args;
};

struct RefInstant {
  int64_t track, ts;
  core::Category category;
  core::StringId name, detail;
  int64_t value;
};

struct RefCounter {
  std::string name;
  int64_t ts;
  double value;
};

struct Reference {
  std::vector<RefSpan> spans;
  std::vector<RefInstant> instants;
  std::vector<RefCounter> counters;
  std::vector<core::MemoryRecord> memory;
  std::vector<FlowRow> flows;  // absolute times, resolved tracks
  std::vector<int64_t> threadTracks;
  int64_t asyncTrack = 0;
};

// A refused push counts as dropped in the ring (core's contract) even though it is retried here;
// the test counts refusals to know what dropped_events must say.
std::atomic<uint64_t> gRefused{0};
void pushOrWait(core::ThreadBuffer& b, const core::Record& r) {
  while (!b.ring.tryPush(r)) {
    gRefused.fetch_add(1);
    std::this_thread::yield();
  }
}
void pushPairOrWait(core::ThreadBuffer& b, const core::Record& a, const core::Record& c) {
  while (!b.ring.tryPushPair(a, c)) {
    gRefused.fetch_add(2);
    std::this_thread::yield();
  }
}

// One producer thread: nested op trees under one long "step" span (emitted last, so it covers
// every chunk of its track), args on some spans, instants, counters, memory, flows.
class Producer {
 public:
  Producer(core::Session& s, int index, int64_t base, const std::vector<core::StringId>& names,
           const std::vector<core::StringId>& keys, core::TrackId asyncTrack)
      : session_(s),
        index_(index),
        cursor_(base + index * 7),
        names_(names),
        keys_(keys),
        asyncTrack_(asyncTrack),
        rng_(1234u + unsigned(index)) {}

  void run(int roots) {
    buf_ = &session_.threadBuffer(("worker " + std::to_string(index_)).c_str());
    ref.threadTracks.push_back(buf_->track);
    const core::EventId stepId = buf_->nextId();
    const int64_t stepStart = cursor_;
    cursor_ += 3;
    for (int r = 0; r < roots; ++r) {
      tree(1, stepId, 3);
      if (r % 10 == 0) sideEvents();
    }
    cursor_ += 5;
    RefSpan step;
    step.start = stepStart;
    step.end = cursor_;
    step.depth = 0;
    step.category = core::Category::kPhase;
    step.name = names_[0];
    step.id = stepId;
    step.track = buf_->track;
    step.args = {{keys_[0], index_}};
    push(step);
    cursor_ += 2;
  }

  Reference ref;

 private:
  int64_t rand(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

  void push(const RefSpan& r) {
    core::SpanRecord s;
    s.category = r.category;
    s.depth = static_cast<uint16_t>(r.depth);
    s.name = r.name;
    s.start_ns = r.start;
    s.end_ns = r.end;
    s.id = r.id;
    s.parent = r.parent;
    s.seq = r.seq;
    s.detail = r.detail;
    s.track = r.track == int64_t{buf_->track} ? 0 : static_cast<core::TrackId>(r.track);
    if (r.args.empty()) {
      pushOrWait(*buf_, core::Record::from(s));
    } else {
      core::ArgsRecord a;
      a.owner = r.id;
      a.count = static_cast<uint8_t>(r.args.size());
      for (size_t i = 0; i < r.args.size(); ++i) {
        a.args[i].key = r.args[i].first;
        a.args[i].value = r.args[i].second;
      }
      pushPairOrWait(*buf_, core::Record::from(s), core::Record::from(a));
    }
    ref.spans.push_back(r);
  }

  void tree(int depth, core::EventId parent, int maxDepth) {
    RefSpan r;
    r.id = buf_->nextId();
    r.parent = parent;
    r.depth = depth;
    r.track = buf_->track;
    r.start = cursor_;
    cursor_ += rand(0, 3);
    if (depth < maxDepth) {
      const int64_t n = rand(0, 3);
      for (int64_t i = 0; i < n; ++i) tree(depth + 1, r.id, maxDepth);
    }
    cursor_ += rand(1, 40);
    r.end = cursor_;
    r.category = depth == 1 ? core::Category::kModule : core::Category::kOp;
    r.name = names_[size_t(rand(1, int64_t(names_.size()) - 1))];
    r.detail = rand(0, 2) == 0 ? names_[size_t(rand(1, 3))] : 0;
    r.seq = rand(0, 3) == 0 ? rand(0, 1000) : -1;
    const int64_t nargs = rand(0, 5) == 0 ? rand(1, 3) : 0;
    for (int64_t i = 0; i < nargs; ++i) r.args.emplace_back(keys_[size_t(i)], rand(-5, 1 << 20));
    push(r);
    cursor_ += rand(0, 5);
  }

  void sideEvents() {
    const int64_t ts = cursor_;
    // An instant on the thread's own track.
    core::InstantRecord in;
    in.category = core::Category::kUser;
    in.name = names_[1];
    in.ts_ns = ts;
    in.detail = rand(0, 1) ? names_[2] : 0;
    in.value = rand(0, 99);
    pushOrWait(*buf_, core::Record::from(in));
    ref.instants.push_back({buf_->track, ts, in.category, in.name, in.detail, in.value});
    // A collective on the shared async lane (overlapping other threads' collectives).
    RefSpan c;
    c.id = buf_->nextId();
    c.track = asyncTrack_;
    c.start = ts + index_;
    c.end = ts + index_ + rand(50, 500);
    c.category = core::Category::kComm;
    c.name = names_[4];
    push(c);
    // A counter sample ("loss" from every thread, "tokens" from thread 0 only).
    core::CounterRecord cr;
    cr.name = index_ == 0 && rand(0, 1) ? session_.strings().intern("tokens")
                                        : session_.strings().intern("loss");
    cr.ts_ns = ts;
    cr.value = double(rand(0, 1000)) / 7.0;
    pushOrWait(*buf_, core::Record::from(cr));
    ref.counters.push_back({session_.strings().get(cr.name), ts, cr.value});
    // An allocation.
    core::MemoryRecord m;
    m.category = static_cast<core::MemoryCategory>(rand(0, 6));
    m.device_type = 0;
    m.device_index = -1;
    m.op = rand(0, 1) ? names_[3] : 0;
    m.ts_ns = ts;
    m.ptr = 0xffff000000000000ULL + uint64_t(rand(0, 1 << 30));  // above INT64_MAX on purpose
    m.bytes = rand(-4096, 4096);
    m.total = rand(0, 1 << 30);
    m.scope = rand(0, 1) ? names_[5] : 0;
    pushOrWait(*buf_, core::Record::from(m));
    ref.memory.push_back(m);
    // A flow from this thread (track 0 = own) to the async lane.
    core::FlowRecord f;
    f.flow = core::FlowKind::kSendRecv;
    f.src_track = 0;
    f.dst_track = asyncTrack_;
    f.src_ts_ns = ts;
    f.dst_ts_ns = c.start;
    pushOrWait(*buf_, core::Record::from(f));
    ref.flows.push_back({f.flow, int64_t{buf_->track}, ts, int64_t{asyncTrack_}, c.start});
  }

  core::Session& session_;
  int index_;
  int64_t cursor_;
  const std::vector<core::StringId>& names_;
  const std::vector<core::StringId>& keys_;
  core::TrackId asyncTrack_;
  std::mt19937_64 rng_;
  core::ThreadBuffer* buf_ = nullptr;
};

struct Workload {
  core::Session session{256};  // small rings: producers wait for the writer now and then
  uint64_t refused = 0;
  std::vector<core::StringId> names, keys;
  Reference ref;
  WriterCounts writerCounts;
};

// Runs `threads` producers through a ShardWriter into `path` and closes it.
void record(Workload& w, const std::string& path, int threads, int roots, ShardOptions opt = {}) {
  for (const char* n : {"step", "aten::mm", "aten::add", "[8, 16]", "gloo:all_reduce", "scope"}) {
    w.names.push_back(w.session.strings().intern(n));
  }
  for (const char* k : {"stage", "microbatch", "chunk"}) {
    w.keys.push_back(w.session.strings().intern(k));
  }
  const core::TrackId asyncTrack = w.session.tracks().add(core::TrackKind::kAsync, 0, "comm lane");
  w.ref.asyncTrack = asyncTrack;
  opt.path = path;
  if (opt.chunk_rows == ShardOptions{}.chunk_rows) opt.chunk_rows = 64;
  opt.transaction_rows = 700;
  opt.flush_interval_ms = 1;
  opt.rank = 3;
  opt.command = "test --flag";
  ShardWriter writer(w.session, opt);
  writer.start();
  const int64_t base = core::nowNs() + 1000;
  std::vector<std::unique_ptr<Producer>> producers;
  for (int t = 0; t < threads; ++t) {
    producers.push_back(
        std::make_unique<Producer>(w.session, t, base, w.names, w.keys, asyncTrack));
  }
  std::vector<std::thread> running;
  for (auto& p : producers) running.emplace_back([&p, roots] { p->run(roots); });
  for (auto& t : running) t.join();
  w.refused = gRefused.exchange(0);
  writer.setStat("custom_stat", 42, Severity::kInfo);
  writer.setMeta("note", "hello");
  writer.close();
  w.writerCounts = writer.counts();
  for (auto& p : producers) {
    auto& r = p->ref;
    w.ref.spans.insert(w.ref.spans.end(), r.spans.begin(), r.spans.end());
    w.ref.instants.insert(w.ref.instants.end(), r.instants.begin(), r.instants.end());
    w.ref.counters.insert(w.ref.counters.end(), r.counters.begin(), r.counters.end());
    w.ref.memory.insert(w.ref.memory.end(), r.memory.begin(), r.memory.end());
    w.ref.flows.insert(w.ref.flows.end(), r.flows.begin(), r.flows.end());
    w.ref.threadTracks.insert(w.ref.threadTracks.end(), r.threadTracks.begin(),
                              r.threadTracks.end());
  }
}

bool refLess(const RefSpan& a, const RefSpan& b) {
  return std::tie(a.start, a.depth) < std::tie(b.start, b.depth);
}

std::vector<RefSpan> refSpansOf(const Reference& ref, int64_t track) {
  std::vector<RefSpan> out;
  for (const auto& s : ref.spans) {
    if (s.track == track) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), refLess);
  return out;
}

void requireSameSpan(const SpanRow& got, const RefSpan& want, int64_t origin) {
  INFO("span at " << want.start - origin << " depth " << want.depth);
  REQUIRE(got.start_ns == want.start - origin);
  REQUIRE(got.dur_ns == want.end - want.start);
  REQUIRE(got.depth == want.depth);
  REQUIRE(got.category == want.category);
  REQUIRE(got.name == want.name);
  REQUIRE(got.detail == want.detail);
  REQUIRE(got.seq == want.seq);
}

// One recorded trace shared by the read-only test cases below (recording takes a moment).
struct Recorded {
  TempDir dir;
  Workload w;
  std::string path;
  Recorded() : path(dir.file("rank3.db")) { record(w, path, 4, 300); }
};
Recorded& recorded() {
  static Recorded r;
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// round trip

TEST_CASE("round trip: every span comes back on its track in start order with its args") {
  auto& rec = recorded();
  const Reference& ref = rec.w.ref;
  auto reader = TraceReader::open(rec.path);
  const int64_t origin = std::stoll(reader.meta("origin_ns"));
  CHECK(reader.schemaVersion() == schema::kSchemaVersion);
  CHECK(reader.meta("kind") == "shard");
  CHECK(reader.meta("complete") == "1");
  CHECK(reader.meta("command") == "test --flag");
  CHECK(reader.meta("note") == "hello");
  CHECK(reader.str(rec.w.names[1]) == "aten::mm");
  CHECK(reader.str(99999) == "");

  std::vector<int64_t> tracks = ref.threadTracks;
  tracks.push_back(ref.asyncTrack);
  size_t total = 0;
  for (int64_t track : tracks) {
    const auto want = refSpansOf(ref, track);
    REQUIRE(!want.empty());
    std::vector<SpanRow> got;
    reader.forEachSpan(track, [&](const SpanRow& s) {
      got.push_back(s);
      if (got.size() <= 3) {  // the reader may be called back from inside forEachSpan
        CHECK(!reader.spans(track, s.start_ns, s.start_ns).empty());
        reader.argsOfTrack(track);
      }
    });
    REQUIRE(got.size() == want.size());
    std::map<int64_t, size_t> rowOf;  // span id -> index in want
    for (size_t i = 0; i < got.size(); ++i) {
      requireSameSpan(got[i], want[i], origin);
      CHECK(got[i].track == track);
      rowOf[got[i].id] = i;
    }
    REQUIRE(rowOf.size() == got.size());  // ids unique

    // Args of the whole track and of single spans.
    std::map<size_t, std::vector<std::pair<core::StringId, int64_t>>> gotArgs;
    for (const ArgRow& a : reader.argsOfTrack(track)) {
      REQUIRE(rowOf.count(a.span));
      gotArgs[rowOf[a.span]].emplace_back(a.key, a.value);
    }
    size_t withArgs = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (want[i].args.empty()) {
        CHECK(gotArgs.count(i) == 0);
        continue;
      }
      ++withArgs;
      REQUIRE(gotArgs[i] == want[i].args);
    }
    CHECK(gotArgs.size() == withArgs);
    if (withArgs > 0) {
      const size_t i = gotArgs.begin()->first;
      const auto single = reader.args(got[i].id);
      REQUIRE(single.size() == want[i].args.size());
      CHECK(single[0].key == want[i].args[0].first);
    }
    total += got.size();
  }
  CHECK(total == ref.spans.size());
  CHECK(reader.counts().spans == int64_t(ref.spans.size()));
  CHECK(rec.w.writerCounts.spans == ref.spans.size());
  CHECK(rec.w.writerCounts.unknown == 0);
}

TEST_CASE("round trip: tracks and ranks and instants and counters and memory and flows") {
  auto& rec = recorded();
  const Reference& ref = rec.w.ref;
  auto reader = TraceReader::open(rec.path);
  const int64_t origin = std::stoll(reader.meta("origin_ns"));

  // Ranks: one, with the first and last event.
  const auto ranks = reader.ranks();
  REQUIRE(ranks.size() == 1);
  CHECK(ranks[0].rank == 3);
  CHECK(ranks[0].pid == int64_t(getpid()));
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& s : ref.spans) first = std::min(first, s.start), last = std::max(last, s.end);
  for (const auto& m : ref.memory) first = std::min(first, m.ts_ns), last = std::max(last, m.ts_ns);
  CHECK(ranks[0].start_ns == first - origin);
  CHECK(ranks[0].end_ns == last - origin);
  CHECK(reader.timeRange() == std::make_pair(first - origin, last - origin));

  // Tracks: threads, the async lane and two counter tracks, with counts and longest spans.
  const auto tracks = reader.tracks();
  std::map<std::string, TrackRow> byName;
  for (const auto& t : tracks) byName[t.name] = t;
  REQUIRE(byName.count("loss"));
  REQUIRE(byName.count("tokens"));
  CHECK(byName["loss"].kind == core::TrackKind::kCounter);
  REQUIRE(byName.count("comm lane"));
  CHECK(byName["comm lane"].kind == core::TrackKind::kAsync);
  for (int64_t tid : ref.threadTracks) {
    auto it = std::find_if(tracks.begin(), tracks.end(), [&](auto& t) { return t.id == tid; });
    REQUIRE(it != tracks.end());
    CHECK(it->kind == core::TrackKind::kThread);
    CHECK(it->rank == 3);
    const auto spans = refSpansOf(ref, tid);
    int64_t longest = 0;
    for (const auto& s : spans) longest = std::max(longest, s.end - s.start);
    CHECK(it->longest_span_ns == longest);
    size_t instants = 0;
    for (const auto& i : ref.instants) instants += i.track == tid;
    CHECK(it->event_count == int64_t(spans.size() + instants));
  }

  // Instants of each thread.
  for (int64_t tid : ref.threadTracks) {
    std::vector<RefInstant> want;
    for (const auto& i : ref.instants) {
      if (i.track == tid) want.push_back(i);
    }
    const auto got = reader.instants(tid, INT64_MIN, INT64_MAX);
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i].ts_ns == want[i].ts - origin);
      CHECK(got[i].category == want[i].category);
      CHECK(got[i].name == want[i].name);
      CHECK(got[i].detail == want[i].detail);
      CHECK(got[i].value == want[i].value);
    }
  }

  // Counters: one track per name, samples from every thread.
  for (const char* name : {"loss", "tokens"}) {
    std::vector<std::pair<int64_t, double>> want, got;
    for (const auto& c : ref.counters) {
      if (c.name == name) want.emplace_back(c.ts - origin, c.value);
    }
    for (const auto& c : reader.counters(byName[name].id, INT64_MIN, INT64_MAX)) {
      got.emplace_back(c.ts_ns, c.value);
    }
    std::sort(want.begin(), want.end());
    std::sort(got.begin(), got.end());
    REQUIRE(!want.empty());
    CHECK(got == want);
    CHECK(byName[name].event_count == int64_t(want.size()));
  }

  // Memory: every event, ptr above INT64_MAX intact.
  using MemKey = std::tuple<int64_t, uint64_t, int64_t, int64_t, int, int, int, uint32_t, uint32_t>;
  std::vector<MemKey> want, got;
  for (const auto& m : ref.memory) {
    want.emplace_back(m.ts_ns - origin, m.ptr, m.bytes, m.total, int(m.category), m.device_type,
                      m.device_index, m.op, m.scope);
  }
  for (const auto& m : reader.memory(3, INT64_MIN, INT64_MAX)) {
    CHECK(m.rank == 3);
    got.emplace_back(m.ts_ns, m.ptr, m.bytes, m.total, int(m.category), m.device_type,
                     m.device_index, m.op, m.scope);
  }
  std::sort(want.begin(), want.end());
  std::sort(got.begin(), got.end());
  CHECK(got == want);
  CHECK(reader.memory(0, INT64_MIN, INT64_MAX).empty());

  // Flows: track 0 resolved to the producing thread's track.
  using FlowKey = std::tuple<int, int64_t, int64_t, int64_t, int64_t>;
  std::vector<FlowKey> wantF, gotF;
  for (const auto& f : ref.flows) {
    wantF.emplace_back(int(f.kind), f.src_track, f.src_ts_ns - origin, f.dst_track,
                       f.dst_ts_ns - origin);
  }
  for (const auto& f : reader.flows()) {
    gotF.emplace_back(int(f.kind), f.src_track, f.src_ts_ns, f.dst_track, f.dst_ts_ns);
  }
  std::sort(wantF.begin(), wantF.end());
  std::sort(gotF.begin(), gotF.end());
  CHECK(gotF == wantF);

  const auto counts = reader.counts();
  CHECK(counts.instants == int64_t(ref.instants.size()));
  CHECK(counts.counters == int64_t(ref.counters.size()));
  CHECK(counts.memory == int64_t(ref.memory.size()));
  CHECK(counts.flows == int64_t(ref.flows.size()));
  size_t args = 0;
  for (const auto& s : ref.spans) args += s.args.size();
  CHECK(counts.args == int64_t(args));
  reader.quickCheck();
}

// ---------------------------------------------------------------------------------------------
// range queries

namespace {

struct RangeCheck {
  int nonEmpty = 0, withStep = 0;
};

// reader.spans() over random windows of every track against a brute-force overlap filter.
RangeCheck checkRanges(const TraceReader& reader, const Reference& ref, uint64_t seed) {
  const int64_t origin = std::stoll(reader.meta("origin_ns"));
  std::mt19937_64 rng(seed);
  std::vector<int64_t> tracks = ref.threadTracks;
  tracks.push_back(ref.asyncTrack);
  RangeCheck r;
  for (int64_t track : tracks) {
    const auto all = refSpansOf(ref, track);
    const int64_t lo = all.front().start - origin - 100;
    int64_t hi = lo;
    for (const auto& s : all) hi = std::max(hi, s.end - origin + 100);
    for (int q = 0; q < 150; ++q) {
      const int64_t width = q % 3 == 0 ? 0
                                       : std::uniform_int_distribution<int64_t>(
                                             1, (hi - lo) / (q % 3 == 1 ? 200 : 5))(rng);
      const int64_t t0 = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
      const int64_t t1 = t0 + width;
      std::vector<RefSpan> want;
      for (const auto& s : all) {
        if (s.start - origin <= t1 && s.end - origin >= t0) want.push_back(s);
      }
      const auto got = reader.spans(track, t0, t1);
      INFO("track " << track << " window [" << t0 << ", " << t1 << "]");
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) requireSameSpan(got[i], want[i], origin);
      r.nonEmpty += !got.empty();
      r.withStep += std::any_of(got.begin(), got.end(), [](auto& s) { return s.depth == 0; }) &&
                    got.size() > 1;
    }
    // Empty and reversed windows, everything, and the streamed form.
    CHECK(reader.spans(track, hi + 1000, hi + 2000).empty());
    CHECK(reader.spans(track, hi, lo).empty());
    const auto everything = reader.spans(track, INT64_MIN, INT64_MAX);
    REQUIRE(everything.size() == all.size());
    size_t i = 0;
    reader.forEachSpan(track, [&](const SpanRow& s) { requireSameSpan(s, all[i++], origin); });
    CHECK(i == all.size());
  }
  return r;
}

}  // namespace

TEST_CASE("range queries match a brute-force overlap filter (long spans included)") {
  auto& rec = recorded();
  auto reader = TraceReader::open(rec.path);
  const RangeCheck r = checkRanges(reader, rec.w.ref, 7);
  CHECK(r.nonEmpty > 300);
  CHECK(r.withStep > 100);  // windows that find the long step span from a chunk far before them
  CHECK(reader.spans(987654, INT64_MIN, INT64_MAX).empty());
}

TEST_CASE("range queries stay exact when chunks are not sorted inside (as a merge may rebuild)") {
  // Join id-adjacent chunks of one track into one chunk, as merging an incomplete shard rebuilds
  // them: such a chunk is several sorted runs, not one.
  TempDir dir;
  const std::string p = dir.file("rechunked.db");
  fs::copy_file(recorded().path, p);
  struct Chunk {
    int64_t track, minStart, maxEnd, first, last;
  };
  std::vector<Chunk> chunks;
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(p.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(db, "SELECT * FROM span_chunks ORDER BY first_id", -1, &st, nullptr);
    while (sqlite3_step(st) == SQLITE_ROW) {
      Chunk c{sqlite3_column_int64(st, 0), sqlite3_column_int64(st, 1), sqlite3_column_int64(st, 2),
              sqlite3_column_int64(st, 3), sqlite3_column_int64(st, 4)};
      if (!chunks.empty() && chunks.back().track == c.track && chunks.back().last + 1 == c.first) {
        Chunk& b = chunks.back();
        b.minStart = std::min(b.minStart, c.minStart);
        b.maxEnd = std::max(b.maxEnd, c.maxEnd);
        b.last = c.last;
      } else {
        chunks.push_back(c);
      }
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
  }
  std::string sql = "DELETE FROM span_chunks; UPDATE tracks SET longest_chunk_ns = 0;";
  for (const Chunk& c : chunks) {
    sql += "INSERT INTO span_chunks VALUES (" + std::to_string(c.track) + ", " +
           std::to_string(c.minStart) + ", " + std::to_string(c.maxEnd) + ", " +
           std::to_string(c.first) + ", " + std::to_string(c.last) + ");";
    sql += "UPDATE tracks SET longest_chunk_ns = max(longest_chunk_ns, " +
           std::to_string(c.maxEnd - c.minStart) + ") WHERE id = " + std::to_string(c.track) + ";";
  }
  execSql(p, sql);
  // Some rebuilt chunk really is out of order inside.
  int unsorted = 0;
  {
    auto reader = TraceReader::open(p);
    for (int64_t track : recorded().w.ref.threadTracks) {
      std::vector<SpanRow> rows;
      reader.forEachSpan(track, [&](const SpanRow& s) { rows.push_back(s); });
      std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.id < b.id; });
      for (const Chunk& c : chunks) {
        if (c.track != track) continue;
        for (size_t i = 1; i < rows.size(); ++i) {
          if (rows[i].id > c.first && rows[i].id <= c.last && rows[i - 1].id >= c.first &&
              rows[i].start_ns < rows[i - 1].start_ns) {
            ++unsorted;
            break;
          }
        }
      }
    }
  }
  INFO(chunks.size() << " chunks after joining");
  REQUIRE(unsorted > 0);
  auto reader = TraceReader::open(p);
  checkRanges(reader, recorded().w.ref, 8);
}

TEST_CASE("range queries read the right ids when a chunk's ids have gaps (rows deleted by hand)") {
  // The reader numbers a chunk's rows from first_id when the chunk holds every id of its range;
  // with gaps it must read the ids. The truth here is SQLite's own plain query of the same file.
  TempDir dir;
  const std::string p = dir.file("gaps.db");
  fs::copy_file(recorded().path, p);
  execSql(p, "DELETE FROM spans WHERE id % 5 = 2");
  auto reader = TraceReader::open(p);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(p.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db,
                             "SELECT id, start_ns, dur_ns, depth, category, name, "
                             "ifnull(detail, 0), ifnull(seq, -1) FROM spans WHERE track = ?1 "
                             "ORDER BY start_ns, depth, id",
                             -1, &st, nullptr) == SQLITE_OK);
  std::mt19937_64 rng(9);
  for (int64_t track : recorded().w.ref.threadTracks) {
    std::vector<SpanRow> want;
    sqlite3_bind_int64(st, 1, track);
    while (sqlite3_step(st) == SQLITE_ROW) {
      SpanRow r;
      r.id = sqlite3_column_int64(st, 0);
      r.track = track;
      r.start_ns = sqlite3_column_int64(st, 1);
      r.dur_ns = sqlite3_column_int64(st, 2);
      r.depth = sqlite3_column_int(st, 3);
      r.category = static_cast<core::Category>(sqlite3_column_int(st, 4));
      r.name = static_cast<core::StringId>(sqlite3_column_int64(st, 5));
      r.detail = static_cast<core::StringId>(sqlite3_column_int64(st, 6));
      r.seq = sqlite3_column_int64(st, 7);
      want.push_back(r);
    }
    sqlite3_reset(st);
    REQUIRE(want.size() > 100);
    auto same = [](const SpanRow& a, const SpanRow& b) {
      return a.id == b.id && a.track == b.track && a.start_ns == b.start_ns &&
             a.dur_ns == b.dur_ns && a.depth == b.depth && a.category == b.category &&
             a.name == b.name && a.detail == b.detail && a.seq == b.seq;
    };
    std::vector<SpanRow> streamed;
    reader.forEachSpan(track, [&](const SpanRow& s) { streamed.push_back(s); });
    REQUIRE(streamed.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) REQUIRE(same(streamed[i], want[i]));
    const int64_t lo = want.front().start_ns, hi = want.back().start_ns;
    for (int q = 0; q < 40; ++q) {
      const int64_t t0 = std::uniform_int_distribution<int64_t>(lo, hi)(rng);
      const int64_t t1 = t0 + (hi - lo) / 20;
      std::vector<SpanRow> inWindow;
      for (const auto& r : want) {
        if (r.start_ns <= t1 && r.end_ns() >= t0) inWindow.push_back(r);
      }
      const auto got = reader.spans(track, t0, t1);
      INFO("track " << track << " window [" << t0 << ", " << t1 << "]");
      REQUIRE(got.size() == inWindow.size());
      for (size_t i = 0; i < got.size(); ++i) REQUIRE(same(got[i], inWindow[i]));
    }
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
}

TEST_CASE("spans: name, depth and category at their limits come back from the reader and SQL") {
  TempDir dir;
  const std::string path = dir.file("limits.db");
  core::Session session(64);
  struct Case {
    uint32_t name;
    uint16_t depth;
    uint8_t category;  // as pushed
    core::Category stored;
  };
  const std::vector<Case> cases = {
      {0xffffffffu, 65535, uint8_t(core::Category::kMemcpy), core::Category::kMemcpy},
      {1, 0, uint8_t(core::Category::kOp), core::Category::kOp},
      {123456, 300, uint8_t(core::Category::kOther), core::Category::kOther},
      {77, 2, 200, core::Category::kOther},  // no such category: stored as kOther
  };
  {
    ShardWriter writer(session, optionsFor(path));
    core::ThreadBuffer& b = session.threadBuffer("limits");
    for (size_t i = 0; i < cases.size(); ++i) {
      core::SpanRecord s;
      s.name = cases[i].name;
      s.depth = cases[i].depth;
      s.category = static_cast<core::Category>(cases[i].category);
      s.start_ns = core::nowNs() + int64_t(i) * 1000;
      s.end_ns = s.start_ns + 10;
      s.id = b.nextId();
      REQUIRE(b.ring.tryPush(core::Record::from(s)));
    }
    writer.close();
  }
  auto reader = TraceReader::open(path);
  int64_t track = 0;
  for (const auto& t : reader.tracks()) {
    if (t.name == "limits") track = t.id;
  }
  const auto got = reader.spans(track, INT64_MIN, INT64_MAX);
  REQUIRE(got.size() == cases.size());
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT name, depth, category FROM spans WHERE id = ?1", -1, &st,
                             nullptr) == SQLITE_OK);
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    CHECK(got[i].name == cases[i].name);
    CHECK(got[i].depth == cases[i].depth);
    CHECK(got[i].category == cases[i].stored);
    sqlite3_bind_int64(st, 1, got[i].id);
    REQUIRE(sqlite3_step(st) == SQLITE_ROW);
    CHECK(uint32_t(sqlite3_column_int64(st, 0)) == cases[i].name);
    CHECK(sqlite3_column_int(st, 1) == cases[i].depth);
    CHECK(sqlite3_column_int(st, 2) == int(cases[i].stored));
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  // The aggregate of the unknown category went to kOther too.
  bool found = false;
  for (const auto& a : reader.aggregates()) {
    if (a.name == 77) {
      found = true;
      CHECK(a.category == core::Category::kOther);
    }
  }
  CHECK(found);
}

// ---------------------------------------------------------------------------------------------
// aggregates

TEST_CASE("aggregates: count and total and self time per name and category") {
  auto& rec = recorded();
  const Reference& ref = rec.w.ref;
  auto reader = TraceReader::open(rec.path);
  std::map<core::EventId, int64_t> childTime;
  for (const auto& s : ref.spans) {
    if (s.parent) childTime[s.parent] += s.end - s.start;
  }
  std::map<std::pair<core::StringId, int>, std::array<int64_t, 3>> want;
  for (const auto& s : ref.spans) {
    auto& a = want[{s.name, int(s.category)}];
    const int64_t dur = s.end - s.start;
    a[0] += 1;
    a[1] += dur;
    a[2] += std::max<int64_t>(0, dur - (childTime.count(s.id) ? childTime[s.id] : 0));
  }
  std::map<std::pair<core::StringId, int>, std::array<int64_t, 3>> got;
  for (const auto& a : reader.aggregates()) {
    CHECK(a.rank == 3);
    got[{a.name, int(a.category)}] = {a.count, a.total_ns, a.self_ns};
  }
  CHECK(got == want);
  // Self time is really exclusive: the step span's self time is much less than its total.
  const auto step = got.at({rec.w.names[0], int(core::Category::kPhase)});
  CHECK(step[2] < step[1] / 2);
}

// ---------------------------------------------------------------------------------------------
// stats

TEST_CASE("stats: dropped_events says what the rings refused and custom stats are kept") {
  auto reader = TraceReader::open(recorded().path);
  std::map<std::string, StatRow> stats;
  for (const auto& s : reader.stats()) stats[s.name] = s;
  REQUIRE(stats.count("dropped_events"));
  const uint64_t refused = recorded().w.refused;
  CHECK(stats["dropped_events"].value == int64_t(refused));
  CHECK(stats["dropped_events"].severity == (refused ? Severity::kError : Severity::kInfo));
  CHECK(stats["unknown_records"].value == 0);
  CHECK(stats["custom_stat"].value == 42);
  CHECK(stats["dropped_events"].rank == 3);
  CHECK(stats.count("clipped_spans") == 0);
  CHECK(stats.count("orphan_args") == 0);
}

TEST_CASE(
    "stats: dropped events are an error while unknown records and clipped spans are warnings") {
  TempDir dir;
  const std::string path = dir.file("drops.db");
  core::Session session(16);
  {
    ShardWriter writer(session, optionsFor(path));  // not started: nothing drains while we push
    std::thread t([&] {
      auto& b = session.threadBuffer("producer");
      for (int i = 0; i < 40; ++i) {
        core::SpanRecord s;
        s.start_ns = 100 + i;
        s.end_ns = i == 5 ? 50 : 200 + i;  // one span ends before it starts
        s.id = b.nextId();
        b.ring.tryPush(core::Record::from(s));
      }
    });
    t.join();
    core::Record junk = core::Record::from(core::CounterRecord{});
    junk.bytes[0] = 77;  // a kind this writer does not know
    session.threadBuffer().ring.tryPush(junk);
    writer.close();
    CHECK(writer.counts().unknown == 1);
    CHECK(writer.counts().spans == 16);
  }
  auto reader = TraceReader::open(path);
  std::map<std::string, StatRow> stats;
  for (const auto& s : reader.stats()) stats[s.name] = s;
  CHECK(stats.at("dropped_events").value == 24);
  CHECK(stats.at("dropped_events").severity == Severity::kError);
  CHECK(stats.at("unknown_records").value == 1);
  CHECK(stats.at("unknown_records").severity == Severity::kWarning);
  CHECK(stats.at("clipped_spans").value == 1);
  CHECK(stats.at("clipped_spans").severity == Severity::kWarning);
  CHECK(reader.counts().spans == 16);
}

TEST_CASE("args that do not follow their span are counted and not attached to another span") {
  TempDir dir;
  const std::string path = dir.file("orphan.db");
  core::Session session(64);
  ShardWriter writer(session, optionsFor(path));
  auto& b = session.threadBuffer();
  core::SpanRecord s;
  s.id = b.nextId();
  s.start_ns = core::nowNs();
  s.end_ns = s.start_ns + 10;
  core::ArgsRecord a;
  a.owner = s.id + 1;  // not the span just pushed
  a.count = 1;
  b.ring.tryPushPair(core::Record::from(s), core::Record::from(a));
  writer.close();
  auto reader = TraceReader::open(path);
  CHECK(reader.counts().args == 0);
  bool found = false;
  for (const auto& st : reader.stats()) found |= st.name == "orphan_args" && st.value == 1;
  CHECK(found);
}

// ---------------------------------------------------------------------------------------------
// writer errors

TEST_CASE("writer: an uncreatable path is a TraceError naming it") {
  core::Session session;
  const std::string path = "/nonexistent-dir-tracerun/x.db";
  try {
    ShardWriter writer(session, optionsFor(path));
    FAIL("no error");
  } catch (const TraceError& e) {
    CHECK(std::string(e.what()).find(path) != std::string::npos);
  }
}

TEST_CASE("writer: a write failure on the drain thread is kept and rethrown by flush and close") {
  TempDir dir;
  const std::string path = dir.file("full.db");
  core::Session session(1 << 12);
  // A file-size limit makes writes past 256 KiB fail with EFBIG, as a full disk would.
  struct rlimit old;
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  auto oldHandler = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 256 * 1024;
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  std::string flushError, closeError;
  {
    ShardOptions opt;
    opt.path = path;
    opt.flush_interval_ms = 1;
    ShardWriter writer(session, opt);
    writer.start();
    auto& b = session.threadBuffer();
    const auto name = session.strings().intern("op");
    for (int i = 0; i < 200000; ++i) {
      core::SpanRecord s;
      s.id = b.nextId();
      s.name = name;
      s.start_ns = core::nowNs() + i * 1000;
      s.end_ns = s.start_ns + 999;
      s.detail = static_cast<core::StringId>(i);  // larger rows
      // A full ring means the drain thread is behind or has stopped: flush here (it rethrows).
      if (!b.ring.tryPush(core::Record::from(s)) || i % 5000 == 0) {
        try {
          writer.flush();
        } catch (const TraceError& e) {
          flushError = e.what();
          break;
        }
        b.ring.tryPush(core::Record::from(s));
      }
    }
    try {
      writer.close();
    } catch (const TraceError& e) {
      closeError = e.what();
    }
    CHECK_THROWS_AS(writer.close(), TraceError);  // still failed when asked again
    // (and the destructor, next, must not throw)
  }
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, oldHandler);
  INFO("flush: " << flushError << " / close: " << closeError);
  CHECK(flushError.find(path) != std::string::npos);
  CHECK(closeError.find(path) != std::string::npos);
  CHECK(openError(path).find("incomplete") != std::string::npos);
}

TEST_CASE("writer: close is idempotent and an empty shard is a valid trace") {
  TempDir dir;
  const std::string path = dir.file("empty.db");
  core::Session session;
  ShardWriter writer(session, optionsFor(path));
  writer.start();
  writer.flush();
  writer.close();
  writer.close();
  CHECK_NOTHROW(writer.flush());
  auto reader = TraceReader::open(path);
  CHECK(reader.counts().spans == 0);
  CHECK(reader.ranks().size() == 1);
  CHECK(reader.timeRange() == std::make_pair(int64_t{0}, int64_t{0}));
  CHECK(!fs::exists(path + "-wal"));  // journal_mode switched back: one self-contained file
}

// ---------------------------------------------------------------------------------------------
// reader errors

TEST_CASE("reader errors: one line naming the file and the problem") {
  TempDir dir;
  const std::string good = recorded().path;

  SECTION("missing file") {
    const std::string p = dir.file("missing.db");
    const auto e = openError(p);
    CHECK(e.find(p + ": cannot open") == 0);
  }
  SECTION("a text file") {
    const std::string p = dir.file("notes.txt");
    std::ofstream(p) << "hello, this is not a database at all\n";
    CHECK(openError(p) == p + ": not an SQLite file (and so not a tracerun trace)");
  }
  SECTION("an empty file") {
    const std::string p = dir.file("empty.db");
    std::ofstream(p).flush();
    CHECK(openError(p).find(": not an SQLite file") != std::string::npos);
  }
  SECTION("an SQLite file that is not a trace") {
    const std::string p = dir.file("other.db");
    execSql(p, "CREATE TABLE t (x); INSERT INTO t VALUES (1)");
    CHECK(openError(p) == p + ": not a tracerun trace (no meta table)");
    execSql(p, "CREATE TABLE meta (key, value); INSERT INTO meta VALUES ('magic', 'other')");
    CHECK(openError(p) == p + ": not a tracerun trace (meta magic is 'other')");
  }
  SECTION("a newer schema version") {
    const std::string p = dir.file("newer.db");
    fs::copy_file(good, p);
    execSql(p, "UPDATE meta SET value = '3' WHERE key = 'schema_version'");
    CHECK(openError(p) == p + ": written by a newer tracerun (schema 3, this build reads 2)");
    const std::string q = dir.file("newer2.db");
    fs::copy_file(good, q);
    execSql(q, "PRAGMA user_version = 7");
    CHECK(openError(q) == q + ": written by a newer tracerun (schema 7, this build reads 2)");
  }
  SECTION("an older schema version (1: name, depth and category in columns of their own)") {
    const std::string p = dir.file("older.db");
    fs::copy_file(good, p);
    execSql(p,
            "PRAGMA user_version = 1; UPDATE meta SET value = '1' WHERE key = "
            "'schema_version'");
    CHECK(openError(p) ==
          p + ": written by an older tracerun (schema 1, this build reads 2); record it again");
  }
  SECTION("an incomplete shard (complete = 0)") {
    const std::string p = dir.file("incomplete.db");
    fs::copy_file(good, p);
    execSql(p, "UPDATE meta SET value = '0' WHERE key = 'complete'");
    CHECK(openError(p) == p + ": incomplete trace (the writer did not finish)");
  }
  SECTION("a copy taken while the writer was still running") {
    const std::string live = dir.file("live.db");
    const std::string p = dir.file("copy.db");
    core::Session session;
    ShardWriter writer(session, optionsFor(live));
    writer.start();
    auto& b = session.threadBuffer();
    core::SpanRecord s;
    s.id = b.nextId();
    s.start_ns = core::nowNs();
    s.end_ns = s.start_ns + 5;
    b.ring.tryPush(core::Record::from(s));
    writer.flush();
    fs::copy_file(live, p);  // the main file only, as a crash would leave it without its WAL
    writer.close();
    CHECK(openError(p) == p + ": incomplete trace (the writer did not finish)");
    CHECK(openError(live).empty());
  }
  SECTION("a truncated copy") {
    const std::string p = dir.file("truncated.db");
    fs::copy_file(good, p);
    const auto size = fs::file_size(p);
    fs::resize_file(p, size / 2);
    const auto e = openError(p);
    CHECK(e.find(p + ": truncated (" + std::to_string(size / 2) + " bytes, the header says " +
                 std::to_string(size) + ")") == 0);
    fs::resize_file(p, 60);
    CHECK(openError(p).find(": truncated (60 bytes") != std::string::npos);
  }
}

TEST_CASE("a shard whose process died names its rank and holds spans older than a second") {
  TempDir dir;
  const std::string live = dir.file("live.db");
  const std::string copy = dir.file("crashed.db");
  core::Session session;
  ShardOptions o = optionsFor(live);
  o.rank = 5;
  o.clock_offset_ns = 777;
  ShardWriter writer(session, o);
  writer.start();
  auto& b = session.threadBuffer();
  core::SpanRecord s;
  s.id = b.nextId();
  s.start_ns = core::nowNs();
  s.end_ns = s.start_ns + 5;
  REQUIRE(b.ring.tryPush(core::Record::from(s)));
  // No flush(): the drain thread alone must write the pending chunk and commit within ~1 s.
  // Wait up to 10 s for it (a loaded machine may be slow); what is checked is the content.
  auto countIn = [](const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    int64_t v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
      v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
  };
  int64_t spans = 0;
  for (int i = 0; i < 600 && spans != 1; ++i) {  // 60 s: a bound for a hang, not a timing
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fs::copy_file(live, copy, fs::copy_options::overwrite_existing);
    if (fs::exists(live + "-wal")) {
      fs::copy_file(live + "-wal", copy + "-wal", fs::copy_options::overwrite_existing);
    }
    spans = countIn(copy, "SELECT count(*) FROM spans");
  }
  CHECK(spans == 1);
  CHECK(countIn(copy, "SELECT rank FROM ranks") == 5);
  CHECK(countIn(copy, "SELECT clock_offset_ns FROM ranks WHERE rank = 5") == 777);
  CHECK(openError(copy) == copy + ": incomplete trace (the writer did not finish)");
  writer.close();
}

TEST_CASE("reader errors: byte-flipped copies give TraceErrors or data and never a crash") {
  TempDir dir;
  const std::string good = recorded().path;
  const auto size = fs::file_size(good);
  std::ifstream in(good, std::ios::binary);
  std::vector<char> bytes(size);
  in.read(bytes.data(), std::streamsize(size));
  std::mt19937_64 rng(99);
  int failedOpen = 0, failedLater = 0, clean = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto copy = bytes;
    // Flip a run of bytes somewhere past the 100-byte header (trial 0: in the header's page size).
    const size_t at = trial == 0 ? 16 : std::uniform_int_distribution<size_t>(100, size - 64)(rng);
    for (size_t i = 0; i < 16; ++i) copy[at + i] = char(~copy[at + i]);
    const std::string p = dir.file("flip" + std::to_string(trial) + ".db");
    std::ofstream(p, std::ios::binary).write(copy.data(), std::streamsize(copy.size()));
    std::optional<TraceReader> reader;
    try {
      reader.emplace(TraceReader::open(p));
    } catch (const TraceError& e) {
      CHECK(std::string(e.what()).find(p + ": ") == 0);
      ++failedOpen;
      continue;
    }
    try {
      for (const auto& t : reader->tracks()) {
        reader->spans(t.id, 0, 1'000'000);
        size_t n = 0;
        reader->forEachSpan(t.id, [&](const SpanRow&) { ++n; });
        reader->argsOfTrack(t.id);
        reader->instants(t.id, INT64_MIN, INT64_MAX);
        reader->counters(t.id, INT64_MIN, INT64_MAX);
      }
      reader->memory(3, INT64_MIN, INT64_MAX);
      reader->flows();
      reader->aggregates();
      reader->stats();
      reader->counts();
      reader->quickCheck();
      ++clean;
    } catch (const TraceError& e) {
      CHECK(std::string(e.what()).find(p + ": ") == 0);
      ++failedLater;
    }
  }
  INFO("open failed " << failedOpen << ", later " << failedLater << ", clean " << clean);
  CHECK(failedOpen + failedLater > 10);  // most damage is noticed
}
