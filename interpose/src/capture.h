// The capture's process-wide state and lifecycle, and the small internal API every capture source
// (ops, memory, annotations; later collectives and CUPTI) records through. No libtorch here: the
// libtorch parts plug in as CaptureHooks. Not a public header.
//
// Recording from a capture source:
//   if (ThreadState* t = threadState()) { ... t->buffer->ring.tryPush(...); }
// threadState() is null when nothing is capturing or the thread is exiting; the first call on a
// thread registers it with the Session (one lock, one allocation), later calls cost a TLS load
// and a compare.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "capture_words.h"
#include "thread_state.h"

namespace tracerun::interpose {

struct CaptureConfig {
  std::string output;    // shard path; "%r" is replaced by the rank
  bool ops = true;       // ATen ops and autograd nodes
  bool scopes = true;    // user scopes (annotations, record_function)
  bool memory = true;    // CPU allocations and frees
  bool shapes = true;    // input shapes and dtypes of ops
  bool tensors = false;  // input/output tensor identities of ops (dataflow; costs, so opt-in)
  bool comm = true;      // collectives (comm_entry.cpp and CUPTI read TRACERUN_CAPTURE themselves;
  bool cuda = false;     // these three only go into the shard's meta `capture`)
  bool cuda_sync = false;
  int rank = 0;
  int world_size = 1;
  std::string traced_ranks;  // TRACERUN_RANKS as RankSet::text() ("": every rank), for meta
  std::string command;       // for meta
  std::string target;        // what TRACERUN_TARGET named, for meta
  // Records per thread buffer: 16 MiB absorbs a burst of tiny ops (~2-4M records/s here) for
  // ~70-150 ms while the writer catches up; 4 MiB (core's default) overflowed on a small MLP.
  size_t ring_capacity = size_t{1} << 18;
  bool claim = false;  // capture only if `output.claim` can be created (one process per shard)
  bool signal_handlers = true;  // close on SIGTERM/SIGHUP/SIGINT, then end by that signal
  // How long the close a terminating signal starts may take before that signal ends the process
  // anyway (the shard keeps what it wrote; a raw shard is converted by the launcher).
  int signal_close_ms = 10000;
  int drain_interval_ms = 10;   // how often the writer drains the buffers (benchmarks raise it)
  int64_t clock_offset_ns = 0;  // this host's CLOCK_MONOTONIC minus rank 0's (launcher-measured)
  int restart = 0;              // which restart of the group this process belongs to (0: first run)
  // true (the default; TRACERUN_WRITER=sqlite for false): the process appends raw records to
  // OUTPUT.raw and builds the SQLite shard once it stops (docs/trace-format.md, "The raw shard");
  // false: the writer thread runs SQLite while recording.
  bool raw_writer = true;
  // With raw_writer: build the SQLite shard when the capture stops (false: leave OUTPUT.raw for
  // the caller, e.g. a benchmark that times the conversion apart, or the launcher).
  bool convert_at_stop = true;
};

// Environment variables (set by the launcher, or by hand for a program linked with the library):
//   TRACERUN_OUTPUT   shard path, "%r" -> rank (required: nothing starts without it)
//   TRACERUN_TARGET   capture only in this program: an absolute path compared with the realpath
//                     of /proc/self/exe, or a bare name compared with its basename
//   TRACERUN_CAPTURE  comma list of capture words (capture_words.h; unset or empty: its
//                     defaults); an unknown word is said once on stderr and ignored
//   TRACERUN_SHAPES   0 to skip input shapes
//   TRACERUN_CLAIM    1: only the first matching process per shard captures
//   TRACERUN_BUFFER_MB  per-thread record buffer size (default 16 MiB = 262144 records)
//   TRACERUN_DRAIN_MS   writer drain interval (default 10; benchmarks raise it)
//   TRACERUN_WRITER   raw (default: records appended to OUTPUT.raw, SQLite built at stop) or
//                     sqlite (the writer thread runs SQLite while recording)
//   RANK, WORLD_SIZE  torchrun's variables (default 0 and 1)
//   TRACERUN_RANKS    `tracerun --ranks`: start only when RANK is in this list (core/rank_set.h;
//                     a malformed list is said once and every rank is traced)
//   TRACERUN_CLOCK_OFFSET_NS  this host's clock minus rank 0's, stored in the shard's ranks row
//   TRACERUN_RESTART  restart count of the group (the launcher's); > 0 adds a "restart" instant
//   TRACERUN_STATUS   per-rank status file for the launcher's status line (status_file.cpp)
// Returns the configuration, or nullopt with the reason in *why.
std::optional<CaptureConfig> configFromEnvironment(std::string* why);
// The capture words `config` asks for (the shard's meta `capture`).
CaptureSet captureWordsOf(const CaptureConfig& config);
// Whether TRACERUN_TARGET `target` names the program at `exe` (a resolved path).
bool targetMatches(const std::string& target, const std::string& exe);
std::string selfExecutable();  // realpath of /proc/self/exe

// What the libtorch side installs when a capture starts and removes when it stops.
struct CaptureHooks {
  void (*start)(const CaptureConfig&) = nullptr;
  void (*stop)() = nullptr;
};
void addCaptureHooks(CaptureHooks hooks);  // call before startCapture (op_capture.cpp does)
CaptureHooks opCaptureHooks();             // op_capture.cpp: RecordFunction callbacks
CaptureHooks memoryCaptureHooks();         // memory_capture.cpp: the tracing CPU allocator

// Starts a capture writing the shard config.output. Returns false (after one line on stderr) when
// the shard cannot be created or a capture is already running.
bool startCapture(const CaptureConfig& config);
// Stops recording, drains every buffer, closes the shard. Idempotent; safe from any thread except
// a signal handler (see capture.cpp for the signal path).
void stopCapture();
// For benchmarks: nowNs() on the TSC (the default where usable, core/clock.h) or clock_gettime.
void setTscClock(bool on) noexcept;
// Reads TRACERUN_* and starts when told to; the static initializer calls it. Quiet when not told.
void startFromEnvironment();

// ---- for capture sources ------------------------------------------------------------------------

// 0 when not capturing, else the current capture's generation.
extern std::atomic<uint64_t> gActiveGeneration;
extern __thread ThreadState* tlsThreadState __attribute__((tls_model("initial-exec")));
// This thread's memory category (core::MemoryCategory), set by annotation MemoryTags.
extern __thread uint8_t tlsMemoryCategory __attribute__((tls_model("initial-exec")));

ThreadState* threadStateSlow() noexcept;

inline ThreadState* threadState() noexcept {
  const uint64_t g = gActiveGeneration.load(std::memory_order_relaxed);
  if (g == 0) return nullptr;
  ThreadState* t = tlsThreadState;
  if (t != nullptr && t->generation == g) return t;
  return threadStateSlow();
}
inline bool capturing() noexcept {
  return gActiveGeneration.load(std::memory_order_relaxed) != 0;
}

const CaptureConfig& activeConfig() noexcept;  // meaningful while capturing
core::TrackId asyncTrack() noexcept;           // the process's track for async scopes

// Rare events, counted process-wide and written to the stats table at close.
enum class Stat : int {
  kStackOverflow = 0,  // spans deeper than kMaxDepth (not recorded)
  kUnmatchedEnd,       // an end with no matching start on this thread's stack
  kClosedByParent,     // spans closed because an enclosing span ended first
  kFlowMissing,        // backward nodes whose forward op was not found
  kMemoryUnrecorded,   // allocations/frees on a thread that could not record (exiting)
  kNameCacheMisses,    // names interned (once per distinct name per thread when caches work)
  kShapeCacheMisses,   // shape signatures formatted and interned
  kTensorIdsDropped,   // tensor identities beyond kMaxTensorInputs/Outputs of an op (tensors)
  kCount,
};
void countStat(Stat s, uint64_t n = 1) noexcept;
uint64_t statValue(Stat s) noexcept;

// Live CPU bytes allocated through the tracing allocator (all threads).
extern std::atomic<int64_t> gLiveBytes;
extern std::atomic<int64_t> gPeakBytes;  // highest gLiveBytes seen

}  // namespace tracerun::interpose
