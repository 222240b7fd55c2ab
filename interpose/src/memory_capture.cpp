// Every CPU allocation and free through c10's CPU allocator: a wrapping allocator installed with
// c10::SetCPUAllocator (process-wide, all threads). It keeps a 64-byte header in front of each
// block (inner context, deleter, size, category) so a free needs no lookup and no allocation.
// CUDA's caching allocator is covered by interpose/cuda/cuda_alloc_capture.cpp (libtorch's
// allocator trace tracker; built only where libtorch has CUDA), which registers its own hooks and
// records into the same per-thread buffers, with device_type 1.
// Also defines tracerun_annotate_tag_memory (annotate_abi.h): a category set on blocks already
// allocated, written as a record of 0 bytes (it needs this file's state: whether memory is on, the
// CPU's live bytes). It does not touch the blocks' headers (a caller's pointer may not be ours).
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/alignment.h>

#include <new>

#include "capture.h"
#include "tracerun/core/clock.h"
#include "tracerun/torch_compat.h"

namespace tracerun::interpose {

namespace {

// Above the default CPU allocator's 0 so ours is used; below 255 so a program can still override.
constexpr uint8_t kAllocatorPriority = 100;
constexpr uint64_t kMagic = 0x7472616365727531ull;  // "traceru1"

struct Header {
  uint64_t magic;
  void* innerContext;
  c10::DeleterFnPtr innerDeleter;
  int64_t bytes;
  uint8_t category;
};
// The user pointer stays aligned as c10 requires (64 bytes on x86-64).
constexpr size_t kHeaderBytes = c10::gAlignment < 64 ? 64 : c10::gAlignment;
static_assert(sizeof(Header) <= kHeaderBytes);

std::atomic<bool> gMemoryOn{false};  // this capture records memory

void record(void* ptr, int64_t bytes, int64_t total, uint8_t category, int8_t deviceType = 0,
            int8_t deviceIndex = -1) noexcept {
  ThreadState* t = threadState();
  if (t == nullptr) {
    if (capturing()) countStat(Stat::kMemoryUnrecorded);
    return;
  }
  core::StringId op = 0;
  core::EventId span = 0;
  if (const Frame* f = t->top()) {
    span = f->id;
    if (f->category == core::Category::kOp || f->category == core::Category::kBackward) {
      op = f->name;
    }
  }
  const core::StringId scope = t->userTop >= 0 ? t->frames[t->userTop].name : 0;
  core::RecordRing& ring = t->buffer->ring;
  if (!ring.reserve(1)) [[unlikely]] {
    return;
  }
  // Built in place in the ring slot, as spans are (see RecordRing::reserve).
  new (ring.pending(0)) core::MemoryRecord{core::RecordKind::kMemory,
                                           static_cast<core::MemoryCategory>(category),
                                           deviceType,
                                           deviceIndex,
                                           op,
                                           core::nowNs(),
                                           reinterpret_cast<uint64_t>(ptr),
                                           bytes,
                                           total,
                                           span,
                                           scope,
                                           0,
                                           0};
  ring.commit(1);
}

void tracedDelete(void* context) {
  if (context == nullptr) return;
  char* user = static_cast<char*>(context);
  auto* h = reinterpret_cast<Header*>(user - kHeaderBytes);
  const int64_t total = gLiveBytes.fetch_sub(h->bytes, std::memory_order_relaxed) - h->bytes;
  if (gMemoryOn.load(std::memory_order_relaxed)) record(user, -h->bytes, total, h->category);
  const c10::DeleterFnPtr innerDeleter = h->innerDeleter;
  void* innerContext = h->innerContext;
  h->magic = 0;
  innerDeleter(innerContext);
}

class TracingCpuAllocator final : public c10::Allocator {
 public:
  explicit TracingCpuAllocator(c10::Allocator* inner) : inner_(inner) {}

