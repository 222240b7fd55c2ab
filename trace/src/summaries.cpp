// The level-of-detail builder (summaries.h): two passes over each track's spans in span order, the
// first to count each level's rows (which levels the track stores), the second to write them; the
// same for the memory and counter series, two passes over each table in rowid order.
#include "summaries.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "span_chunks.h"
#include "tracerun/trace/error.h"
#include "tracerun/trace/schema.h"

namespace tracerun::trace::lod {

namespace {

struct Row {
  int64_t id = 0, start_ns = 0, dur_ns = 0, packed = 0;
  int depth = 0;
};

class SpanStream {
 public:
  explicit SpanStream(const sql::Db& db)
      : chunks_(db,
                "SELECT min_start_ns, first_id, last_id FROM span_chunks WHERE track = ?1 ORDER "
                "BY min_start_ns, first_id"),
        spans_(db, "SELECT id, start_ns, dur_ns, packed FROM spans WHERE id BETWEEN ?1 AND ?2") {}

  template <typename Fn>
  void forEach(int64_t track, Fn&& fn) {
    chunks_.reset();
    chunks_.bind(1, track);
    std::vector<chunks::ChunkRef> list;
    while (chunks_.step()) list.push_back({chunks_.i64(0), chunks_.i64(1), chunks_.i64(2)});
    chunks_.reset();
    chunks::mergeChunks<Row>(
        list,
        [&](const chunks::ChunkRef& c, std::vector<Row>& rows) {
          spans_.reset();
          spans_.bind(1, c.first_id).bind(2, c.last_id);
          while (spans_.step()) {
            Row r;
            r.id = spans_.i64(0);
            r.start_ns = spans_.i64(1);
            r.dur_ns = std::max<int64_t>(0, spans_.i64(2));
            r.packed = spans_.i64(3);
            r.depth = schema::packedDepth(r.packed);
            rows.push_back(r);
          }
          spans_.reset();
          // A damaged file's chunk may be out of order; the merge needs each chunk sorted.
          if (!std::is_sorted(rows.begin(), rows.end(), chunks::spanLess<Row>)) {
            std::sort(rows.begin(), rows.end(), chunks::spanLess<Row>);
          }
        },
        fn);
  }

 private:
  sql::Stmt chunks_, spans_;
};

constexpr int64_t kNone = std::numeric_limits<int64_t>::min();

// A series' key: (track) for counters, (rank, device_type, device_index) for memory.
using SeriesKey = std::array<int64_t, 3>;

template <typename V>
V valueAt(const sql::Stmt& s, int col);
template <>
int64_t valueAt<int64_t>(const sql::Stmt& s, int col) {
  return s.i64(col);
}
template <>
double valueAt<double>(const sql::Stmt& s, int col) {
  return s.f64(col);
}

// The summaries of every series of one table (summaries.h): a first pass in rowid order counts
// each series' samples and rows per level (which levels it stores) and checks that the series is in
// time order there (a shard's rows are, unless threads interleaved); the second pass writes the
// finest stored level's buckets, each folded into the next level's as it closes. The series not in
// time order in rowid order are then read in one more statement, ORDER BY key, ts_ns, rowid (one
// sort of the table, however many series need it).
template <typename V>
class SeriesBuilder {
 public:
  SeriesBuilder(const sql::Db& db, const std::string& table, std::vector<std::string> keys,
                const std::string& value, const std::string& lodTable, const std::string& lodValues)
      : db_(db), keys_(std::move(keys)) {
    std::string keyList, marks;
    for (const auto& key : keys_) {
      keyList += key + ", ";
      marks += "?, ";
    }
    scanSql_ =
        "SELECT " + keyList + "ts_ns, " + value + ", rowid FROM " + table + " ORDER BY rowid";
    orderedSql_ = "SELECT " + keyList + "ts_ns, " + value + ", rowid FROM " + table + " ORDER BY " +
                  keyList + "ts_ns, rowid";
    insert_ = sql::Stmt(db, "INSERT INTO " + lodTable + " (" + keyList + "level, bucket, count, " +
                                lodValues + ") VALUES (" + marks + "?, ?, ?, ?, ?, ?)");
  }

