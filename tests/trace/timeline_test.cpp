// Timeline (timeline.h) against brute force: every query on generated traces (a dense nested
// track and an overlapping async lane written by ShardWriter, and the multi-rank fixture) equals
// what a plain scan of all spans, flows, counters and memory computes from the header's
// definitions; also on an "older" copy whose summaries are built at open. No timing here
// (bench/timeline_bench.cpp measures).
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "../support/temp_dir.h"
#include "fixture_trace.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"
#include "tracerun/trace/timeline.h"

using namespace tracerun;
using namespace tracerun::trace;
using tracerun::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// ---- generated traces --------------------------------------------------------------------------

// One rank: a thread with dense nested spans (durations from 20 ns to ~1 ms, gaps of every size),
// and an async lane whose depth-0 spans overlap each other.
void writeDense(const std::string& path, uint64_t seed, int roots) {
  core::Session session;
  ShardOptions o;
  o.path = path;
  o.summaries = true;
  o.chunk_rows = 64;
  ShardWriter writer(session, o);
  writer.start();
  auto& buf = session.threadBuffer("main");
  const core::TrackId lane = session.tracks().add(core::TrackKind::kAsync, 0, "lane");
  std::vector<core::StringId> names;
  for (const char* n :
       {"aten::mm", "aten::add", "step", "AddmmBackward0", "nccl:all_reduce", "Model.fc1"}) {
    names.push_back(session.strings().intern(n));
  }
  std::mt19937_64 rng(seed);
  auto push = [&](const core::SpanRecord& r) {
    while (!buf.ring.tryPush(core::Record::from(r))) writer.flush();
  };
  // Children before parents, as capture pushes them.
  std::function<void(int64_t, int64_t, uint16_t)> tree = [&](int64_t start, int64_t end,
                                                             uint16_t depth) {
    if (depth < 6 && end - start > 60) {
      int64_t t = start + static_cast<int64_t>(rng() % 10);
      const int children = static_cast<int>(rng() % 6);
      for (int c = 0; c < children && t < end - 20; ++c) {
        const int64_t room = end - t;
        const int64_t len = std::max<int64_t>(1, static_cast<int64_t>(rng() % (room / 2 + 1)));
        tree(t, t + len, static_cast<uint16_t>(depth + 1));
        t += len + static_cast<int64_t>(rng() % 50);
      }
    }
    core::SpanRecord r;
    r.name = names[rng() % names.size()];
    r.category = static_cast<core::Category>(rng() % 4);
    r.start_ns = start;
    r.end_ns = end;
    r.depth = depth;
    r.id = buf.nextId();
    push(r);
  };
  int64_t t = 5'000'000;
  for (int i = 0; i < roots; ++i) {
    const int64_t scale = int64_t{20} << (rng() % 16);  // 20 ns .. 655 us
    const int64_t len = scale + static_cast<int64_t>(rng() % static_cast<uint64_t>(scale));
    tree(t, t + len, 0);
    t += len + static_cast<int64_t>(rng() % (rng() % 4 == 0 ? 2'000'000 : 3'000));
  }
  for (int i = 0; i < roots; ++i) {
    core::SpanRecord r;
    r.name = names[rng() % names.size()];
    r.start_ns = 5'000'000 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t - 5'000'000));
    r.end_ns = r.start_ns + static_cast<int64_t>(rng() % 200'000);
    r.id = buf.nextId();
    r.track = lane;
    push(r);
  }
  for (int i = 0; i < 3000; ++i) {
    core::CounterRecord c;
    c.name = names[0];
    c.ts_ns = 5'000'000 + static_cast<int64_t>(rng() % static_cast<uint64_t>(t - 5'000'000));
    c.value = static_cast<double>(rng() % 1000) - 500;
    while (!buf.ring.tryPush(core::Record::from(c))) writer.flush();
  }
  int64_t live = 0;
  for (int i = 0; i < 3000; ++i) {
    core::MemoryRecord m;
    m.ts_ns = 5'000'000 + i * ((t - 5'000'000) / 3000);
    m.bytes = live > 0 && rng() % 2 ? -static_cast<int64_t>(rng() % static_cast<uint64_t>(live))
                                    : static_cast<int64_t>(rng() % 100000);
    live += m.bytes;
    m.total = live;
    m.device_type = static_cast<int8_t>(i % 3 == 0 ? 1 : 0);
    m.device_index = static_cast<int8_t>(m.device_type ? 0 : -1);
    while (!buf.ring.tryPush(core::Record::from(m))) writer.flush();
  }
  writer.close();
}

// One rank of counters and memory only, for the series summaries: `samples` memory events over
// two devices and as many counter samples over three tracks, in bursts (runs of samples a few ns
// apart, some at the same ns) separated by gaps of every size, with negative and large values.
void writeSeries(const std::string& path, uint64_t seed, int samples) {
  core::Session session;
  ShardOptions o;
  o.path = path;
  o.summaries = true;
  ShardWriter writer(session, o);
  writer.start();
  auto& buf = session.threadBuffer("main");
  std::vector<core::StringId> names;
  for (const char* n : {"loss", "tokens/s", "lr"}) names.push_back(session.strings().intern(n));
  std::mt19937_64 rng(seed);
  auto times = [&] {
    std::vector<int64_t> out;
    int64_t t = -3'000'000 + static_cast<int64_t>(rng() % 1000);  // times before the origin too
    while (static_cast<int>(out.size()) < samples) {
      const int burst = 1 + static_cast<int>(rng() % 200);
      for (int i = 0; i < burst; ++i) {
        out.push_back(t);
        t += static_cast<int64_t>(rng() % 4 == 0 ? 0 : rng() % 3000);
      }
      t += static_cast<int64_t>(rng() % (int64_t{1} << (rng() % 26)));
    }
    return out;
  };
  const auto counterTimes = times();
  for (size_t i = 0; i < counterTimes.size(); ++i) {
    core::CounterRecord c;
    c.name = names[rng() % names.size()];
    c.ts_ns = counterTimes[i];
    c.value = static_cast<double>(static_cast<int64_t>(rng() % 2001) - 1000) / 8.0 +
              (rng() % 50 == 0 ? 1e12 : 0);
    while (!buf.ring.tryPush(core::Record::from(c))) writer.flush();
  }
  int64_t live[2] = {0, 0};
  for (int64_t ts : times()) {
    core::MemoryRecord m;
    const int dev = static_cast<int>(rng() % 2);
    m.ts_ns = ts;
    m.device_type = static_cast<int8_t>(dev);
    m.device_index = static_cast<int8_t>(dev ? 0 : -1);
    m.bytes = live[dev] > 0 && rng() % 2
                  ? -static_cast<int64_t>(rng() % static_cast<uint64_t>(live[dev] + 1))
                  : static_cast<int64_t>(rng() % (uint64_t{1} << (rng() % 40)));
    live[dev] += m.bytes;
    m.total = live[dev];
    while (!buf.ring.tryPush(core::Record::from(m))) writer.flush();
  }
  writer.close();
}

// A copy of `path` whose memory and counter rows are stored in another order (`order`, an ORDER BY
// over the old rows: rowid order no longer time order, as when capture threads interleave),
// without the summaries (built at open).
std::string shuffled(const std::string& path, const std::string& copy, const std::string& order) {
  fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(copy.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const std::string sql =
      "CREATE TEMP TABLE m AS SELECT rowid AS r, * FROM memory; DELETE FROM memory; INSERT INTO "
      "memory SELECT rank, ts_ns, device_type, device_index, ptr, bytes, total, category, op, "
      "scope FROM m ORDER BY " +
      order +
      "; CREATE TEMP TABLE c AS SELECT rowid AS r, * FROM "
      "counters; DELETE FROM counters; INSERT INTO counters SELECT track, ts_ns, value FROM c "
      "ORDER BY " +
      order + "; DELETE FROM meta WHERE key = 'summaries'";
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
  return copy;
}

// A copy of `path` as a file written before the summaries existed.
std::string asOlder(const std::string& path, const std::string& copy) {
  fs::copy_file(path, copy, fs::copy_options::overwrite_existing);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(copy.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db,
                              "DROP TABLE span_lod; DROP TABLE span_lod_depths; DROP TABLE "
                              "name_buckets; DROP TABLE memory_devices; DROP TABLE memory_lod; "
                              "DROP TABLE counter_lod; DELETE FROM meta WHERE key = 'summaries'",
                              nullptr, nullptr, &err);
  INFO((err ? err : ""));
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
  return copy;
}

// ---- brute force from the definitions in timeline.h --------------------------------------------

struct All {
  std::map<int64_t, std::vector<SpanRow>> byTrack;  // span order
  std::vector<SpanRow> spans;
};

All loadAll(const TraceReader& r) {
  All a;
  for (const auto& t : r.tracks()) {
    r.forEachSpan(t.id, [&](const SpanRow& s) {
      a.byTrack[t.id].push_back(s);
      a.spans.push_back(s);
    });
  }
  return a;
}

int64_t floorDiv(int64_t t, int64_t w) {
  int64_t q = t / w;
  if (t % w != 0 && t < 0) --q;
  return q;
}

bool longer(const SpanRow& a, const SpanRow& b) {
  return std::make_tuple(a.dur_ns, -a.start_ns, -a.id) >
         std::make_tuple(b.dur_ns, -b.start_ns, -b.id);
}

std::vector<DrawItem> bruteDraw(const All& all, const DrawRequest& q) {
  const double R = q.ns_per_px >= 1 ? q.ns_per_px : 1;
  int64_t W = 1;
  while (static_cast<double>(W * 4) <= R) W *= 4;
  std::map<int, std::map<int64_t, std::vector<SpanRow>>> buckets;
  auto it = all.byTrack.find(q.track);
  if (it == all.byTrack.end()) return {};
  for (const SpanRow& s : it->second) {
    if (s.depth < q.min_depth || s.depth > q.max_depth) continue;
    buckets[s.depth][floorDiv(s.start_ns, W)].push_back(s);
  }
  std::vector<DrawItem> out;
  for (const auto& [depth, list] : buckets) {
    bool haveFold = false;
    for (const auto& [b, spans] : list) {
      int64_t first = INT64_MAX, end = INT64_MIN, busy = 0;
      const SpanRow* dom = nullptr;
      for (const SpanRow& s : spans) {
        first = std::min(first, s.start_ns);
        end = std::max(end, s.end_ns());
        busy += s.dur_ns;
        if (!dom || longer(s, *dom)) dom = &s;
      }
      if (end < q.t0 || first > q.t1) continue;
      DrawItem item;
      const bool big = static_cast<double>(dom->dur_ns) >= kMinSpanPixels * R;
      item.kind = big ? DrawItem::Kind::kSpan : DrawItem::Kind::kFold;
      item.depth = depth;
      item.start_ns = big ? dom->start_ns : first;
      item.end_ns = big ? dom->end_ns() : end;
      item.count = static_cast<int64_t>(spans.size());
      item.busy_ns = busy;
      item.span_id = dom->id;
      item.span_start_ns = dom->start_ns;
      item.span_dur_ns = dom->dur_ns;
      item.name = dom->name;
      item.category = dom->category;
      if (!big && haveFold && out.back().kind == DrawItem::Kind::kFold &&
          static_cast<double>(item.start_ns - out.back().end_ns) < R) {
        DrawItem& p = out.back();
        p.start_ns = std::min(p.start_ns, item.start_ns);
        p.end_ns = std::max(p.end_ns, item.end_ns);
        p.count += item.count;
        p.busy_ns += item.busy_ns;
        if (std::make_tuple(item.span_dur_ns, -item.span_start_ns, -item.span_id) >
            std::make_tuple(p.span_dur_ns, -p.span_start_ns, -p.span_id)) {
          p.span_id = item.span_id;
          p.span_start_ns = item.span_start_ns;
          p.span_dur_ns = item.span_dur_ns;
          p.name = item.name;
          p.category = item.category;
        }
        continue;
      }
      out.push_back(item);
      haveFold = true;
    }
  }
  return out;
}

using ItemKey =
    std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, uint32_t>;
std::vector<ItemKey> keys(const std::vector<DrawItem>& items) {
  std::vector<ItemKey> out;
  for (const auto& i : items) {
    out.emplace_back(static_cast<int>(i.kind), i.depth, i.start_ns, i.end_ns, i.count, i.busy_ns,
                     i.span_id, i.span_dur_ns, i.name);
  }
  return out;
}

void checkDraw(const Timeline& tl, const All& all, std::mt19937_64& rng, int queries,
               bool* sawSummaries) {
  const auto [lo, hi] = tl.reader().timeRange();
  for (const auto& t : tl.trackDepths()) {
    for (int i = 0; i < queries; ++i) {
      DrawRequest q;
      q.track = t.track;
      const int64_t span = hi - lo + 1;
      const int64_t len = std::max<int64_t>(1, span >> (rng() % 14));
      q.t0 = lo - span / 20 + static_cast<int64_t>(rng() % static_cast<uint64_t>(span));
      q.t1 = q.t0 + len;
      const double px = static_cast<double>(200 + rng() % 3000);
      q.ns_per_px = static_cast<double>(len) / px;
      if (i % 7 == 0) q.ns_per_px = static_cast<double>(rng() % 5);
      if (i % 5 == 0) {
        q.min_depth = static_cast<int>(rng() % 3);
        q.max_depth = q.min_depth + static_cast<int>(rng() % 3);
      }
      const DrawList got = tl.draw(q);
      *sawSummaries = *sawSummaries || got.from_summaries;
      INFO("track " << q.track << " [" << q.t0 << ", " << q.t1 << "] at " << q.ns_per_px
                    << " ns/px");
      REQUIRE(keys(got.items) == keys(bruteDraw(all, q)));
      // At most kMaxItemsPerColumn items start in any pixel column of any depth.
      const double R = q.ns_per_px >= 1 ? q.ns_per_px : 1;
      std::map<std::pair<int, int64_t>, int> perColumn;
      for (const auto& item : got.items) {
        const auto column = static_cast<int64_t>(
            std::floor(static_cast<double>(std::max(item.start_ns, q.t0) - q.t0) / R));
        CHECK(++perColumn[{item.depth, column}] <= kMaxItemsPerColumn);
      }
    }
  }
}

void checkDepthsAndDetails(const Timeline& tl, const All& all, std::mt19937_64& rng) {
  std::vector<TrackDepth> want;
  for (const auto& [track, spans] : all.byTrack) {
    TrackDepth d;
    d.track = track;
    for (const auto& s : spans) d.max_depth = std::max(d.max_depth, s.depth);
    d.spans = static_cast<int64_t>(spans.size());
    want.push_back(d);
  }
  const auto got = tl.trackDepths();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CHECK(got[i].track == want[i].track);
    CHECK(got[i].max_depth == want[i].max_depth);
    CHECK(got[i].spans == want[i].spans);
    CHECK(tl.maxDepth(want[i].track) == want[i].max_depth);
  }
  CHECK(tl.maxDepth(-12345) == -1);

  for (int i = 0; i < 150; ++i) {
    const SpanRow& s = all.spans[rng() % all.spans.size()];
    const auto d = tl.span(s.id, 5);
    REQUIRE(d);
    CHECK(d->span.start_ns == s.start_ns);
    CHECK(d->span.dur_ns == s.dur_ns);
    CHECK(d->span.name == s.name);
    CHECK(d->span.depth == s.depth);
    const SpanRow* parent = nullptr;
    std::vector<int64_t> children;
    for (const SpanRow& o : all.byTrack.at(s.track)) {
      if (o.depth == s.depth - 1 && o.start_ns <= s.start_ns && o.end_ns() >= s.end_ns()) {
        parent = &o;  // the last in span order
      }
      if (o.depth == s.depth + 1 && o.start_ns >= s.start_ns && o.end_ns() <= s.end_ns()) {
        children.push_back(o.id);
      }
    }
    CHECK(d->parent.has_value() == (parent != nullptr));
    if (parent && d->parent) CHECK(d->parent->id == parent->id);
    CHECK(d->child_count == static_cast<int64_t>(children.size()));
    std::vector<int64_t> gotChildren;
    for (const auto& c : d->children) gotChildren.push_back(c.id);
    children.resize(std::min<size_t>(children.size(), 5));
    CHECK(gotChildren == children);
    CHECK(d->args.size() == tl.reader().args(s.id).size());
  }
  CHECK_FALSE(tl.span(0));
  CHECK_FALSE(tl.span(all.spans.size() * 10 + 99));
}

void checkFlows(const Timeline& tl, const All& all, std::mt19937_64& rng) {
  const auto flows = tl.reader().flows();
  const auto [lo, hi] = tl.reader().timeRange();
  auto startingAt = [&](int64_t track, int64_t ts) -> int64_t {
    auto it = all.byTrack.find(track);
    if (it == all.byTrack.end()) return 0;
    for (const SpanRow& s : it->second) {
      if (s.start_ns == ts) return s.id;
    }
    return 0;
  };
  int resolved = 0;
  for (int i = 0; i < 20; ++i) {
    const int64_t t0 = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
    const int64_t t1 = i == 0 ? hi : t0 + (hi - lo) / (1 + static_cast<int64_t>(rng() % 8));
    std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> want, got;
    for (const auto& f : flows) {
      const bool in =
          (f.src_ts_ns >= t0 && f.src_ts_ns <= t1) || (f.dst_ts_ns >= t0 && f.dst_ts_ns <= t1);
      if (!in) continue;
      want.emplace_back(f.src_track, f.src_ts_ns, f.dst_track, f.dst_ts_ns,
                        startingAt(f.src_track, f.src_ts_ns), startingAt(f.dst_track, f.dst_ts_ns));
    }
    for (const auto& l : tl.flows(t0, t1)) {
      got.emplace_back(l.flow.src_track, l.flow.src_ts_ns, l.flow.dst_track, l.flow.dst_ts_ns,
                       l.src_span, l.dst_span);
      resolved += l.src_span != 0 && l.dst_span != 0;
    }
    CHECK(got == want);
  }
  if (!flows.empty()) CHECK(resolved > 0);
}

// spansAtDepth: every track and depth over the whole trace and over random windows.
void checkSpansAtDepth(const Timeline& tl, const All& all, std::mt19937_64& rng) {
  std::map<std::pair<int64_t, int>, std::vector<SpanRow>> byDepth;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& s : all.spans) {
    byDepth[{s.track, s.depth}].push_back(s);
    lo = std::min(lo, s.start_ns);
    hi = std::max(hi, s.start_ns);
  }
  auto key = [](const std::vector<SpanRow>& v) {
    std::vector<
        std::tuple<int64_t, int64_t, int64_t, int64_t, int, int, uint32_t, uint32_t, int64_t>>
        out;
    for (const auto& s : v)
      out.emplace_back(s.start_ns, s.id, s.track, s.dur_ns, s.depth, static_cast<int>(s.category),
                       s.name, s.detail, s.seq);
    return out;
  };
  for (auto& [td, list] : byDepth) {
    std::sort(list.begin(), list.end(), [](const SpanRow& a, const SpanRow& b) {
      return std::tie(a.start_ns, a.id) < std::tie(b.start_ns, b.id);
    });
    INFO("track " << td.first << " depth " << td.second);
    CHECK(key(tl.spansAtDepth(td.first, td.second, INT64_MIN / 4, INT64_MAX / 4)) == key(list));
    for (int i = 0; i < 4; ++i) {
      const int64_t a = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      const int64_t b = a + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      std::vector<SpanRow> want;
      for (const auto& s : list)
        if (s.start_ns >= a && s.start_ns <= b) want.push_back(s);
      CHECK(key(tl.spansAtDepth(td.first, td.second, a, b)) == key(want));
    }
    CHECK(tl.spansAtDepth(td.first, td.second, 10, 9).empty());
  }
  CHECK(tl.spansAtDepth(-12345, 0, INT64_MIN / 4, INT64_MAX / 4).empty());
}

