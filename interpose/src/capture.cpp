// Capture lifecycle: configuration from the environment, the Session and ShardWriter of a capture,
// thread registration, the SIGINT/SIGTERM flush path, fork safety and stats. No libtorch: the
// libtorch-facing parts arrive as CaptureHooks.
//
// Sections: configuration · process-wide state · thread registration · start/stop ·
//           signals and fork · stats
#include "capture.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "status_file.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/rank_set.h"
#include "tracerun/core/raw_shard_writer.h"
#include "tracerun/trace/raw_convert.h"
#include "tracerun/trace/shard_writer.h"

namespace tracerun::interpose {

// ---- configuration ------------------------------------------------------------------------------

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

int envInt(const char* name, int fallback) {
  const char* v = env(name);
  if (v == nullptr) return fallback;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && x >= 0 && x <= INT_MAX ? static_cast<int>(x) : fallback;
}

std::string baseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string commandLine() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!all.empty() && all.back() == '\0') all.pop_back();
  for (char& c : all) {
    if (c == '\0') c = ' ';
  }
  return all;
}

}  // namespace

std::string selfExecutable() {
  char buf[PATH_MAX];
  if (::realpath("/proc/self/exe", buf) == nullptr) return {};
  return buf;
}

bool targetMatches(const std::string& target, const std::string& exe) {
  if (target.empty()) return true;
  if (exe.empty()) return false;
  if (target.find('/') != std::string::npos) {
    char buf[PATH_MAX];
    const std::string resolved = ::realpath(target.c_str(), buf) != nullptr ? buf : target;
    return resolved == exe;
  }
  return target == baseName(exe);
}

CaptureSet captureWordsOf(const CaptureConfig& config) {
  return CaptureSet{}
      .set(CaptureWord::kOps, config.ops)
      .set(CaptureWord::kScopes, config.scopes)
      .set(CaptureWord::kMemory, config.memory)
      .set(CaptureWord::kComm, config.comm)
      .set(CaptureWord::kCuda, config.cuda)
      .set(CaptureWord::kTensors, config.tensors)
      .set(CaptureWord::kCudaSync, config.cuda_sync);
}

std::optional<CaptureConfig> configFromEnvironment(std::string* why) {
  const char* output = env("TRACERUN_OUTPUT");
  if (output == nullptr) {
    if (why) *why = "TRACERUN_OUTPUT is not set";
    return std::nullopt;
  }
  CaptureConfig c;
  if (const char* target = env("TRACERUN_TARGET")) {
    c.target = target;
    const std::string exe = selfExecutable();
    if (!targetMatches(c.target, exe)) {
      if (why) *why = exe + " is not the target " + c.target;
      return std::nullopt;
    }
  }
  c.rank = core::rankFromEnvironment();
  c.world_size = envInt("WORLD_SIZE", 1);
  // `tracerun --ranks`: a rank outside the list runs as without tracerun.
  if (const char* ranks = env("TRACERUN_RANKS")) {
    std::string problem;
    const core::RankSet traced = core::RankSet::parse(ranks, &problem);
    if (!problem.empty()) {
      std::fprintf(stderr, "tracerun: TRACERUN_RANKS=%s: %s; every rank is traced\n", ranks,
                   problem.c_str());
    } else if (!traced.contains(c.rank)) {
      if (why) *why = "rank " + std::to_string(c.rank) + " is not in TRACERUN_RANKS " + ranks;
      return std::nullopt;
    } else {
      c.traced_ranks = traced.text();
    }
  }
  c.output = expandRank(output, c.rank);
  std::string problem;
  const CaptureSet words = captureWordsFromEnvironment(&problem);
  if (!problem.empty())
    std::fprintf(stderr, "tracerun: TRACERUN_CAPTURE: %s; ignored\n", problem.c_str());
  c.ops = words.has(CaptureWord::kOps);
  c.scopes = words.has(CaptureWord::kScopes);
  c.memory = words.has(CaptureWord::kMemory);
  c.tensors = words.has(CaptureWord::kTensors);
  c.comm = words.has(CaptureWord::kComm);
  c.cuda = words.has(CaptureWord::kCuda);
  c.cuda_sync = words.has(CaptureWord::kCudaSync);
  if (const char* shapes = env("TRACERUN_SHAPES")) c.shapes = std::strcmp(shapes, "0") != 0;
  if (const char* claim = env("TRACERUN_CLAIM")) c.claim = std::strcmp(claim, "1") == 0;
  if (const int mb = envInt("TRACERUN_BUFFER_MB", 0); mb > 0) {
    c.ring_capacity = (size_t{static_cast<unsigned>(mb)} << 20) / sizeof(core::Record);
  }
  if (const char* offset = env("TRACERUN_CLOCK_OFFSET_NS")) {
    c.clock_offset_ns = std::strtoll(offset, nullptr, 10);
  }
  c.restart = envInt("TRACERUN_RESTART", 0);
  // How often the writer drains (benchmarks raise it to keep the writer idle while they time).
  if (const int ms = envInt("TRACERUN_DRAIN_MS", 0); ms > 0) c.drain_interval_ms = ms;
  if (const char* w = env("TRACERUN_WRITER")) {
    if (std::strcmp(w, "raw") == 0) {
      c.raw_writer = true;
    } else if (std::strcmp(w, "sqlite") == 0) {
      c.raw_writer = false;
    } else {
      std::fprintf(stderr, "tracerun: TRACERUN_WRITER=%s: not raw or sqlite; ignored\n", w);
    }
  }
  c.command = commandLine();
  return c;
}

