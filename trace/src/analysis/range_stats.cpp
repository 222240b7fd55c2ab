// Range statistics (range_stats.h): one pass over each chosen track's spans in the range, per
// (name, category) accumulators holding every duration for the percentiles. Not a cache: each call
// reads the range anew.
#include "tracerun/trace/analysis/range_stats.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/analysis/comm.h"

namespace tracerun::trace::analysis {
namespace {

int64_t satAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

struct Acc {
  int64_t count = 0, total = 0, self = 0;
  int64_t min = INT64_MAX, max = INT64_MIN;
  std::vector<int64_t> durs;
  std::vector<int> ranks;  // appended when the rank changes; sorted and deduplicated at the end
};

struct CollAcc {
  int64_t calls = 0, bytes = 0, time = 0;
  int group_size = 0;     // kMixedSizes when spans of the op named different sizes
  bool hostCall = false;  // an NCCL host call: its span is the enqueue (comm.h)
};
constexpr int kMixedSizes = -1;  // two groups' calls in one row: no one bus-bandwidth factor

// a's size after a span or row of size `size` (0: none recorded) joins it.
int joinSizes(int a, int size) {
  if (size == 0 || a == size) return a;
  return a == 0 ? size : kMixedSizes;
}

// What one thread gathers from its tracks.
struct Partial {
  std::unordered_map<uint64_t, Acc> names;  // key: name << 8 | category
  std::map<int, RankRangeStats> ranks;
  std::map<std::string, CollAcc> colls;
  int64_t spans = 0;
  bool cancelled = false;
};

uint64_t keyOf(core::StringId name, core::Category c) {
  return (uint64_t{name} << 8) | static_cast<uint64_t>(c);
}

void scanTrack(const TraceReader& reader, const TrackRow& track, const RangeQuery& q,
               core::StringId bytesKey, core::StringId groupKey, Partial& out) {
  if (q.t1 < q.t0) return;
  const std::vector<SpanRow> spans = reader.spans(track.id, q.t0, q.t1);
  // Children's time per span (index into spans); the parent of a span at depth d is the most
  // recent span at depth d - 1 in span order, when it encloses it.
  std::vector<int64_t> child(spans.size(), 0);
  std::vector<size_t> lastAt;
  constexpr size_t kNone = SIZE_MAX;
  for (size_t i = 0; i < spans.size(); ++i) {
    const SpanRow& s = spans[i];
    const auto d = static_cast<size_t>(std::max(0, s.depth));
    if (lastAt.size() <= d) lastAt.resize(d + 1, kNone);
    lastAt[d] = i;
    if (d > 0 && lastAt[d - 1] != kNone) {
      const SpanRow& p = spans[lastAt[d - 1]];
      if (p.start_ns <= s.start_ns && s.end_ns() <= p.end_ns()) {
        child[lastAt[d - 1]] = satAdd(child[lastAt[d - 1]], std::max<int64_t>(0, s.dur_ns));
      }
    }
  }
  RankRangeStats& rs = out.ranks[track.rank];
  rs.rank = track.rank;
  for (size_t i = 0; i < spans.size(); ++i) {
    const SpanRow& s = spans[i];
    if (s.start_ns < q.t0 || s.end_ns() > q.t1) continue;
    const int64_t dur = std::max<int64_t>(0, s.dur_ns);
    Acc& a = out.names[keyOf(s.name, s.category)];
    ++a.count;
    a.total = satAdd(a.total, dur);
    a.self = satAdd(a.self, std::max<int64_t>(0, dur - child[i]));
    a.min = std::min(a.min, dur);
    a.max = std::max(a.max, dur);
    a.durs.push_back(dur);
    if (a.ranks.empty() || a.ranks.back() != track.rank) a.ranks.push_back(track.rank);
    ++out.spans;
    ++rs.spans;
    rs.total_ns = satAdd(rs.total_ns, dur);
    if (s.depth == 0) rs.busy_ns = satAdd(rs.busy_ns, dur);
    if (s.category == core::Category::kComm && !vocab::nccl::isControlCall(reader.str(s.name))) {
      std::string op = normalizeCommName(reader.str(s.name));
      if (op.empty()) op = reader.str(s.name);
      int64_t bytes = -1, group = 0;
      if (bytesKey != 0 || groupKey != 0) {
        for (const ArgRow& arg : reader.args(s.id)) {
          if (bytesKey != 0 && arg.key == bytesKey) bytes = arg.value;
          if (groupKey != 0 && arg.key == groupKey) group = arg.value;
        }
      }
      if (bytes < 0) bytes = bytesOfShapes(reader.str(s.detail));
      CollAcc& c = out.colls[op];
      c.hostCall = c.hostCall || vocab::nccl::isDataCall(reader.str(s.name));
      ++c.calls;
      c.bytes = satAdd(c.bytes, bytes);
      c.time = satAdd(c.time, dur);
      if (group > 0) c.group_size = joinSizes(c.group_size, static_cast<int>(group));
    }
  }
}

std::vector<TrackRow> chosenTracks(const TraceReader& reader, const RangeQuery& q) {
  std::vector<TrackRow> out;
  for (TrackRow& t : reader.tracks()) {
    if (!q.ranks.empty() && std::find(q.ranks.begin(), q.ranks.end(), t.rank) == q.ranks.end()) {
      continue;
    }
    out.push_back(std::move(t));
  }
  return out;
}

void scanTracks(const TraceReader& reader, const std::vector<TrackRow>& tracks, size_t from,
                size_t stride, const RangeQuery& q, const std::atomic<bool>* cancel, Partial& out) {
  const core::StringId bytesKey = NameCodes::find(reader, vocab::arg::kBytes);
  const core::StringId groupKey = NameCodes::find(reader, vocab::arg::kGroupSize);
  for (size_t i = from; i < tracks.size(); i += stride) {
    if (cancel && cancel->load()) {
      out.cancelled = true;
      return;
    }
    out.ranks[tracks[i].rank].rank = tracks[i].rank;
    scanTrack(reader, tracks[i], q, bytesKey, groupKey, out);
  }
}

RangeStats finish(const RangeQuery& q, std::vector<Partial>& parts) {
  RangeStats r;
  r.query = q;
  // Merge into the first partial.
  Partial& all = parts.front();
  for (size_t p = 1; p < parts.size(); ++p) {
    Partial& o = parts[p];
    all.cancelled = all.cancelled || o.cancelled;
    all.spans += o.spans;
    for (auto& [k, a] : o.names) {
      Acc& b = all.names[k];
      b.count += a.count;
      b.total = satAdd(b.total, a.total);
      b.self = satAdd(b.self, a.self);
      b.min = std::min(b.min, a.min);
      b.max = std::max(b.max, a.max);
      b.durs.insert(b.durs.end(), a.durs.begin(), a.durs.end());
      b.ranks.insert(b.ranks.end(), a.ranks.begin(), a.ranks.end());
    }
    for (const auto& [rank, s] : o.ranks) {
      RankRangeStats& t = all.ranks[rank];
      t.rank = rank;
      t.spans += s.spans;
      t.total_ns = satAdd(t.total_ns, s.total_ns);
      t.busy_ns = satAdd(t.busy_ns, s.busy_ns);
    }
    for (const auto& [op, c] : o.colls) {
      CollAcc& d = all.colls[op];
      d.calls += c.calls;
      d.bytes = satAdd(d.bytes, c.bytes);
      d.time = satAdd(d.time, c.time);
      d.group_size = joinSizes(d.group_size, c.group_size);
      d.hostCall = d.hostCall || c.hostCall;
    }
  }
  r.cancelled = all.cancelled;
  r.spans = all.spans;
  r.names.reserve(all.names.size());
  for (auto& [k, a] : all.names) {
    NameStats n;
    n.name = static_cast<core::StringId>(k >> 8);
    n.category = static_cast<core::Category>(k & 0xff);
    n.count = a.count;
    n.total_ns = a.total;
    n.self_ns = a.self;
    n.min_ns = a.min;
    n.max_ns = a.max;
    n.p50_ns = nearestRankPercentile(a.durs, 0.50);
    n.p95_ns = nearestRankPercentile(a.durs, 0.95);
    std::sort(a.ranks.begin(), a.ranks.end());
    n.ranks = static_cast<int>(std::unique(a.ranks.begin(), a.ranks.end()) - a.ranks.begin());
    r.names.push_back(n);
  }
  std::sort(r.names.begin(), r.names.end(), [](const NameStats& a, const NameStats& b) {
    if (a.total_ns != b.total_ns) return a.total_ns > b.total_ns;
    if (a.name != b.name) return a.name < b.name;
    return a.category < b.category;
  });
  for (const auto& [rank, s] : all.ranks) r.ranks.push_back(s);
  for (const auto& [op, c] : all.colls) {
    RangeCollective x;
    x.op = op;
    x.calls = c.calls;
    x.bytes = c.bytes;
    x.time_ns = c.time;
    x.group_size = std::max(0, c.group_size);  // mixed: unknown
    x.host_call_time = c.hostCall;
    x.algbw_gbps =
        c.time > 0 && !c.hostCall ? static_cast<double>(c.bytes) / static_cast<double>(c.time) : 0;
    x.busbw_gbps = x.algbw_gbps * busBandwidthFactor(op, x.group_size);
    r.collectives.push_back(std::move(x));
  }
  return r;
}

}  // namespace

int64_t nearestRankPercentile(std::vector<int64_t>& values, double p) {
  if (values.empty()) return 0;
  const double pos = std::ceil(p * static_cast<double>(values.size()));
  const auto idx =
      static_cast<size_t>(std::clamp(pos, 1.0, static_cast<double>(values.size()))) - 1;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(idx), values.end());
  return values[idx];
}