void checkSearch(const Timeline& tl, const All& all, std::mt19937_64& rng) {
  const auto& r = tl.reader();
  std::set<core::StringId> used;
  for (const auto& s : all.spans) used.insert(s.name);
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (const std::string text : {"mm", "ATEN", "step", "o", "no such name", "_"}) {
    INFO("search " << text);
    std::vector<core::StringId> want;
    for (core::StringId id : used) {
      if (lower(r.str(id)).find(lower(text)) != std::string::npos) want.push_back(id);
    }
    const auto names = tl.namesMatching(text);
    CHECK(names == want);
    std::vector<SpanRow> matches;
    for (const auto& s : all.spans) {
      if (std::find(want.begin(), want.end(), s.name) != want.end()) matches.push_back(s);
    }
    auto order = [](const SpanRow& a, const SpanRow& b) {
      return std::tie(a.start_ns, a.track, a.id) < std::tie(b.start_ns, b.track, b.id);
    };
    std::sort(matches.begin(), matches.end(), order);
    CHECK(tl.matchCount(names) == static_cast<int64_t>(matches.size()));
    std::set<int64_t> holding;
    for (const auto& m : matches) holding.insert(m.track);
    CHECK(tl.matchTracks(names) == std::vector<int64_t>(holding.begin(), holding.end()));
    // Walk forward and backward from the ends, then jump from random places.
    MatchPosition pos{INT64_MIN, INT64_MIN, INT64_MIN};
    for (size_t i = 0; i < std::min<size_t>(matches.size(), 40); ++i) {
      const auto m = tl.nextMatch(names, pos);
      REQUIRE(m);
      CHECK(m->id == matches[i].id);
      pos = {m->start_ns, m->track, m->id};
    }
    pos = {INT64_MAX, INT64_MAX, INT64_MAX};
    for (size_t i = 0; i < std::min<size_t>(matches.size(), 40); ++i) {
      const auto m = tl.previousMatch(names, pos);
      REQUIRE(m);
      CHECK(m->id == matches[matches.size() - 1 - i].id);
      pos = {m->start_ns, m->track, m->id};
    }
    if (matches.empty()) {
      CHECK_FALSE(tl.nextMatch(names, {INT64_MIN, INT64_MIN, INT64_MIN}));
      continue;
    }
    CHECK_FALSE(
        tl.nextMatch(names, {matches.back().start_ns, matches.back().track, matches.back().id}));
    CHECK_FALSE(tl.previousMatch(
        names, {matches.front().start_ns, matches.front().track, matches.front().id}));
    for (int i = 0; i < 20; ++i) {
      const SpanRow& at = all.spans[rng() % all.spans.size()];
      const MatchPosition p{at.start_ns, at.track, at.id};
      auto next = std::find_if(matches.begin(), matches.end(), [&](const SpanRow& m) {
        return std::tie(p.start_ns, p.track, p.span_id) < std::tie(m.start_ns, m.track, m.id);
      });
      const auto gotNext = tl.nextMatch(names, p);
      CHECK(gotNext.has_value() == (next != matches.end()));
      if (gotNext && next != matches.end()) CHECK(gotNext->id == next->id);
      const int64_t t0 = at.start_ns, t1 = t0 + static_cast<int64_t>(rng() % 50'000'000);
      std::vector<int64_t> want2;
      for (const auto& m : matches) {
        if (m.start_ns >= t0 && m.start_ns <= t1 && want2.size() < 25) want2.push_back(m.id);
      }
      std::vector<int64_t> got2;
      for (const auto& m : tl.matches(names, t0, t1, 25)) got2.push_back(m.id);
      CHECK(got2 == want2);
    }
  }
}