// ---- process-wide state -------------------------------------------------------------------------

std::atomic<uint64_t> gActiveGeneration{0};
__thread ThreadState* tlsThreadState __attribute__((tls_model("initial-exec"))) = nullptr;
__thread uint8_t tlsMemoryCategory __attribute__((tls_model("initial-exec"))) = 0;
std::atomic<int64_t> gLiveBytes{0};
std::atomic<int64_t> gPeakBytes{0};

namespace {

// One capture. Sessions are deliberately leaked: threads still running (and frees arriving from
// them) may touch their buffers after the capture stopped.
struct ActiveCapture {
  CaptureConfig config;
  uint64_t generation = 0;
  core::Session* session = nullptr;
  std::unique_ptr<trace::ShardWriter> writer;  // in-process SQLite (TRACERUN_WRITER=sqlite)
  std::unique_ptr<core::RawShardWriter> raw;   // or the raw shard, converted at stop
  core::TrackId asyncTrack = 0;
  std::once_flag asyncTrackOnce;
  // Flushes the writer's pending span chunks every kFlushPeriod, so a process that dies or calls
  // _exit loses at most that much (the drain thread alone commits rows but holds spans back).
  std::thread flusher;
  std::mutex flushMu;
  std::condition_variable flushCv;
  bool stopFlusher = false;
};

constexpr auto kFlushPeriod = std::chrono::milliseconds(1000);

// Blocks every signal on this thread while it lives: threads started meanwhile inherit the mask,
// so SIGINT/SIGTERM handlers always run on the program's own threads.
struct BlockSignals {
  sigset_t old;
  BlockSignals() {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
  }
  ~BlockSignals() { ::pthread_sigmask(SIG_SETMASK, &old, nullptr); }
  BlockSignals(const BlockSignals&) = delete;
  BlockSignals& operator=(const BlockSignals&) = delete;
};

void flusherMain(ActiveCapture* a) {
  std::unique_lock<std::mutex> lock(a->flushMu);
  const auto period = std::max<std::chrono::milliseconds>(
      kFlushPeriod, std::chrono::milliseconds(a->config.drain_interval_ms));
  while (!a->flushCv.wait_for(lock, period, [a] { return a->stopFlusher; })) {
    lock.unlock();
    core::recalibrateClock(std::chrono::nanoseconds(period).count());  // keep nowNs() on time
    try {
      if (a->raw) {
        a->raw->flush();
      } else {
        a->writer->flush();
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: writing %s failed: %s\n", a->config.output.c_str(), e.what());
      return;
    }
    lock.lock();
  }
}

std::mutex gLifecycleMu;
// Set while stopCapture() closes the shard.
std::atomic<bool> gClosing{false};
// A terminating signal noted by its handler (onTerminatingSignal), waiting for the shard to be
// whole: the close that ends (stopCapture) or the closer thread after it ends the process by it.
std::atomic<int> gDeferredSignal{0};
// Terminating signals that arrived while a close was running: the second ends the process at once.
std::atomic<int> gSignalsDuringClose{0};
// Set on the thread that runs stopCapture()'s close, for as long as it does. Read by the signal
// handler: initial-exec, so reading it never calls into the dynamic linker.
__thread bool tlsClosingHere __attribute__((tls_model("initial-exec"))) = false;

// The signals the capture handles where the program kept the default action (their default ends
// the process before its shard is closed): SIGTERM (launchers, schedulers), SIGHUP (a closed
// terminal), SIGINT (Ctrl-C; not in a Python interpreter: installSignalHandlers).
constexpr std::array<int, 3> kTerminatingSignals = {SIGTERM, SIGHUP, SIGINT};

// The default action for `sig` again (async-signal-safe: handlers call it before re-raising).
void restoreDefaultAction(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
}

// Ends the process by `sig` now: its default action, sent to the process (the calling thread may
// block it; a program thread takes it). Async-signal-safe.
void endProcessBy(int sig) {
  restoreDefaultAction(sig);
  ::kill(::getpid(), sig);
}

// How long a terminating signal's close may take (the last capture's signal_close_ms).
constexpr int kSignalCloseMsDefault = 10000;
std::atomic<int> gSignalCloseMs{kSignalCloseMsDefault};

std::atomic<ActiveCapture*> gCurrent{nullptr};  // the last capture started (leaked, see above)
std::vector<CaptureHooks> gHooks;
uint64_t gNextGeneration = 1;
std::atomic<uint64_t> gStats[static_cast<int>(Stat::kCount)];

const char* statName(Stat s) {
  switch (s) {
    case Stat::kStackOverflow:
      return "capture_stack_overflow";
    case Stat::kUnmatchedEnd:
      return "capture_unmatched_ends";
    case Stat::kClosedByParent:
      return "capture_spans_closed_by_parent";
    case Stat::kFlowMissing:
      return "capture_backward_without_forward";
    case Stat::kMemoryUnrecorded:
      return "capture_memory_events_unrecorded";
    case Stat::kNameCacheMisses:
      return "capture_names_interned";
    case Stat::kShapeCacheMisses:
      return "capture_shapes_interned";
    case Stat::kTensorIdsDropped:
      return "capture_tensor_ids_dropped";
    case Stat::kCount:
      break;
  }
  return "capture_unknown";
}

}  // namespace

const CaptureConfig& activeConfig() noexcept {
  static const CaptureConfig kNone;
  const ActiveCapture* a = gCurrent.load(std::memory_order_acquire);
  return a != nullptr ? a->config : kNone;
}

core::TrackId asyncTrack() noexcept {
  ActiveCapture* a = gCurrent.load(std::memory_order_acquire);
  if (a == nullptr) return 0;
  // Made on the first async span, so traces without any have no empty "async" track.
  std::call_once(a->asyncTrackOnce, [a] {
    try {
      a->asyncTrack = a->session->tracks().add(core::TrackKind::kAsync, 0, "async");
    } catch (...) {
    }
  });
  return a->asyncTrack;
}

void countStat(Stat s, uint64_t n) noexcept {
  gStats[static_cast<int>(s)].fetch_add(n, std::memory_order_relaxed);
}
uint64_t statValue(Stat s) noexcept {
  return gStats[static_cast<int>(s)].load(std::memory_order_relaxed);
}

void addCaptureHooks(CaptureHooks hooks) {
  std::lock_guard<std::mutex> lock(gLifecycleMu);
  gHooks.push_back(hooks);
}

// ---- thread registration ------------------------------------------------------------------------

namespace {

// Owns this thread's ThreadState. Touched only after Session::threadBuffer() has run on the
// thread, so it is destroyed before the Session's own thread-local (destruction runs in reverse
// order of construction) and never outlives the buffer it points to.
struct ThreadOwner {
  std::unique_ptr<ThreadState> state;
  ~ThreadOwner();
};
__thread bool tlsExiting = false;
thread_local ThreadOwner tlsOwner;

ThreadOwner::~ThreadOwner() {
  tlsExiting = true;
  tlsThreadState = nullptr;
}

std::string threadName() {
  char name[17] = {};
  if (::prctl(PR_GET_NAME, name, 0, 0, 0) != 0 || name[0] == '\0') return {};
  return name;
}

}  // namespace

void setTscClock(bool on) noexcept {
  if (on) {
    core::enableTscClock();
  } else {
    core::disableTscClock();
  }
}

ThreadState* threadStateSlow() noexcept {
  if (tlsExiting) return nullptr;
  const uint64_t g = gActiveGeneration.load(std::memory_order_acquire);
  ActiveCapture* a = gCurrent.load(std::memory_order_acquire);
  if (g == 0 || a == nullptr || a->generation != g) return nullptr;
  try {
    const std::string name = threadName();
    core::ThreadBuffer& buffer = a->session->threadBuffer(name.empty() ? nullptr : name.c_str());
    ThreadOwner& owner = tlsOwner;
    if (!owner.state) owner.state = std::make_unique<ThreadState>();
    ThreadState* t = owner.state.get();
    // (Re)bind to this capture: ids of the old session's strings mean nothing here.
    t->generation = g;
    t->session = a->session;
    t->buffer = &buffer;
    t->depth = 0;
    t->userTop = -1;
    t->pendingStep = 0;
    t->stepFrame = -1;
    t->optimizerSteps = 0;
    t->programMarksSteps = false;
    t->stepEndDeferred = false;
    t->names = NameCache();
    t->shapes = ShapeCache();
    if (t->seqMap != nullptr) t->seqMap->track.store(buffer.track, std::memory_order_relaxed);
    tlsThreadState = t;
    return t;
  } catch (...) {
    return nullptr;
  }
}

// ---- start/stop ---------------------------------------------------------------------------------

namespace {
void installSignalHandlers();
void installForkHandler();
// The close's milestones, for a signal handler waiting on them (see "signals and fork" below).
void announceRecordsSafe();
void announceClosed();
void forgetCloseAnnouncements();
}  // namespace

namespace {

uint64_t fileBytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// The SQLite shard's options for this capture (the in-process writer's, and the raw writer's
// placeholder shard).
trace::ShardOptions shardOptionsOf(const CaptureConfig& config) {
  trace::ShardOptions options;
  options.path = config.output;
  options.rank = config.rank;
  options.world_size = config.world_size;
  options.command = config.command;
  options.flush_interval_ms = config.drain_interval_ms;
  options.clock_offset_ns = config.clock_offset_ns;
  return options;
}

// The capture's writer: a raw shard beside the output (converted at stop), or the in-process
// SQLite writer; either way with the capture's meta rows and its drain thread started.
void openWriter(ActiveCapture& a) {
  const CaptureConfig& config = a.config;
  std::vector<std::pair<std::string, std::string>> meta = {
      {"capture", captureWordsOf(config).text()}, {"capture_shapes", config.shapes ? "1" : "0"}};
  if (!config.target.empty()) meta.emplace_back("capture_target", config.target);
  if (config.restart > 0) meta.emplace_back("restart", std::to_string(config.restart));
  if (!config.traced_ranks.empty()) meta.emplace_back("traced_ranks", config.traced_ranks);
  const BlockSignals block;  // the drain thread inherits it
  if (config.raw_writer) {
    // The shard exists from the start, as with the SQLite writer: an empty one, marked incomplete,
    // that the conversion replaces. Launchers, `tracerun merge SHARD` and the merge-by-hand lines
    // name shards; the merge reads SHARD.raw beside a shard in its place (merge.h).
    {
      core::Session none(2);
      trace::ShardOptions placeholder = shardOptionsOf(config);
      placeholder.complete = false;
      trace::ShardWriter(none, placeholder).close();
    }
    core::RawShardOptions options;
    options.path = trace::rawShardPath(config.output);
    // The conversion's room is held while recording (raw_shard_writer.h): what the shard will
    // need beyond the placeholder, whose room the conversion reuses (raw_convert.h).
    options.reserve_path = trace::rawReservePath(config.output);
    options.shard_base_bytes = fileBytes(config.output);
    options.rank = config.rank;
    options.world_size = config.world_size;
    options.command = config.command;
    options.drain_interval_ms = config.drain_interval_ms;
    options.clock_offset_ns = config.clock_offset_ns;
    a.raw = std::make_unique<core::RawShardWriter>(*a.session, options);
    for (const auto& [k, v] : meta) a.raw->setMeta(k, v);
    a.raw->start();
    return;
  }
  a.writer = std::make_unique<trace::ShardWriter>(*a.session, shardOptionsOf(config));
  for (const auto& [k, v] : meta) a.writer->setMeta(k, v);
  a.writer->start();
}

// The shard's stats rows for the capture's own counters.
void setCaptureStats(ActiveCapture& a) {
  auto put = [&a](const std::string& name, int64_t v, trace::Severity sev) {
    if (a.raw) {
      a.raw->setStat(name, v, static_cast<core::StatSeverity>(static_cast<int>(sev)));
    } else {
      a.writer->setStat(name, v, sev);
    }
  };
  for (int i = 0; i < static_cast<int>(Stat::kCount); ++i) {
    const auto s = static_cast<Stat>(i);
    const auto v = static_cast<int64_t>(statValue(s));
    const bool bad = s == Stat::kStackOverflow || s == Stat::kMemoryUnrecorded;
    put(statName(s), v, v > 0 && bad ? trace::Severity::kWarning : trace::Severity::kInfo);
  }
  put("memory_live_bytes_at_end", gLiveBytes.load(), trace::Severity::kInfo);
  put("memory_peak_bytes", gPeakBytes.load(), trace::Severity::kInfo);
}

// Closes the writer; a raw shard is then converted into the SQLite shard and removed. When the
// conversion fails (no room after all) the raw file stays whole beside the shard, and the line
// says so: the launcher converts it again, `tracerun merge` reads it. Throws what failed.
void closeWriter(ActiveCapture& a) {
  setCaptureStats(a);
  if (!a.raw) {
    a.writer->close();
    return;
  }
  a.raw->close();         // also gives the conversion the room it held
  announceRecordsSafe();  // what follows is the conversion, which needs nothing of the program's
  if (!a.config.convert_at_stop && !a.raw->failed()) return;
  const std::string rawPath = a.raw->path();
  const uint64_t placeholderBytes = fileBytes(a.config.output);
  try {
    const int64_t t0 = core::nowNs();
    trace::convertRawShard(rawPath, a.config.output);
    if (env("TRACERUN_VERBOSE")) {  // what sizes the conversion's room (trace-format.md)
      const uint64_t shardBytes = fileBytes(a.config.output);
      std::fprintf(stderr,
                   "tracerun: converted %s: %llu raw bytes (%llu records) into %llu shard bytes "
                   "(%llu more than the placeholder) in %.3f s\n",
                   rawPath.c_str(), static_cast<unsigned long long>(a.raw->bytesWritten()),
                   static_cast<unsigned long long>(a.raw->recordsWritten()),
                   static_cast<unsigned long long>(shardBytes),
                   static_cast<unsigned long long>(
                       shardBytes > placeholderBytes ? shardBytes - placeholderBytes : 0),
                   static_cast<double>(core::nowNs() - t0) * 1e-9);
    }
  } catch (const trace::TraceError& e) {
    throw trace::TraceError(std::string(e.what()) + "; every record written is kept in " + rawPath +
                            " (`tracerun merge` reads it beside the shard)");
  }
  ::unlink(rawPath.c_str());
  if (a.raw->failed()) {
    throw trace::TraceError(rawPath +
                            ": later events were dropped (see the line above); the shard holds "
                            "every record written before them");
  }
}
}  // namespace

bool startCapture(const CaptureConfig& config) {
  std::lock_guard<std::mutex> lock(gLifecycleMu);
  if (gActiveGeneration.load() != 0) {
    std::fprintf(stderr, "tracerun: a capture is already running in this process\n");
    return false;
  }
  if (config.claim) {
    const std::string claim = config.output + ".claim";
    const int fd =
        ::open(claim.c_str(), O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0600);
    if (fd < 0) return false;  // another process of the same target captures this shard
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::write(fd, pid.data(), pid.size()) < 0) { /* the claim itself is what matters */
    }
    ::close(fd);
  }
  // A fresh fit before the writer takes its time origin (clock.h): a line left by an earlier
  // capture drifted unrefitted since, and its first refit could then step it.
  core::disableTscClock();
  core::enableTscClock();
  auto active = std::make_unique<ActiveCapture>();
  active->config = config;
  active->session = new core::Session(config.ring_capacity);  // leaked: see ActiveCapture
  try {
    openWriter(*active);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracerun: capture off: %s\n", e.what());
    return false;
  }
  active->generation = gNextGeneration++;
  const uint64_t generation = active->generation;
  {
    const BlockSignals block;
    active->flusher = std::thread(flusherMain, active.get());
  }
  gCurrent.store(active.release(), std::memory_order_release);  // leaked: see ActiveCapture
  gActiveGeneration.store(generation, std::memory_order_release);
  for (const auto& h : gHooks) {
    if (h.start) h.start(config);
  }
  forgetCloseAnnouncements();  // an earlier capture's close in this process
  gSignalsDuringClose.store(0);
  if (config.signal_handlers) {
    gSignalCloseMs.store(config.signal_close_ms > 0 ? config.signal_close_ms
                                                    : kSignalCloseMsDefault);
    installSignalHandlers();
  }
  installForkHandler();
  if (config.restart > 0) {  // the launcher restarted the group: mark where this run begins
    if (ThreadState* t = threadState()) {
      core::InstantRecord r;
      r.category = core::Category::kPhase;
      r.name = t->intern("restart");
      r.ts_ns = core::nowNs();
      r.value = config.restart;
      t->buffer->ring.tryPush(core::Record::from(r));
    }
  }
  return true;
}

