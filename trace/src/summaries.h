// Building the level-of-detail summaries (span_lod, span_lod_depths, name_buckets, memory_devices,
// memory_lod, counter_lod; layout in span_chunks.h and below) from a file's spans and samples: at
// writer close, after a merge, and for an older file when a Timeline opens it (into TEMP tables).
// Reads spans only through the chunk contract; never queries.
#pragma once

#include <cstdint>
#include <functional>

#include "sqlite_util.h"

namespace tracerun::trace::lod {

// progress(done, total) in work units (each span and each counter or memory sample is read twice);
// returning false cancels with TraceError("<path>: cancelled"). Writes through unqualified table
// names (so TEMP tables of those names take the rows) inside the caller's transaction. Memory: the
// open buckets of one track (depths x levels) plus what mergeChunks holds; for the series, one
// open bucket per level per series.
void build(const sql::Db& db, const std::function<bool(int64_t, int64_t)>& progress);

// ---- series summaries (memory_lod, counter_lod) -------------------------------------------------
//
// A series is the samples of one counter track, or the memory.total of one (rank, device), in
// (ts_ns, rowid) order. Level k (kFirstLevel <= k < kLevels, as for spans) buckets them by
// floor(ts_ns / 4^k). A series stores the levels from the finest one whose rows are at most
// 1/kCompression of its samples up to the first one with at most kSeriesTopRows rows (a coarser
// query merges that one); a series with no such level stores none and is read from its samples.

inline constexpr int64_t kSeriesTopRows = 4;

// One memory_lod / counter_lod row, accumulated sample by sample in series order or merged from
// the finer buckets it covers (in time order): exact, since min, max and count fold in any grouping
// and `last` is the later part's. V: int64_t for memory.total, double for counters (never NaN:
// SQLite stores no NaN in a NOT NULL REAL column).
template <typename V>
struct SeriesBucket {
  int64_t bucket = 0;
  int64_t count = 0;
  V min = 0, max = 0, last = 0;

  void add(V v) noexcept {
    if (count == 0) min = max = v;
    ++count;
    min = v < min ? v : min;
    max = v > max ? v : max;
    last = v;
  }
  // `later` holds samples after all of this bucket's.
  void merge(const SeriesBucket& later) noexcept {
    if (later.count == 0) return;
    if (count == 0) {
      const int64_t b = bucket;
      *this = later;
      bucket = b;
      return;
    }
    count += later.count;
    min = later.min < min ? later.min : min;
    max = later.max > max ? later.max : max;
    last = later.last;
  }
};

}  // namespace tracerun::trace::lod
