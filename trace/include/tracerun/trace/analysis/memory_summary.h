// The stored per-category memory summary: each device's MemorySeries (memory_live.h) kept in the
// trace file by merge, so the memory view reads O(blocks) rows instead of replaying every event.
// Not a classification (analyzeMemory's, memory.h, is the only one) and not drawing.
//
// Tables (their columns are owned by schema.cpp and documented in docs/trace-format.md; written by
// merge after the other summaries; meta `memory_category_summary` = "2"):
//   memory_category_blocks (rank, device_type, device_index, block, first_ts_ns, last_ts_ns,
//     count, levels BLOB, events BLOB) WITHOUT ROWID, PRIMARY KEY (rank, device_type,
//     device_index, block): block b holds the device's series events b * 64 .. b * 64 + count - 1;
//     levels: the cumulative live bytes per stacked category (memory_live.h's Levels) as zigzag
//     varints, min of the block (7), max of the block (7), after the block's last event (7);
//     events: per event zigzag varints (ts - the previous event's ts, first_ts_ns for the first),
//     (signed bytes), then one byte (kStackOrder index of the bytes' category).
//   memory_category_allocations (rank PRIMARY KEY, categories BLOB): one byte per allocation of
//     the rank (core::MemoryCategory), in forEachMemory order: MemoryAnalysis::categories.
// Threading: one call uses its reader from the calling thread only.
#pragma once

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

inline constexpr const char* kMemorySummaryMetaKey = "memory_category_summary";
// "2": seven stacked categories (input added); a summary of another version is replayed instead.
inline constexpr const char* kMemorySummaryVersion = "2";

struct MemoryCategorySummary {
  std::vector<MemorySeries> series;  // by rank, then device (type, index)
  // Per rank: each allocation's category (MemoryAnalysis::categories with keep_categories).
  std::map<int, std::vector<core::MemoryCategory>> categories;
  bool stored = false;  // read from the file's tables (false: replayed from the events)

  // The series of the device a rank's report shows (MemoryAnalysis::primary's rule), or null.
  const MemorySeries* primary(int rank) const;
};

// The summary of `rank` (-1: every rank): the stored one when the file has it (and it reads
// whole), else replayed as replayMemorySummary does. `cancel` as buildMemorySeries's.
MemoryCategorySummary memorySummary(const TraceReader& reader, int rank = -1,
                                    const std::atomic<bool>* cancel = nullptr);

// Only the stored summary: nullopt when the file has none (a trace merged before it existed).
// Throws TraceError naming the table when its rows are damaged.
std::optional<MemoryCategorySummary> storedMemorySummary(const TraceReader& reader, int rank = -1);

// From the events: analyzeMemory's classification (keep_categories, no replay) then
// buildMemorySeries over every device: three scans of the rank's rows.
MemoryCategorySummary replayMemorySummary(const TraceReader& reader, int rank = -1,
                                          const std::atomic<bool>* cancel = nullptr);

// Writes the summary of every rank into the trace at `path` (replacing a stored one): what merge
// does, for a trace merged before (or to rebuild it). Ranks are replayed on parallel threads.
void writeMemorySummary(const std::string& path);

}  // namespace tracerun::trace::analysis