RangeStats rangeStats(const TraceReader& reader, const RangeQuery& query,
                      const std::atomic<bool>* cancel) {
  std::vector<Partial> parts(1);
  scanTracks(reader, chosenTracks(reader, query), 0, 1, query, cancel, parts[0]);
  return finish(query, parts);
}

RangeStats rangeStatsParallel(const std::string& path, const RangeQuery& query, int threads,
                              const std::atomic<bool>* cancel) {
  const TraceReader first = TraceReader::open(path);
  std::vector<TrackRow> tracks = chosenTracks(first, query);
  // Biggest tracks first, dealt round robin, so the threads get similar shares.
  std::sort(tracks.begin(), tracks.end(),
            [](const TrackRow& a, const TrackRow& b) { return a.event_count > b.event_count; });
  const auto n = static_cast<size_t>(std::max(1, threads));
  std::vector<Partial> parts(n);
  std::vector<std::thread> pool;
  std::vector<std::string> errors(n);
  for (size_t i = 1; i < n; ++i) {
    pool.emplace_back([&, i] {
      try {
        const TraceReader reader = TraceReader::open(path);
        scanTracks(reader, tracks, i, n, query, cancel, parts[i]);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
  }
  try {
    scanTracks(first, tracks, 0, n, query, cancel, parts[0]);
  } catch (const std::exception& e) {
    errors[0] = e.what();
  }
  for (std::thread& t : pool) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw TraceError(e);
  }
  return finish(query, parts);
}

}  // namespace tracerun::trace::analysis
