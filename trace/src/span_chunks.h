// The span chunk contract, owned here and nowhere else: how many spans a chunk holds, the order of
// spans inside a chunk and in every query result, and how ids are handed out in a chunk. The
// writer, merge and the reader include this; it holds no SQL and does no I/O.
//
// The contract (docs/trace-format.md, "How spans are laid out"):
// 1. A chunk is a run of spans of ONE track, at most kChunkRows long when the writer or merge
//    makes it (the writer's ShardOptions::chunk_rows may choose another size).
// 2. Inside a chunk, spans are in span order: (start, depth, id) ascending (SpanOrder).
// 3. A chunk's ids are consecutive, first_id..last_id, handed out in span order: the span at
//    position i of a chunk has id first_id + i (idAt). So reading a chunk's rowid range in
//    ascending rowid order yields the chunk in span order, and a reader need not read the ids.
// 4. span_chunks holds one row per chunk: (track, min_start_ns, max_end_ns, first_id, last_id),
//    with min_start_ns the first span's start and max_end_ns the latest end (ChunkExtent).
// Chunks of one track overlap in time (a parent is written after its children), so a track's
// spans in span order are a merge of its chunks in min_start order (mergeChunks).
//
// The level-of-detail summaries built from the chunks live here too (namespace lod below): their
// level widths, which levels a track stores, the bucket of a span and what a bucket holds.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace tracerun::trace::chunks {

// Spans per chunk, for the writer (unless ShardOptions::chunk_rows says otherwise) and for the
// chunks merge rebuilds for an incomplete shard.
inline constexpr size_t kChunkRows = 256;

// The span order: start, then depth (a parent before the children that start with it), then id.
// Before ids are given (the writer's pending chunk), `id` is the arrival index: ids are then
// handed out in this order, so the two orders agree.
struct SpanOrder {
  int64_t start = 0;
  int64_t depth = 0;
  int64_t id = 0;
  friend bool operator<(const SpanOrder& a, const SpanOrder& b) noexcept {
    if (a.start != b.start) return a.start < b.start;
    if (a.depth != b.depth) return a.depth < b.depth;
    return a.id < b.id;
  }
  friend bool operator>(const SpanOrder& a, const SpanOrder& b) noexcept { return b < a; }
};

// The span order over any row type with start_ns, depth and id members (SpanRow and friends).
template <typename Row>
SpanOrder orderOf(const Row& r) noexcept {
  return {r.start_ns, static_cast<int64_t>(r.depth), r.id};
}
template <typename Row>
bool spanLess(const Row& a, const Row& b) noexcept {
  return orderOf(a) < orderOf(b);
}

// The earliest start a span reaching time t can have when no span is longer than `longest`:
// t - longest, saturated at the int64 minimum. The lower bound of every window query (reader,
// timeline), which lets SQLite seek on start instead of scanning.
inline int64_t earliestStartReaching(int64_t t, int64_t longest) noexcept {
  if (longest > 0 && t < std::numeric_limits<int64_t>::min() + longest) {
    return std::numeric_limits<int64_t>::min();
  }
  return t - longest;
}

// Rule 3: the id of the span at `position` (0-based) of the chunk whose first id is first_id.
constexpr int64_t idAt(int64_t first_id, int64_t position) noexcept {
  return first_id + position;
}
// Whether [first_id, last_id] holding `rows` rows has every id (no gap): only then does idAt
// name the rows of a chunk read in rowid order. A damaged file may break it; readers check.
constexpr bool idsDense(int64_t first_id, int64_t last_id, int64_t rows) noexcept {
  return last_id >= first_id &&
         static_cast<uint64_t>(last_id) - static_cast<uint64_t>(first_id) + 1 ==
             static_cast<uint64_t>(rows);
}

// Rule 4: one span_chunks row, accumulated span by span in chunk order.
struct ChunkExtent {
  int64_t track = 0;
  int64_t min_start = std::numeric_limits<int64_t>::max();
  int64_t max_end = std::numeric_limits<int64_t>::min();
  int64_t first_id = 0, last_id = -1;
  int64_t rows = 0;
  SpanOrder last;  // the last span added, for the order rule

  bool empty() const noexcept { return rows == 0; }
  int64_t width() const noexcept { return max_end - min_start; }
  // Whether the span (track, id, order) may extend this chunk: same track, next id, not before
  // the last span in span order, and room left (rules 1-3).
  bool accepts(int64_t span_track, int64_t id, const SpanOrder& order,
               size_t limit) const noexcept {
    return !empty() && span_track == track && id == last_id + 1 && !(order < last) &&
           static_cast<size_t>(rows) < limit;
  }
  void add(int64_t span_track, int64_t id, const SpanOrder& order, int64_t end) noexcept {
    if (empty()) {
      track = span_track;
      first_id = id;
      min_start = order.start;
    }
    min_start = order.start < min_start ? order.start : min_start;
    max_end = end > max_end ? end : max_end;
    last_id = id;
    last = order;
    ++rows;
  }
};

// A chunk as a reader finds it in span_chunks.
struct ChunkRef {
  int64_t min_start = 0, first_id = 0, last_id = 0;
};