void stopCapture() {
  // Nothing to stop (never started, stopped, or a forked child, where onForkChild cleared it):
  // return before the lock, which a child forked while the parent held it would wait on forever.
  // While another thread is closing the shard (a signal's close on the closer thread), wait for
  // that close instead: a program ending meanwhile (its exit calls this) would otherwise end the
  // process with its shard half written. gClosing is set before the generation is cleared, so
  // whoever sees generation 0 from a close in progress also sees gClosing.
  // The closing thread itself (code inside the close that ends up here) returns: the lock is its.
  if ((gActiveGeneration.load() == 0 && !gClosing.load()) || tlsClosingHere) return;
  std::lock_guard<std::mutex> lock(gLifecycleMu);
  // A terminating signal noted before or during this close (onTerminatingSignal) ends the process
  // once the shard is whole (a rank the launcher stopped while it was ending on its own).
  struct Closing {
    Closing() {
      tlsClosingHere = true;
      gClosing.store(true);
    }
    ~Closing() {
      gClosing.store(false);
      tlsClosingHere = false;
      // The noted signal before the announcement: a handler parked until the close ends must find
      // its signal pending when it returns (its thread blocks it meanwhile), not run on.
      if (const int sig = gDeferredSignal.exchange(0); sig != 0) endProcessBy(sig);
      announceClosed();
    }
  } closing;
  const uint64_t generation = gActiveGeneration.exchange(0);
  ActiveCapture* a = gCurrent.load(std::memory_order_acquire);
  if (generation == 0 || a == nullptr || a->generation != generation) return;
  for (auto it = gHooks.rbegin(); it != gHooks.rend(); ++it) {
    try {  // a hook that throws must not leave the shard unclosed (this runs in destructors)
      if (it->stop) it->stop();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: a capture's stop step failed: %s\n", e.what());
    } catch (...) {
      std::fprintf(stderr, "tracerun: a capture's stop step failed\n");
    }
  }
  {
    std::lock_guard<std::mutex> flushLock(a->flushMu);
    a->stopFlusher = true;
  }
  a->flushCv.notify_all();
  if (a->flusher.joinable()) a->flusher.join();
  try {
    closeWriter(*a);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracerun: closing %s failed: %s\n", a->config.output.c_str(), e.what());
    // The launcher's sign that this shard's writer failed (a full disk has room for an empty
    // file's name, not for the shard): SHARD.close-failed, holding the message when it fits.
    const std::string marker = a->config.output + ".close-failed";
    const int fd =
        ::open(marker.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const std::string line = std::string(e.what()) + "\n";
      if (::write(fd, line.data(), line.size()) < 0) {
      }
      ::close(fd);
    }
  }
}

