// mergeShards against shards built directly with SQL from the schema (independent of ShardWriter):
// times shifted by exactly each rank's clock offset, strings remapped by text, ids unique, range
// queries equal brute force, aggregates and stats carried per rank, bad shards refused.
// Sections: the generated model · writing a shard with SQL · reading the merged file back · tests
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "../support/temp_dir.h"
#include "fixture_trace.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/schema.h"
#include "tracerun/trace/shard_writer.h"

namespace fs = std::filesystem;
using namespace tracerun;
using namespace tracerun::trace;

namespace {

// ---- the generated model ------------------------------------------------------------------------

// Every time below is "global": rank 0's CLOCK_MONOTONIC. A rank's clock reads global + offset.
constexpr int64_t kGlobalBase = 10'000'000'000;

struct GenSpan {
  std::string track, name, detail;  // detail "" = NULL
  int64_t start = 0, dur = 0;       // global start
  int depth = 0, category = 0;
  int64_t seq = -1;  // -1 = NULL
  std::vector<std::pair<std::string, int64_t>> args;
  int64_t shard_id = 0;
};
struct GenInstant {
  std::string track, name, detail;
  int64_t ts = 0, value = 0;
  int category = 0;
};
struct GenCounter {
  std::string track;
  int64_t ts = 0;
  double value = 0;
};
struct GenMemory {
  int64_t ts = 0, ptr = 0, bytes = 0, total = 0;
  int device_type = 0, device_index = -1, category = 0;
  std::string op, scope;
};
struct GenFlow {
  int kind = 0;
  std::string src_track, dst_track;
  int64_t src_ts = 0, dst_ts = 0;
};
struct GenTrack {
  int64_t id;
  int kind;
  std::string name;
};

struct GenShard {
  int rank = 0;
  int64_t offset = 0;        // this rank's clock minus rank 0's
  int64_t start_global = 0;  // when the rank started, global; its origin is start_global + offset
  bool complete = true;
  std::vector<GenTrack> tracks;
  std::vector<GenSpan> spans;
  std::vector<GenInstant> instants;
  std::vector<GenCounter> counters;
  std::vector<GenMemory> memory;
  std::vector<GenFlow> flows;
  std::vector<std::tuple<std::string, int64_t, int>> stats;
  int64_t origin() const { return start_global + offset; }
};

const std::vector<std::string> kNames = {
    "aten::mm", "aten::add", "aten::relu",      "aten::addmm", "step",
    "forward",  "backward",  "gloo:all_reduce", "microbatch",  "weird \"quoted\"\tname \xC3\xBC\\"};
const std::vector<std::string> kDetails = {"", "[[4, 8], [8, 16]]", "[[1]]", "dtype=float"};

void genTree(std::mt19937_64& rng, const std::string& track, int depth, int64_t start, int64_t end,
             std::vector<GenSpan>& out) {
  GenSpan s;
  s.track = track;
  s.name = kNames[rng() % kNames.size()];
  s.detail = kDetails[rng() % kDetails.size()];
  s.start = start;
  s.dur = end - start;
  s.depth = depth;
  s.category = static_cast<int>(rng() % 9);
  s.seq = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 100) : -1;
  if (rng() % 3 == 0) s.args.push_back({"microbatch", static_cast<int64_t>(rng() % 8)});
  if (rng() % 4 == 0) s.args.push_back({"stage", -static_cast<int64_t>(rng() % 4)});
  out.push_back(s);
  if (depth >= 3) return;
  const int children = static_cast<int>(rng() % 4);
  int64_t cursor = start + 1;
  for (int i = 0; i < children; ++i) {
    const int64_t room = (end - 1 - cursor) / (children - i);
    if (room < 8) break;
    const int64_t cs = cursor + static_cast<int64_t>(rng() % static_cast<uint64_t>(room / 4));
    const int64_t ce = cs + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(room / 2));
    genTree(rng, track, depth + 1, cs, ce, out);
    cursor = ce + 1;
  }
}

GenShard generate(int rank, int64_t offset, uint64_t seed) {
  std::mt19937_64 rng(seed);
  GenShard g;
  g.rank = rank;
  g.offset = offset;
  g.start_global = kGlobalBase - 1'000'000 - rank * 1000;
  g.tracks = {{1, 0, "main"}, {2, 0, "worker"}, {3, 3, "loss"}, {4, 1, "gloo lane"}};
  for (const char* track : {"main", "worker"}) {
    int64_t t = kGlobalBase + static_cast<int64_t>(rng() % 1000);
    for (int root = 0; root < 40; ++root) {
      const int64_t dur = 1000 + static_cast<int64_t>(rng() % 100000);
      genTree(rng, track, 0, t, t + dur, g.spans);
      t += dur + 1 + static_cast<int64_t>(rng() % 5000);
    }
  }
  int64_t t = kGlobalBase;
  for (int i = 0; i < 25; ++i) {  // an async lane: overlapping spans are allowed there
    GenSpan s;
    s.track = "gloo lane";
    s.name = "gloo:all_reduce";
    s.start = t;
    s.dur = 5000 + static_cast<int64_t>(rng() % 50000);
    s.category = 4;
    s.args = {{"bytes", int64_t{1} << (10 + i % 20)}};
    g.spans.push_back(s);
    t += static_cast<int64_t>(rng() % 40000);
  }
  for (int i = 0; i < 20; ++i) {
    g.instants.push_back(
        {"main", "marker", i % 2 ? "" : "detail text", kGlobalBase + i * 7919, i * 3 - 10, i % 9});
  }
  for (int i = 0; i < 50; ++i) {
    g.counters.push_back({"loss", kGlobalBase + i * 10007, 0.25 * i + rank + 1e-3});
  }
  int64_t total = 0;
  for (int i = 0; i < 40; ++i) {
    GenMemory m;
    m.ts = kGlobalBase + i * 5003;
    m.ptr = (int64_t{1} << 40) + i * 4096;
    m.bytes = i % 3 == 2 ? -4096 : 8192;
    total += m.bytes;
    m.total = total;
    m.device_type = i % 2;
    m.device_index = i % 2 ? 0 : -1;
    m.category = i % 7;
    m.op = i % 4 ? kNames[i % kNames.size()] : "";
    m.scope = i % 5 ? "forward" : "";
    g.memory.push_back(m);
  }
  std::vector<const GenSpan*> mains, workers;
  for (const auto& s : g.spans) (s.track == "main" ? mains : workers).push_back(&s);
  for (int i = 0; i < 15; ++i) {
    const GenSpan* a = mains[rng() % mains.size()];
    const GenSpan* b = workers[rng() % workers.size()];
    g.flows.push_back({i % 4, a->track, b->track, a->start, b->start});
  }
  g.stats = {{"dropped_events", rank * 10, rank % 3}, {"clipped_spans", rank, 0}};
  return g;
}