void checkSeries(const Timeline& tl, std::mt19937_64& rng) {
  const auto& r = tl.reader();
  const auto [lo, hi] = r.timeRange();
  auto bucketsOf = [](const std::vector<std::pair<int64_t, double>>& samples, int64_t asked) {
    int64_t W = 1;
    while (W * 4 <= asked) W *= 4;
    std::vector<std::tuple<int64_t, int64_t, double, double, double>> out;
    for (const auto& [ts, v] : samples) {
      const int64_t start = floorDiv(ts, W) * W;
      if (out.empty() || std::get<0>(out.back()) != start) out.emplace_back(start, 0, v, v, v);
      auto& b = out.back();
      ++std::get<1>(b);
      std::get<2>(b) = std::min(std::get<2>(b), v);
      std::get<3>(b) = std::max(std::get<3>(b), v);
      std::get<4>(b) = v;
    }
    return out;
  };
  auto asTuples = [](const Series& s) {
    std::vector<std::tuple<int64_t, int64_t, double, double, double>> out;
    for (const auto& b : s.buckets) out.emplace_back(b.start_ns, b.count, b.min, b.max, b.last);
    return out;
  };
  for (const auto& t : r.tracks()) {
    if (t.kind != core::TrackKind::kCounter) continue;
    const auto all = r.counters(t.id, INT64_MIN, INT64_MAX);
    for (int i = 0; i < 10; ++i) {
      const int64_t t0 = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      const int64_t t1 = t0 + (hi - lo) / (1 + static_cast<int64_t>(rng() % 10));
      const int64_t asked = 1 + static_cast<int64_t>(rng() % 1'000'000);
      std::vector<std::pair<int64_t, double>> samples;
      const CounterRow* prev = nullptr;
      for (const auto& c : all) {
        if (c.ts_ns < t0) prev = &c;
        if (c.ts_ns >= t0 && c.ts_ns <= t1) samples.emplace_back(c.ts_ns, c.value);
      }
      const Series s = tl.counterSeries(t.id, t0, t1, asked);
      CHECK(asTuples(s) == bucketsOf(samples, asked));
      CHECK(s.has_before == (prev != nullptr));
      if (prev && s.has_before) CHECK(s.before == prev->value);
    }
  }
  std::set<std::tuple<int, int, int>> devices;
  for (const auto& rank : r.ranks()) {
    for (const auto& m : r.memory(rank.rank, INT64_MIN, INT64_MAX)) {
      devices.insert({m.rank, m.device_type, m.device_index});
    }
  }
  std::set<std::tuple<int, int, int>> gotDevices;
  for (const auto& d : tl.memoryDevices())
    gotDevices.insert({d.rank, d.device_type, d.device_index});
  CHECK(gotDevices == devices);
  for (const auto& d : tl.memoryDevices()) {
    const auto all = r.memory(d.rank, INT64_MIN, INT64_MAX);
    for (int i = 0; i < 10; ++i) {
      const int64_t t0 = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
      const int64_t t1 = t0 + (hi - lo) / (1 + static_cast<int64_t>(rng() % 10));
      const int64_t asked = 1 + static_cast<int64_t>(rng() % 1'000'000);
      std::vector<std::pair<int64_t, double>> samples;
      for (const auto& m : all) {
        if (m.device_type != d.device_type || m.device_index != d.device_index) continue;
        if (m.ts_ns >= t0 && m.ts_ns <= t1) samples.emplace_back(m.ts_ns, double(m.total));
      }
      CHECK(asTuples(tl.memorySeries(d, t0, t1, asked)) == bucketsOf(samples, asked));
    }
  }
}