void startFromEnvironment() {
  std::string why;
  auto config = configFromEnvironment(&why);
  if (!config) {
    if (env("TRACERUN_VERBOSE")) std::fprintf(stderr, "tracerun: not capturing: %s\n", why.c_str());
    return;
  }
  startCapture(*config);
}

// ---- signals and fork ---------------------------------------------------------------------------
//
// A signal handler may not take locks or touch SQLite. SIGINT/SIGTERM/SIGHUP handlers (installed
// only where the program kept the default action) note the signal in gDeferredSignal and write its
// number to two pipes. A closer thread reads the first and runs stopCapture(); whoever then finds
// the noted signal (the close's end, or the closer after it) restores the default action and sends
// it to the process, which still dies of that signal, with its shard whole. A watchdog thread reads
// the second pipe and ends the process by the signal anyway if the close has not ended within
// CaptureConfig::signal_close_ms (10 s): a close stuck on a dead file system must not make the
// process immortal. Of the signals that arrive while a close runs, the second ends the process at
// once. A signal with nothing recording or closing takes its default action at once.
// Meanwhile the handler keeps the thread it interrupted where it is, so the program does no more
// (and logs no more) than its trace holds: until the close has written every record, then until it
// has ended (the raw shard's conversion), each part at most kSignalParkMs: a thread holding a lock
// the close needs (a name table, the thread registry, a driver's lock under CUPTI's flush, a malloc
// arena) then lets go of it and the close goes on, the program running on unrecorded until the
// close ends it. (The handler used to wait up to 10 s for the whole close: the shard of such a
// thread's process stayed half written.)
// Capture threads block every signal, so the handlers and the final signal land on program threads.
// In a Python interpreter SIGINT is left to Python (pythonOwnsSigint).

