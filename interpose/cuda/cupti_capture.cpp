// CUDA activity capture inside libtracerun: dlopens libcupti (never a link-time dependency),
// enables kernel/memcpy/memset/synchronization records plus runtime/driver API and
// external-correlation records (for the op -> kernel flows), and translates completed buffers
// (cupti_translate.cpp). Starts only when TRACERUN_CAPTURE lists "cuda"; any failure prints one
// line "tracerun: CUDA capture off: <reason>", sets the stat cuda_capture_off and leaves the rest
// of the capture as is.
//
// Clocks: CUPTI is asked to take its timestamps from core::nowNs() (the trace's clock;
// cuptiActivityRegisterTimestampCallback), and the remaining offset is measured anyway from the
// tightest of a few bracketed reads, so a CUPTI without that call still aligns (its default clock
// is CLOCK_REALTIME).
#include <cupti.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "capture.h"
#include "cupti_translate.h"
#include "op_correlation.h"
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
  PushExternalIdFn pushExternal = nullptr;
  PopExternalIdFn popExternal = nullptr;
  CUptiResult (*timestampCallback)(CUpti_TimestampCallbackFunc) = nullptr;  // optional
};

Cupti gCupti;
std::mutex gMu;  // guards gCtx and the counts (buffers complete on CUPTI's thread)
TranslateContext* gCtx = nullptr;
uint64_t gBuffers = 0, gRecords = 0, gDropped = 0;
bool gOn = false;
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                         CUPTI_ACTIVITY_KIND_RUNTIME,
                                         CUPTI_ACTIVITY_KIND_DRIVER,
                                         CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
constexpr size_t kBufferBytes = size_t{8} << 20;

bool cudaWanted() {
  const char* what = std::getenv("TRACERUN_CAPTURE");
  if (what == nullptr) return false;
  const std::string list = std::string(",") + what + ",";
  return list.find(",cuda,") != std::string::npos;
}

// The one line, and a warning row in the stats table so the trace says it too.
void off(const std::string& why) {
  std::fprintf(stderr, "tracerun: CUDA capture off: %s\n", why.c_str());
  if (ThreadState* t = threadState()) {
    try {
      t->session->setStat("cuda_capture_off", 1, core::StatSeverity::kWarning);
    } catch (...) {
    }
  }
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

uint64_t CUPTIAPI traceClock() {
  return static_cast<uint64_t>(core::nowNs());
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // none: CUPTI drops and counts
  *maxRecords = 0;
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t,
                              size_t validSize) {
  const std::unique_ptr<uint8_t, decltype(&std::free)> owned(buffer, &std::free);
  std::vector<core::Record> out;
  std::lock_guard<std::mutex> lock(gMu);
  ThreadState* t = threadState();
  if (gCtx == nullptr || t == nullptr) return;
  ++gBuffers;
  CUpti_Activity* record = nullptr;
  while (validSize > 0 && gCupti.nextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
    ++gRecords;
    out.clear();
    translate(*record, *gCtx, out);
    for (const auto& r : out) t->buffer->ring.tryPush(r);  // a full ring counts dropped_events
  }
  size_t dropped = 0;
  if (gCupti.dropped(context, streamId, &dropped) == CUPTI_SUCCESS) gDropped += dropped;
}

void startCuda(const CaptureConfig& config) {
  if (!cudaWanted()) return;
  static uint64_t attempted = 0;  // one attempt (and at most one line) per capture
  const uint64_t generation = gActiveGeneration.load();
  if (generation == attempted) return;
  attempted = generation;
  if (gCupti.lib == nullptr) {
    if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
      return off(std::string("no CUDA driver (") + dlerror() + ")");
    }
    gCupti.lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
    if (gCupti.lib == nullptr) gCupti.lib = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
    if (gCupti.lib == nullptr) return off(std::string("cannot load libcupti: ") + dlerror());
    load(gCupti.resultString, "cuptiGetResultString");
    load(gCupti.timestampCallback, "cuptiActivityRegisterTimestampCallback");
    if (!load(gCupti.enable, "cuptiActivityEnable") ||
        !load(gCupti.disable, "cuptiActivityDisable") ||
        !load(gCupti.registerCallbacks, "cuptiActivityRegisterCallbacks") ||
        !load(gCupti.nextRecord, "cuptiActivityGetNextRecord") ||
        !load(gCupti.flushAll, "cuptiActivityFlushAll") ||
        !load(gCupti.timestamp, "cuptiGetTimestamp") ||
        !load(gCupti.dropped, "cuptiActivityGetNumDroppedRecords") ||
        !load(gCupti.pushExternal, "cuptiActivityPushExternalCorrelationId") ||
        !load(gCupti.popExternal, "cuptiActivityPopExternalCorrelationId")) {
      gCupti.lib = nullptr;
      return off("libcupti lacks the activity API");
    }
  }
  ThreadState* owner = threadState();
  if (owner == nullptr) return off("no capture thread state");
  // Before any kind is enabled (CUPTI's rule): records then carry the trace's own clock.
  if (gCupti.timestampCallback != nullptr) gCupti.timestampCallback(traceClock);
  std::vector<ClockSample> samples;
  for (int i = 0; i < 8; ++i) {
    ClockSample s;
    s.host_before = core::nowNs();
    if (CUptiResult r = gCupti.timestamp(&s.cupti); r != CUPTI_SUCCESS) return off(errorText(r));
    s.host_after = core::nowNs();
    samples.push_back(s);
  }
  auto ctx = std::make_unique<TranslateContext>();
  ctx->clock_offset_ns = clockOffset(samples);
  ctx->op_base_ns = core::nowNs() - 1;
  core::Session* session = owner->session;
  ctx->stream_track = [session](uint32_t device, uint32_t stream) {
    const std::string name =
        stream == kNoStream
            ? "cuda context " + std::to_string(device) + " sync"
            : "cuda:" + std::to_string(device) + " stream " + std::to_string(stream);
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
  const int64_t base = ctx->op_base_ns;
  {
    std::lock_guard<std::mutex> lock(gMu);
    delete gCtx;  // a previous capture's (late buffers are discarded once it is null)
    gCtx = ctx.release();
    gBuffers = gRecords = gDropped = 0;
  }
  gOn = true;
  // Op capture's callback is registered by now (its hook runs first: libtracerun's static
  // initializer adds it before this file's), so this one runs after it and sees the op's frame.
  if (config.ops) startOpCorrelation(gCupti.pushExternal, gCupti.popExternal, base);
}

void stopCuda() {
  if (!gOn) return;
  gOn = false;
  stopOpCorrelation();
  gCupti.flushAll(1);  // completes every buffer (bufferCompleted) before returning
  for (CUpti_ActivityKind k : kKinds) gCupti.disable(k);
  size_t globalDropped = 0;
  gCupti.dropped(nullptr, 0, &globalDropped);
  std::lock_guard<std::mutex> lock(gMu);
  ThreadState* t = threadState();
  if (gCtx == nullptr || t == nullptr) return;
  finish(*gCtx);
  try {
    for (const auto& s : cuptiStats(*gCtx, gDropped + globalDropped, gBuffers, gRecords)) {
      t->session->setStat(s.name, s.value, s.severity);
    }
    t->session->setStat("cupti_ops_uncorrelated", static_cast<int64_t>(uncorrelatedOps()),
                        core::StatSeverity::kInfo);
  } catch (...) {
  }
  delete gCtx;  // a buffer CUPTI completes after this is discarded (bufferCompleted sees null)
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
