// CUDA caching-allocator event -> core record translation on synthetic event sequences (no GPU, no
// libtorch). Expected totals are written out by hand or computed by a separate model of the
// allocator's live blocks (a map from pointer to size), never by the code under test.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <map>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_alloc_translate.h"

// Counts operator new calls on this thread, to check the translation never allocates.
namespace {
thread_local uint64_t tlsNews = 0;
}  // namespace
void* operator new(std::size_t n) {
  ++tlsNews;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

using namespace tracerun;
using namespace tracerun::interpose::cuda;

namespace {

constexpr core::StringId kReserved0 = 11, kReserved1 = 12, kOom0 = 21, kOom1 = 22;

struct Fixture {
  AllocState s;
  int64_t clock = 1000;
  Fixture() {
    s.reserved_name[0] = kReserved0;
    s.reserved_name[1] = kReserved1;
    s.oom_name[0] = kOom0;
    s.oom_name[1] = kOom1;
  }
  // Translates one event; returns the records written (0 or 1).
  std::vector<core::Record> feed(AllocAction a, int device, uint64_t addr, int64_t size) {
    AllocEvent e;
    e.action = a;
    e.device = device;
    e.addr = addr;
    e.size = size;
    e.stream = 7;
    e.ts_ns = clock++;
    core::Record r;
    std::vector<core::Record> out;
    if (translateAllocEvent(e, s, &r)) out.push_back(r);
    return out;
  }
  core::MemoryRecord memory(AllocAction a, int device, uint64_t addr, int64_t size) {
    const auto out = feed(a, device, addr, size);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].kind() == core::RecordKind::kMemory);
    return out[0].as<core::MemoryRecord>();
  }
  core::CounterRecord counter(AllocAction a, int device, uint64_t addr, int64_t size) {
    const auto out = feed(a, device, addr, size);
    REQUIRE(out.size() == 1);
    REQUIRE(out[0].kind() == core::RecordKind::kCounter);
    return out[0].as<core::CounterRecord>();
  }
  std::map<std::string, core::SessionStat> stats() const {
    std::map<std::string, core::SessionStat> m;
    for (const auto& st : allocStats(s)) m[st.name] = st;
    return m;
  }
};

}  // namespace

TEST_CASE("CUDA alloc: allocations and frees on one device carry CUDA, device, ptr, bytes, total",
          "[cuda_alloc]") {
  Fixture f;
  // Live bytes after each event, worked out by hand: 1000, 1512, 5608, 4608, 4864, 4352, 0.
  struct Step {
    AllocAction action;
    uint64_t ptr;
    int64_t size;
    int64_t bytes;
    int64_t total;
  };
  const std::vector<Step> steps = {
      {AllocAction::kAlloc, 0x7000, 1000, 1000, 1000},
      {AllocAction::kAlloc, 0x7400, 512, 512, 1512},
      {AllocAction::kAlloc, 0x8000, 4096, 4096, 5608},
      {AllocAction::kFreeRequested, 0x7000, 1000, -1000, 4608},
      {AllocAction::kAlloc, 0x7000, 256, 256, 4864},
      {AllocAction::kFreeRequested, 0x7400, 512, -512, 4352},
      {AllocAction::kFreeRequested, 0x8000, 4096, -4096, 256},
      {AllocAction::kFreeRequested, 0x7000, 256, -256, 0},
  };
  for (const Step& st : steps) {
    const int64_t ts = f.clock;
    const core::MemoryRecord m = f.memory(st.action, 0, st.ptr, st.size);
    CHECK(m.device_type == 1);
    CHECK(m.device_index == 0);
    CHECK(m.ptr == st.ptr);
    CHECK(m.bytes == st.bytes);
    CHECK(m.total == st.total);
    CHECK(m.ts_ns == ts);
    CHECK(m.category == core::MemoryCategory::kUnknown);  // the capture adds the thread's tag
    CHECK(m.op == 0);
    CHECK(m.span == 0);
  }
  auto st = f.stats();
  CHECK(st["cuda_alloc_events"].value == 8);
  CHECK(st["cuda_alloc_peak_bytes"].value == 5608);
  CHECK(st["cuda_alloc_live_bytes_at_end"].value == 0);
  CHECK(st["cuda_alloc_ooms"].severity == core::StatSeverity::kInfo);
}

