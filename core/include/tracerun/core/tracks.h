// Tracks: the rows of a timeline within one process (rank). A thread, an async lane (collectives
// that start and end on other threads), a device stream, a counter, a memory pool. Thread-safe;
// ids are dense from 1 (0 means "the producing thread's own track" in records).
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "tracerun/core/records.h"

namespace tracerun::core {

enum class TrackKind : uint8_t {
  kThread = 0,
  kAsync = 1,
  kStream = 2,
  kCounter = 3,
  kMemory = 4,
  kCount = 5,
};
const char* trackKindName(TrackKind k) noexcept;

struct TrackInfo {
  TrackId id = 0;
  TrackKind kind = TrackKind::kThread;
  int64_t tid = 0;  // OS thread id, stream id, device index; 0 when it means nothing
  std::string name;
};

class TrackRegistry {
 public:
  TrackId add(TrackKind kind, int64_t tid, std::string name);
  // The id of the track with this kind and name, added if new (counters, async lanes).
  TrackId findOrAdd(TrackKind kind, int64_t tid, const std::string& name);
  size_t size() const;
  std::vector<TrackInfo> since(size_t first) const;  // tracks with index >= first (id = index+1)

 private:
  mutable std::mutex mu_;
  std::vector<TrackInfo> tracks_;
};

}  // namespace tracerun::core
