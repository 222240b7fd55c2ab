// Timeline (timeline.h): the interactive reader's queries over the level-of-detail summaries
// (span_chunks.h, namespace lod) and the indexes. Never writes to the trace file; an older file's
// summaries go into TEMP tables of this connection.
//
// Sections: open · draw (buckets from the levels or from spans, then items) · span details ·
//           flows · name search · series · Timeline forwarding
#include "tracerun/trace/timeline.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "span_chunks.h"
#include "sqlite_util.h"
#include "summaries.h"
#include "tracerun/trace/schema.h"

namespace tracerun::trace {

namespace {

int64_t endOf(int64_t start, int64_t dur) {
  int64_t end = 0;
  if (__builtin_add_overflow(start, dur, &end)) return std::numeric_limits<int64_t>::max();
  return end;
}

struct DepthInfo {
  int64_t count = 0, longest = 0;
  int first = -1, top = -1;
};

bool before(const SpanRow& s, const MatchPosition& p) {
  return std::tie(s.start_ns, s.track, s.id) < std::tie(p.start_ns, p.track, p.span_id);
}
bool after(const SpanRow& s, const MatchPosition& p) {
  return std::tie(p.start_ns, p.track, p.span_id) < std::tie(s.start_ns, s.track, s.id);
}
bool matchLess(const SpanRow& a, const SpanRow& b) {
  return std::tie(a.start_ns, a.track, a.id) < std::tie(b.start_ns, b.track, b.id);
}

lod::Bucket bucketFromRow(const sql::Stmt& s) {
  lod::Bucket b;
  b.bucket = s.i64(0);
  b.count = s.i64(1);
  b.busy = s.i64(2);
  b.first = s.i64(3);
  b.max_end = s.i64(4);
  b.dom_id = s.i64(5);
  b.dom_start = s.i64(6);
  b.dom_dur = s.i64(7);
  b.dom_packed = s.i64(8);
  return b;
}

}  // namespace

class Timeline::Impl {
 public:
  Impl(const std::string& path, TraceReader reader) : path_(path), reader_(std::move(reader)) {}

  void open(const TimelineOptions& options);
  DrawList draw(const DrawRequest& req) const;
  std::optional<SpanDetail> span(int64_t id, size_t maxChildren) const;
  std::vector<FlowLink> flows(int64_t t0, int64_t t1) const;
  std::vector<SpanRow> spansAtDepth(int64_t track, int d, int64_t t0, int64_t t1) const;
  std::optional<SpanRow> rowById(int64_t id) const;
  int64_t spanStartingAt(int64_t track, int64_t ts) const;
  std::vector<core::StringId> namesMatching(const std::string& text) const;
  int64_t matchCount(const std::vector<core::StringId>& names) const;
  std::optional<SpanRow> nextMatch(const std::vector<core::StringId>& names,
                                   const MatchPosition& pos, bool forward) const;
  std::vector<SpanRow> matches(const std::vector<core::StringId>& names, int64_t t0, int64_t t1,
                               size_t limit) const;
  // Spans of one track starting in name bucket b whose name is in `names`, in match order.
  std::vector<SpanRow> matchesInBucket(const std::unordered_set<core::StringId>& names,
                                       int64_t track, int64_t b) const;
  Series counterSeries(int64_t track, int64_t t0, int64_t t1, int64_t nsPerBucket) const;
  Series memorySeries(const MemoryDevice& d, int64_t t0, int64_t t1, int64_t nsPerBucket) const;

  // One kind of series (counters by track, memory by rank and device; summaries.h): its
  // statements, the key columns bound first (?1..?keys), and each series' stored levels.
  using SeriesKey = std::array<int64_t, 3>;
  struct SeriesQuery {
    SeriesQuery(const sql::Db& db, const std::string& table,
                const std::vector<std::string>& keyColumns, const std::string& value,
                const std::string& lodTable, const std::string& lodValues);
    int keys = 0;
    sql::Stmt prev, raw, rows, firstLevel, topLevel;
    std::map<SeriesKey, std::pair<int, int>> levels;  // (first, top); -1: none stored
  };
  Series series(SeriesQuery& q, const SeriesKey& key, int64_t t0, int64_t t1,
                int64_t nsPerBucket) const;

  const DepthInfo* depth(int64_t track, int d) const {
    auto it = depths_.find(track);
    if (it == depths_.end() || d < 0 || static_cast<size_t>(d) >= it->second.size()) return nullptr;
    return it->second[static_cast<size_t>(d)].count > 0 ? &it->second[static_cast<size_t>(d)]
                                                        : nullptr;
  }
  int maxDepth(int64_t track) const {
    auto it = depths_.find(track);
    return it == depths_.end() ? -1 : static_cast<int>(it->second.size()) - 1;
  }

