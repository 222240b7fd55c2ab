// Memory analysis: per rank and device, live bytes over time by category (parameter, gradient,
// optimizer_state, activation, temporary, other), the peak, and what was live at it. Categories
// come from the capture's tags, refined by lifetimes: an allocation freed before the outermost op
// that made it returned is temporary (whatever its tag, unless parameter, gradient or optimizer
// state); an untagged one made in a forward phase and freed in backward (a "backward" phase or an
// autograd node) is an activation; other untagged ones are "other". Reads through TraceReader
// only, streaming the memory events (two passes); does not look at tensors or shapes.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

// Live bytes indexed by core::MemoryCategory (kUnknown stays 0 after classification).
using CategoryBytes = std::array<int64_t, static_cast<size_t>(core::MemoryCategory::kCount)>;

inline int64_t& at(CategoryBytes& b, core::MemoryCategory c) {
  return b[static_cast<size_t>(c)];
}
inline int64_t at(const CategoryBytes& b, core::MemoryCategory c) {
  return b[static_cast<size_t>(c)];
}

struct MemoryOptions {
  int rank = -1;                 // -1: every rank
  size_t timeline_points = 512;  // per device; each point is the highest moment of its slice
  size_t top_allocations = 10;   // largest live allocations kept at the peak
  bool keep_categories = false;  // fill MemoryAnalysis::categories (memory_live.h replays them)
  // false: classify only (event counts and categories); no peak, timeline, allocated bytes or
  // largest blocks (memory_live.h's buildMemorySeries replays itself: one pass fewer).
  bool replay = true;
};

struct MemoryPoint {
  int64_t ts_ns = 0;
  int64_t total = 0;
  CategoryBytes by_category{};
};

struct LiveAllocation {
  uint64_t ptr = 0;
  int64_t bytes = 0;
  int64_t ts_ns = 0;                                             // when it was allocated
  core::MemoryCategory category = core::MemoryCategory::kOther;  // after classification
  core::MemoryCategory tag = core::MemoryCategory::kUnknown;     // what capture recorded
  core::StringId op = 0, scope = 0;
};

// One device of one rank (device_type 0 = CPU, 1 = CUDA).
struct DeviceMemory {
  int rank = 0;
  int device_type = 0, device_index = -1;
  int64_t allocations = 0, frees = 0;
  int64_t unmatched_frees = 0;  // frees of blocks allocated before the capture (not counted)
  int64_t reused_pointers = 0;  // allocations at an address still live (the earlier one dropped)
  int64_t peak_bytes = 0;       // highest total of live bytes (of allocations seen)
  int64_t peak_ts_ns = 0;
  CategoryBytes at_peak{};         // live bytes by category at the peak
  CategoryBytes category_peaks{};  // each category's own highest live bytes
  CategoryBytes allocated{};       // bytes allocated over the run, by category
  int64_t live_at_end = 0;
  int64_t inferred_activations = 0, inferred_temporaries = 0;  // classified from lifetimes
  std::vector<LiveAllocation> largest_at_peak;                 // largest first
  std::vector<MemoryPoint> timeline;                           // in time order, includes the peak
};

struct MemoryAnalysis {
  std::vector<DeviceMemory> devices;  // by rank, then device
  // With keep_categories: per rank, each allocation's category, indexed by its ordinal among the
  // rank's allocations (all devices) in forEachMemory order.
  std::map<int, std::vector<core::MemoryCategory>> categories;
  // The device a rank's report shows: a CUDA one when the rank has any, else its CPU. Null when
  // the rank recorded no memory events.
  const DeviceMemory* primary(int rank) const;
};

MemoryAnalysis analyzeMemory(const TraceReader& reader, const MemoryOptions& options = {});

// The dtype the traced program named for each memory category (core/memory_dtype.h: allocations
// carry no dtype), trace-wide, from the string table: {"parameter": "bf16", ...}; two names for one
// category are both given ("bf16|fp32"). Empty when the program named none.
std::map<std::string, std::string> memoryDtypes(const TraceReader& reader);

}  // namespace tracerun::trace::analysis