// Every counter track and memory device against brute force at bucket widths from 1 ns to past
// the whole run, over the widest window, the samples' range, windows cut at bucket edges and
// random ones. Counts the answers that came (partly) from the series summaries.
void checkSeriesZooms(const Timeline& tl, std::mt19937_64& rng, int* fromSummaries) {
  using Samples = std::vector<std::pair<int64_t, double>>;  // (ts, value) in (ts, rowid) order
  using Tuple = std::tuple<int64_t, int64_t, int64_t, double, double, double>;
  const auto& r = tl.reader();
  std::vector<std::pair<std::function<Series(int64_t, int64_t, int64_t)>, Samples>> all;
  for (const auto& t : r.tracks()) {
    if (t.kind != core::TrackKind::kCounter) continue;
    Samples samples;
    for (const auto& c : r.counters(t.id, INT64_MIN, INT64_MAX)) {
      samples.emplace_back(c.ts_ns, c.value);
    }
    all.emplace_back([&tl, id = t.id](int64_t t0, int64_t t1,
                                      int64_t w) { return tl.counterSeries(id, t0, t1, w); },
                     samples);
  }
  for (const auto& d : tl.memoryDevices()) {
    Samples samples;
    for (const auto& m : r.memory(d.rank, INT64_MIN, INT64_MAX)) {
      if (m.device_type == d.device_type && m.device_index == d.device_index) {
        samples.emplace_back(m.ts_ns, static_cast<double>(m.total));
      }
    }
    all.emplace_back(
        [&tl, d](int64_t t0, int64_t t1, int64_t w) { return tl.memorySeries(d, t0, t1, w); },
        samples);
  }
  for (const auto& [query, samples] : all) {
    if (samples.empty()) continue;
    const int64_t lo = samples.front().first, hi = samples.back().first;
    for (int e = 0; e <= 22; ++e) {
      const int64_t W = int64_t{1} << (2 * e);
      const int64_t asked = W + static_cast<int64_t>(rng() % static_cast<uint64_t>(3 * W));
      std::vector<std::pair<int64_t, int64_t>> windows = {
          {INT64_MIN, INT64_MAX}, {lo, hi}, {lo + 1, hi - 1}};
      for (int i = 0; i < 6; ++i) {
        const int64_t a = lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
        const int64_t len = (hi - lo) >> (rng() % 12);
        windows.push_back({a, a + len});
        // Cut at edges of the summary buckets of this width and of the ones below it.
        const int64_t Wc = std::max<int64_t>(1, W >> (2 * (rng() % 3)));
        const int64_t a0 = floorDiv(a, Wc) * Wc;
        windows.push_back({a0, a0 + Wc * (1 + static_cast<int64_t>(rng() % 64)) - 1});
      }
      for (const auto& [t0, t1] : windows) {
        if (t0 > t1) continue;
        std::vector<Tuple> want;
        std::optional<double> before;
        for (const auto& [ts, v] : samples) {
          if (ts < t0) before = v;
          if (ts < t0 || ts > t1) continue;
          const int64_t start = floorDiv(ts, W) * W;
          if (want.empty() || std::get<0>(want.back()) != start) {
            want.emplace_back(start, start + W, 0, v, v, v);
          }
          auto& b = want.back();
          ++std::get<2>(b);
          std::get<3>(b) = std::min(std::get<3>(b), v);
          std::get<4>(b) = std::max(std::get<4>(b), v);
          std::get<5>(b) = v;
        }
        const Series s = query(t0, t1, asked);
        std::vector<Tuple> got;
        for (const auto& b : s.buckets) {
          got.emplace_back(b.start_ns, b.end_ns, b.count, b.min, b.max, b.last);
        }
        INFO("window [" << t0 << ", " << t1 << "], asked " << asked << " ns per bucket");
        CHECK(s.bucket_ns == W);
        CHECK(got == want);
        CHECK(s.has_before == before.has_value());
        if (before && s.has_before) CHECK(s.before == *before);
        if (s.from_summaries) ++*fromSummaries;
      }
    }
  }
}

