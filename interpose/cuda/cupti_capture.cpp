// CUDA activity capture inside libtracerun: dlopens libcupti (never a link-time dependency),
// enables kernel/memcpy/memset and context records (synchronization records with `cuda-sync`) plus
// API and external-correlation records (for the op -> kernel flows), and translates completed
// buffers (cupti_translate.cpp). It does not translate or name anything itself.
//
// Cost: API records are wanted because CUPTI emits an op's external correlation record with them,
// and for the launch calls' own times (kept as launch spans: cupti_translate.h). Where libcupti
// has cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi (CUDA 13), only the
// launch-type APIs are enabled (cupti_translate.h: launchRuntimeApis /
// launchDriverApis), not the whole RUNTIME and DRIVER kinds; without them, or when one is
// refused, the whole kinds (the stat cupti_launch_apis_only says which). Buffers are 4 MiB, as
// Kineto's. Contexts: CONTEXT records name each context's device (cuptiActivityEnableAndDump
// also reports the contexts that existed before the capture started); optional. Starts only when
// TRACERUN_CAPTURE lists "cuda"; any failure prints one line "tracerun: CUDA capture off:
// <reason>", sets the stat cuda_capture_off and leaves the rest of the capture as is.
//
// Clocks: CUPTI is asked to take its timestamps from core::nowNs() (the trace's clock;
// cuptiActivityRegisterTimestampCallback), and the remaining offset is measured anyway from the
// tightest of a few bracketed reads, so a CUPTI without that call still aligns (its default clock
// is CLOCK_REALTIME).
//
// Stopping: stopCapture sets the capture's generation to 0 before it runs this file's stop hook,
// so threadState() is null there, and in the buffers CUPTI's final flush completes. Both therefore
// go through the session kept at start (gSession): the final records land in the completing
// thread's buffer of that session (the flush runs on a thread of its own: finalFlush), and the
// cupti_* stats in its stats table, before the writer's last drain and close.
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
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
  CUptiResult (*enableAndDump)(CUpti_ActivityKind) = nullptr;               // optional
  CUptiResult (*enableRuntimeApi)(CUpti_CallbackId, uint8_t) = nullptr;     // optional
  CUptiResult (*enableDriverApi)(CUpti_CallbackId, uint8_t) = nullptr;      // optional
};

Cupti gCupti;
// gMu guards gCtx, gSession, gBuffer and the counts (buffers complete on CUPTI's thread).
std::mutex gMu;
TranslateContext* gCtx = nullptr;
core::Session* gSession = nullptr;      // the capture's, from startCuda to the end of stopCuda
core::ThreadBuffer* gBuffer = nullptr;  // the completing thread's, during one bufferCompleted
uint64_t gBuffers = 0, gRecords = 0, gDropped = 0;
uint64_t gTranslateErrors = 0;  // records whose translation threw (skipped; the first one said)
bool gOn = false;
bool gLaunchApisOnly = false;  // per-API enabling in use (else the whole RUNTIME/DRIVER kinds)
bool gContexts = false;        // CONTEXT records enabled
CuptiPartsOff gPartsOff;       // TRACERUN_CUPTI_OFF, read at each start (cost attribution)
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION};
constexpr CUpti_ActivityKind kApiKinds[] = {CUPTI_ACTIVITY_KIND_RUNTIME,
                                            CUPTI_ACTIVITY_KIND_DRIVER};
constexpr size_t kBufferBytes = size_t{4} << 20;

bool cudaWanted() {
  return captureWordsFromEnvironment().has(CaptureWord::kCuda);
}