// ---- writing a shard with SQL -------------------------------------------------------------------

class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &db_) == SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      const std::string msg = err ? err : "?";
      sqlite3_free(err);
      FAIL("SQL failed: " << msg << " in " << sql.substr(0, 200));
    }
  }

 private:
  sqlite3* db_ = nullptr;
};

std::string q(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

struct ShardLayout {
  bool write_chunks = true;
  bool write_rank = true;
  bool write_aggregates = true;
  bool describe_worker = true;  // false: the tracks table lacks "worker" (a crashed writer)
  int64_t schema_version = schema::kSchemaVersion;
  std::string kind = "shard";
  size_t chunk_rows = 37;
};

// Writes g as a shard; fills in GenSpan::shard_id. Strings get shard-specific ids.
void writeShard(GenShard& g, const std::string& path, const ShardLayout& layout = {}) {
  fs::remove(path);
  RawDb db(path);
  db.exec("BEGIN");
  for (const auto& s : schema::createStatements()) db.exec(s);
  db.exec("PRAGMA user_version = " + std::to_string(layout.schema_version));
  const int64_t origin = g.origin();
  auto local = [&](int64_t global) { return global + g.offset - origin; };

  // Strings in a rank-specific order, so the same text has different ids in different shards.
  std::vector<std::string> pool = kNames;
  pool.insert(pool.end(), kDetails.begin() + 1, kDetails.end());
  for (const char* extra : {"microbatch", "stage", "bytes", "marker", "detail text"}) {
    pool.push_back(extra);
  }
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  std::mt19937_64 shuffle(1000 + g.rank);
  std::shuffle(pool.begin(), pool.end(), shuffle);
  std::map<std::string, int64_t> ids{{"", 0}};
  db.exec("INSERT INTO strings VALUES (0, '')");
  for (size_t i = 0; i < pool.size(); ++i) {
    const int64_t id = static_cast<int64_t>(i) * 3 + 1 + g.rank;  // sparse on purpose
    ids[pool[i]] = id;
    db.exec("INSERT INTO strings VALUES (" + std::to_string(id) + ", " + q(pool[i]) + ")");
  }
  auto sid = [&](const std::string& s) { return std::to_string(ids.at(s)); };
  auto sidOrNull = [&](const std::string& s) { return s.empty() ? std::string("NULL") : sid(s); };
  std::map<std::string, int64_t> trackIds;
  for (const auto& t : g.tracks) trackIds[t.name] = t.id;

  // Spans: per track sorted by start, in chunks, chunks of the tracks interleaved.
  std::map<std::string, std::vector<GenSpan*>> byTrack;
  for (auto& s : g.spans) byTrack[s.track].push_back(&s);
  for (auto& [name, list] : byTrack) {
    std::stable_sort(list.begin(), list.end(), [](const GenSpan* a, const GenSpan* b) {
      return std::tie(a->start, a->depth) < std::tie(b->start, b->depth);
    });
  }
  std::map<std::string, size_t> cursor;
  std::map<std::string, int64_t> longestSpan, longestChunk, events;
  int64_t nextId = 1;
  for (bool more = true; more;) {
    more = false;
    for (auto& [name, list] : byTrack) {
      size_t& at = cursor[name];
      if (at >= list.size()) continue;
      more = true;
      const size_t end = std::min(list.size(), at + layout.chunk_rows);
      const int64_t first = nextId;
      int64_t minStart = INT64_MAX, maxEnd = INT64_MIN;
      for (; at < end; ++at) {
        GenSpan& s = *list[at];
        s.shard_id = nextId++;
        const int64_t start = local(s.start);
        minStart = std::min(minStart, start);
        maxEnd = std::max(maxEnd, start + s.dur);
        longestSpan[name] = std::max(longestSpan[name], s.dur);
        ++events[name];
        // packed as docs/trace-format.md spells it, not through schema::packSpan.
        db.exec("INSERT INTO spans (id, track, start_ns, dur_ns, detail, seq, packed) VALUES (" +
                std::to_string(s.shard_id) + ", " + std::to_string(trackIds.at(name)) + ", " +
                std::to_string(start) + ", " + std::to_string(s.dur) + ", " + sidOrNull(s.detail) +
                ", " + (s.seq < 0 ? std::string("NULL") : std::to_string(s.seq)) + ", " +
                std::to_string(s.category) + " + (" + std::to_string(s.depth) + " << 4) + (" +
                sid(s.name) + " << 20))");
        for (const auto& [key, value] : s.args) {
          db.exec("INSERT INTO args VALUES (" + std::to_string(s.shard_id) + ", " + sid(key) +
                  ", " + std::to_string(value) + ")");
        }
      }
      longestChunk[name] = std::max(longestChunk[name], maxEnd - minStart);
      if (layout.write_chunks) {
        db.exec("INSERT INTO span_chunks VALUES (" + std::to_string(trackIds.at(name)) + ", " +
                std::to_string(minStart) + ", " + std::to_string(maxEnd) + ", " +
                std::to_string(first) + ", " + std::to_string(nextId - 1) + ")");
      }
    }
  }
  for (const auto& i : g.instants) {
    ++events[i.track];
    db.exec("INSERT INTO instants VALUES (" + std::to_string(trackIds.at(i.track)) + ", " +
            std::to_string(local(i.ts)) + ", " + std::to_string(i.category) + ", " + sid(i.name) +
            ", " + sidOrNull(i.detail) + ", " + std::to_string(i.value) + ")");
  }
  for (const auto& c : g.counters) {
    ++events[c.track];
    std::ostringstream v;
    v.precision(17);
    v << c.value;
    db.exec("INSERT INTO counters VALUES (" + std::to_string(trackIds.at(c.track)) + ", " +
            std::to_string(local(c.ts)) + ", " + v.str() + ")");
  }
  for (const auto& m : g.memory) {
    db.exec("INSERT INTO memory VALUES (" + std::to_string(g.rank) + ", " +
            std::to_string(local(m.ts)) + ", " + std::to_string(m.device_type) + ", " +
            std::to_string(m.device_index) + ", " + std::to_string(m.ptr) + ", " +
            std::to_string(m.bytes) + ", " + std::to_string(m.total) + ", " +
            std::to_string(m.category) + ", " + sidOrNull(m.op) + ", " + sidOrNull(m.scope) + ")");
  }
  for (const auto& f : g.flows) {
    db.exec("INSERT INTO flows VALUES (" + std::to_string(f.kind) + ", " +
            std::to_string(trackIds.at(f.src_track)) + ", " + std::to_string(local(f.src_ts)) +
            ", " + std::to_string(trackIds.at(f.dst_track)) + ", " +
            std::to_string(local(f.dst_ts)) + ")");
  }
  for (const auto& t : g.tracks) {
    if (!layout.describe_worker && t.name == "worker") continue;
    db.exec("INSERT INTO tracks VALUES (" + std::to_string(t.id) + ", " + std::to_string(g.rank) +
            ", " + std::to_string(t.kind) + ", " + std::to_string(100 + t.id) + ", " + q(t.name) +
            ", " + std::to_string(events[t.name]) + ", " + std::to_string(longestSpan[t.name]) +
            ", " + std::to_string(longestChunk[t.name]) + ")");
  }
  if (layout.write_aggregates) {
    std::map<std::pair<std::string, int>, std::tuple<int64_t, int64_t>> agg;
    for (const auto& s : g.spans) {
      auto& [count, total] = agg[{s.name, s.category}];
      ++count;
      total += s.dur;
    }
    for (const auto& [key, value] : agg) {
      db.exec("INSERT INTO aggregates VALUES (" + std::to_string(g.rank) + ", " + sid(key.first) +
              ", " + std::to_string(key.second) + ", " + std::to_string(std::get<0>(value)) + ", " +
              std::to_string(std::get<1>(value)) + ", " + std::to_string(std::get<1>(value) / 2) +
              ")");
    }
  }
  for (const auto& [name, value, severity] : g.stats) {
    db.exec("INSERT INTO stats VALUES (" + std::to_string(g.rank) + ", " + q(name) + ", " +
            std::to_string(value) + ", " + std::to_string(severity) + ")");
  }
  if (layout.write_rank) {
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto& s : g.spans) {
      first = std::min(first, local(s.start));
      last = std::max(last, local(s.start) + s.dur);
    }
    db.exec("INSERT INTO ranks VALUES (" + std::to_string(g.rank) + ", 'host-" +
            std::to_string(g.rank) + "', " + std::to_string(4000 + g.rank) + ", " +
            std::to_string(g.offset) + ", " + std::to_string(first) + ", " + std::to_string(last) +
            ")");
  }
  const std::map<std::string, std::string> meta = {
      {"magic", schema::kMagic},
      {"schema_version", std::to_string(layout.schema_version)},
      {"kind", layout.kind},
      {"complete", g.complete ? "1" : "0"},
      {"origin_ns", std::to_string(origin)},
      {"world_size", "4"},
      {"command", "train --rank " + std::to_string(g.rank)},
      {"tracerun_version", "test"},
  };
  for (const auto& [k, v] : meta) db.exec("INSERT INTO meta VALUES (" + q(k) + ", " + q(v) + ")");
  db.exec("COMMIT");
}

