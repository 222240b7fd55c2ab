// The level-of-detail builder (summaries.h): two passes over each track's spans in span order, the
// first to count each level's rows (which levels the track stores), the second to write them.
#include "summaries.h"

#include <algorithm>
#include <array>
#include <functional>
#include <limits>
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

}  // namespace

void build(const sql::Db& db, const std::function<bool(int64_t, int64_t)>& progress) {
  std::vector<std::pair<int64_t, int64_t>> tracks;  // (track, spans)
  int64_t total = 0;
  {
    sql::Stmt s(db,
                "SELECT track, total(last_id - first_id + 1) FROM span_chunks WHERE last_id >= "
                "first_id GROUP BY track ORDER BY track");
    while (s.step()) {
      tracks.emplace_back(s.i64(0), static_cast<int64_t>(s.f64(1)));
      total += tracks.back().second;
    }
  }
  total *= 2;
  int64_t done = 0;
  int64_t reported = 0;
  auto tick = [&] {
    if (++done - reported < 65536 || !progress) return;
    reported = done;
    if (!progress(done, total)) throw TraceError(db.path() + ": cancelled");
  };

  SpanStream stream(db);
  sql::Stmt insDepth(db, "INSERT INTO span_lod_depths (track, depth, span_count, longest_span_ns, "
                         "first_level, top_level) VALUES (?, ?, ?, ?, ?, ?)");
  sql::Stmt insLod(db,
                   "INSERT INTO span_lod (track, level, depth, bucket, count, busy_ns, first_ns, "
                   "max_end_ns, dom_id, dom_start_ns, dom_dur_ns, dom_packed) VALUES (?, ?, ?, ?, "
                   "?, ?, ?, ?, ?, ?, ?, ?)");
  sql::Stmt insName(db, "INSERT INTO name_buckets (name, bucket, track, count) VALUES (?, ?, ?, ?)");

  sql::Stmt chunkList(db,
                      "SELECT first_id, last_id FROM span_chunks WHERE track = ?1 ORDER BY "
                      "first_id");
  sql::Stmt startsOf(db, "SELECT start_ns, dur_ns, packed FROM spans WHERE id BETWEEN ?1 AND ?2");

  for (const auto& [track, spanCount] : tracks) {
    // Pass 1: rows per level, over all depths, and each depth's count and longest span. Read in
    // id order, which is start order per depth on a thread track (a depth's spans end, and are
    // written, in order); elsewhere the counts are too high, which only makes the stored levels
    // coarser. Same bucket at level k means same bucket above it: the loop stops there.
    struct DepthState {
      int64_t count = 0, longest = 0;
      std::array<int64_t, kLevels> last;
    };
    std::vector<DepthState> depths;
    std::array<int64_t, kLevels> rows{};
    int64_t n = 0;
    chunkList.reset();
    chunkList.bind(1, track);
    std::vector<std::pair<int64_t, int64_t>> ranges;
    while (chunkList.step()) ranges.emplace_back(chunkList.i64(0), chunkList.i64(1));
    chunkList.reset();
    for (const auto& [firstId, lastId] : ranges) {
      startsOf.reset();
      startsOf.bind(1, firstId).bind(2, lastId);
      while (startsOf.step()) {
        const int64_t start = startsOf.i64(0);
        const int depth = schema::packedDepth(startsOf.i64(2));
        if (static_cast<size_t>(depth) >= depths.size()) {
          DepthState fresh;
          fresh.last.fill(kNone);
          depths.resize(static_cast<size_t>(depth) + 1, fresh);
        }
        DepthState& d = depths[static_cast<size_t>(depth)];
        ++d.count;
        d.longest = std::max(d.longest, std::max<int64_t>(0, startsOf.i64(1)));
        for (int k = kFirstLevel; k < kLevels; ++k) {
          const int64_t b = bucketOf(start, k);
          if (b == d.last[static_cast<size_t>(k)]) break;
          ++rows[static_cast<size_t>(k)];
          d.last[static_cast<size_t>(k)] = b;
        }
        ++n;
        tick();
      }
      startsOf.reset();
    }
    const int64_t used = std::count_if(depths.begin(), depths.end(),
                                       [](const DepthState& d) { return d.count > 0; });
    int first = -1;
    for (int k = kFirstLevel; k < kLevels && n > 0; ++k) {
      if (rows[static_cast<size_t>(k)] * kCompression <= n) {
        first = k;
        break;
      }
    }
    int top = first;
    while (top >= 0 && top + 1 < kLevels && rows[static_cast<size_t>(top)] > used) ++top;
    for (size_t d = 0; d < depths.size(); ++d) {
      if (depths[d].count == 0) continue;
      insDepth.bind(1, track).bind(2, static_cast<int64_t>(d)).bind(3, depths[d].count);
      insDepth.bind(4, depths[d].longest).bind(5, int64_t{first}).bind(6, int64_t{top});
      insDepth.run();
    }

    // Pass 2, in span order: the finest stored level's buckets from the spans; a bucket that
    // closes is written and merged into the next level's (Bucket::merge is exact), so a span
    // costs one add whatever the number of levels.
    const int levels = first < 0 ? 0 : top - first + 1;
    std::vector<Bucket> open(depths.size() * static_cast<size_t>(levels));
    auto writeBucket = [&](const Bucket& b, int level, int64_t depth) {
      insLod.bind(1, track).bind(2, int64_t{level}).bind(3, depth).bind(4, b.bucket);
      insLod.bind(5, b.count).bind(6, b.busy).bind(7, b.first).bind(8, b.max_end);
      insLod.bind(9, b.dom_id).bind(10, b.dom_start).bind(11, b.dom_dur).bind(12, b.dom_packed);
      insLod.run();
    };
    // Closes depth d's open bucket at level index j: written, then folded into level j + 1.
    std::function<void(size_t, int)> close = [&](size_t d, int j) {
      Bucket* level = &open[d * static_cast<size_t>(levels)];
      if (level[j].count == 0) return;
      writeBucket(level[j], first + j, static_cast<int64_t>(d));
      if (j + 1 < levels) {
        const int64_t up = level[j].bucket >> 2;
        if (level[j + 1].count > 0 && level[j + 1].bucket != up) close(d, j + 1);
        if (level[j + 1].count == 0) level[j + 1].bucket = up;
        level[j + 1].merge(level[j]);
        level[j + 1].bucket = up;
      }
      level[j] = Bucket();
    };
    int64_t nameBucket = kNone;
    std::unordered_map<uint32_t, int64_t> names;
    auto flushNames = [&] {
      for (const auto& [name, count] : names) {
        insName.bind(1, int64_t{name}).bind(2, nameBucket).bind(3, track).bind(4, count).run();
      }
      names.clear();
    };
    stream.forEach(track, [&](const Row& r) {
      if (levels > 0) {
        const auto d = static_cast<size_t>(r.depth);
        Bucket& b = open[d * static_cast<size_t>(levels)];
        const int64_t index = bucketOf(r.start_ns, first);
        if (b.count > 0 && b.bucket != index) close(d, 0);
        b.bucket = index;
        b.add(r.id, r.start_ns, r.dur_ns, r.packed);
      }
      const int64_t nb = bucketOf(r.start_ns, kNameLevel);
      if (nb != nameBucket) {
        flushNames();
        nameBucket = nb;
      }
      ++names[schema::packedName(r.packed)];
      tick();
    });
    flushNames();
    for (size_t d = 0; d < depths.size(); ++d) {
      for (int j = 0; j < levels; ++j) close(d, j);
    }
  }
  sql::Stmt(db,
            "INSERT INTO memory_devices (rank, device_type, device_index, events) SELECT rank, "
            "device_type, device_index, count(*) FROM memory GROUP BY rank, device_type, "
            "device_index")
      .run();
  if (progress && !progress(total, total)) throw TraceError(db.path() + ": cancelled");
}

}  // namespace tracerun::trace::lod