  template <typename Tick>
  void countPass(Tick&& tick) {
    // Rows per level are counted in rowid order (the scan does it), so a series out of time
    // order there is overcounted at each place it goes back: its stored levels may be coarser,
    // never missing rows.
    counting_ = true;
    scan(scanSql_, true, [&](State&, int64_t, V) { tick(); });
    for (auto& entry : series_) {
      State& st = entry.second;
      for (int k = kFirstLevel; k < kLevels; ++k) {
        if (st.rows[static_cast<size_t>(k)] * kCompression <= st.n) {
          st.first = k;
          break;
        }
      }
      if (st.first < 0) continue;
      int top = st.first;
      while (top + 1 < kLevels && st.rows[static_cast<size_t>(top)] > kSeriesTopRows) ++top;
      st.open.resize(static_cast<size_t>(top - st.first + 1));
    }
  }

  std::vector<std::pair<SeriesKey, int64_t>> sampleCounts() const {
    std::vector<std::pair<SeriesKey, int64_t>> out;
    for (const auto& [key, st] : series_) out.emplace_back(key, st.n);
    return out;
  }

  template <typename Tick>
  void writePass(Tick&& tick) {
    counting_ = false;
    for (auto& entry : series_) entry.second.resetOrder();
    scan(scanSql_, true, [&](State& st, int64_t ts, V v) {
      if (!st.open.empty()) push(st, ts, v);
      tick();
    });
    const bool anyUnsorted = std::any_of(series_.begin(), series_.end(), [](const auto& e) {
      return !e.second.sorted && !e.second.open.empty();
    });
    if (anyUnsorted) {
      for (auto& entry : series_) entry.second.resetOrder();
      scan(orderedSql_, false, [&](State& st, int64_t ts, V v) {
        if (!st.open.empty()) push(st, ts, v);
      });
    }
    for (auto& entry : series_) {
      State& st = entry.second;
      for (size_t j = 0; j < st.open.size(); ++j) close(st, j);
    }
  }

 private:
  struct State {
    SeriesKey key{};
    int64_t n = 0;
    bool sorted = true;
    std::array<int64_t, kLevels> rows{};
    std::array<int64_t, kLevels> last;
    int first = -1;
    std::vector<SeriesBucket<V>> open;  // levels first .. top
    // Reordering (scan): samples wait here until kReorder later ones are read, so a series
    // whose rowid order strays from time order by less than that still reads in (ts, rowid) order.
    struct Sample {
      int64_t ts, rowid;
      V v;
      bool operator>(const Sample& o) const noexcept {
        return ts != o.ts ? ts > o.ts : rowid > o.rowid;
      }
    };
    std::priority_queue<Sample, std::vector<Sample>, std::greater<Sample>> pending;
    int64_t emittedTs = std::numeric_limits<int64_t>::min(), emittedRowid = 0;
    bool emittedAny = false;
    State() { last.fill(kNone); }
    void resetOrder() {
      pending = {};
      emittedAny = false;
    }
  };
  static constexpr size_t kReorder = 4096;

  // Calls fn(state, ts, value) for each sample of the statement's rows (key..., ts, value, rowid),
  // per series in (ts, rowid) order. reorder (the rowid-order scans): through each series'
  // reordering heap, and a series found out of order beyond it is marked unsorted (no longer
  // given to fn; read again by the sorted statement). Otherwise only the unsorted series' rows.
  template <typename Fn>
  void scan(const std::string& sql, bool reorder, Fn&& fn) {
    sql::Stmt s(db_, sql);
    const int nk = static_cast<int>(keys_.size());
    SeriesKey previous{};
    State* st = nullptr;
    auto emit = [&](State& state) {
      const typename State::Sample x = state.pending.top();
      state.pending.pop();
      if (state.emittedAny &&
          (x.ts < state.emittedTs || (x.ts == state.emittedTs && x.rowid < state.emittedRowid))) {
        state.sorted = false;
        state.pending = {};
        return;
      }
      state.emittedAny = true;
      state.emittedTs = x.ts;
      state.emittedRowid = x.rowid;
      fn(state, x.ts, x.v);
    };
    while (s.step()) {
      SeriesKey key{};
      for (int i = 0; i < nk; ++i) key[static_cast<size_t>(i)] = s.i64(i);
      if (st == nullptr || key != previous) {
        st = &series_[key];
        st->key = key;
        previous = key;
      }
      if (!reorder) {
        if (!st->sorted) fn(*st, s.i64(nk), valueAt<V>(s, nk + 1));
        continue;
      }
      if (counting_) {
        ++st->n;
        const int64_t ts = s.i64(nk);
        for (int k = kFirstLevel; k < kLevels; ++k) {
          const int64_t b = bucketOf(ts, k);
          if (b == st->last[static_cast<size_t>(k)]) break;
          ++st->rows[static_cast<size_t>(k)];
          st->last[static_cast<size_t>(k)] = b;
        }
      }
      if (!st->sorted) continue;
      st->pending.push({s.i64(nk), s.i64(nk + 2), valueAt<V>(s, nk + 1)});
      if (st->pending.size() > kReorder) emit(*st);
    }
    if (!reorder) return;
    for (auto& entry : series_) {
      while (entry.second.sorted && !entry.second.pending.empty()) emit(entry.second);
    }
  }