  c10::DataPtr allocate(size_t n) TRACERUN_ALLOCATE_CONST override {
    if (n == 0) return inner_->allocate(0);  // c10 gives a null pointer for 0 bytes: keep that
    c10::DataPtr block = inner_->allocate(n + kHeaderBytes);
    char* base = static_cast<char*>(block.get());
    if (base == nullptr) return block;
    const c10::Device device = block.device();
    auto* h = new (base)
        Header{kMagic, nullptr, block.get_deleter(), static_cast<int64_t>(n), tlsMemoryCategory};
    h->innerContext = block.release_context();
    char* user = base + kHeaderBytes;
    const auto bytes = static_cast<int64_t>(n);
    const int64_t total = gLiveBytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    int64_t peak = gPeakBytes.load(std::memory_order_relaxed);
    while (total > peak &&
           !gPeakBytes.compare_exchange_weak(peak, total, std::memory_order_relaxed)) {
    }
    if (gMemoryOn.load(std::memory_order_relaxed)) record(user, bytes, total, h->category);
    return c10::DataPtr(user, user, &tracedDelete, device);  // data == context: raw_allocate works
  }

  c10::DeleterFnPtr raw_deleter() const override { return &tracedDelete; }
#if TRACERUN_ALLOCATOR_HAS_COPY_DATA
  void copy_data(void* dest, const void* src, size_t count) const override {
    inner_->copy_data(dest, src, count);
  }
#endif

 private:
  c10::Allocator* inner_;
};

// Installed once, on the first capture that records memory, and kept for the process: blocks it
// handed out must still find their deleter after a capture stops.
void startMemory(const CaptureConfig& config) {
  if (!config.memory) return;
  static TracingCpuAllocator* wrapper = [] {
    auto* w = new TracingCpuAllocator(c10::GetCPUAllocator());  // process lifetime, never freed
    c10::SetCPUAllocator(w, kAllocatorPriority);
    return w;
  }();
  (void)wrapper;
  gMemoryOn.store(true);
}

void stopMemory() {
  gMemoryOn.store(false);
}

}  // namespace

CaptureHooks memoryCaptureHooks() {
  return CaptureHooks{&startMemory, &stopMemory};
}

}  // namespace tracerun::interpose

#define TRACERUN_ANNOTATE_WEAK  // the definition below is the strong one
#include "tracerun/annotate_abi.h"

extern "C" __attribute__((visibility("default"))) void tracerun_annotate_tag_memory(
    const uint64_t* ptrs, int n, int device_type, int device_index, int category, int64_t total) {
  using namespace tracerun::interpose;
  if (ptrs == nullptr || n <= 0 || !gMemoryOn.load(std::memory_order_relaxed)) return;
  if (category <= 0 || category >= static_cast<int>(tracerun::core::MemoryCategory::kCount)) return;
  if (device_type < 0 || device_type > 127 || device_index < -1 || device_index > 127) return;
  if (total < 0) {
    if (device_type != 0) return;  // another device's live bytes are not ours to know
    total = gLiveBytes.load(std::memory_order_relaxed);
  }
  for (int i = 0; i < n; ++i) {
    if (ptrs[i] == 0) continue;
    record(reinterpret_cast<void*>(ptrs[i]), 0, total, static_cast<uint8_t>(category),
           static_cast<int8_t>(device_type), static_cast<int8_t>(device_index));
  }
}

extern "C" __attribute__((visibility("default"))) void tracerun_annotate_offload_memory(
    uint64_t block, int64_t bytes, int device_type, int device_index, int category, int64_t total) {
  using namespace tracerun::interpose;
  if (block == 0 || bytes == 0 || !gMemoryOn.load(std::memory_order_relaxed)) return;
  if (category <= 0 || category >= static_cast<int>(tracerun::core::MemoryCategory::kCount)) return;
  if (device_type != static_cast<int>(tracerun::OffloadDevice::kNvme) &&
      device_type != static_cast<int>(tracerun::OffloadDevice::kPinnedHost)) {
    return;
  }
  if (device_index < -1 || device_index > 127 || total < 0) return;
  record(reinterpret_cast<void*>(block), bytes, total, static_cast<uint8_t>(category),
         static_cast<int8_t>(device_type), static_cast<int8_t>(device_index));
}
