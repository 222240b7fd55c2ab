// CUDA caching-allocator events -> tracerun core records: a pure translation (no libtorch, no CUDA
// headers, no globals), so tests feed it synthetic event sequences. cuda_alloc_capture.cpp turns
// libtorch's c10::cuda::CUDACachingAllocator::TraceEntry into an AllocEvent and calls
// translateAllocEvent from the allocator's trace-tracker callback, which libtorch runs while it
// holds the device allocator's mutex: the translation is lock-free and allocation-free (atomics,
// fixed arrays, strings interned beforehand).
//
// What an event becomes:
//   ALLOC            -> MemoryRecord, +size (the requested, unrounded size), device_type 1 (CUDA),
//                       device_index, ptr, total = this device's allocated bytes after it
//   FREE_REQUESTED   -> MemoryRecord, -size (the block's requested size), total after it. The block
//                       counts as freed here, as torch.cuda.memory_allocated() does.
//   FREE_COMPLETED   -> nothing (counted): the same block becoming reusable after its streams
//                       finished (record_stream); a second free of the pointer would be unmatched
//   SEGMENT_ALLOC / SEGMENT_MAP    -> CounterRecord "cuda:<d> reserved bytes" (+size)
//   SEGMENT_FREE / SEGMENT_UNMAP   -> the same counter (-size): reserved memory (cudaMalloc'd or
//                       mapped segments, what the allocator holds from the device) is a counter
//                       track, not memory events, so the memory analysis counts each byte once
//   OOM              -> InstantRecord "cuda:<d> out of memory" on the thread's track, value = the
//                       (rounded) bytes asked for (size_); the free bytes CUDA reported (addr_)
//                       are not kept
//   SNAPSHOT         -> nothing (counted)
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/core/session.h"

namespace tracerun::interpose::cuda {

enum class AllocAction : uint8_t {
  kAlloc = 0,
  kFreeRequested,
  kFreeCompleted,
  kSegmentAlloc,
  kSegmentFree,
  kSegmentMap,
  kSegmentUnmap,
  kSnapshot,
  kOom,
  kUnknown,  // an action this build does not know (a newer libtorch)
};

// The fields of one TraceEntry that tracerun uses, in plain types.
struct AllocEvent {
  AllocAction action = AllocAction::kUnknown;
  int device = 0;       // CUDA device index
  uint64_t addr = 0;    // block or segment address; for OOM, the free bytes CUDA reported
  int64_t size = 0;     // bytes (ALLOC/FREE_*: requested size; SEGMENT_*: segment or mapped size)
  uint64_t stream = 0;  // cudaStream_t as an integer (not recorded yet)
  int64_t ts_ns = 0;    // host clock (core::nowNs), taken by the caller
};

inline constexpr int kMaxCudaDevices = 64;

// Process-wide translation state. Each device's totals are updated with atomic adds, so events of
// different devices may be translated concurrently (libtorch serialises each device's events
// under that device's allocator mutex, not across devices).
struct AllocState {
  // Interned before any event (0: that device's counter / instant is not written, and counted).
  core::StringId reserved_name[kMaxCudaDevices] = {};
  core::StringId oom_name[kMaxCudaDevices] = {};

  std::atomic<int64_t> allocated[kMaxCudaDevices] = {};       // live requested bytes
  std::atomic<int64_t> peak_allocated[kMaxCudaDevices] = {};  // highest `allocated` seen
  std::atomic<int64_t> reserved[kMaxCudaDevices] = {};        // segment bytes
  std::atomic<int64_t> peak_reserved[kMaxCudaDevices] = {};

  std::atomic<uint64_t> allocs{0}, frees{0}, frees_completed{0}, segment_events{0};
  std::atomic<uint64_t> ooms{0}, snapshots{0}, unknown{0};
  std::atomic<uint64_t> bad_device{0};  // device index < 0 or >= kMaxCudaDevices: skipped
  std::atomic<uint64_t> unnamed{0};     // counter / instant skipped: its name was not interned
};

// Translates one event. Writes at most one record to *out and returns true when it did (the caller
// adds the thread's op / span / scope / category to a MemoryRecord and pushes it). Lock-free,
// allocation-free, noexcept.
bool translateAllocEvent(const AllocEvent& e, AllocState& s, core::Record* out) noexcept;

// Zeroes every total, peak and count; keeps the interned names.
void resetAllocState(AllocState& s) noexcept;

// The stats table rows for a capture: cuda_alloc_events (allocations + frees recorded),
// cuda_alloc_peak_bytes and cuda_reserved_peak_bytes (the highest over devices),
// cuda_alloc_live_bytes_at_end, cuda_alloc_frees_completed, cuda_alloc_segment_events,
// cuda_alloc_unknown_actions, cuda_alloc_skipped (bad device index, or a counter / instant whose
// name was not interned) (info); cuda_alloc_ooms (warning when > 0).
std::vector<core::SessionStat> allocStats(const AllocState& s);

}  // namespace tracerun::interpose::cuda