  void push(State& st, int64_t ts, V v) {
    SeriesBucket<V>& b = st.open[0];
    const int64_t index = bucketOf(ts, st.first);
    if (b.count > 0 && b.bucket != index) close(st, 0);
    b.bucket = index;
    b.add(v);
  }

  // Writes level index j's open bucket, folds it into level j + 1's (closing that one first when
  // it is another bucket) and empties it.
  void close(State& st, size_t j) {
    SeriesBucket<V>& b = st.open[j];
    if (b.count == 0) return;
    const int k = static_cast<int>(keys_.size());
    for (int i = 0; i < k; ++i) insert_.bind(i + 1, st.key[static_cast<size_t>(i)]);
    insert_.bind(k + 1, int64_t{st.first + static_cast<int>(j)}).bind(k + 2, b.bucket);
    insert_.bind(k + 3, b.count).bind(k + 4, b.min).bind(k + 5, b.max).bind(k + 6, b.last);
    insert_.run();
    if (j + 1 < st.open.size()) {
      SeriesBucket<V>& up = st.open[j + 1];
      const int64_t index = b.bucket >> 2;
      if (up.count > 0 && up.bucket != index) close(st, j + 1);
      up.bucket = index;
      up.merge(b);
    }
    b = SeriesBucket<V>();
  }

  const sql::Db& db_;
  std::vector<std::string> keys_;
  std::string scanSql_, orderedSql_;
  sql::Stmt insert_;
  std::map<SeriesKey, State> series_;
  bool counting_ = false;  // the first pass: counts each series' samples
};

// Counts the builder's work (each span, memory and counter row, twice) and reports it through the
// caller's progress callback every 65536 rows; a callback that returns false cancels the build.
class Progress {
 public:
  Progress(const sql::Db& db, const std::function<bool(int64_t, int64_t)>& report, int64_t total)
      : db_(db), report_(report), total_(total) {}

  void tick() {
    if (++done_ - reported_ < 65536 || !report_) return;
    reported_ = done_;
    if (!report_(std::min(done_, total_), total_)) throw TraceError(db_.path() + ": cancelled");
  }

  void finish() const {
    if (report_ && !report_(total_, total_)) throw TraceError(db_.path() + ": cancelled");
  }

 private:
  const sql::Db& db_;
  const std::function<bool(int64_t, int64_t)>& report_;
  int64_t total_ = 0, done_ = 0, reported_ = 0;
};

// Each track with spans and its span count, by track.
std::vector<std::pair<int64_t, int64_t>> spanTracks(const sql::Db& db) {
  std::vector<std::pair<int64_t, int64_t>> tracks;
  sql::Stmt s(db,
              "SELECT track, total(last_id - first_id + 1) FROM span_chunks WHERE last_id >= "
              "first_id GROUP BY track ORDER BY track");
  while (s.step()) tracks.emplace_back(s.i64(0), static_cast<int64_t>(s.f64(1)));
  return tracks;
}

// The rows the build reads: the tracks' spans, memory and counters (max rowid, a B-tree seek, at
// least the rows), each read twice.
int64_t workTotal(const sql::Db& db, const std::vector<std::pair<int64_t, int64_t>>& tracks) {
  int64_t total = 0;
  for (const auto& track : tracks) total += track.second;
  for (const char* table : {"memory", "counters"}) {
    sql::Stmt rows(db, std::string("SELECT max(rowid) FROM ") + table);
    if (rows.step()) total += std::max<int64_t>(0, rows.i64(0));
  }
  return total * 2;
}

// One track's plan from the first pass: each depth's count and longest span, and the levels stored
// (first .. top; first < 0 when none).
struct TrackPlan {
  struct Depth {
    int64_t count = 0, longest = 0;
    std::array<int64_t, kLevels> last;
  };
  std::vector<Depth> depths;
  int first = -1, top = -1;
  int levels() const { return first < 0 ? 0 : top - first + 1; }
};

// The span summaries of every track (span_lod_depths, span_lod, name_buckets): a first pass per
// track counts rows per level, a second writes the buckets.
class SpanLodBuilder {
 public:
  explicit SpanLodBuilder(const sql::Db& db)
      : stream_(db),
        insDepth_(db,
                  "INSERT INTO span_lod_depths (track, depth, span_count, longest_span_ns, "
                  "first_level, top_level) VALUES (?, ?, ?, ?, ?, ?)"),
        insLod_(db,
                "INSERT INTO span_lod (track, level, depth, bucket, count, busy_ns, first_ns, "
                "max_end_ns, dom_id, dom_start_ns, dom_dur_ns, dom_packed) VALUES (?, ?, ?, ?, "
                "?, ?, ?, ?, ?, ?, ?, ?)"),
        insName_(db, "INSERT INTO name_buckets (name, bucket, track, count) VALUES (?, ?, ?, ?)"),
        chunkList_(db,
                   "SELECT first_id, last_id FROM span_chunks WHERE track = ?1 ORDER BY "
                   "first_id"),
        startsOf_(db, "SELECT start_ns, dur_ns, packed FROM spans WHERE id BETWEEN ?1 AND ?2") {}