namespace {

constexpr int kSignalParkMs = 2000;
int gCloseRequestPipe[2] = {-1, -1};     // handler -> closer: the signal number
int gWatchdogRequestPipe[2] = {-1, -1};  // handler -> watchdog: the same
// Readable once the close has written every record / once it ended: waiting handlers poll them
// (nobody reads them until forgetCloseAnnouncements(), at the next start).
int gRecordsSafePipe[2] = {-1, -1};
int gClosedPipe[2] = {-1, -1};
int gWatchdogDonePipe[2] = {-1, -1};  // closer -> watchdog: one byte per close served
pid_t gOwnerPid = 0;                  // the process whose closer and watchdog read the pipes

void writeToStderr(const char* text, size_t n) {
  if (::write(STDERR_FILENO, text, n) < 0) {
  }
}

int elapsedMs(const timespec& since) {
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<int>((now.tv_sec - since.tv_sec) * 1000LL +
                          (now.tv_nsec - since.tv_nsec) / 1000000LL);
}

// Waits until `fd` is readable, at most `limitMs` in all: a handled signal that cuts poll short
// (EINTR: torch's SIGCHLD handler when DataLoader workers die with the rank) waits again for what
// is left. True when readable. Async-signal-safe.
bool awaitReadable(int fd, int limitMs) {
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    const int left = limitMs - elapsedMs(start);
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, left);
    if (ready > 0) return true;
    if (ready == 0 || errno != EINTR) return false;
  }
}

