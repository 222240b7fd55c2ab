// CUDA activity capture inside libtracerun: dlopens libcupti (never a link-time dependency), enables
// kernel/memcpy/memset/synchronization/external-correlation records and translates completed
// buffers (cupti_translate.cpp). Starts only when TRACERUN_CAPTURE lists "cuda"; any failure prints
// one line "tracerun: CUDA capture off: <reason>" and leaves the rest of the capture untouched.
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "capture.h"
#include "cupti_translate.h"
#include "tracerun/core/clock.h"

namespace tracerun::interpose::cuda {
namespace {

struct Cupti {
  void* lib = nullptr;
  CUptiResult (*enable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*registerCallbacks)(CUpti_BuffersCallbackRequestFunc,
                                   CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*nextRecord)(uint8_t*, size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*flushAll)(uint32_t) = nullptr;
  CUptiResult (*timestamp)(uint64_t*) = nullptr;
  CUptiResult (*dropped)(CUcontext, uint32_t, size_t*) = nullptr;
  CUptiResult (*resultString)(CUptiResult, const char**) = nullptr;
};

Cupti gCupti;
std::mutex gMu;  // guards gCtx (buffers complete on CUPTI's thread)
TranslateContext* gCtx = nullptr;
bool gOn = false;
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
constexpr size_t kBufferBytes = size_t{8} << 20;

bool cudaWanted() {
  const char* what = std::getenv("TRACERUN_CAPTURE");
  if (what == nullptr) return false;
  const std::string list = std::string(",") + what + ",";
  return list.find(",cuda,") != std::string::npos;
}

void off(const std::string& why) {
  std::fprintf(stderr, "tracerun: CUDA capture off: %s\n", why.c_str());
}

std::string errorText(CUptiResult r) {
  const char* s = nullptr;
  if (gCupti.resultString != nullptr) gCupti.resultString(r, &s);
  return s != nullptr ? s : "CUPTI error " + std::to_string(static_cast<int>(r));
}

template <typename Fn>
bool load(Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(gCupti.lib, name));
  return fn != nullptr;
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize) {
  std::vector<core::Record> out;
  {
    std::lock_guard<std::mutex> lock(gMu);
    ThreadState* t = threadState();
    if (gCtx != nullptr && t != nullptr) {
      CUpti_Activity* record = nullptr;
      while (gCupti.nextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
        out.clear();
        translate(*record, *gCtx, out);
        for (const auto& r : out) t->buffer->ring.tryPush(r);
      }
    }
  }
  std::free(buffer);
}

void startCuda(const CaptureConfig& config) {
  if (!cudaWanted()) return;
  static uint64_t attempted = 0;  // one attempt (and at most one line) per capture
  const uint64_t generation = gActiveGeneration.load();
  if (generation == attempted) return;
  attempted = generation;
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
    return off(std::string("no CUDA driver (") + dlerror() + ")");
  }
  gCupti.lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (gCupti.lib == nullptr) gCupti.lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
  if (gCupti.lib == nullptr) return off(std::string("cannot load libcupti: ") + dlerror());
  load(gCupti.resultString, "cuptiGetResultString");
  if (!load(gCupti.enable, "cuptiActivityEnable") || !load(gCupti.disable, "cuptiActivityDisable") ||
      !load(gCupti.registerCallbacks, "cuptiActivityRegisterCallbacks") ||
      !load(gCupti.nextRecord, "cuptiActivityGetNextRecord") ||
      !load(gCupti.flushAll, "cuptiActivityFlushAll") ||
      !load(gCupti.timestamp, "cuptiGetTimestamp") ||
      !load(gCupti.dropped, "cuptiActivityGetNumDroppedRecords")) {
    return off("libcupti lacks the activity API");
  }
  uint64_t cuptiNow = 0;
  if (CUptiResult r = gCupti.timestamp(&cuptiNow); r != CUPTI_SUCCESS) return off(errorText(r));
  auto* ctx = new TranslateContext();  // lives as long as the process (late buffers)
  ctx->clock_offset_ns = core::nowNs() - static_cast<int64_t>(cuptiNow);
  ThreadState* owner = threadState();
  if (owner == nullptr) return off("no capture thread state");
  core::Session* session = owner->session;
  ctx->stream_track = [session](uint32_t device, uint32_t stream) {
    const std::string name = stream == kNoStream
                                 ? "cuda context " + std::to_string(device) + " sync"
                                 : "cuda:" + std::to_string(device) + " stream " +
                                       std::to_string(stream);
    return session->tracks().findOrAdd(core::TrackKind::kStream, stream, name);
  };
  ctx->intern = [session](const std::string& s) { return session->strings().intern(s); };
  ctx->next_id = [] {
    ThreadState* t = threadState();
    return t != nullptr ? t->buffer->nextId() : core::EventId{0};
  };
  if (CUptiResult r = gCupti.registerCallbacks(bufferRequested, bufferCompleted);
      r != CUPTI_SUCCESS) {
    return off(errorText(r));
  }
  for (CUpti_ActivityKind kind : kKinds) {
    if (CUptiResult r = gCupti.enable(kind); r != CUPTI_SUCCESS) {
      for (CUpti_ActivityKind k : kKinds) gCupti.disable(k);
      return off(errorText(r));
    }
  }
  {
    std::lock_guard<std::mutex> lock(gMu);
    gCtx = ctx;
  }
  gOn = true;
  (void)config;
}

void stopCuda() {
  if (!gOn) return;
  gOn = false;
  gCupti.flushAll(1);
  for (CUpti_ActivityKind k : kKinds) gCupti.disable(k);
  size_t dropped = 0;
  gCupti.dropped(nullptr, 0, &dropped);
  std::lock_guard<std::mutex> lock(gMu);
  if (ThreadState* t = threadState(); t != nullptr && gCtx != nullptr) {
    // Until capture.cpp has named stats, the counts are counter samples at the end.
    const std::pair<const char*, uint64_t> counts[] = {
        {"cupti_dropped_records", dropped},      {"cupti_kernels", gCtx->kernels},
        {"cupti_nccl_kernels", gCtx->nccl_kernels}, {"cupti_copies", gCtx->copies},
        {"cupti_records_without_op", gCtx->without_op}};
    for (const auto& [name, value] : counts) {
      core::CounterRecord c;
      c.name = t->intern(name);
      c.ts_ns = core::nowNs();
      c.value = static_cast<double>(value);
      t->buffer->ring.tryPush(core::Record::from(c));
    }
  }
  gCtx = nullptr;
}

// Static initializers run in link order: if libtracerun's LibraryLifetime already started the
// capture, start now; otherwise startCapture calls the hook.
struct Register {
  Register() {
    addCaptureHooks(CaptureHooks{&startCuda, &stopCuda});
    if (capturing()) startCuda(activeConfig());
  }
};
Register gRegister;

}  // namespace
}  // namespace tracerun::interpose::cuda