  void track(int64_t track, Progress& progress) {
    const TrackPlan plan = countPass(track, progress);
    writeDepths(track, plan);
    writePass(track, plan, progress);
  }

 private:
  // Pass 1: rows per level, over all depths, and each depth's count and longest span. Read in id
  // order, which is start order per depth on a thread track (a depth's spans end, and are
  // written, in order); elsewhere the counts are too high, which only makes the stored levels
  // coarser. Same bucket at level k means same bucket above it: the loop stops there.
  TrackPlan countPass(int64_t track, Progress& progress) {
    TrackPlan plan;
    std::array<int64_t, kLevels> rows{};
    int64_t n = 0;
    for (const auto& [firstId, lastId] : chunkRanges(track)) {
      startsOf_.reset();
      startsOf_.bind(1, firstId).bind(2, lastId);
      while (startsOf_.step()) {
        const int64_t start = startsOf_.i64(0);
        const int depth = schema::packedDepth(startsOf_.i64(2));
        if (static_cast<size_t>(depth) >= plan.depths.size()) {
          TrackPlan::Depth fresh;
          fresh.last.fill(kNone);
          plan.depths.resize(static_cast<size_t>(depth) + 1, fresh);
        }
        TrackPlan::Depth& d = plan.depths[static_cast<size_t>(depth)];
        ++d.count;
        d.longest = std::max(d.longest, std::max<int64_t>(0, startsOf_.i64(1)));
        for (int k = kFirstLevel; k < kLevels; ++k) {
          const int64_t b = bucketOf(start, k);
          if (b == d.last[static_cast<size_t>(k)]) break;
          ++rows[static_cast<size_t>(k)];
          d.last[static_cast<size_t>(k)] = b;
        }
        ++n;
        progress.tick();
      }
      startsOf_.reset();
    }
    chooseLevels(plan, rows, n);
    return plan;
  }

  std::vector<std::pair<int64_t, int64_t>> chunkRanges(int64_t track) {
    chunkList_.reset();
    chunkList_.bind(1, track);
    std::vector<std::pair<int64_t, int64_t>> ranges;
    while (chunkList_.step()) ranges.emplace_back(chunkList_.i64(0), chunkList_.i64(1));
    chunkList_.reset();
    return ranges;
  }

  // The finest level that compresses the track's n spans kCompression-fold, up to the first with
  // at most one row per used depth.
  static void chooseLevels(TrackPlan& plan, const std::array<int64_t, kLevels>& rows, int64_t n) {
    const int64_t used = std::count_if(plan.depths.begin(), plan.depths.end(),
                                       [](const TrackPlan::Depth& d) { return d.count > 0; });
    for (int k = kFirstLevel; k < kLevels && n > 0; ++k) {
      if (rows[static_cast<size_t>(k)] * kCompression <= n) {
        plan.first = k;
        break;
      }
    }
    plan.top = plan.first;
    while (plan.top >= 0 && plan.top + 1 < kLevels && rows[static_cast<size_t>(plan.top)] > used) {
      ++plan.top;
    }
  }

  void writeDepths(int64_t track, const TrackPlan& plan) {
    for (size_t d = 0; d < plan.depths.size(); ++d) {
      if (plan.depths[d].count == 0) continue;
      insDepth_.bind(1, track).bind(2, static_cast<int64_t>(d)).bind(3, plan.depths[d].count);
      insDepth_.bind(4, plan.depths[d].longest)
          .bind(5, int64_t{plan.first})
          .bind(6, int64_t{plan.top});
      insDepth_.run();
    }
  }