// ---- reading the merged file back ---------------------------------------------------------------

// A span as text, times global minus the merged origin, so generated and merged compare directly.
using SpanKey = std::tuple<int, std::string, int64_t, int, std::string, std::string, int64_t, int,
                           int64_t, std::string>;

std::string argsText(std::vector<std::pair<std::string, int64_t>> args) {
  std::sort(args.begin(), args.end());
  std::string out;
  for (const auto& [k, v] : args) out += k + "=" + std::to_string(v) + ";";
  return out;
}

std::vector<SpanKey> expectedSpans(const std::vector<GenShard>& shards, int64_t mergedOrigin) {
  std::vector<SpanKey> out;
  for (const auto& g : shards) {
    for (const auto& s : g.spans) {
      out.emplace_back(g.rank, s.track, s.start - mergedOrigin, s.depth, s.name, s.detail, s.dur,
                       s.category, s.seq, argsText(s.args));
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Merged {
  std::vector<SpanKey> spans;
  std::map<int64_t, std::vector<SpanRow>> byTrack;
  std::set<int64_t> ids;
  size_t rows = 0;
};

Merged readSpans(const TraceReader& r) {
  Merged m;
  for (const auto& t : r.tracks()) {
    std::map<int64_t, std::vector<std::pair<std::string, int64_t>>> args;
    for (const auto& a : r.argsOfTrack(t.id)) args[a.span].push_back({r.str(a.key), a.value});
    r.forEachSpan(t.id, [&](const SpanRow& s) {
      m.spans.emplace_back(t.rank, t.name, s.start_ns, s.depth, r.str(s.name), r.str(s.detail),
                           s.dur_ns, static_cast<int>(s.category), s.seq, argsText(args[s.id]));
      m.byTrack[t.id].push_back(s);
      m.ids.insert(s.id);
      ++m.rows;
    });
  }
  std::sort(m.spans.begin(), m.spans.end());
  return m;
}

std::string describe(const SpanKey& k) {
  std::ostringstream o;
  o << "rank " << std::get<0>(k) << " track " << std::get<1>(k) << " start " << std::get<2>(k)
    << " depth " << std::get<3>(k) << " name '" << std::get<4>(k) << "' detail '" << std::get<5>(k)
    << "' dur " << std::get<6>(k) << " cat " << std::get<7>(k) << " seq " << std::get<8>(k)
    << " args " << std::get<9>(k);
  return o.str();
}

void requireSameSpans(const std::vector<SpanKey>& expected, const std::vector<SpanKey>& got) {
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i]) {
      FAIL("span " << i << " differs: expected " << describe(expected[i]) << "\n got "
                   << describe(got[i]));
    }
  }
}

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("tracerun-merge") {}
};