// Synchronization records only with `cuda-sync`, as torch.profiler records CUDA_SYNC only with
// enable_cuda_sync_events (and TRACERUN_CUPTI_OFF=sync still turns them off).
bool syncWanted() {
  return captureWordsFromEnvironment().has(CaptureWord::kCudaSync) && !gPartsOff.sync;
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

// Every launch-type API on (enable 1) or off (0); false at the first refusal.
bool setLaunchApis(uint8_t enable) {
  if (gCupti.enableRuntimeApi == nullptr || gCupti.enableDriverApi == nullptr) return false;
  bool ok = true;
  for (uint32_t cbid : launchRuntimeApis()) {
    ok = gCupti.enableRuntimeApi(cbid, enable) == CUPTI_SUCCESS && ok;
    if (!ok && enable != 0) return false;
  }
  for (uint32_t cbid : launchDriverApis()) {
    ok = gCupti.enableDriverApi(cbid, enable) == CUPTI_SUCCESS && ok;
    if (!ok && enable != 0) return false;
  }
  return ok;
}

// API records: the launch-type APIs alone where libcupti can, else the whole kinds.
bool enableApiRecords() {
  gLaunchApisOnly = setLaunchApis(1);
  if (gLaunchApisOnly) return true;
  setLaunchApis(0);  // a refusal half-way: undo what was on
  for (CUpti_ActivityKind kind : kApiKinds) {
    if (gCupti.enable(kind) != CUPTI_SUCCESS) return false;
  }
  return true;
}

void disableAll() {
  for (CUpti_ActivityKind k : kKinds) gCupti.disable(k);
  for (CUpti_ActivityKind k : kApiKinds) gCupti.disable(k);
  if (gLaunchApisOnly) setLaunchApis(0);
  if (gContexts) gCupti.disable(CUPTI_ACTIVITY_KIND_CONTEXT);
  gLaunchApisOnly = gContexts = false;
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

// The calling thread's record buffer in `session`: its ThreadState's while capturing (null when
// the thread cannot record, e.g. it is exiting); inside stopCapture (generation 0, threadState()
// null) the same thread's buffer, found through the session (registered under the thread's name
// if this thread never recorded). Throws on allocation failure.
core::ThreadBuffer* recordBuffer(core::Session& session) {
  if (capturing()) {
    ThreadState* t = threadState();
    return t != nullptr && t->session == &session ? t->buffer : nullptr;
  }
  char name[17] = {};
  const bool named = ::prctl(PR_GET_NAME, name, 0, 0, 0) == 0 && name[0] != '\0';
  return &session.threadBuffer(named ? name : nullptr);
}

// A record whose translation threw (gMu held): counted (stat cupti_translate_errors, an error)
// and, the first time in a capture, one line naming the record kind and the reason.
void translateFailed(const CUpti_Activity& record, const char* why) {
  if (gTranslateErrors++ == 0) {
    std::fprintf(stderr, "tracerun: a CUDA activity record (kind %d) could not be translated: %s\n",
                 static_cast<int>(record.kind), why);
  }
}

void CUPTIAPI bufferCompleted(CUcontext context, uint32_t streamId, uint8_t* buffer, size_t,
                              size_t validSize) {
  const std::unique_ptr<uint8_t, decltype(&std::free)> owned(buffer, &std::free);
  std::lock_guard<std::mutex> lock(gMu);
  if (gCtx == nullptr || gSession == nullptr) return;  // no capture, or after its stop
  try {
    std::vector<core::Record> out;
    gBuffer = recordBuffer(*gSession);
    if (gBuffer == nullptr) return;
    ++gBuffers;
    CUpti_Activity* record = nullptr;
    while (validSize > 0 && gCupti.nextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
      ++gRecords;
      out.clear();
      // One record that cannot be translated is skipped, counted and said once; the rest of the
      // buffer still is (a throw here once cost every kernel record after the first API record).
      try {
        translate(*record, *gCtx, out);
      } catch (const std::exception& e) {
        translateFailed(*record, e.what());
        continue;
      } catch (...) {
        translateFailed(*record, "unknown exception");
        continue;
      }
      for (const auto& r : out) gBuffer->ring.tryPush(r);  // a full ring counts dropped_events
    }
  } catch (...) {  // CUPTI's thread: nothing may escape; the rest of this buffer is lost
  }
  gBuffer = nullptr;
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
    load(gCupti.enableAndDump, "cuptiActivityEnableAndDump");
    load(gCupti.enableRuntimeApi, "cuptiActivityEnableRuntimeApi");
    load(gCupti.enableDriverApi, "cuptiActivityEnableDriverApi");
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
  std::string unknownParts;
  gPartsOff = parseCuptiPartsOff(std::getenv("TRACERUN_CUPTI_OFF"), &unknownParts);
  if (!unknownParts.empty()) {
    std::fprintf(stderr,
                 "tracerun: TRACERUN_CUPTI_OFF: unknown part(s) %s (sync, clock, correlation)\n",
                 unknownParts.c_str());
  }
  // Before any kind is enabled (CUPTI's rule): records then carry the trace's own clock.
  if (gCupti.timestampCallback != nullptr && !gPartsOff.clock) gCupti.timestampCallback(traceClock);
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
  ctx->track = [session](const std::string& name, int64_t tid) {
    return session->tracks().findOrAdd(core::TrackKind::kStream, tid, name);
  };
  ctx->intern = [session](const std::string& s) { return session->strings().intern(s); };
  ctx->next_id = [] {  // only called by translate, inside bufferCompleted (gMu held)
    return gBuffer != nullptr ? gBuffer->nextId() : core::EventId{0};
  };
  if (CUptiResult r = gCupti.registerCallbacks(bufferRequested, bufferCompleted);
      r != CUPTI_SUCCESS) {
    return off(errorText(r));
  }
  for (CUpti_ActivityKind kind : kKinds) {
    if (kind == CUPTI_ACTIVITY_KIND_SYNCHRONIZATION && !syncWanted()) continue;
    if (CUptiResult r = gCupti.enable(kind); r != CUPTI_SUCCESS) {
      disableAll();
      return off(errorText(r));
    }
  }
  if (!enableApiRecords()) {
    disableAll();
    return off("cannot enable API records");
  }
  // Optional: without CONTEXT records a sync's device is learnt from the context's kernels.
  gContexts = (gCupti.enableAndDump != nullptr ? gCupti.enableAndDump : gCupti.enable)(
                  CUPTI_ACTIVITY_KIND_CONTEXT) == CUPTI_SUCCESS;
  const int64_t base = ctx->op_base_ns;
  {
    std::lock_guard<std::mutex> lock(gMu);
    delete gCtx;  // a previous capture's (late buffers are discarded once it is null)
    gCtx = ctx.release();
    gSession = session;
    gBuffers = gRecords = gDropped = gTranslateErrors = 0;
  }
  gOn = true;
  // Op capture's callback is registered by now (its hook runs first: libtracerun's static
  // initializer adds it before this file's), so this one runs after it and sees the op's frame.
  if (config.ops && !gPartsOff.correlation) {
    startOpCorrelation(gCupti.pushExternal, gCupti.popExternal, base);
  }
}

// CUPTI's forced flush: completes every buffer (bufferCompleted) before returning. Called on a
// thread of its own, since CUPTI may complete them on the calling thread and the stopping thread
// may be past its thread_locals: at a normal exit, stopCapture runs from libtracerun's static
// destructor, after the main thread's thread_locals (its buffer registration with the session
// among them) were destroyed. The fresh thread registers a buffer of its own with the session
// (a thread track "tracerun-cupti"); the writer drains it when it closes the shard.
// finish(): the syncs still waiting for their context's device are placed now, into this
// thread's buffer (the flush thread's: see finalFlush).
void finishHere() {
  std::lock_guard<std::mutex> lock(gMu);
  if (gCtx == nullptr || gSession == nullptr) return;
  try {
    std::vector<core::Record> out;
    gBuffer = recordBuffer(*gSession);
    if (gBuffer != nullptr) {
      finish(*gCtx, out);
      for (const auto& r : out) gBuffer->ring.tryPush(r);
    }
  } catch (...) {
  }
  gBuffer = nullptr;
}

void finalFlush() {
  try {
    std::thread([] {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
      ::prctl(PR_SET_NAME, "tracerun-cupti", 0, 0, 0);
      gCupti.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      finishHere();
    }).join();
  } catch (const std::system_error&) {  // no thread: flush here, the records discarded
    {
      std::lock_guard<std::mutex> lock(gMu);
      gSession = nullptr;
    }
    gCupti.flushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }
}

void stopCuda() {
  if (!gOn) return;
  gOn = false;
  stopOpCorrelation();
  core::Session* session = nullptr;
  {
    std::lock_guard<std::mutex> lock(gMu);
    session = gSession;
  }
  const bool launchApisOnly = gLaunchApisOnly, contexts = gContexts;
  finalFlush();
  disableAll();
  size_t globalDropped = 0;
  gCupti.dropped(nullptr, 0, &globalDropped);
  std::lock_guard<std::mutex> lock(gMu);
  // Not threadState(): the generation is 0 by now. The session outlives this hook (the writer
  // writes its stats when stopCapture closes the shard, after the hooks).
  if (gCtx == nullptr || session == nullptr) return;
  std::vector<core::Record> late;  // finishHere ran (else nothing can be written): counts only
  finish(*gCtx, late);
  try {
    for (const auto& s : cuptiStats(*gCtx, gDropped + globalDropped, gBuffers, gRecords)) {
      session->setStat(s.name, s.value, s.severity);
    }
    session->setStat("cupti_ops_uncorrelated", static_cast<int64_t>(uncorrelatedOps()),
                     core::StatSeverity::kInfo);
    session->setStat("cupti_launch_apis_only", launchApisOnly ? 1 : 0, core::StatSeverity::kInfo);
    session->setStat("cupti_translate_errors", static_cast<int64_t>(gTranslateErrors),
                     gTranslateErrors > 0 ? core::StatSeverity::kError : core::StatSeverity::kInfo);
    if (gPartsOff.bits() != 0) {
      session->setStat("cupti_parts_off", gPartsOff.bits(), core::StatSeverity::kWarning);
    }
    session->setStat("cupti_context_records", contexts ? 1 : 0, core::StatSeverity::kInfo);
  } catch (...) {
  }
  delete gCtx;  // a buffer CUPTI completes after this is discarded (bufferCompleted sees null)
  gCtx = nullptr;
  gSession = nullptr;
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