TEST_CASE("CUDA alloc: each device keeps its own total and peak", "[cuda_alloc]") {
  Fixture f;
  CHECK(f.memory(AllocAction::kAlloc, 0, 0x1000, 300).total == 300);
  CHECK(f.memory(AllocAction::kAlloc, 1, 0x2000, 7000).total == 7000);
  const core::MemoryRecord m = f.memory(AllocAction::kAlloc, 0, 0x1400, 200);
  CHECK(m.total == 500);
  CHECK(m.device_index == 0);
  const core::MemoryRecord g = f.memory(AllocAction::kFreeRequested, 1, 0x2000, 7000);
  CHECK(g.total == 0);
  CHECK(g.device_index == 1);
  CHECK(f.memory(AllocAction::kAlloc, 1, 0x2000, 100).total == 100);
  CHECK(f.s.peak_allocated[0].load() == 500);
  CHECK(f.s.peak_allocated[1].load() == 7000);
  auto st = f.stats();
  CHECK(st["cuda_alloc_peak_bytes"].value == 7000);  // the highest device
  CHECK(st["cuda_alloc_live_bytes_at_end"].value == 600);
}

TEST_CASE("CUDA alloc: segments are a reserved-bytes counter per device, not memory events",
          "[cuda_alloc]") {
  Fixture f;
  const int64_t mib = 1 << 20;
  core::CounterRecord c = f.counter(AllocAction::kSegmentAlloc, 0, 0x10000000, 2 * mib);
  CHECK(c.name == kReserved0);
  CHECK(c.value == 2.0 * mib);
  CHECK(c.ts_ns == 1000);
  c = f.counter(AllocAction::kSegmentAlloc, 1, 0x20000000, 20 * mib);
  CHECK(c.name == kReserved1);
  CHECK(c.value == 20.0 * mib);
  // Expandable segments: mapping grows the reservation, unmapping shrinks it.
  CHECK(f.counter(AllocAction::kSegmentMap, 0, 0x10200000, 4 * mib).value == 6.0 * mib);
  CHECK(f.counter(AllocAction::kSegmentUnmap, 0, 0x10200000, 2 * mib).value == 4.0 * mib);
  CHECK(f.counter(AllocAction::kSegmentFree, 1, 0x20000000, 20 * mib).value == 0.0);
  // Blocks inside a segment are what memory events count; segments do not touch that total.
  CHECK(f.memory(AllocAction::kAlloc, 0, 0x10000000, 1000).total == 1000);
  CHECK(f.counter(AllocAction::kSegmentFree, 0, 0x10000000, 4 * mib).value == 0.0);
  auto st = f.stats();
  CHECK(st["cuda_reserved_peak_bytes"].value == 20 * mib);
  CHECK(st["cuda_alloc_segment_events"].value == 6);
  CHECK(st["cuda_alloc_events"].value == 1);
}

TEST_CASE("CUDA alloc: FREE_COMPLETED and SNAPSHOT write nothing and change no total",
          "[cuda_alloc]") {
  Fixture f;
  f.memory(AllocAction::kAlloc, 0, 0x5000, 4096);
  f.memory(AllocAction::kFreeRequested, 0, 0x5000, 4096);  // freed for the program
  // The block was used on a second stream (record_stream): it becomes reusable later.
  CHECK(f.feed(AllocAction::kFreeCompleted, 0, 0x5000, 4096).empty());
  CHECK(f.feed(AllocAction::kSnapshot, 0, 0, 0).empty());
  CHECK(f.s.allocated[0].load() == 0);
  CHECK(f.memory(AllocAction::kAlloc, 0, 0x5000, 64).total == 64);
  auto st = f.stats();
  CHECK(st["cuda_alloc_frees_completed"].value == 1);
  CHECK(st["cuda_alloc_events"].value == 3);
}