// A track's spans in span order from its chunks (given in min_start order): each chunk is read
// (readChunk(chunk, rows) appends its rows, each in span order), and rows wait in their chunk's
// buffer until no chunk still to be read can start before them. Memory: the rows of the chunks
// overlapping the one being read.
template <typename Row, typename ReadChunk, typename Emit>
void mergeChunks(const std::vector<ChunkRef>& list, ReadChunk&& readChunk, Emit&& emit) {
  // Each chunk read is a run in span order (sorted here when a damaged file's is not); a heap of
  // the open runs, keyed by their next row, picks the next row to emit. Runs open at once are the
  // chunks overlapping in time (a few), so a row costs a comparison or two, not a heap of rows.
  struct Run {
    std::vector<Row> rows;
    size_t next = 0;
  };
  std::vector<Run> runs;      // open and spent runs (their buffers are reused)
  std::vector<size_t> spent;  // indexes of spent runs
  std::vector<size_t> open;   // a heap of open runs' indexes, the earliest next row on top
  const auto later = [&runs](size_t a, size_t b) noexcept {
    return spanLess(runs[b].rows[runs[b].next], runs[a].rows[runs[a].next]);
  };
  const auto head = [&]() -> const Row& {
    return runs[open.front()].rows[runs[open.front()].next];
  };
  const auto emitNext = [&] {
    std::pop_heap(open.begin(), open.end(), later);
    Run& r = runs[open.back()];
    emit(r.rows[r.next]);
    if (++r.next < r.rows.size()) {
      std::push_heap(open.begin(), open.end(), later);
    } else {
      spent.push_back(open.back());
      open.pop_back();
    }
  };
  for (const ChunkRef& c : list) {
    while (!open.empty() && head().start_ns < c.min_start) emitNext();
    if (spent.empty()) {
      spent.push_back(runs.size());
      runs.emplace_back();
    }
    const size_t i = spent.back();
    Run& r = runs[i];
    r.rows.clear();
    r.next = 0;
    readChunk(c, r.rows);
    if (r.rows.empty()) continue;
    if (!std::is_sorted(r.rows.begin(), r.rows.end(), spanLess<Row>)) {
      std::sort(r.rows.begin(), r.rows.end(), spanLess<Row>);
    }
    spent.pop_back();
    open.push_back(i);
    std::push_heap(open.begin(), open.end(), later);
  }
  while (!open.empty()) emitNext();
}

}  // namespace tracerun::trace::chunks

// Level-of-detail summaries (tables span_lod, span_lod_depths, name_buckets; docs/trace-format.md).
namespace tracerun::trace::lod {

// Version of the summary tables' layout, in meta `summaries`; a file without it (or with another
// value) gets them built when a Timeline opens it.
inline constexpr const char* kSummariesVersion = "2";  // 2: memory_lod, counter_lod

// Level k buckets time into widths of 4^k ns, aligned to multiples of the width.
inline constexpr int kLevels = 27;     // 4^26 ns: 52 days
inline constexpr int kFirstLevel = 5;  // 1,024 ns: no level finer than this is stored
inline constexpr int kNameLevel = 13;  // name_buckets: 4^13 ns = 67 ms
// A track stores level k (>= kFirstLevel) when its rows there, over all depths, are at most
// 1/kCompression of its spans: the summaries stay under a third of the spans, and a level not
// stored is one where reading the spans costs about as much.
inline constexpr int64_t kCompression = 4;

constexpr int64_t width(int level) noexcept {
  return int64_t{1} << (2 * level);
}
// The level for R ns per pixel: the largest width not above R (level 0 below 4 ns).
inline int levelFor(double ns_per_px) noexcept {
  int k = 0;
  while (k + 1 < kLevels && static_cast<double>(width(k + 1)) <= ns_per_px) ++k;
  return k;
}
constexpr int64_t floorDiv(int64_t t, int64_t w) noexcept {
  return t >= 0 ? t / w : -((-(t + 1)) / w) - 1;
}
// floor(t / 4^level): an arithmetic shift (GCC and Clang shift signed values arithmetically, and
// C++20 requires it), the builder's hot path.
constexpr int64_t bucketOf(int64_t t, int level) noexcept {
  return t >> (2 * level);
}
static_assert(bucketOf(-1, 3) == -1 && bucketOf(-64, 3) == -1 && bucketOf(-65, 3) == -2 &&
              bucketOf(63, 3) == 0 && bucketOf(64, 3) == 1);

// Whether span a (duration, start, id) dominates b: longer, then earlier, then lower id.
constexpr bool dominates(int64_t durA, int64_t startA, int64_t idA, int64_t durB, int64_t startB,
                         int64_t idB) noexcept {
  if (durA != durB) return durA > durB;
  if (startA != startB) return startA < startB;
  return idA < idB;
}

// One span_lod row: the spans of one track and depth starting in one bucket of one level.
struct Bucket {
  int64_t bucket = 0;
  int64_t count = 0;
  int64_t busy = 0;  // summed durations
  int64_t first = 0, max_end = 0;
  int64_t dom_id = 0, dom_start = 0, dom_dur = -1, dom_packed = 0;

  void add(int64_t id, int64_t start, int64_t dur, int64_t packed) noexcept {
    if (count == 0) {
      first = start;
      max_end = start + dur;
    }
    ++count;
    busy += dur;
    first = start < first ? start : first;
    max_end = start + dur > max_end ? start + dur : max_end;
    if (dom_dur < 0 || dominates(dur, start, id, dom_dur, dom_start, dom_id)) {
      dom_id = id;
      dom_start = start;
      dom_dur = dur;
      dom_packed = packed;
    }
  }
  // Folds another bucket's spans into this one (a coarser bucket from finer ones).
  void merge(const Bucket& o) noexcept {
    if (o.count == 0) return;
    if (count == 0) {
      *this = o;
      return;
    }
    count += o.count;
    busy += o.busy;
    first = o.first < first ? o.first : first;
    max_end = o.max_end > max_end ? o.max_end : max_end;
    if (dominates(o.dom_dur, o.dom_start, o.dom_id, dom_dur, dom_start, dom_id)) {
      dom_id = o.dom_id;
      dom_start = o.dom_start;
      dom_dur = o.dom_dur;
      dom_packed = o.dom_packed;
    }
  }
};

}  // namespace tracerun::trace::lod
