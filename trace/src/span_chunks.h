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
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
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

// Rule 3: the id of the span at `position` (0-based) of the chunk whose first id is first_id.
constexpr int64_t idAt(int64_t first_id, int64_t position) noexcept {
  return first_id + position;
}
// Whether [first_id, last_id] holding `rows` rows has every id (no gap): only then does idAt
// name the rows of a chunk read in rowid order. A damaged file may break it; readers check.
constexpr bool idsDense(int64_t first_id, int64_t last_id, int64_t rows) noexcept {
  return last_id >= first_id && static_cast<uint64_t>(last_id) - static_cast<uint64_t>(first_id) +
                                        1 ==
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
  bool accepts(int64_t span_track, int64_t id, const SpanOrder& order, size_t limit) const noexcept {
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
// (readChunk(chunk, rows) appends its rows, each in span order), and rows wait in a heap until no
// chunk still to be read can start before them. Memory: the rows of the chunks overlapping the
// one being read.
template <typename Row, typename ReadChunk, typename Emit>
void mergeChunks(const std::vector<ChunkRef>& list, ReadChunk&& readChunk, Emit&& emit) {
  struct Later {
    bool operator()(const Row& a, const Row& b) const noexcept { return spanLess(b, a); }
  };
  std::priority_queue<Row, std::vector<Row>, Later> heap;
  std::vector<Row> chunk;
  for (const ChunkRef& c : list) {
    while (!heap.empty() && heap.top().start_ns < c.min_start) {
      emit(heap.top());
      heap.pop();
    }
    chunk.clear();
    readChunk(c, chunk);
    for (const Row& r : chunk) heap.push(r);
  }
  while (!heap.empty()) {
    emit(heap.top());
    heap.pop();
  }
}

}  // namespace tracerun::trace::chunks