void checkEverything(const std::string& path, uint64_t seed, bool expectSummaries) {
  int64_t lastDone = -1;
  TimelineOptions options;
  options.progress = [&](int64_t done, int64_t total) {
    CHECK(done >= lastDone);
    CHECK(done <= total);
    lastDone = done;
    return true;
  };
  Timeline tl = Timeline::open(path, options);
  CHECK(tl.summariesBuiltAtOpen() == (lastDone >= 0));
  const All all = loadAll(tl.reader());
  REQUIRE(!all.spans.empty());
  std::mt19937_64 rng(seed);
  bool sawSummaries = false;
  checkDraw(tl, all, rng, 120, &sawSummaries);
  if (expectSummaries) CHECK(sawSummaries);
  checkDepthsAndDetails(tl, all, rng);
  checkFlows(tl, all, rng);
  checkSearch(tl, all, rng);
  checkSpansAtDepth(tl, all, rng);
  checkSeries(tl, rng);
  int fromSummaries = 0;
  checkSeriesZooms(tl, rng, &fromSummaries);
  const EventCounts want = tl.reader().counts(), got = tl.summaryCounts();
  CHECK(got.spans == want.spans);
  CHECK(got.memory == want.memory);
  CHECK(got.counters == want.counters);
}

}  // namespace

