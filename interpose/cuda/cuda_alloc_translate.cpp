#include "cuda_alloc_translate.h"

#include <algorithm>

namespace tracerun::interpose::cuda {

namespace {

static_assert(std::atomic<int64_t>::is_always_lock_free &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "the tracker runs under the allocator's mutex: its counters must not lock");

// Adds delta to *value and raises *peak to the result; returns the result.
int64_t addWithPeak(std::atomic<int64_t>& value, std::atomic<int64_t>& peak,
                    int64_t delta) noexcept {
  const int64_t now = value.fetch_add(delta, std::memory_order_relaxed) + delta;
  int64_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  return now;
}

core::Record memoryRecord(const AllocEvent& e, int64_t bytes, int64_t total) noexcept {
  core::MemoryRecord m;
  m.device_type = 1;  // c10::DeviceType::CUDA
  m.device_index = static_cast<int8_t>(e.device);
  m.ts_ns = e.ts_ns;
  m.ptr = e.addr;
  m.bytes = bytes;
  m.total = total;
  return core::Record::from(m);
}

}  // namespace

bool translateAllocEvent(const AllocEvent& e, AllocState& s, core::Record* out) noexcept {
  if (e.action == AllocAction::kUnknown) {
    s.unknown.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (e.device < 0 || e.device >= kMaxCudaDevices) {
    s.bad_device.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const auto d = static_cast<size_t>(e.device);
  switch (e.action) {
    case AllocAction::kAlloc: {
      s.allocs.fetch_add(1, std::memory_order_relaxed);
      const int64_t total = addWithPeak(s.allocated[d], s.peak_allocated[d], e.size);
      *out = memoryRecord(e, e.size, total);
      return true;
    }
    case AllocAction::kFreeRequested: {
      s.frees.fetch_add(1, std::memory_order_relaxed);
      const int64_t total = s.allocated[d].fetch_sub(e.size, std::memory_order_relaxed) - e.size;
      *out = memoryRecord(e, -e.size, total);
      return true;
    }
    case AllocAction::kFreeCompleted:
      s.frees_completed.fetch_add(1, std::memory_order_relaxed);
      return false;
    case AllocAction::kSegmentAlloc:
    case AllocAction::kSegmentMap:
    case AllocAction::kSegmentFree:
    case AllocAction::kSegmentUnmap: {
      s.segment_events.fetch_add(1, std::memory_order_relaxed);
      const bool grows =
          e.action == AllocAction::kSegmentAlloc || e.action == AllocAction::kSegmentMap;
      const int64_t total =
          addWithPeak(s.reserved[d], s.peak_reserved[d], grows ? e.size : -e.size);
      if (s.reserved_name[d] == 0) {
        s.unnamed.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      core::CounterRecord c;
      c.name = s.reserved_name[d];
      c.ts_ns = e.ts_ns;
      c.value = static_cast<double>(total);
      *out = core::Record::from(c);
      return true;
    }
    case AllocAction::kOom: {
      s.ooms.fetch_add(1, std::memory_order_relaxed);
      if (s.oom_name[d] == 0) {
        s.unnamed.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      core::InstantRecord r;
      r.category = core::Category::kOther;
      r.name = s.oom_name[d];
      r.ts_ns = e.ts_ns;
      r.value = e.size;
      *out = core::Record::from(r);
      return true;
    }
    case AllocAction::kSnapshot:
      s.snapshots.fetch_add(1, std::memory_order_relaxed);
      return false;
    case AllocAction::kUnknown:
      break;
  }
  return false;
}

void resetAllocState(AllocState& s) noexcept {
  for (int d = 0; d < kMaxCudaDevices; ++d) {
    s.allocated[d].store(0, std::memory_order_relaxed);
    s.peak_allocated[d].store(0, std::memory_order_relaxed);
    s.reserved[d].store(0, std::memory_order_relaxed);
    s.peak_reserved[d].store(0, std::memory_order_relaxed);
  }
  for (auto* c : {&s.allocs, &s.frees, &s.frees_completed, &s.segment_events, &s.ooms, &s.snapshots,
                  &s.unknown, &s.bad_device, &s.unnamed}) {
    c->store(0, std::memory_order_relaxed);
  }
}

std::vector<core::SessionStat> allocStats(const AllocState& s) {
  int64_t peakAllocated = 0, peakReserved = 0, liveAtEnd = 0;
  for (int d = 0; d < kMaxCudaDevices; ++d) {
    peakAllocated = std::max(peakAllocated, s.peak_allocated[d].load(std::memory_order_relaxed));
    peakReserved = std::max(peakReserved, s.peak_reserved[d].load(std::memory_order_relaxed));
    liveAtEnd += s.allocated[d].load(std::memory_order_relaxed);
  }
  auto n = [](const std::atomic<uint64_t>& a) {
    return static_cast<int64_t>(a.load(std::memory_order_relaxed));
  };
  const int64_t ooms = n(s.ooms);
  using core::StatSeverity;
  return {
      {"cuda_alloc_events", n(s.allocs) + n(s.frees), StatSeverity::kInfo},
      {"cuda_alloc_peak_bytes", peakAllocated, StatSeverity::kInfo},
      {"cuda_reserved_peak_bytes", peakReserved, StatSeverity::kInfo},
      {"cuda_alloc_live_bytes_at_end", liveAtEnd, StatSeverity::kInfo},
      {"cuda_alloc_frees_completed", n(s.frees_completed), StatSeverity::kInfo},
      {"cuda_alloc_segment_events", n(s.segment_events), StatSeverity::kInfo},
      {"cuda_alloc_unknown_actions", n(s.unknown), StatSeverity::kInfo},
      {"cuda_alloc_skipped", n(s.bad_device) + n(s.unnamed), StatSeverity::kInfo},
      {"cuda_alloc_ooms", ooms, ooms > 0 ? StatSeverity::kWarning : StatSeverity::kInfo},
  };
}

}  // namespace tracerun::interpose::cuda