void onTerminatingSignal(int sig) {
  const int savedErrno = errno;
  // Nothing recording and nothing closing (never started here, or stopped already: Python's exit
  // close, tracerun_annotate_close): the default action, on this thread, as without tracerun.
  if (gActiveGeneration.load() == 0 && !gClosing.load()) {
    endProcessBy(sig);  // pending here (blocked in this handler); delivered on return
    errno = savedErrno;
    return;
  }
  // Read before the closer can begin its close: a close that began earlier is the program ending
  // (or an earlier signal's close), which ends the process by this signal when the shard is
  // whole; this thread may be the one closing, so it does not wait. The second signal that comes
  // during a close ends the process now (a close stuck on a dead file system).
  const bool closingAlready = gClosing.load() || tlsClosingHere;
  gDeferredSignal.store(sig);
  if (closingAlready) {
    if (gSignalsDuringClose.fetch_add(1) >= 1) {
      static const char kSecond[] =
          "tracerun: second signal while the trace is being closed: ending now "
          "(the shard keeps what it wrote; tracerun merge reads it)\n";
      writeToStderr(kSecond, sizeof kSecond - 1);
      endProcessBy(sig);
      errno = savedErrno;
      return;
    }
    static const char kMessage[] =
        "tracerun: signal while the trace is being closed: closing it first "
        "(a second signal ends the process now)\n";
    writeToStderr(kMessage, sizeof kMessage - 1);
  }
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (::getpid() == gOwnerPid && ::write(gCloseRequestPipe[1], &byte, 1) == 1) {
    if (::write(gWatchdogRequestPipe[1], &byte, 1) != 1) {
    }
    if (!closingAlready) {  // each part of the park at most kSignalParkMs
      const int limitMs = gSignalCloseMs.load();
      timespec start{};
      ::clock_gettime(CLOCK_MONOTONIC, &start);
      if (awaitReadable(gRecordsSafePipe[0], std::min(kSignalParkMs, limitMs))) {
        awaitReadable(gClosedPipe[0], std::min(kSignalParkMs, limitMs - elapsedMs(start)));
      }
    }
    errno = savedErrno;
    return;  // the close ends the process by `sig` once the shard is whole
  }
  gDeferredSignal.store(0);  // no closer here (a process forked without fork handlers)
  endProcessBy(sig);
  errno = savedErrno;
}