TEST_CASE("timeline: every query equals brute force on a dense generated shard") {
  TempDir dir;
  const std::string path = dir.file("dense.db");
  writeDense(path, 7, 1500);
  SECTION("summaries written at close") {
    checkEverything(path, 1, true);
  }
  SECTION("an older file: summaries built at open, the file untouched") {
    const std::string older = asOlder(path, dir.file("older.db"));
    const auto before = fs::file_size(older);
    const auto mtime = fs::last_write_time(older);
    int calls = 0;
    TimelineOptions o;
    o.progress = [&](int64_t, int64_t) { return ++calls < 0; };  // cancel at once
    CHECK_THROWS_WITH(Timeline::open(older, o), older + ": cancelled");
    checkEverything(older, 2, true);
    CHECK(fs::file_size(older) == before);
    CHECK(fs::last_write_time(older) == mtime);
  }
}

TEST_CASE("timeline: every query equals brute force on the merged multi-rank fixture") {
  TempDir dir;
  fixture::Options o;
  o.dir = dir.path.string();
  o.ranks = 3;
  o.roots_per_thread = 60;
  const auto g = fixture::writeFixture(o);
  CHECK_FALSE(Timeline::open(g.merged).summariesBuiltAtOpen());  // merge wrote them
  CHECK(Timeline::open(g.shards[1]).summariesBuiltAtOpen());     // a launcher's shard has none
  checkEverything(g.merged, 3, false);
  checkEverything(g.shards[1], 5, false);
  checkEverything(asOlder(g.merged, dir.file("older.db")), 4, false);
}