TEST_CASE("CUDA alloc: OOM is an instant with the request size and a warning stat",
          "[cuda_alloc]") {
  Fixture f;
  const auto out = f.feed(AllocAction::kOom, 1, /*free bytes*/ 123456, 8 << 20);
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].kind() == core::RecordKind::kInstant);
  const auto r = out[0].as<core::InstantRecord>();
  CHECK(r.name == kOom1);
  CHECK(r.value == (8 << 20));
  CHECK(r.ts_ns == 1000);
  CHECK(r.track == 0);  // the allocating thread's track
  auto st = f.stats();
  CHECK(st["cuda_alloc_ooms"].value == 1);
  CHECK(st["cuda_alloc_ooms"].severity == core::StatSeverity::kWarning);
  CHECK(f.s.allocated[1].load() == 0);
}

TEST_CASE("CUDA alloc: unknown actions, bad devices and unnamed counters are skipped and counted",
          "[cuda_alloc]") {
  Fixture f;
  CHECK(f.feed(AllocAction::kUnknown, 0, 0x1000, 100).empty());
  CHECK(f.feed(AllocAction::kAlloc, -1, 0x1000, 100).empty());
  CHECK(f.feed(AllocAction::kAlloc, kMaxCudaDevices, 0x1000, 100).empty());
  // Device 5's names were not interned: no counter, but its reserved total still moves.
  CHECK(f.feed(AllocAction::kSegmentAlloc, 5, 0x9000000, 2 << 20).empty());
  CHECK(f.feed(AllocAction::kOom, 5, 0, 2 << 20).empty());
  CHECK(f.s.reserved[5].load() == (2 << 20));
  // Memory events need no name.
  CHECK(f.memory(AllocAction::kAlloc, 5, 0x9000000, 100).device_index == 5);
  for (int d = 0; d < kMaxCudaDevices; ++d) {
    if (d != 5) CHECK(f.s.allocated[d].load() == 0);
  }
  auto st = f.stats();
  CHECK(st["cuda_alloc_unknown_actions"].value == 1);
  CHECK(st["cuda_alloc_skipped"].value == 4);  // two bad devices, one counter, one instant
  CHECK(st["cuda_alloc_events"].value == 1);
  CHECK(st["cuda_alloc_ooms"].value == 1);
}

TEST_CASE("CUDA alloc: a random allocator trace gives the totals of an independent model",
          "[cuda_alloc]") {
  Fixture f;
  std::mt19937_64 rng(42);
  // The model: live blocks per device (pointer -> requested size), as the allocator hands them out.
  std::map<uint64_t, int64_t> live[3];
  int64_t peak[3] = {0, 0, 0};
  uint64_t next = 0x100000;
  int records = 0;
  for (int i = 0; i < 20000; ++i) {
    const int d = static_cast<int>(rng() % 3);
    const bool alloc = live[d].empty() || rng() % 100 < 55;
    uint64_t ptr = 0;
    int64_t size = 0;
    if (alloc) {
      ptr = next;
      next += 0x1000;
      size = static_cast<int64_t>(1 + rng() % 4096);
      live[d][ptr] = size;
    } else {
      auto it = live[d].begin();
      std::advance(it, static_cast<long>(rng() % live[d].size()));
      ptr = it->first;
      size = it->second;
      live[d].erase(it);
    }
    int64_t expected = 0;
    for (const auto& [p, n] : live[d]) expected += n;
    peak[d] = std::max(peak[d], expected);
    const core::MemoryRecord m =
        f.memory(alloc ? AllocAction::kAlloc : AllocAction::kFreeRequested, d, ptr, size);
    REQUIRE(m.total == expected);
    REQUIRE(m.bytes == (alloc ? size : -size));
    REQUIRE(m.device_index == d);
    ++records;
  }
  int64_t liveAtEnd = 0;
  for (int d = 0; d < 3; ++d) {
    int64_t sum = 0;
    for (const auto& [p, n] : live[d]) sum += n;
    CHECK(f.s.allocated[d].load() == sum);
    CHECK(f.s.peak_allocated[d].load() == peak[d]);
    liveAtEnd += sum;
  }
  auto st = f.stats();
  CHECK(st["cuda_alloc_events"].value == records);
  CHECK(st["cuda_alloc_live_bytes_at_end"].value == liveAtEnd);
}

