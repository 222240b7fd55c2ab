// The one clock of a trace: CLOCK_MONOTONIC in integer nanoseconds. Per-rank offsets to rank 0 are
// applied when shards are merged (trace/), never here.
#pragma once

#include <cstdint>
#include <ctime>

namespace tracerun::core {

inline int64_t nowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace tracerun::core
