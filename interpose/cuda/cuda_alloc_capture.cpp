// CUDA caching-allocator events inside libtracerun: libtorch's allocator trace tracker
// (attachAllocatorTraceTracker, libtorch 2.2+) -> cuda_alloc_translate.cpp -> the allocating
// thread's record buffer. Compiled only where libtorch has CUDA (TRACERUN_WITH_TORCH_CUDA); with a
// 1.13-2.1 libtorch it compiles to the one line below. Runs when the capture records `memory`.
//
// When to attach. The tracker reaches only device allocators that exist, i.e. after libtorch
// initialised CUDA, and tracerun must not initialise CUDA itself in a program that has not touched
// it yet (that would run cuInit at start-up: CUDA_VISIBLE_DEVICES set later by the program would be
// ignored, forked children could not use CUDA, a CPU-only run would pay the driver's start-up). So
// a small thread polls, every 5 ms, whether the program has loaded the CUDA driver
// (dlopen("libcuda.so.1", RTLD_NOLOAD), no side effect). Once it has, lazyInitCuda() (a no-op
// after libtorch's own initialisation, or waits for it; it only initialises the caching allocator
// when the program used the CUDA runtime outside ATen), then the tracker is attached, once per
// process (there is no detach): it does nothing while no capture records memory. Allocations made
// before a capture started recording are not events, but the allocator's own live and reserved
// bytes at that moment are the base of the running totals (and the stat
// cuda_alloc_live_bytes_at_attach): a record's total is the device's live bytes as libtorch counts
// them. Usually the program's first CUDA allocation is missed: it holds the device allocator's
// mutex through its cudaMalloc while the tracker waits to be attached.
//
// The tracker runs on the thread that allocates or frees, while libtorch holds that device's
// allocator mutex: no lock of ours is taken except, once per thread, the thread's registration
// with the session (as for CPU memory events), and the translation neither locks nor allocates.
//
// Exit. The watcher is a std::thread, and a std::thread destroyed while joinable calls
// std::terminate. At a normal exit the static destructors of this file run before libtracerun's
// LibraryLifetime calls stopCapture (its object is constructed first: op_capture.cpp links
// before this file, and a test binary's objects are constructed after the library's), so the
// watcher's owner must stop and join it itself, in its destructor; otherwise every traced process
// that records `memory` and reaches exit with the watcher joinable aborts ("terminate called
// without an active exception") and loses its trace. stopCudaAlloc, which stopCapture calls later
// through the hooks, then finds the watcher gone and does nothing.
#define TRACERUN_COMPAT_CUDA_ALLOC
#include "tracerun/torch_compat.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "capture.h"
#include "cuda_alloc_capture.h"

#if TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

#include "cuda_alloc_translate.h"
#include "tracerun/core/clock.h"

#endif

namespace tracerun::interpose::cuda {
namespace {

bool cudaWanted() {
  return captureWordsFromEnvironment().has(CaptureWord::kCuda);
}

#if TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER

using compat::CudaTraceEntry;

AllocState gState;                   // totals, rebased at each capture's start
std::atomic<bool> gOn{false};        // the tracker records (a capture with `memory` is on)
std::atomic<bool> gAttached{false};  // the tracker is attached (once per process)
int gDevices = 0;                    // devices at attach time (written before gAttached)

// Set once the watcher's owner (below) was destroyed at exit: start and stop do nothing after.
// A trivially destructible atomic, so reading it after static destruction is still defined.
std::atomic<bool> gWatcherGone{false};

void stopCudaAlloc();

// The watcher thread and what it shares with the capture's start and stop (mu guards the rest).
// Destroying it stops and joins the thread (see "Exit" above).
struct Watcher {
  std::mutex mu;
  std::condition_variable cv;
  std::thread thread;
  bool stop = false;
  core::Session* session = nullptr;  // the capture's session (ActiveCapture keeps it alive)
  uint64_t generation = 0;
  int64_t live_at_attach = -1;  // the allocator's live requested bytes when attached (-1: not yet)

