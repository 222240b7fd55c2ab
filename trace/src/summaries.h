// Building the level-of-detail summaries (span_lod, span_lod_depths, name_buckets; layout in
// span_chunks.h) from a file's spans: at writer close, after a merge, and for an older file when a
// Timeline opens it (into TEMP tables). Reads spans only through the chunk contract; never queries.
#pragma once

#include <cstdint>
#include <functional>

#include "sqlite_util.h"

namespace tracerun::trace::lod {

// progress(done, total) in spans (each is read twice); returning false cancels with
// TraceError("<path>: cancelled"). Writes through unqualified table names (so TEMP tables of those
// names take the rows) inside the caller's transaction. Memory: the open buckets of one track
// (depths x levels) plus what mergeChunks holds.
void build(const sql::Db& db, const std::function<bool(int64_t, int64_t)>& progress);

}  // namespace tracerun::trace::lod