  // Pass 2, in span order: the finest stored level's buckets from the spans; a bucket that closes
  // is written and merged into the next level's (Bucket::merge is exact), so a span costs one add
  // whatever the number of levels. Name buckets are counted alongside.
  void writePass(int64_t track, const TrackPlan& plan, Progress& progress) {
    const int levels = plan.levels();
    std::vector<Bucket> open(plan.depths.size() * static_cast<size_t>(levels));
    NameCounts names{track, kNone, {}};
    stream_.forEach(track, [&](const Row& r) {
      if (levels > 0) {
        const auto d = static_cast<size_t>(r.depth);
        Bucket& b = open[d * static_cast<size_t>(levels)];
        const int64_t index = bucketOf(r.start_ns, plan.first);
        if (b.count > 0 && b.bucket != index) close(track, plan, open, d, 0);
        b.bucket = index;
        b.add(r.id, r.start_ns, r.dur_ns, r.packed);
      }
      const int64_t nb = bucketOf(r.start_ns, kNameLevel);
      if (nb != names.bucket) {
        flushNames(names);
        names.bucket = nb;
      }
      ++names.counts[schema::packedName(r.packed)];
      progress.tick();
    });
    flushNames(names);
    for (size_t d = 0; d < plan.depths.size(); ++d) {
      for (int j = 0; j < levels; ++j) close(track, plan, open, d, j);
    }
  }

  // Closes depth d's open bucket at level index j: written, then folded into level j + 1.
  void close(int64_t track, const TrackPlan& plan, std::vector<Bucket>& open, size_t d, int j) {
    const int levels = plan.levels();
    Bucket* level = &open[d * static_cast<size_t>(levels)];
    if (level[j].count == 0) return;
    writeBucket(track, level[j], plan.first + j, static_cast<int64_t>(d));
    if (j + 1 < levels) {
      const int64_t up = level[j].bucket >> 2;
      if (level[j + 1].count > 0 && level[j + 1].bucket != up) close(track, plan, open, d, j + 1);
      if (level[j + 1].count == 0) level[j + 1].bucket = up;
      level[j + 1].merge(level[j]);
      level[j + 1].bucket = up;
    }
    level[j] = Bucket();
  }

  void writeBucket(int64_t track, const Bucket& b, int level, int64_t depth) {
    insLod_.bind(1, track).bind(2, int64_t{level}).bind(3, depth).bind(4, b.bucket);
    insLod_.bind(5, b.count).bind(6, b.busy).bind(7, b.first).bind(8, b.max_end);
    insLod_.bind(9, b.dom_id).bind(10, b.dom_start).bind(11, b.dom_dur).bind(12, b.dom_packed);
    insLod_.run();
  }

  // The spans per name in the current name bucket of one track.
  struct NameCounts {
    int64_t track = 0, bucket = kNone;
    std::unordered_map<uint32_t, int64_t> counts;
  };

  void flushNames(NameCounts& names) {
    for (const auto& [name, count] : names.counts) {
      insName_.bind(1, int64_t{name}).bind(2, names.bucket).bind(3, names.track).bind(4, count);
      insName_.run();
    }
    names.counts.clear();
  }

  SpanStream stream_;
  sql::Stmt insDepth_, insLod_, insName_, chunkList_, startsOf_;
};

// The series: memory per (rank, device), then counters per track (and memory_devices from the
// first pass over memory).
void buildSeries(const sql::Db& db, Progress& progress) {
  auto tick = [&] { progress.tick(); };
  SeriesBuilder<int64_t> memory(db, "memory", {"rank", "device_type", "device_index"}, "total",
                                "memory_lod", "min_total, max_total, last_total");
  memory.countPass(tick);
  sql::Stmt insDevice(db,
                      "INSERT INTO memory_devices (rank, device_type, device_index, events) VALUES "
                      "(?, ?, ?, ?)");
  for (const auto& [key, n] : memory.sampleCounts()) {
    insDevice.bind(1, key[0]).bind(2, key[1]).bind(3, key[2]).bind(4, n).run();
  }
  memory.writePass(tick);
  SeriesBuilder<double> counters(db, "counters", {"track"}, "value", "counter_lod",
                                 "min_value, max_value, last_value");
  counters.countPass(tick);
  counters.writePass(tick);
}

}  // namespace

void build(const sql::Db& db, const std::function<bool(int64_t, int64_t)>& progress) {
  const auto tracks = spanTracks(db);
  Progress work(db, progress, workTotal(db, tracks));
  SpanLodBuilder spans(db);
  for (const auto& track : tracks) spans.track(track.first, work);
  buildSeries(db, work);
  work.finish();
}

}  // namespace tracerun::trace::lod
