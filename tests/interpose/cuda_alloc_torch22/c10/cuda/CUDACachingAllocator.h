// Stand-in (see ../../README.md): the declarations of libtorch 2.2's
// c10/cuda/CUDACachingAllocator.h that tracerun uses, with 2.2's types (int device, int64_t
// address and size). The test defines the functions.
#pragma once

#include <c10/core/Allocator.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>

namespace c10 {
struct GatheredContext;
}  // namespace c10

namespace c10::cuda::CUDACachingAllocator {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;
  int64_t freed = 0;
};

enum struct StatType : uint64_t { AGGREGATE = 0, SMALL_POOL = 1, LARGE_POOL = 2, NUM_TYPES = 3 };

typedef std::array<Stat, static_cast<size_t>(StatType::NUM_TYPES)> StatArray;

struct DeviceStats {
  StatArray allocation;
  StatArray segment;
  StatArray active;
  StatArray inactive_split;
  StatArray allocated_bytes;
  StatArray reserved_bytes;
  StatArray active_bytes;
  StatArray inactive_split_bytes;
  StatArray requested_bytes;
  int64_t num_alloc_retries = 0;
  int64_t num_ooms = 0;
  Stat oversize_allocations;
  Stat oversize_segments;
  int64_t max_split_size = 0;
};

struct TraceEntry {
  enum Action {
    ALLOC,
    FREE_REQUESTED,
    FREE_COMPLETED,
    SEGMENT_ALLOC,
    SEGMENT_FREE,
    SEGMENT_MAP,
    SEGMENT_UNMAP,
    SNAPSHOT,
    OOM
  };
  TraceEntry(Action action, int device, int64_t addr, size_t size, cudaStream_t stream,
             std::shared_ptr<GatheredContext> context = nullptr)
      : action_(action),
        device_(device),
        addr_(addr),
        context_(std::move(context)),
        stream_(stream),
        size_(static_cast<int64_t>(size)) {}
  Action action_;
  int device_;
  int64_t addr_;  // for OOM, the free bytes CUDA reported
  std::shared_ptr<GatheredContext> context_;
  cudaStream_t stream_;
  int64_t size_;
};

using AllocatorTraceTracker = std::function<void(const TraceEntry&)>;

DeviceStats getDeviceStats(int device);
void attachAllocatorTraceTracker(AllocatorTraceTracker tracker);

}  // namespace c10::cuda::CUDACachingAllocator