  Watcher() = default;
  Watcher(const Watcher&) = delete;
  Watcher& operator=(const Watcher&) = delete;
  ~Watcher() {
    stopCudaAlloc();
    gWatcherGone.store(true);
  }
};
Watcher gWatcher;

AllocAction actionOf(const CudaTraceEntry& te) {
  switch (te.action_) {
    case CudaTraceEntry::ALLOC:
      return AllocAction::kAlloc;
    case CudaTraceEntry::FREE_REQUESTED:
      return AllocAction::kFreeRequested;
    case CudaTraceEntry::FREE_COMPLETED:
      return AllocAction::kFreeCompleted;
    case CudaTraceEntry::SEGMENT_ALLOC:
      return AllocAction::kSegmentAlloc;
    case CudaTraceEntry::SEGMENT_FREE:
      return AllocAction::kSegmentFree;
    case CudaTraceEntry::SEGMENT_MAP:
      return AllocAction::kSegmentMap;
    case CudaTraceEntry::SEGMENT_UNMAP:
      return AllocAction::kSegmentUnmap;
    case CudaTraceEntry::SNAPSHOT:
      return AllocAction::kSnapshot;
    case CudaTraceEntry::OOM:
      return AllocAction::kOom;
    default:
      return AllocAction::kUnknown;  // actions added after this was written
  }
}

// The tracker. Never throws (libtorch calls it inside its allocator).
void onTraceEntry(const CudaTraceEntry& te) noexcept {
  if (!gOn.load(std::memory_order_acquire)) return;
  AllocEvent e;
  e.action = actionOf(te);
  e.device = static_cast<int>(te.device_);
  e.addr = static_cast<uint64_t>(te.addr_);
  e.size = static_cast<int64_t>(te.size_);
  e.ts_ns = core::nowNs();
  core::Record r;
  if (!translateAllocEvent(e, gState, &r)) return;
  ThreadState* t = threadState();
  if (t == nullptr) {
    if (capturing()) countStat(Stat::kMemoryUnrecorded);
    return;
  }
  if (r.kind() == core::RecordKind::kMemory) {
    auto m = r.as<core::MemoryRecord>();
    // An allocation carries the thread's MemoryTag; the analysis takes a free's from its block.
    if (m.bytes > 0) m.category = static_cast<core::MemoryCategory>(tlsMemoryCategory);
    if (const Frame* f = t->top()) {
      m.span = f->id;
      if (f->category == core::Category::kOp || f->category == core::Category::kBackward) {
        m.op = f->name;
      }
    }
    if (t->userTop >= 0) m.scope = t->frames[t->userTop].name;
    r = core::Record::from(m);
  }
  t->buffer->ring.tryPush(r);  // a full ring counts dropped_events
}

bool driverLoaded() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return false;
  dlclose(h);  // drops the reference NOLOAD added
  return true;
}

// The first line of an exception's message (c10::Error::what() appends a backtrace).
std::string firstLine(const std::exception& ex) {
  const auto* c10Error = dynamic_cast<const c10::Error*>(&ex);
  const std::string text = c10Error != nullptr ? c10Error->what_without_backtrace() : ex.what();
  return text.substr(0, text.find('\n'));
}

// One line (only when the user asked for `cuda`) and a warning row in the stats table.
void off(core::Session* session, const std::string& why) {
  if (!cudaWanted()) return;
  std::fprintf(stderr, "tracerun: CUDA allocator events off: %s\n", why.c_str());
  try {
    session->setStat("cuda_alloc_capture_off", 1, core::StatSeverity::kWarning);
  } catch (...) {
  }
}

// Names of the per-device counter and OOM instant in this capture's string table.
void internNames(core::Session* session) {
  for (int d = 0; d < gDevices && d < kMaxCudaDevices; ++d) {
    const std::string prefix = "cuda:" + std::to_string(d);
    gState.reserved_name[d] = session->strings().intern(prefix + " reserved bytes");
    gState.oom_name[d] = session->strings().intern(prefix + " out of memory");
  }
}

// On the watcher thread, once the program loaded the CUDA driver: attach (once per process) and
// start recording for the capture `generation`.
void attachAndStart(core::Session* session, uint64_t generation) {
  if (!gAttached.load()) {
    try {
      compat::lazyInitCuda();
      gDevices = compat::cudaDeviceCount();
    } catch (const std::exception& ex) {
      return off(session, "cannot initialise CUDA: " + firstLine(ex));
    }
    if (gDevices <= 0) return off(session, "no CUDA device");
    try {
      // cudaMallocAsync and CUDAPluggableAllocator refuse (TORCH_CHECK): nothing is recorded.
      compat::attachCudaAllocTracker(&onTraceEntry);
    } catch (const std::exception& ex) {
      return off(session, "the CUDA allocator refused the tracker: " + firstLine(ex));
    }
    gAttached.store(true);
  }
  std::lock_guard<std::mutex> lock(gWatcher.mu);
  if (gWatcher.stop || gWatcher.generation != generation ||
      gActiveGeneration.load() != generation) {
    return;
  }
  try {
    internNames(session);
    // The tracker records nothing yet (gOn is false): totals start from what the allocator holds
    // now, so each event's total is the device's live requested bytes, as libtorch counts them,
    // including blocks allocated before the tracker was attached.
    resetAllocState(gState);
    int64_t live = 0;
    for (int d = 0; d < gDevices && d < kMaxCudaDevices; ++d) {
      int64_t reserved = 0, requested = 0;
      compat::cudaAllocatorBytes(d, &reserved, &requested);
      const auto i = static_cast<size_t>(d);
      gState.reserved[i].store(reserved);
      gState.peak_reserved[i].store(reserved);
      gState.allocated[i].store(requested);
      gState.peak_allocated[i].store(requested);
      live += requested;
    }
    gWatcher.live_at_attach = live;
  } catch (const std::exception& ex) {
    return off(session, firstLine(ex));
  }
  gOn.store(true, std::memory_order_release);
}

void watch(core::Session* session, uint64_t generation) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);  // signals go to the program's threads
  std::unique_lock<std::mutex> lock(gWatcher.mu);
  while (!gWatcher.stop) {
    if (gAttached.load() || driverLoaded()) {
      lock.unlock();
      attachAndStart(session, generation);
      return;
    }
    gWatcher.cv.wait_for(lock, std::chrono::milliseconds(5));
  }
}