  std::string path_;
  TraceReader reader_;
  sql::Db db_;
  bool built_ = false;
  std::map<int64_t, std::vector<DepthInfo>> depths_;  // track -> by depth
  std::vector<int64_t> tracks_;
  mutable sql::Stmt lodRows_, spanById_, nameNext_, namePrev_, nameTracks_, nameRange_;
  std::unique_ptr<SeriesQuery> memory_, counters_;  // const queries use them (non-const pointees)
};

// ---------------------------------------------------------------------------------------------
// open

void Timeline::Impl::open(const TimelineOptions& options) {
  db_ = sql::Db(path_, sql::Db::Mode::kReadOnly);
  if (reader_.meta("summaries") != lod::kSummariesVersion) {
    // An older file: the summaries go into TEMP tables (an anonymous temporary file), which
    // shadow any tables of the same names in the file.
    for (const auto& sql : schema::summaryTableStatements(true)) db_.exec(sql);
    db_.exec("BEGIN");
    try {
      lod::build(db_, options.progress);
    } catch (...) {
      db_.exec("ROLLBACK");
      throw;
    }
    db_.exec("COMMIT");
    built_ = true;
  }
  sql::Stmt s(db_,
              "SELECT track, depth, span_count, longest_span_ns, first_level, top_level FROM "
              "span_lod_depths ORDER BY track, depth");
  while (s.step()) {
    const int64_t d = s.i64(1);
    if (d < 0 || d > 65535) continue;
    auto& list = depths_[s.i64(0)];
    if (static_cast<size_t>(d) >= list.size()) list.resize(static_cast<size_t>(d) + 1);
    DepthInfo& info = list[static_cast<size_t>(d)];
    info.count = s.i64(2);
    info.longest = s.i64(3);
    info.first = static_cast<int>(s.i64(4));
    info.top = static_cast<int>(s.i64(5));
  }
  for (const auto& t : reader_.tracks()) tracks_.push_back(t.id);
  lodRows_ = sql::Stmt(db_,
                       "SELECT bucket, count, busy_ns, first_ns, max_end_ns, dom_id, dom_start_ns, "
                       "dom_dur_ns, dom_packed FROM span_lod WHERE track = ?1 AND level = ?2 AND "
                       "depth = ?3 AND bucket BETWEEN ?4 AND ?5 AND max_end_ns >= ?6 AND first_ns "
                       "<= ?7 ORDER BY bucket");
  spanById_ = sql::Stmt(db_,
                        "SELECT id, track, start_ns, dur_ns, packed, detail, seq FROM spans WHERE "
                        "id = ?1");
  nameNext_ = sql::Stmt(db_,
                        "SELECT bucket FROM name_buckets WHERE name = ?1 AND bucket >= ?2 ORDER BY "
                        "bucket LIMIT 1");
  namePrev_ = sql::Stmt(db_,
                        "SELECT bucket FROM name_buckets WHERE name = ?1 AND bucket <= ?2 ORDER BY "
                        "bucket DESC LIMIT 1");
  nameTracks_ = sql::Stmt(db_, "SELECT track FROM name_buckets WHERE name = ?1 AND bucket = ?2");
  memory_ = std::make_unique<SeriesQuery>(
      db_, "memory", std::vector<std::string>{"rank", "device_type", "device_index"}, "total",
      "memory_lod", "min_total, max_total, last_total");
  counters_ =
      std::make_unique<SeriesQuery>(db_, "counters", std::vector<std::string>{"track"}, "value",
                                    "counter_lod", "min_value, max_value, last_value");
  nameRange_ = sql::Stmt(db_,
                         "SELECT bucket, track FROM name_buckets WHERE name = ?1 AND bucket "
                         "BETWEEN ?2 AND ?3");
}

// ---------------------------------------------------------------------------------------------
// draw

DrawList Timeline::Impl::draw(const DrawRequest& request) const {
  // Bucket arithmetic (bucket * width, one bucket past t1) stays far from the int64 limits: no
  // span lies beyond +-2^61 ns (73 years) of the origin in a trace this reads.
  constexpr int64_t kLimit = int64_t{1} << 61;
  DrawRequest req = request;
  req.t0 = std::clamp(req.t0, -kLimit, kLimit);
  req.t1 = std::clamp(req.t1, -kLimit, kLimit);
  DrawList out;
  const double R = req.ns_per_px >= 1 ? req.ns_per_px : 1;
  const int k = lod::levelFor(R);
  const int64_t W = lod::width(k);
  out.bucket_ns = W;
  if (req.t0 > req.t1) return out;
  const int last = std::min(req.max_depth, maxDepth(req.track));
  const int firstDepth = std::max(0, req.min_depth);

  // Per depth, the visible buckets of level k in bucket order.
  std::map<int, std::vector<lod::Bucket>> visible;
  auto isVisible = [&](const lod::Bucket& b) {
    return b.count > 0 && b.max_end >= req.t0 && b.first <= req.t1;
  };
  std::vector<int> raw;
  for (int d = firstDepth; d <= last; ++d) {
    const DepthInfo* info = depth(req.track, d);
    if (!info) continue;
    if (info->first < 0 || k < info->first) {
      raw.push_back(d);
      continue;
    }
    out.from_summaries = true;
    const int j = std::min(k, info->top);
    const int64_t ratio = lod::width(k - j);  // level-j buckets per level-k bucket
    const int64_t kbLo = lod::bucketOf(chunks::earliestStartReaching(req.t0, info->longest), k);
    const int64_t kbHi = lod::bucketOf(req.t1, k);
    auto& rows = lodRows_;
    rows.reset();
    rows.bind(1, req.track).bind(2, int64_t{j}).bind(3, int64_t{d});
    rows.bind(4, kbLo * ratio).bind(5, (kbHi + 1) * ratio - 1);
    // Merged into coarser buckets, a level-j row that ends before t0 may still belong to a
    // visible bucket: only the identity level filters in SQL.
    rows.bind(6, j == k ? req.t0 : std::numeric_limits<int64_t>::min());
    rows.bind(7, j == k ? req.t1 : std::numeric_limits<int64_t>::max());
    auto& list = visible[d];
    while (rows.step()) {
      lod::Bucket b = bucketFromRow(rows);
      b.bucket = lod::floorDiv(b.bucket, ratio);
      if (!list.empty() && list.back().bucket == b.bucket) {
        list.back().merge(b);
      } else {
        list.push_back(b);
      }
    }
    rows.reset();
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const lod::Bucket& b) { return !isVisible(b); }),
               list.end());
  }
  if (!raw.empty()) {
    // From the spans: one read of the buckets from t0's to t1's; a bucket before t0's holds a span
    // that reaches into them, and only its own width is read again, to count all its spans.
    const std::unordered_set<int> wanted(raw.begin(), raw.end());
    const int64_t k0 = lod::bucketOf(req.t0, k);
    const int64_t hiEdge = (lod::bucketOf(req.t1, k) + 1) * W - 1;
    auto packOf = [](const SpanRow& s) {
      return schema::packSpan(s.name, static_cast<uint16_t>(s.depth),
                              static_cast<uint8_t>(s.category));
    };
    std::map<int, std::vector<lod::Bucket>> fromSpans;
    std::set<std::pair<int, int64_t>> early;  // (depth, bucket before k0)
    for (const SpanRow& s : reader_.spans(req.track, k0 * W, hiEdge)) {
      if (!wanted.count(s.depth) || s.start_ns > hiEdge) continue;
      const int64_t b = lod::bucketOf(s.start_ns, k);
      if (b < k0) {
        early.insert({s.depth, b});
        continue;
      }
      auto& list = fromSpans[s.depth];  // per depth, starts (so buckets) come in order
      if (list.empty() || list.back().bucket != b) {
        list.emplace_back();
        list.back().bucket = b;
      }
      list.back().add(s.id, s.start_ns, std::max<int64_t>(0, s.dur_ns), packOf(s));
    }
    for (const auto& [d, b] : early) {
      lod::Bucket e;
      e.bucket = b;
      for (const SpanRow& s : reader_.spans(req.track, b * W, b * W + W - 1)) {
        if (s.depth == d && lod::bucketOf(s.start_ns, k) == b) {
          e.add(s.id, s.start_ns, std::max<int64_t>(0, s.dur_ns), packOf(s));
        }
      }
      if (isVisible(e)) visible[d].push_back(e);  // `early` is in bucket order
    }
    for (const auto& [d, list] : fromSpans) {
      for (const lod::Bucket& bucket : list) {
        if (isVisible(bucket)) visible[d].push_back(bucket);
      }
    }
  }

  // Items: one per visible bucket, folds merged across gaps under a pixel.
  for (const auto& [d, list] : visible) {
    const size_t depthBegin = out.items.size();
    for (const lod::Bucket& b : list) {
      DrawItem item;
      const bool big = static_cast<double>(b.dom_dur) >= kMinSpanPixels * R;
      item.kind = big ? DrawItem::Kind::kSpan : DrawItem::Kind::kFold;
      item.depth = d;
      item.start_ns = big ? b.dom_start : b.first;
      item.end_ns = big ? endOf(b.dom_start, b.dom_dur) : b.max_end;
      item.count = b.count;
      item.busy_ns = b.busy;
      item.span_id = b.dom_id;
      item.span_start_ns = b.dom_start;
      item.span_dur_ns = b.dom_dur;
      item.name = schema::packedName(b.dom_packed);
      item.category = static_cast<core::Category>(schema::packedCategory(b.dom_packed));
      if (!big && out.items.size() > depthBegin) {
        DrawItem& prev = out.items.back();
        if (prev.kind == DrawItem::Kind::kFold &&
            static_cast<double>(item.start_ns) - static_cast<double>(prev.end_ns) < R) {
          prev.start_ns = std::min(prev.start_ns, item.start_ns);
          prev.end_ns = std::max(prev.end_ns, item.end_ns);
          prev.count += item.count;
          prev.busy_ns += item.busy_ns;
          if (lod::dominates(item.span_dur_ns, item.span_start_ns, item.span_id, prev.span_dur_ns,
                             prev.span_start_ns, prev.span_id)) {
            prev.span_id = item.span_id;
            prev.span_start_ns = item.span_start_ns;
            prev.span_dur_ns = item.span_dur_ns;
            prev.name = item.name;
            prev.category = item.category;
          }
          continue;
        }
      }
      out.items.push_back(item);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// spans at one depth

std::vector<SpanRow> Timeline::Impl::spansAtDepth(int64_t track, int d, int64_t t0,
                                                  int64_t t1) const {
  std::vector<SpanRow> out;
  const DepthInfo* info = depth(track, d);
  if (info == nullptr || t0 > t1) return out;
  auto keep = [&](const SpanRow& s) {
    return s.depth == d && s.start_ns >= t0 && s.start_ns <= t1;
  };
  if (info->first < 0) {  // no stored level: the spans themselves
    for (const SpanRow& s : reader_.spans(track, t0, t1))
      if (keep(s)) out.push_back(s);
  } else {
    // Buckets of the finest stored level by start: a bucket of one span names it (its dominant);
    // a fuller one is read from the spans of its own width.
    constexpr int64_t kLimit = int64_t{1} << 61;
    const int j = info->first;
    const int64_t W = lod::width(j);
    std::vector<std::pair<int64_t, int64_t>> rows;  // (bucket, id when alone else 0)
    auto& r = lodRows_;
    r.reset();
    r.bind(1, track).bind(2, int64_t{j}).bind(3, int64_t{d});
    r.bind(4, lod::bucketOf(std::clamp(t0, -kLimit, kLimit), j));
    r.bind(5, lod::bucketOf(std::clamp(t1, -kLimit, kLimit), j));
    r.bind(6, std::numeric_limits<int64_t>::min()).bind(7, std::numeric_limits<int64_t>::max());
    while (r.step()) {
      const lod::Bucket b = bucketFromRow(r);
      rows.push_back({b.bucket, b.count == 1 ? b.dom_id : 0});
    }
    r.reset();
    for (const auto& [bucket, id] : rows) {
      if (id != 0) {
        const auto one = rowById(id);
        if (one && keep(*one)) out.push_back(*one);
        continue;
      }
      const int64_t lo = bucket * W, hi = lo + W - 1;
      for (const SpanRow& s : reader_.spans(track, lo, hi))
        if (keep(s) && s.start_ns >= lo && s.start_ns <= hi) out.push_back(s);
    }
  }
  std::sort(out.begin(), out.end(), [](const SpanRow& a, const SpanRow& b) {
    return std::tie(a.start_ns, a.id) < std::tie(b.start_ns, b.id);
  });
  return out;
}

// ---------------------------------------------------------------------------------------------
// span details

std::optional<SpanRow> Timeline::Impl::rowById(int64_t id) const {
  auto& s = spanById_;
  s.reset();
  s.bind(1, id);
  if (!s.step()) {
    s.reset();
    return std::nullopt;
  }
  SpanRow r;
  r.id = s.i64(0);
  r.track = s.i64(1);
  r.start_ns = s.i64(2);
  r.dur_ns = s.i64(3);
  const int64_t packed = s.i64(4);
  r.depth = schema::packedDepth(packed);
  r.category = static_cast<core::Category>(schema::packedCategory(packed));
  r.name = schema::packedName(packed);
  r.detail = s.isNull(5) ? 0 : static_cast<core::StringId>(s.i64(5));
  r.seq = s.isNull(6) ? -1 : s.i64(6);
  s.reset();
  return r;
}

std::optional<SpanDetail> Timeline::Impl::span(int64_t id, size_t maxChildren) const {
  const auto row = rowById(id);
  if (!row) return std::nullopt;
  SpanDetail out;
  SpanRow& r = out.span;
  r = *row;
  const int64_t end = r.end_ns();
  if (r.depth > 0) {
    // The enclosing span one level up: the latest-starting one in span order.
    for (const SpanRow& p : reader_.spans(r.track, r.start_ns, r.start_ns)) {
      if (p.depth == r.depth - 1 && p.start_ns <= r.start_ns && p.end_ns() >= end) out.parent = p;
    }
  }
  for (const SpanRow& c : reader_.spans(r.track, r.start_ns, end)) {
    if (c.depth != r.depth + 1 || c.start_ns < r.start_ns || c.end_ns() > end) continue;
    ++out.child_count;
    if (out.children.size() < maxChildren) out.children.push_back(c);
  }
  out.args = reader_.args(r.id);
  return out;
}

// ---------------------------------------------------------------------------------------------
// flows

int64_t Timeline::Impl::spanStartingAt(int64_t track, int64_t ts) const {
  for (const SpanRow& s : reader_.spans(track, ts, ts)) {
    if (s.start_ns == ts) return s.id;  // span order: the shallowest first
  }
  return 0;
}

std::vector<FlowLink> Timeline::Impl::flows(int64_t t0, int64_t t1) const {
  std::vector<std::pair<int64_t, FlowRow>> found;  // (rowid, flow)
  if (t0 > t1) return {};
  sql::Stmt s(db_,
              "SELECT rowid, kind, src_track, src_ts_ns, dst_track, dst_ts_ns FROM flows WHERE "
              "rowid IN (SELECT rowid FROM flows WHERE src_track = ?1 AND src_ts_ns BETWEEN ?2 AND "
              "?3 UNION SELECT rowid FROM flows WHERE dst_track = ?1 AND dst_ts_ns BETWEEN ?2 AND "
              "?3)");
  std::unordered_set<int64_t> seen;
  for (int64_t track : tracks_) {
    s.reset();
    s.bind(1, track).bind(2, t0).bind(3, t1);
    while (s.step()) {
      if (!seen.insert(s.i64(0)).second) continue;
      FlowRow f;
      f.kind = static_cast<core::FlowKind>(s.i64(1));
      f.src_track = s.i64(2);
      f.src_ts_ns = s.i64(3);
      f.dst_track = s.i64(4);
      f.dst_ts_ns = s.i64(5);
      found.emplace_back(s.i64(0), f);
    }
  }
  std::sort(found.begin(), found.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<FlowLink> out;
  std::map<std::pair<int64_t, int64_t>, int64_t> resolved;
  auto resolve = [&](int64_t track, int64_t ts) {
    auto [it, fresh] = resolved.try_emplace({track, ts}, 0);
    if (fresh) it->second = spanStartingAt(track, ts);
    return it->second;
  };
  for (const auto& [rowid, f] : found) {
    FlowLink link;
    link.flow = f;
    link.src_span = resolve(f.src_track, f.src_ts_ns);
    link.dst_span = resolve(f.dst_track, f.dst_ts_ns);
    out.push_back(link);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// name search

std::vector<core::StringId> Timeline::Impl::namesMatching(const std::string& text) const {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  const std::string needle = lower(text);
  sql::Stmt used(db_, "SELECT 1 FROM name_buckets WHERE name = ?1 LIMIT 1");
  std::vector<core::StringId> out;
  for (size_t i = 0; i < reader_.stringCount(); ++i) {
    const auto id = static_cast<core::StringId>(i);
    if (lower(reader_.str(id)).find(needle) == std::string::npos) continue;
    used.reset();
    used.bind(1, int64_t{id});
    if (used.step()) out.push_back(id);
  }
  return out;
}

int64_t Timeline::Impl::matchCount(const std::vector<core::StringId>& names) const {
  sql::Stmt s(db_, "SELECT total(count) FROM name_buckets WHERE name = ?1");
  int64_t n = 0;
  for (core::StringId name : std::unordered_set<core::StringId>(names.begin(), names.end())) {
    s.reset();
    s.bind(1, int64_t{name});
    if (s.step()) n += static_cast<int64_t>(s.f64(0));
  }
  return n;
}

std::vector<SpanRow> Timeline::Impl::matchesInBucket(
    const std::unordered_set<core::StringId>& names, int64_t track, int64_t b) const {
  const int64_t W = lod::width(lod::kNameLevel);
  const int64_t lo = b * W, hi = lo + W - 1;
  std::vector<SpanRow> out;
  for (const SpanRow& s : reader_.spans(track, lo, hi)) {
    if (s.start_ns >= lo && s.start_ns <= hi && names.count(s.name)) out.push_back(s);
  }
  std::sort(out.begin(), out.end(), matchLess);
  return out;
}

std::optional<SpanRow> Timeline::Impl::nextMatch(const std::vector<core::StringId>& names,
                                                 const MatchPosition& pos, bool forward) const {
  const std::unordered_set<core::StringId> set(names.begin(), names.end());
  if (set.empty()) return std::nullopt;
  int64_t cursor = lod::bucketOf(pos.start_ns, lod::kNameLevel);
  for (;;) {
    // The nearest bucket (in the search direction) holding any of the names.
    std::optional<int64_t> bucket;
    auto& s = forward ? nameNext_ : namePrev_;
    for (core::StringId name : set) {
      s.reset();
      s.bind(1, int64_t{name}).bind(2, cursor);
      if (s.step()) {
        const int64_t b = s.i64(0);
        if (!bucket || (forward ? b < *bucket : b > *bucket)) bucket = b;
      }
      s.reset();
    }
    if (!bucket) return std::nullopt;
    std::unordered_set<int64_t> trackSet;
    for (core::StringId name : set) {
      nameTracks_.reset();
      nameTracks_.bind(1, int64_t{name}).bind(2, *bucket);
      while (nameTracks_.step()) trackSet.insert(nameTracks_.i64(0));
      nameTracks_.reset();
    }
    std::optional<SpanRow> best;
    for (int64_t track : trackSet) {
      for (const SpanRow& m : matchesInBucket(set, track, *bucket)) {
        if (forward ? !after(m, pos) : !before(m, pos)) continue;
        if (!best || (forward ? matchLess(m, *best) : matchLess(*best, m))) best = m;
      }
    }
    if (best) return best;
    cursor = forward ? *bucket + 1 : *bucket - 1;
  }
}

std::vector<SpanRow> Timeline::Impl::matches(const std::vector<core::StringId>& names, int64_t t0,
                                             int64_t t1, size_t limit) const {
  std::vector<SpanRow> out;
  const std::unordered_set<core::StringId> set(names.begin(), names.end());
  if (t0 > t1 || set.empty() || limit == 0) return out;
  std::map<int64_t, std::unordered_set<int64_t>> buckets;  // bucket -> tracks
  for (core::StringId name : set) {
    nameRange_.reset();
    nameRange_.bind(1, int64_t{name})
        .bind(2, lod::bucketOf(t0, lod::kNameLevel))
        .bind(3, lod::bucketOf(t1, lod::kNameLevel));
    while (nameRange_.step()) buckets[nameRange_.i64(0)].insert(nameRange_.i64(1));
    nameRange_.reset();
  }
  for (const auto& [b, tracks] : buckets) {
    std::vector<SpanRow> here;
    for (int64_t track : tracks) {
      for (const SpanRow& m : matchesInBucket(set, track, b)) {
        if (m.start_ns >= t0 && m.start_ns <= t1) here.push_back(m);
      }
    }
    std::sort(here.begin(), here.end(), matchLess);
    for (const SpanRow& m : here) {
      if (out.size() == limit) return out;
      out.push_back(m);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// series

namespace {

void addSample(Series& out, int64_t ts, double v) {
  const int64_t b = lod::floorDiv(ts, out.bucket_ns);
  if (out.buckets.empty() || out.buckets.back().start_ns != b * out.bucket_ns) {
    SeriesBucket nb;
    nb.start_ns = b * out.bucket_ns;
    nb.end_ns = nb.start_ns + out.bucket_ns;
    nb.min = nb.max = v;
    out.buckets.push_back(nb);
  }
  SeriesBucket& sb = out.buckets.back();
  ++sb.count;
  sb.min = std::min(sb.min, v);
  sb.max = std::max(sb.max, v);
  sb.last = v;
}

// A bucket of a stored level, inside one of out's buckets (and after all samples already added).
void addRow(Series& out, int64_t start, int64_t count, double lo, double hi, double last) {
  const int64_t b = lod::floorDiv(start, out.bucket_ns);
  if (out.buckets.empty() || out.buckets.back().start_ns != b * out.bucket_ns) {
    SeriesBucket nb;
    nb.start_ns = b * out.bucket_ns;
    nb.end_ns = nb.start_ns + out.bucket_ns;
    nb.min = lo;
    nb.max = hi;
    out.buckets.push_back(nb);
  }
  SeriesBucket& sb = out.buckets.back();
  sb.count += count;
  sb.min = std::min(sb.min, lo);
  sb.max = std::max(sb.max, hi);
  sb.last = last;
}

}  // namespace

Timeline::Impl::SeriesQuery::SeriesQuery(const sql::Db& db, const std::string& table,
                                         const std::vector<std::string>& keyColumns,
                                         const std::string& value, const std::string& lodTable,
                                         const std::string& lodValues)
    : keys(static_cast<int>(keyColumns.size())) {
  std::string where;
  for (size_t i = 0; i < keyColumns.size(); ++i) {
    where += keyColumns[i] + " = ?" + std::to_string(i + 1) + " AND ";
  }
  auto p = [&](int i) { return "?" + std::to_string(keys + i); };
  prev = sql::Stmt(db, "SELECT " + value + " FROM " + table + " WHERE " + where + "ts_ns < " +
                           p(1) + " ORDER BY ts_ns DESC, rowid DESC LIMIT 1");
  raw = sql::Stmt(db, "SELECT ts_ns, " + value + " FROM " + table + " WHERE " + where +
                          "ts_ns BETWEEN " + p(1) + " AND " + p(2) + " ORDER BY ts_ns, rowid");
  rows = sql::Stmt(db, "SELECT bucket, count, " + lodValues + " FROM " + lodTable + " WHERE " +
                           where + "level = " + p(1) + " AND bucket BETWEEN " + p(2) + " AND " +
                           p(3) + " ORDER BY bucket");
  // Two seeks on the primary key (one min() or max() each is a seek; both in one is a scan).
  where.resize(where.size() - 5);  // the trailing " AND "
  firstLevel = sql::Stmt(db, "SELECT min(level) FROM " + lodTable + " WHERE " + where);
  topLevel = sql::Stmt(db, "SELECT max(level) FROM " + lodTable + " WHERE " + where);
}

Series Timeline::Impl::series(SeriesQuery& q, const SeriesKey& key, int64_t t0, int64_t t1,
                              int64_t nsPerBucket) const {
  Series out;
  const int k = lod::levelFor(static_cast<double>(std::max<int64_t>(1, nsPerBucket)));
  out.bucket_ns = lod::width(k);
  if (t0 > t1) return out;
  auto bindKey = [&](sql::Stmt& s) {
    s.reset();
    for (int i = 0; i < q.keys; ++i) s.bind(i + 1, key[static_cast<size_t>(i)]);
  };
  bindKey(q.prev);
  q.prev.bind(q.keys + 1, t0);
  if (q.prev.step()) {
    out.has_before = true;
    out.before = q.prev.f64(0);
  }
  q.prev.reset();
  auto raw = [&](int64_t a, int64_t b) {
    bindKey(q.raw);
    q.raw.bind(q.keys + 1, a).bind(q.keys + 2, b);
    while (q.raw.step()) addSample(out, q.raw.i64(0), q.raw.f64(1));
    q.raw.reset();
  };
  auto [it, fresh] = q.levels.try_emplace(key, -1, -1);
  if (fresh) {
    for (auto [stmt, level] : {std::pair{&q.firstLevel, &it->second.first},
                               std::pair{&q.topLevel, &it->second.second}}) {
      bindKey(*stmt);
      if (stmt->step() && !stmt->isNull(0)) *level = static_cast<int>(stmt->i64(0));
      stmt->reset();
    }
  }
  const auto [first, top] = it->second;
  if (first < 0 || k < first) {  // zoomed in finer than the stored levels: the samples
    raw(t0, t1);
    return out;
  }
  // The stored level j (the requested one, or the top one merged up) for the level-j buckets
  // wholly inside [t0, t1]; the samples for the parts of the window outside them.
  const int j = std::min(k, top);
  const int64_t Wj = lod::width(j);
  constexpr int64_t kLimit = int64_t{1} << 61;  // no overflow in bucket * width (as in draw)
  const int64_t lo = -lod::floorDiv(-std::max(t0, -kLimit), Wj);
  const int64_t hi = lod::floorDiv(std::min(t1, kLimit) + 1, Wj) - 1;
  if (lo > hi) {
    raw(t0, t1);
    return out;
  }
  if (t0 < lo * Wj) raw(t0, lo * Wj - 1);
  bindKey(q.rows);
  q.rows.bind(q.keys + 1, int64_t{j}).bind(q.keys + 2, lo).bind(q.keys + 3, hi);
  while (q.rows.step()) {
    addRow(out, q.rows.i64(0) * Wj, q.rows.i64(1), q.rows.f64(2), q.rows.f64(3), q.rows.f64(4));
  }
  q.rows.reset();
  out.from_summaries = true;
  if ((hi + 1) * Wj <= t1) raw((hi + 1) * Wj, t1);
  return out;
}

Series Timeline::Impl::counterSeries(int64_t track, int64_t t0, int64_t t1,
                                     int64_t nsPerBucket) const {
  return series(*counters_, {track, 0, 0}, t0, t1, nsPerBucket);
}

Series Timeline::Impl::memorySeries(const MemoryDevice& d, int64_t t0, int64_t t1,
                                    int64_t nsPerBucket) const {
  return series(*memory_, {d.rank, d.device_type, d.device_index}, t0, t1, nsPerBucket);
}

// ---------------------------------------------------------------------------------------------
// Timeline forwarding

Timeline::Timeline(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Timeline::~Timeline() = default;
Timeline::Timeline(Timeline&&) noexcept = default;
Timeline& Timeline::operator=(Timeline&&) noexcept = default;

Timeline Timeline::open(const std::string& path, const TimelineOptions& options) {
  auto impl = std::make_unique<Impl>(path, TraceReader::open(path));
  impl->open(options);
  return Timeline(std::move(impl));
}

const TraceReader& Timeline::reader() const {
  return impl_->reader_;
}
bool Timeline::summariesBuiltAtOpen() const {
  return impl_->built_;
}

std::vector<TrackDepth> Timeline::trackDepths() const {
  std::vector<TrackDepth> out;
  for (const auto& [track, list] : impl_->depths_) {
    TrackDepth t;
    t.track = track;
    t.max_depth = static_cast<int>(list.size()) - 1;
    for (const auto& d : list) t.spans += d.count;
    out.push_back(t);
  }
  return out;
}
int Timeline::maxDepth(int64_t track) const {
  return impl_->maxDepth(track);
}
DrawList Timeline::draw(const DrawRequest& request) const {
  return impl_->draw(request);
}
std::optional<SpanDetail> Timeline::span(int64_t id, size_t max_children) const {
  return impl_->span(id, max_children);
}
std::vector<SpanRow> Timeline::spansAtDepth(int64_t track, int depth, int64_t t0,
                                            int64_t t1) const {
  return impl_->spansAtDepth(track, depth, t0, t1);
}
std::vector<FlowLink> Timeline::flows(int64_t t0, int64_t t1) const {
  return impl_->flows(t0, t1);
}
std::vector<core::StringId> Timeline::namesMatching(const std::string& text) const {
  return impl_->namesMatching(text);
}
int64_t Timeline::matchCount(const std::vector<core::StringId>& names) const {
  return impl_->matchCount(names);
}
std::vector<int64_t> Timeline::matchTracks(const std::vector<core::StringId>& names) const {
  sql::Stmt s(impl_->db_, "SELECT DISTINCT track FROM name_buckets WHERE name = ?1");
  std::set<int64_t> tracks;
  for (core::StringId name : names) {
    s.reset();
    s.bind(1, int64_t{name});
    while (s.step()) tracks.insert(s.i64(0));
  }
  return {tracks.begin(), tracks.end()};
}
std::optional<SpanRow> Timeline::nextMatch(const std::vector<core::StringId>& names,
                                           const MatchPosition& after) const {
  return impl_->nextMatch(names, after, true);
}
std::optional<SpanRow> Timeline::previousMatch(const std::vector<core::StringId>& names,
                                               const MatchPosition& before) const {
  return impl_->nextMatch(names, before, false);
}
std::vector<SpanRow> Timeline::matches(const std::vector<core::StringId>& names, int64_t t0,
                                       int64_t t1, size_t limit) const {
  return impl_->matches(names, t0, t1, limit);
}
Series Timeline::counterSeries(int64_t track, int64_t t0, int64_t t1, int64_t ns_per_bucket) const {
  return impl_->counterSeries(track, t0, t1, ns_per_bucket);
}
std::vector<MemoryDevice> Timeline::memoryDevices() const {
  sql::Stmt s(impl_->db_,
              "SELECT rank, device_type, device_index FROM memory_devices ORDER BY rank, "
              "device_type, device_index");
  std::vector<MemoryDevice> out;
  while (s.step()) {
    out.push_back(
        {static_cast<int>(s.i64(0)), static_cast<int>(s.i64(1)), static_cast<int>(s.i64(2))});
  }
  return out;
}
EventCounts Timeline::summaryCounts() const {
  EventCounts c;
  for (const auto& t : trackDepths()) c.spans += t.spans;
  auto one = [&](const char* sql) {
    sql::Stmt s(impl_->db_, sql);
    return s.step() ? static_cast<int64_t>(s.f64(0)) : 0;
  };
  c.memory = one("SELECT total(events) FROM memory_devices");
  // A counter track's samples: its top stored level's counts; a track storing no level (under 8
  // samples or so) is counted from its rows.
  c.counters = one(
      "SELECT total(count) FROM counter_lod l WHERE level = (SELECT max(level) FROM counter_lod "
      "WHERE track = l.track)");
  c.counters += one(
      "SELECT count(*) FROM counters WHERE track NOT IN (SELECT DISTINCT track FROM counter_lod)");
  c.args = c.instants = c.flows = -1;
  return c;
}
Series Timeline::memorySeries(const MemoryDevice& device, int64_t t0, int64_t t1,
                              int64_t ns_per_bucket) const {
  return impl_->memorySeries(device, t0, t1, ns_per_bucket);
}

}  // namespace tracerun::trace