const std::vector<int64_t> kOffsets = {0, 5'000'000, -3'000'000, 123'456'789};

std::vector<GenShard> fourShards(const TempDir& dir, std::vector<MergeInput>& inputs) {
  std::vector<GenShard> shards;
  for (int r = 0; r < 4; ++r) shards.push_back(generate(r, kOffsets[r], 42 + r));
  for (int r : {2, 0, 3, 1}) {  // not in rank order on purpose
    writeShard(shards[r], dir.file("rank" + std::to_string(r) + ".db"));
    inputs.push_back({dir.file("rank" + std::to_string(r) + ".db")});
  }
  return shards;
}

std::string mergeError(const std::vector<MergeInput>& inputs, const std::string& out,
                       bool allowIncomplete = false) {
  try {
    mergeShards(inputs, MergeOptions{out, {}}, allowIncomplete);
  } catch (const TraceError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

// ---- tests --------------------------------------------------------------------------------------

TEST_CASE("merge: every rank's events on rank 0's clock, strings by text, ids unique") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  auto shards = fourShards(dir, inputs);
  std::vector<std::pair<size_t, size_t>> progress;
  const std::string out = dir.file("run.db");
  mergeShards(inputs, MergeOptions{out, [&](size_t d, size_t n) { progress.push_back({d, n}); }});
  CHECK(progress.front() == std::make_pair(size_t{0}, size_t{4}));
  CHECK(progress.back() == std::make_pair(size_t{4}, size_t{4}));
  CHECK_FALSE(fs::exists(out + ".tmp"));

  auto r = TraceReader::open(out);
  CHECK(r.meta("kind") == "merged");
  CHECK(r.meta("complete") == "1");
  CHECK(r.meta("world_size") == "4");
  CHECK(r.meta("command") == "train --rank 0");
  const int64_t mergedOrigin = shards[0].origin();
  REQUIRE(r.meta("origin_ns") == std::to_string(mergedOrigin));

  const auto ranks = r.ranks();
  REQUIRE(ranks.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(ranks[i].rank == i);
    CHECK(ranks[i].host == "host-" + std::to_string(i));
    CHECK(ranks[i].pid == 4000 + i);
    CHECK(ranks[i].clock_offset_ns == kOffsets[i]);
    int64_t first = INT64_MAX;
    for (const auto& s : shards[i].spans) first = std::min(first, s.start);
    CHECK(ranks[i].start_ns == first - mergedOrigin);
  }

  const Merged m = readSpans(r);
  CHECK(m.ids.size() == m.rows);  // span ids unique across ranks
  requireSameSpans(expectedSpans(shards, mergedOrigin), m.spans);

  // Each rank's first root lands on the shared axis: its local clock minus exactly its offset.
  for (const auto& g : shards) {
    const auto& s = g.spans.front();
    const int64_t storedInShard = s.start + g.offset - g.origin();
    const int64_t expected = storedInShard + g.origin() - g.offset - mergedOrigin;
    CHECK(expected == s.start - mergedOrigin);
  }

  // Tracks: unique ids, rank from the shard, counts and extents unchanged.
  std::set<int64_t> trackIds;
  std::map<int, int> perRank;
  for (const auto& t : r.tracks()) {
    trackIds.insert(t.id);
    ++perRank[t.rank];
    if (t.name == "main" || t.name == "worker") CHECK(t.longest_span_ns > 0);
  }
  CHECK(trackIds.size() == 16);
  CHECK(perRank == std::map<int, int>{{0, 4}, {1, 4}, {2, 4}, {3, 4}});

  const auto c = r.counts();
  size_t spans = 0, args = 0, instants = 0, counters = 0, memory = 0, flows = 0;
  for (const auto& g : shards) {
    spans += g.spans.size();
    for (const auto& s : g.spans) args += s.args.size();
    instants += g.instants.size();
    counters += g.counters.size();
    memory += g.memory.size();
    flows += g.flows.size();
  }
  CHECK(c.spans == static_cast<int64_t>(spans));
  CHECK(c.args == static_cast<int64_t>(args));
  CHECK(c.instants == static_cast<int64_t>(instants));
  CHECK(c.counters == static_cast<int64_t>(counters));
  CHECK(c.memory == static_cast<int64_t>(memory));
  CHECK(c.flows == static_cast<int64_t>(flows));
  r.quickCheck();
}

TEST_CASE("merge: instants, counters, memory and flows shifted and remapped") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  auto shards = fourShards(dir, inputs);
  const std::string out = dir.file("run.db");
  mergeShards(inputs, MergeOptions{out, {}});
  auto r = TraceReader::open(out);
  const int64_t o = shards[0].origin();
  const int64_t lo = INT64_MIN / 2, hi = INT64_MAX / 2;

  std::map<int64_t, TrackRow> tracks;
  for (const auto& t : r.tracks()) tracks[t.id] = t;

  using InstantKey = std::tuple<int, std::string, int64_t, std::string, std::string, int64_t, int>;
  using CounterKey = std::tuple<int, std::string, int64_t, double>;
  using MemoryKey =
      std::tuple<int, int64_t, int64_t, int64_t, int64_t, int, int, int, std::string, std::string>;
  using FlowKey = std::tuple<int, int, std::string, int64_t, int, std::string, int64_t>;
  std::vector<InstantKey> wantI, gotI;
  std::vector<CounterKey> wantC, gotC;
  std::vector<MemoryKey> wantM, gotM;
  std::vector<FlowKey> wantF, gotF;
  for (const auto& g : shards) {
    for (const auto& i : g.instants) {
      wantI.emplace_back(g.rank, i.track, i.ts - o, i.name, i.detail, i.value, i.category);
    }
    for (const auto& c : g.counters) wantC.emplace_back(g.rank, c.track, c.ts - o, c.value);
    for (const auto& m : g.memory) {
      wantM.emplace_back(g.rank, m.ts - o, m.ptr, m.bytes, m.total, m.device_type, m.device_index,
                         m.category, m.op, m.scope);
    }
    for (const auto& f : g.flows) {
      wantF.emplace_back(f.kind, g.rank, f.src_track, f.src_ts - o, g.rank, f.dst_track,
                         f.dst_ts - o);
    }
  }
  for (const auto& [id, t] : tracks) {
    for (const auto& i : r.instants(id, lo, hi)) {
      gotI.emplace_back(t.rank, t.name, i.ts_ns, r.str(i.name), r.str(i.detail), i.value,
                        static_cast<int>(i.category));
    }
    for (const auto& c : r.counters(id, lo, hi))
      gotC.emplace_back(t.rank, t.name, c.ts_ns, c.value);
  }
  for (int rank = 0; rank < 4; ++rank) {
    for (const auto& m : r.memory(rank, lo, hi)) {
      gotM.emplace_back(m.rank, m.ts_ns, static_cast<int64_t>(m.ptr), m.bytes, m.total,
                        m.device_type, m.device_index, static_cast<int>(m.category), r.str(m.op),
                        r.str(m.scope));
    }
  }
  for (const auto& f : r.flows()) {
    const auto& s = tracks.at(f.src_track);
    const auto& d = tracks.at(f.dst_track);
    gotF.emplace_back(static_cast<int>(f.kind), s.rank, s.name, f.src_ts_ns, d.rank, d.name,
                      f.dst_ts_ns);
  }
  for (auto* v : {&wantI, &gotI}) std::sort(v->begin(), v->end());
  for (auto* v : {&wantC, &gotC}) std::sort(v->begin(), v->end());
  for (auto* v : {&wantM, &gotM}) std::sort(v->begin(), v->end());
  for (auto* v : {&wantF, &gotF}) std::sort(v->begin(), v->end());
  CHECK(gotI == wantI);
  CHECK(gotC == wantC);
  CHECK(gotM == wantM);
  CHECK(gotF == wantF);
}