void startCudaAlloc(const CaptureConfig& config) {
  if (!config.memory || gWatcherGone.load()) return;
  ThreadState* t = threadState();
  if (t == nullptr) return;
  std::lock_guard<std::mutex> lock(gWatcher.mu);
  if (gWatcher.thread.joinable()) return;  // already started for this capture
  gWatcher.session = t->session;
  gWatcher.generation = gActiveGeneration.load();
  gWatcher.stop = false;
  gWatcher.live_at_attach = -1;
  try {
    gWatcher.thread = std::thread(watch, gWatcher.session, gWatcher.generation);
  } catch (const std::exception& ex) {
    off(gWatcher.session, "cannot start a thread: " + firstLine(ex));
  }
}

void stopCudaAlloc() {
  gOn.store(false);
  if (gWatcherGone.load()) return;  // at exit, after the watcher's owner stopped it
  std::thread watcher;
  core::Session* session = nullptr;
  {
    std::lock_guard<std::mutex> lock(gWatcher.mu);
    gWatcher.stop = true;
    watcher = std::move(gWatcher.thread);
    session = gWatcher.session;
    gWatcher.session = nullptr;
  }
  gWatcher.cv.notify_all();
  if (watcher.joinable()) watcher.join();
  gOn.store(false);  // again: the watcher may have turned it on before it saw the stop
  if (session == nullptr || !gAttached.load()) return;
  const int64_t liveAtAttach = gWatcher.live_at_attach;  // written by the watcher, now joined
  try {
    for (const auto& s : allocStats(gState)) session->setStat(s.name, s.value, s.severity);
    if (liveAtAttach >= 0) {
      session->setStat("cuda_alloc_live_bytes_at_attach", liveAtAttach, core::StatSeverity::kInfo);
    }
  } catch (...) {
  }
}

#else  // libtorch 1.13-2.1 with CUDA: no tracker to attach

void startCudaAlloc(const CaptureConfig& config) {
  static uint64_t said = 0;  // once per capture
  if (!config.memory || !cudaWanted() || said == gActiveGeneration.load()) return;
  said = gActiveGeneration.load();
  std::fprintf(stderr,
               "tracerun: CUDA allocator events off: need libtorch >= 2.2 (this is %d.%d)\n",
               compat::kTorchMajor, compat::kTorchMinor);
}

void stopCudaAlloc() {}

#endif  // TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER

// Static initializers run in link order: if the capture already started, start now; otherwise
// startCapture calls the hook (the same arrangement as cupti_capture.cpp).
struct Register {
  Register() {
    addCaptureHooks(CaptureHooks{&startCudaAlloc, &stopCudaAlloc});
    if (capturing()) startCudaAlloc(activeConfig());
  }
};
Register gRegister;

}  // namespace

bool cudaAllocRecording() noexcept {
#if TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER
  return gOn.load(std::memory_order_acquire);
#else
  return false;
#endif
}

}  // namespace tracerun::interpose::cuda