void closerMain() {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = ::read(gCloseRequestPipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    stopCapture();  // waits for a close already running on another thread
    // stopCapture() ends the process by a signal noted during its close; one noted before the
    // close began, or with nothing left to close, is this thread's to act on: before the
    // announcement, as there.
    if (const int sig = gDeferredSignal.exchange(0); sig != 0) endProcessBy(sig);
    announceClosed();  // also when there was nothing left to close
    const unsigned char done = 1;
    if (::write(gWatchdogDonePipe[1], &done, 1) != 1) {
    }
  }
}

void announceRecordsSafe() {
  const unsigned char byte = 1;
  if (gRecordsSafePipe[1] >= 0 && ::write(gRecordsSafePipe[1], &byte, 1) != 1) {
  }
}

void announceClosed() {
  announceRecordsSafe();
  const unsigned char byte = 1;
  if (gClosedPipe[1] >= 0 && ::write(gClosedPipe[1], &byte, 1) != 1) {
  }
}

void forgetCloseAnnouncements() {
  unsigned char bytes[64];
  for (int fd : {gRecordsSafePipe[0], gClosedPipe[0]}) {
    while (fd >= 0 && ::read(fd, bytes, sizeof bytes) > 0) {
    }
  }
}

// Waits for one close per request, each at most gSignalCloseMs from when the request was read.
void watchdogMain() {
  for (;;) {
    unsigned char byte = 0;
    const ssize_t n = ::read(gWatchdogRequestPipe[0], &byte, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    if (awaitReadable(gWatchdogDonePipe[0], gSignalCloseMs.load())) {
      unsigned char done = 0;
      if (::read(gWatchdogDonePipe[0], &done, 1) != 1) {
      }
      continue;
    }
    static const char kLate[] =
        "tracerun: the trace's close did not end in time after a signal: ending now "
        "(the shard keeps what it wrote; tracerun merge reads it)\n";
    writeToStderr(kLate, sizeof kLate - 1);
    endProcessBy(byte);
  }
}

// In a Python interpreter SIGINT is Python's: CPython turns it into KeyboardInterrupt only where
// it still had the default action when Python started, which is after this library's constructor,
// so a handler here would skip the program's `except KeyboardInterrupt` and `finally` blocks.
// There the capture closes at Python's exit instead (sitecustomize.py registers
// tracerun_annotate_close with Py_AtExit), which an uncaught KeyboardInterrupt reaches before
// Python ends the process by SIGINT.
bool pythonOwnsSigint() {
  return ::dlsym(RTLD_DEFAULT, "Py_Initialize") != nullptr;
}

void installSignalHandlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int* fds : {gCloseRequestPipe, gWatchdogRequestPipe, gRecordsSafePipe, gClosedPipe,
                     gWatchdogDonePipe}) {
      if (::pipe2(fds, O_CLOEXEC) != 0) return;
      // Nobody blocks on a full pipe (a storm of signals): the byte is then dropped.
      ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
    }
    for (int fd : {gRecordsSafePipe[0], gClosedPipe[0]}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
    gOwnerPid = ::getpid();
    {
      const BlockSignals block;  // process lifetime, each blocked in read() when idle
      std::thread(closerMain).detach();
      std::thread(watchdogMain).detach();
    }
    const bool python = pythonOwnsSigint();
    for (int sig : kTerminatingSignals) {
      if (sig == SIGINT && python) continue;
      struct sigaction current {};
      if (::sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = onTerminatingSignal;
      // Everything but the synchronous faults waits for the (short) handler.
      ::sigfillset(&sa.sa_mask);
      for (int fault : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS}) {
        ::sigdelset(&sa.sa_mask, fault);
      }
      sa.sa_flags = SA_RESTART;
      ::sigaction(sig, &sa, nullptr);
    }
  });
}

// A forked child (DataLoader workers, subprocess helpers) does not capture: the writer thread
// does not exist there and the shard belongs to the parent.
void onForkChild() {
  gActiveGeneration.store(0);
  // A fork during the parent's close copies gClosing set: here no close runs (stopCapture would
  // wait on the lifecycle lock the parent held, forever), and no signal waits for one.
  gClosing.store(false);
  gDeferredSignal.store(0);
  gSignalsDuringClose.store(0);
  tlsThreadState = nullptr;
  // No refits here: clock_gettime, and no line copied mid-refit (an odd sequence forever).
  core::disableTscClock();
  for (int sig : kTerminatingSignals) {
    struct sigaction current {};
    if (::sigaction(sig, nullptr, &current) == 0 && current.sa_handler == onTerminatingSignal) {
      restoreDefaultAction(sig);
    }
  }
}

void installForkHandler() {
  static std::once_flag once;
  std::call_once(once, [] { ::pthread_atfork(nullptr, nullptr, onForkChild); });
}

}  // namespace

}  // namespace tracerun::interpose