TEST_CASE("merge: range queries on the merged file equal brute-force filtering") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  fourShards(dir, inputs);
  const std::string out = dir.file("run.db");
  mergeShards(inputs, MergeOptions{out, {}});
  auto r = TraceReader::open(out);
  const Merged m = readSpans(r);
  std::mt19937_64 rng(7);
  int windows = 0;
  for (const auto& [track, all] : m.byTrack) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (const auto& s : all) {
      lo = std::min(lo, s.start_ns);
      hi = std::max(hi, s.end_ns());
    }
    std::vector<std::pair<int64_t, int64_t>> ws = {{lo, hi},
                                                   {lo - 10, lo - 1},
                                                   {hi + 1, hi + 9},
                                                   {all[3].start_ns, all[3].start_ns},
                                                   {all[5].end_ns(), all[5].end_ns()}};
    for (int i = 0; i < 30; ++i) {
      const int64_t a = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      const int64_t w = static_cast<int64_t>(rng() % static_cast<uint64_t>((hi - lo) / 8 + 1));
      ws.push_back({a, a + w});
    }
    for (const auto& [t0, t1] : ws) {
      std::vector<int64_t> want, got;
      for (const auto& s : all) {
        if (s.start_ns <= t1 && s.end_ns() >= t0) want.push_back(s.id);
      }
      for (const auto& s : r.spans(track, t0, t1)) got.push_back(s.id);
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      INFO("track " << track << " window [" << t0 << ", " << t1 << "]");
      CHECK(got == want);
      ++windows;
    }
  }
  CHECK(windows > 300);
}

TEST_CASE("merge: aggregates and stats carried per rank") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  auto shards = fourShards(dir, inputs);
  const std::string out = dir.file("run.db");
  mergeShards(inputs, MergeOptions{out, {}});
  auto r = TraceReader::open(out);

  std::map<std::tuple<int, std::string, int>, std::pair<int64_t, int64_t>> want, got;
  for (const auto& g : shards) {
    for (const auto& s : g.spans) {
      auto& [count, total] = want[{g.rank, s.name, s.category}];
      ++count;
      total += s.dur;
    }
  }
  for (const auto& a : r.aggregates()) {
    got[{a.rank, r.str(a.name), static_cast<int>(a.category)}] = {a.count, a.total_ns};
    CHECK(a.self_ns == a.total_ns / 2);
  }
  CHECK(got == want);

  std::set<std::tuple<int, std::string, int64_t, int>> wantStats, gotStats;
  for (const auto& g : shards) {
    for (const auto& [name, value, severity] : g.stats) {
      wantStats.insert({g.rank, name, value, severity});
    }
  }
  for (const auto& s : r.stats()) {
    gotStats.insert({s.rank, s.name, s.value, static_cast<int>(s.severity)});
  }
  CHECK(gotStats == wantStats);  // nothing was missing, so merge added no rows
}

TEST_CASE("merge: an offset given by the caller overrides the shard's") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  auto shards = fourShards(dir, inputs);
  const int64_t measured = 4'000'000;  // rank 2 really runs 4 ms ahead, not 3 ms behind
  for (auto& in : inputs) {
    if (in.path == dir.file("rank2.db")) {
      in.has_offset = true;
      in.clock_offset_ns = measured;
    }
  }
  const std::string out = dir.file("run.db");
  mergeShards(inputs, MergeOptions{out, {}});
  auto r = TraceReader::open(out);
  CHECK(r.ranks()[2].clock_offset_ns == measured);
  // Rank 2's events move by exactly the difference between the two offsets.
  for (auto& s : shards[2].spans) s.start += kOffsets[2] - measured;
  requireSameSpans(expectedSpans(shards, shards[0].origin()), readSpans(r).spans);
}