TEST_CASE("timeline: counter and memory series equal brute force at every zoom") {
  TempDir dir;
  const std::string path = dir.file("series.db");
  writeSeries(path, 21, 40000);
  std::mt19937_64 rng(22);
  auto check = [&](const std::string& file, bool builtAtOpen) {
    Timeline tl = Timeline::open(file);
    CHECK(tl.summariesBuiltAtOpen() == builtAtOpen);
    int fromSummaries = 0;
    checkSeriesZooms(tl, rng, &fromSummaries);
    CHECK(fromSummaries > 0);  // the zoomed-out answers came from the stored levels
    CHECK(tl.summaryCounts().memory == tl.reader().counts().memory);
    CHECK(tl.summaryCounts().counters == tl.reader().counts().counters);
  };
  SECTION("summaries written at close") {
    check(path, false);
  }
  SECTION("an older file: built at open") {
    check(asOlder(path, dir.file("older.db")), true);
  }
  SECTION("summaries of version 1 (spans only): the series ones built at open") {
    const std::string v1 = dir.file("v1.db");
    fs::copy_file(path, v1);
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(v1.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db,
                         "DROP TABLE memory_lod; DROP TABLE counter_lod; UPDATE meta SET value "
                         "= '1' WHERE key = 'summaries'",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
    check(v1, true);
  }
  SECTION("rows out of time order in the file (threads interleaved): built at open") {
    check(shuffled(path, dir.file("shuffled.db"), "random()"), true);
  }
  SECTION("rows a little out of time order (shuffled within runs of 16): built at open") {
    check(shuffled(path, dir.file("local.db"), "r / 16, random()"), true);
  }
}

TEST_CASE("timeline: a zoomed-out draw of a dense track comes from the summaries, bounded") {
  TempDir dir;
  const std::string path = dir.file("dense.db");
  writeDense(path, 11, 3000);
  Timeline tl = Timeline::open(path);
  const auto [lo, hi] = tl.reader().timeRange();
  for (const auto& t : tl.trackDepths()) {
    DrawRequest q;
    q.track = t.track;
    q.t0 = lo;
    q.t1 = hi;
    q.ns_per_px = static_cast<double>(hi - lo) / 1000.0;
    const DrawList d = tl.draw(q);
    INFO("track " << t.track << " with " << t.spans << " spans");
    if (t.max_depth > 0) CHECK(d.from_summaries);  // the nested thread (the lane is sparse)
    CHECK(d.items.size() <=
          static_cast<size_t>(kMaxItemsPerColumn) * 1001 * static_cast<size_t>(t.max_depth + 1));
    int64_t count = 0;
    for (const auto& i : d.items) count += i.count;
    CHECK(count == t.spans);  // the whole track: every span stands in exactly one item
    // The widest window there is: the same items, no overflow in the bucket arithmetic.
    q.t0 = INT64_MIN;
    q.t1 = INT64_MAX;
    int64_t all = 0;
    for (const auto& i : tl.draw(q).items) all += i.count;
    CHECK(all == t.spans);
  }
}