TEST_CASE("CUDA alloc: concurrent events, on one device or several, lose no bytes",
          "[cuda_alloc]") {
  Fixture f;
  // Four threads: two on device 0 (libtorch serialises a device, but the state must not rely on
  // it), one each on devices 1 and 2. Each allocates n blocks of its own size, then frees them.
  constexpr int n = 20000;
  auto worker = [&f](int device, int64_t size, uint64_t base) {
    AllocEvent e;
    e.device = device;
    e.size = size;
    core::Record r;
    for (int i = 0; i < n; ++i) {
      e.action = AllocAction::kAlloc;
      e.addr = base + static_cast<uint64_t>(i) * 0x100;
      translateAllocEvent(e, f.s, &r);
    }
    for (int i = 0; i < n; ++i) {
      e.action = AllocAction::kFreeRequested;
      e.addr = base + static_cast<uint64_t>(i) * 0x100;
      translateAllocEvent(e, f.s, &r);
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(worker, 0, 3, 0x10000000);
  threads.emplace_back(worker, 0, 5, 0x20000000);
  threads.emplace_back(worker, 1, 7, 0x30000000);
  threads.emplace_back(worker, 2, 11, 0x40000000);
  for (auto& t : threads) t.join();
  CHECK(f.s.allocated[0].load() == 0);
  CHECK(f.s.allocated[1].load() == 0);
  CHECK(f.s.allocated[2].load() == 0);
  // Device 1 and 2 peaks are exact (one thread each): all blocks live at once.
  CHECK(f.s.peak_allocated[1].load() == int64_t{7} * n);
  CHECK(f.s.peak_allocated[2].load() == int64_t{11} * n);
  // Device 0's peak lies between one thread's full set and both together.
  CHECK(f.s.peak_allocated[0].load() >= int64_t{5} * n);
  CHECK(f.s.peak_allocated[0].load() <= int64_t{8} * n);
  CHECK(f.stats()["cuda_alloc_events"].value == int64_t{8} * n);
}

TEST_CASE("CUDA alloc: translating allocates nothing", "[cuda_alloc]") {
  Fixture f;
  const AllocAction actions[] = {AllocAction::kAlloc,         AllocAction::kSegmentAlloc,
                                 AllocAction::kFreeRequested, AllocAction::kFreeCompleted,
                                 AllocAction::kSegmentMap,    AllocAction::kSegmentUnmap,
                                 AllocAction::kSegmentFree,   AllocAction::kOom,
                                 AllocAction::kSnapshot,      AllocAction::kUnknown};
  AllocEvent e;
  core::Record r;
  {  // the counter sees an allocation on this thread
    const uint64_t start = tlsNews;
    delete new int(1);
    const uint64_t after = tlsNews;  // read before the assertion: Catch allocates
    REQUIRE(after == start + 1);
  }
  int written = 0, expected = 0;
  const uint64_t before = tlsNews;
  for (int i = 0; i < 10000; ++i) {
    e.action = actions[i % 10];
    e.device = i % 3;
    e.addr = 0x1000 + static_cast<uint64_t>(i / 10) * 0x100;
    e.size = 512;
    written += translateAllocEvent(e, f.s, &r) ? 1 : 0;
    // Alloc and free requested always write; segments and OOM only on the named devices 0 and 1;
    // free completed, snapshot and unknown never.
    const int k = i % 10;
    expected += (k == 0 || k == 2) || ((k == 1 || (k >= 4 && k <= 7)) && e.device < 2);
  }
  const uint64_t news = tlsNews - before;
  CHECK(news == 0);
  CHECK(written == expected);
}

TEST_CASE("CUDA alloc: reset zeroes totals and counts, keeps names", "[cuda_alloc]") {
  Fixture f;
  f.memory(AllocAction::kAlloc, 0, 0x1000, 100);
  f.counter(AllocAction::kSegmentAlloc, 0, 0x1000, 2 << 20);
  resetAllocState(f.s);
  CHECK(f.s.allocated[0].load() == 0);
  CHECK(f.s.reserved[0].load() == 0);
  CHECK(f.stats()["cuda_alloc_events"].value == 0);
  CHECK(f.counter(AllocAction::kSegmentAlloc, 0, 0x1000, 2 << 20).name == kReserved0);
}