TEST_CASE("merge: an incomplete shard is refused, or merged as far as it goes when allowed") {
  TempDir dir;
  std::vector<GenShard> shards = {generate(0, 0, 5), generate(1, 2'500'000, 6)};
  shards[1].complete = false;
  writeShard(shards[0], dir.file("rank0.db"));
  ShardLayout crashed;
  crashed.write_chunks = false;
  crashed.write_rank = false;
  crashed.write_aggregates = false;
  crashed.describe_worker = false;
  writeShard(shards[1], dir.file("rank1.db"), crashed);
  // A crashed writer left no ranks row: the launcher, which measured the offset, passes it.
  const std::vector<MergeInput> inputs = {{dir.file("rank0.db")},
                                          {dir.file("rank1.db"), true, 2'500'000}};
  const std::string out = dir.file("run.db");

  const std::string refused = mergeError(inputs, out);
  CHECK_THAT(refused, Catch::Contains(dir.file("rank1.db")) && Catch::Contains("incomplete"));
  CHECK_FALSE(fs::exists(out));
  CHECK_FALSE(fs::exists(out + ".tmp"));

  mergeShards(inputs, MergeOptions{out, {}}, /*allow_incomplete=*/true);
  auto r = TraceReader::open(out);
  CHECK(r.meta("complete") == "1");
  std::map<std::string, std::pair<int64_t, int>> stats;
  for (const auto& s : r.stats()) {
    if (s.rank == 1) stats[s.name] = {s.value, static_cast<int>(s.severity)};
  }
  CHECK(stats["merge_incomplete_shard"] == std::make_pair(int64_t{1}, 2));
  CHECK(stats["merge_undescribed_tracks"] == std::make_pair(int64_t{1}, 1));
  // Every span is there and findable by range: the chunk index was rebuilt.
  const Merged m = readSpans(r);
  requireSameSpans(expectedSpans(shards, shards[0].origin()), [&] {
    auto spans = m.spans;
    for (auto& k : spans) {
      if (std::get<0>(k) == 1 && std::get<1>(k) == "track 2 (not described)") {
        std::get<1>(k) = "worker";
      }
    }
    std::sort(spans.begin(), spans.end());
    return spans;
  }());
  for (const auto& [track, all] : m.byTrack) {
    for (size_t i = 0; i < all.size(); i += 17) {
      const auto& s = all[i];
      const auto hits = r.spans(track, s.start_ns, s.start_ns);
      CHECK(std::any_of(hits.begin(), hits.end(), [&](const SpanRow& h) { return h.id == s.id; }));
    }
  }
  const auto ranks = r.ranks();
  REQUIRE(ranks.size() == 2);
  CHECK(ranks[1].clock_offset_ns == 2'500'000);
  CHECK(ranks[1].start_ns <= ranks[1].end_ns);
}

TEST_CASE("merge: missing and unreadable shards") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  fourShards(dir, inputs);
  const std::string out = dir.file("run.db");
  inputs.push_back({dir.file("rank4.db")});  // never written

  CHECK_THAT(mergeError(inputs, out),
             Catch::Contains(dir.file("rank4.db") + ": cannot open: No such file"));
  CHECK_FALSE(fs::exists(out));

  mergeShards(inputs, MergeOptions{out, {}}, /*allow_incomplete=*/true);
  auto r = TraceReader::open(out);
  bool recorded = false;
  for (const auto& s : r.stats()) {
    if (s.name == "merge_unreadable_shard" && s.rank == 4 && s.severity == Severity::kError) {
      recorded = true;
    }
  }
  CHECK(recorded);
  CHECK(r.ranks().size() == 4);
}

TEST_CASE("merge: bad inputs give one message naming the file") {
  TempDir dir;
  std::vector<GenShard> g = {generate(0, 0, 1), generate(1, 0, 2)};
  writeShard(g[0], dir.file("a.db"));
  writeShard(g[1], dir.file("b.db"));
  const std::string out = dir.file("run.db");

  SECTION("two shards of the same rank") {
    writeShard(g[0], dir.file("a2.db"));
    CHECK_THAT(mergeError({{dir.file("a.db")}, {dir.file("a2.db")}}, out),
               Catch::Contains("rank 0 is also in"));
  }
  SECTION("a newer schema version") {
    ShardLayout newer;
    newer.schema_version = schema::kSchemaVersion + 1;
    writeShard(g[1], dir.file("b.db"), newer);
    CHECK_THAT(mergeError({{dir.file("a.db")}, {dir.file("b.db")}}, out),
               Catch::Contains(dir.file("b.db") + ": written by a newer tracerun"));
  }
  SECTION("an SQLite file that is not a trace") {
    {
      RawDb other(dir.file("other.db"));
      other.exec("CREATE TABLE t (x)");
    }
    CHECK_THAT(mergeError({{dir.file("a.db")}, {dir.file("other.db")}}, out),
               Catch::Contains(dir.file("other.db") + ": not a tracerun trace"));
  }
  SECTION("a text file") {
    std::FILE* f = std::fopen(dir.file("notes.txt").c_str(), "w");
    std::fputs(
        "hello, this is not a database, but it is long enough to have a header......"
        "...................................................................",
        f);
    std::fclose(f);
    CHECK_THAT(mergeError({{dir.file("notes.txt")}}, out),
               Catch::Contains(dir.file("notes.txt") + ": not an SQLite file"));
  }
  SECTION("a truncated shard") {
    fs::copy_file(dir.file("b.db"), dir.file("cut.db"));
    fs::resize_file(dir.file("cut.db"), fs::file_size(dir.file("b.db")) - 4096);
    CHECK_THAT(mergeError({{dir.file("a.db")}, {dir.file("cut.db")}}, out),
               Catch::Contains(dir.file("cut.db") + ": truncated"));
  }
  SECTION("an already merged file") {
    mergeShards({{dir.file("a.db")}, {dir.file("b.db")}}, MergeOptions{out, {}});
    CHECK_THAT(mergeError({{out}}, dir.file("again.db")), Catch::Contains("already a merged"));
  }
  SECTION("the output is one of the shards") {
    CHECK_THAT(mergeError({{dir.file("a.db")}, {dir.file("b.db")}}, dir.file("b.db")),
               Catch::Contains("is also a shard"));
    CHECK(TraceReader::open(dir.file("b.db")).meta("kind") == "shard");
  }
  SECTION("no shards, or an output that cannot be written") {
    CHECK_THAT(mergeError({}, out), Catch::Contains("nothing to merge"));
    const std::string bad = dir.file("no/such/dir/run.db");
    CHECK_THAT(mergeError({{dir.file("a.db")}}, bad), Catch::Contains(bad));
  }
  CHECK_FALSE(fs::exists(out + ".tmp"));
}

TEST_CASE("merge: an existing output is replaced") {
  TempDir dir;
  GenShard g = generate(0, 0, 9);
  writeShard(g, dir.file("a.db"));
  const std::string out = dir.file("run.db");
  {
    std::FILE* f = std::fopen(out.c_str(), "w");
    std::fputs("old", f);
    std::fclose(f);
  }
  mergeShards({{dir.file("a.db")}}, MergeOptions{out, {}});
  auto r = TraceReader::open(out);
  CHECK(r.counts().spans == static_cast<int64_t>(g.spans.size()));
}

TEST_CASE("merge: shards from ShardWriter land on rank 0's clock, each shifted by its offset") {
  TempDir dir;
  fixture::Options o;
  o.dir = dir.file("trace");
  o.ranks = 4;
  o.threads = 2;
  o.roots_per_thread = 15;
  o.clock_offsets_ns = {0, 3'000'000, -2'000'000, 11'000'000};
  const auto g = fixture::writeFixture(o);
  auto merged = TraceReader::open(g.merged);
  const int64_t origin = std::stoll(merged.meta("origin_ns"));
  CHECK(origin == std::stoll(TraceReader::open(g.shards[0]).meta("origin_ns")));

  // Generated times are global; rank R's shard holds them as global + offset[R] - its origin.
  using Key = std::tuple<int, std::string, int64_t, std::string, int64_t, int>;
  std::vector<Key> want, got, fromShards;
  for (const auto& s : g.spans) {
    want.emplace_back(s.rank, s.track, s.start - origin, s.name, s.end - s.start, s.depth);
  }
  for (const auto& t : merged.tracks()) {
    merged.forEachSpan(t.id, [&](const SpanRow& s) {
      got.emplace_back(t.rank, t.name, s.start_ns, merged.str(s.name), s.dur_ns, s.depth);
    });
  }
  for (int r = 0; r < o.ranks; ++r) {
    auto shard = TraceReader::open(g.shards[static_cast<size_t>(r)]);
    const int64_t shardOrigin = std::stoll(shard.meta("origin_ns"));
    CHECK(shard.ranks().at(0).clock_offset_ns == o.clock_offsets_ns[static_cast<size_t>(r)]);
    for (const auto& t : shard.tracks()) {
      shard.forEachSpan(t.id, [&](const SpanRow& s) {
        const int64_t shifted = s.start_ns + shardOrigin - o.clock_offsets_ns[r] - origin;
        fromShards.emplace_back(r, t.name, shifted, shard.str(s.name), s.dur_ns, s.depth);
      });
    }
  }
  for (auto* v : {&want, &got, &fromShards}) std::sort(v->begin(), v->end());
  REQUIRE(got.size() == want.size());
  CHECK(got == want);
  CHECK(fromShards == want);

  std::set<int64_t> ids;
  size_t n = 0;
  for (const auto& t : merged.tracks()) {
    merged.forEachSpan(t.id, [&](const SpanRow& s) {
      ids.insert(s.id);
      ++n;
    });
  }
  CHECK(ids.size() == n);
  const auto ranks = merged.ranks();
  REQUIRE(ranks.size() == 4);
  for (int r = 0; r < 4; ++r) CHECK(ranks[r].clock_offset_ns == o.clock_offsets_ns[r]);
  std::set<int> statRanks;
  for (const auto& s : merged.stats()) {
    if (s.name == "dropped_events") {
      statRanks.insert(s.rank);
      CHECK(s.value == 0);
    }
  }
  CHECK(statRanks == std::set<int>{0, 1, 2, 3});
  std::set<int> aggRanks;
  for (const auto& a : merged.aggregates()) aggRanks.insert(a.rank);
  CHECK(aggRanks == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("merge: a shard whose process died before closing it (WAL left behind)") {
  TempDir dir;
  const std::string path = dir.file("rank1.db");
  constexpr int kSpans = 500;
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The "rank": writes and commits some spans, then dies without closing the shard.
    int code = 0;
    try {
      core::Session session;
      ShardOptions o;
      o.path = path;
      o.rank = 1;
      o.world_size = 2;
      o.clock_offset_ns = 1'000'000;
      ShardWriter writer(session, o);
      writer.start();
      auto& buf = session.threadBuffer("main");
      const auto name = session.strings().intern("aten::mm");
      for (int i = 0; i < kSpans; ++i) {
        core::SpanRecord r;
        r.name = name;
        r.start_ns = 1'000'000 + i * 1000;
        r.end_ns = r.start_ns + 500;
        r.id = buf.nextId();
        if (!buf.ring.tryPush(core::Record::from(r))) code = 3;
      }
      writer.flush();
      _exit(code);  // here, inside the writer's scope: no destructor runs, the shard stays open
    } catch (...) {
      _exit(2);
    }
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(fs::exists(path));

  GenShard g0 = generate(0, 0, 3);
  writeShard(g0, dir.file("rank0.db"));
  const auto sizeBefore = fs::file_size(path);
  const bool walBefore = fs::exists(path + "-wal");
  CHECK(walBefore);  // what a killed writer leaves: committed rows still in the WAL
  const std::vector<MergeInput> inputs = {{dir.file("rank0.db")}, {path, true, 1'000'000}};
  const std::string out = dir.file("run.db");
  CHECK_THAT(mergeError(inputs, out), Catch::Contains(path + ": incomplete"));
  mergeShards(inputs, MergeOptions{out, {}}, /*allow_incomplete=*/true);
  CHECK(fs::file_size(path) == sizeBefore);  // the shard was only read
  CHECK(fs::exists(path + "-wal") == walBefore);

  auto r = TraceReader::open(out);
  int64_t rank1Spans = 0;
  for (const auto& t : r.tracks()) {
    if (t.rank != 1) continue;
    r.forEachSpan(t.id, [&](const SpanRow& s) {
      ++rank1Spans;
      CHECK(r.str(s.name) == "aten::mm");
    });
  }
  CHECK(rank1Spans == kSpans);
  bool flagged = false;
  for (const auto& s : r.stats()) {
    flagged = flagged || (s.rank == 1 && s.name == "merge_incomplete_shard");
  }
  CHECK(flagged);
}

TEST_CASE("merge: two attempts in one file, the last one's ranks first, each attempt's rows kept") {
  // Attempt 0 (ranks 0 and 1 of a world of 4, as meta world_size says) and attempt 1 (rank 0):
  // attempt 1 keeps rank 0, attempt 0's ranks become 4 and 5; every row is the shard's own.
  TempDir dir;
  std::vector<GenShard> shards = {generate(0, 0, 11), generate(1, 2'000'000, 12),
                                  generate(0, 0, 13)};
  shards[2].start_global += 500'000'000;  // the restart began later on the same clock
  std::vector<MergeInput> inputs;
  const int attempts[] = {0, 0, 1};
  for (int i : {2, 1, 0}) {  // the last attempt listed first on purpose
    const std::string path = dir.file("a" + std::to_string(attempts[i]) + "rank" +
                                      std::to_string(shards[i].rank) + ".db");
    writeShard(shards[i], path);
    inputs.push_back({path});
    inputs.back().attempt = attempts[i];
  }
  const std::string out = dir.file("run.db");
  mergeShards(inputs, MergeOptions{out, {}});
  auto r = TraceReader::open(out);
  CHECK(r.meta("world_size") == "4");
  // The first attempt's rank 0 is the time axis.
  const int64_t mergedOrigin = shards[0].origin();
  REQUIRE(r.meta("origin_ns") == std::to_string(mergedOrigin));

  const auto as = r.attempts();
  REQUIRE(as.size() == 2);
  CHECK(as[0].attempt == 0);
  CHECK(as[0].world_size == 4);
  CHECK(as[1].attempt == 1);
  CHECK(as[1].world_size == 4);
  std::map<int, std::pair<int, int>> ranks;  // merged rank -> (attempt, rank in it)
  for (const auto& k : r.ranks()) ranks[k.rank] = {k.attempt, k.attempt_rank};
  CHECK(ranks == std::map<int, std::pair<int, int>>{{0, {1, 0}}, {4, {0, 0}}, {5, {0, 1}}});
  CHECK(as[0].start_ns == std::min(r.ranks()[1].start_ns, r.ranks()[2].start_ns));
  CHECK(as[1].start_ns == r.ranks()[0].start_ns);

  // Every span of every shard, under its merged rank, at its time on attempt 0's rank 0's clock.
  std::vector<GenShard> renamed = shards;
  renamed[0].rank = 4;
  renamed[1].rank = 5;
  requireSameSpans(expectedSpans(renamed, mergedOrigin), readSpans(r).spans);
  // The per-rank tables follow: memory, aggregates and stats rows under the merged rank.
  for (const auto& g : renamed) {
    CHECK(r.memory(g.rank, INT64_MIN / 2, INT64_MAX / 2).size() == g.memory.size());
  }
  std::map<int, int64_t> spansPerRank;
  for (const auto& a : r.aggregates()) spansPerRank[a.rank] += a.count;
  CHECK(spansPerRank == std::map<int, int64_t>{{0, static_cast<int64_t>(shards[2].spans.size())},
                                               {4, static_cast<int64_t>(shards[0].spans.size())},
                                               {5, static_cast<int64_t>(shards[1].spans.size())}});
  std::set<int> statRanks;
  for (const auto& s : r.stats()) statRanks.insert(s.rank);
  CHECK(statRanks == std::set<int>{0, 4, 5});
  // One attempt (and a shard): the one row of meta world_size, ranks as recorded.
  auto shard = TraceReader::open(inputs[0].path);
  REQUIRE(shard.attempts().size() == 1);
  CHECK(shard.attempts()[0].world_size == 4);
  CHECK(shard.ranks()[0].attempt == 0);
  r.quickCheck();
}

TEST_CASE(
    "merge: traced_ranks joins every shard's list and says when lists disagree: other meta rows "
    "come from the first shard that has them") {
  // Each shard's meta rows as its writer left them: {traced_ranks, capture} ("" = absent). A
  // shard killed before its close has neither; one closed without --ranks has `capture` only.
  struct Case {
    std::string rank0_list, rank0_capture, rank1_list;
    std::string merged;  // the merged file's traced_ranks ("" = absent)
    bool differ;         // merge_traced_ranks_differ set
  };
  const std::vector<Case> cases = {
      {"0,1", "ops", "0,1", "0,1", false},  // both closed, one list
      {"", "", "0,1", "0,1", false},        // rank 0 killed: rank 1's list
      {"0", "ops", "1", "0,1", true},       // lists differ: joined, and said
      {"", "ops", "1", "", true},           // rank 0 traced without --ranks: no list claimed
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    INFO("case " << i);
    TempDir dir;
    std::vector<GenShard> shards = {generate(0, 0, 21), generate(1, 1'000'000, 22)};
    std::vector<MergeInput> inputs;
    for (auto& g : shards) {
      const std::string path = dir.file("rank" + std::to_string(g.rank) + ".db");
      writeShard(g, path);
      RawDb db(path);
      const std::string list = g.rank == 0 ? c.rank0_list : c.rank1_list;
      const std::string capture = g.rank == 0 ? c.rank0_capture : "ops,comm";
      if (!list.empty()) db.exec("INSERT INTO meta VALUES ('traced_ranks', '" + list + "')");
      if (!capture.empty()) db.exec("INSERT INTO meta VALUES ('capture', '" + capture + "')");
      inputs.push_back({path});
    }
    const std::string out = dir.file("run.db");
    mergeShards(inputs, MergeOptions{out, {}});
    const auto r = TraceReader::open(out);
    CHECK(r.meta("traced_ranks") == c.merged);
    // The other meta rows come from the first shard that has them (rank 1 when rank 0 was
    // killed before its close).
    CHECK(r.meta("capture") == (c.rank0_capture.empty() ? "ops,comm" : c.rank0_capture));
    bool differ = false;
    for (const auto& s : r.stats()) differ = differ || s.name == "merge_traced_ranks_differ";
    CHECK(differ == c.differ);
  }
}
