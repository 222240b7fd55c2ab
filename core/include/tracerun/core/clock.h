// The one clock of a trace: CLOCK_MONOTONIC in integer nanoseconds. Per-rank offsets to rank 0 are
// applied when shards are merged (trace/), never here.
//
// nowNs() reads the TSC instead of calling clock_gettime once a capture has enabled it (a capture
// reads the clock twice per op; rdtsc costs ~13 ns here, clock_gettime ~25 ns). The TSC is mapped
// onto CLOCK_MONOTONIC by a line fitted against clock_gettime, refitted about every second by
// recalibrateClock(): each refit starts where the previous line is at that moment (so nowNs()
// never steps back) and slopes so that it meets CLOCK_MONOTONIC one period later, the way adjtime
// slews. The error against CLOCK_MONOTONIC stays within a few microseconds right after
// enableTscClock() and a few hundred ns once refitted (tested in capture_base_test); rank offsets
// and CUPTI alignment read this same nowNs(). Used only where the kernel itself runs
// CLOCK_MONOTONIC on an invariant TSC (clocksource "tsc", constant_tsc and nonstop_tsc), else
// clock_gettime stays.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace tracerun::core {

inline int64_t monotonicNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

namespace clock_detail {

__extension__ typedef unsigned __int128 Uint128;

// ns = baseNs + ((tsc - baseTsc) * nsPerTick32) >> 32, published under a seqlock (odd = writing).
// Written only under enableTscClock/recalibrateClock's callers' serialization (one capture).
struct TscLine {
  std::atomic<uint32_t> seq{0};
  std::atomic<bool> enabled{false};
  std::atomic<uint64_t> baseTsc{0};
  std::atomic<int64_t> baseNs{0};
  std::atomic<uint64_t> nsPerTick32{0};  // ns per tick, 32.32 fixed point
  // The calibration anchor (first fit) and the long-run rate, for the refits.
  uint64_t anchorTsc = 0;
  int64_t anchorNs = 0;
};
inline TscLine gLine;

inline uint64_t readTsc() noexcept {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;
#endif
}

// A (tsc, CLOCK_MONOTONIC) pair read as close together as this thread manages: the tightest of a
// few brackets, the TSC taken at the middle of the clock_gettime bracket.
inline void readPair(uint64_t* tsc, int64_t* ns) noexcept {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 5; ++i) {
    const uint64_t t0 = readTsc();
    const int64_t n = monotonicNs();
    const uint64_t t1 = readTsc();
    if (t1 - t0 < best) {
      best = t1 - t0;
      *tsc = t0 + (t1 - t0) / 2;
      *ns = n;
    }
  }
}

inline bool fileStartsWith(const char* path, const char* text) noexcept {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return false;
  char buf[64] = {};
  const bool ok =
      std::fgets(buf, sizeof buf, f) != nullptr && std::strncmp(buf, text, std::strlen(text)) == 0;
  std::fclose(f);
  return ok;
}

inline bool cpuHasFlags() noexcept {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return false;
  char line[4096];
  bool constant = false, nonstop = false;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "flags", 5) != 0) continue;
    constant = std::strstr(line, " constant_tsc") != nullptr;
    nonstop = std::strstr(line, " nonstop_tsc") != nullptr;
    break;
  }
  std::fclose(f);
  return constant && nonstop;
}

inline void publish(uint64_t baseTsc, int64_t baseNs, uint64_t nsPerTick32) noexcept {
  TscLine& l = gLine;
  const uint32_t s = l.seq.load(std::memory_order_relaxed);
  l.seq.store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  l.baseTsc.store(baseTsc, std::memory_order_relaxed);
  l.baseNs.store(baseNs, std::memory_order_relaxed);
  l.nsPerTick32.store(nsPerTick32, std::memory_order_relaxed);
  l.seq.store(s + 2, std::memory_order_release);
}

inline int64_t lineAt(uint64_t tsc, uint64_t baseTsc, int64_t baseNs, uint64_t mult) noexcept {
  // Signed: a thread may read a TSC a little below baseTsc (another CPU, or a refit in between).
  const int64_t dt = static_cast<int64_t>(tsc - baseTsc);
  if (dt >= 0) return baseNs + static_cast<int64_t>((Uint128(uint64_t(dt)) * mult) >> 32);
  return baseNs - static_cast<int64_t>((Uint128(uint64_t(-dt)) * mult) >> 32);
}

// A refit's new slope, anchored where the current line is at the moment of publishing, with the
// TSC read inside the write section: a reader whose TSC read comes later sees the sequence change
// and retries with the new line, so no reading steps back however long the refitting thread was
// preempted between measuring and publishing (before, the anchor was the measurement's TSC, and
// readings in between went back by the delay times the slope change when it published).
inline void republish(uint64_t nsPerTick32) noexcept {
  TscLine& l = gLine;
  const uint32_t s = l.seq.load(std::memory_order_relaxed);
  l.seq.store(s + 1, std::memory_order_relaxed);
#if defined(__x86_64__)
  _mm_mfence();  // the Intel manual's recipe: the TSC is read after the odd sequence is visible
  _mm_lfence();
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  const uint64_t tsc = readTsc();
  const int64_t ns = lineAt(tsc, l.baseTsc.load(std::memory_order_relaxed),
                            l.baseNs.load(std::memory_order_relaxed),
                            l.nsPerTick32.load(std::memory_order_relaxed));
  l.baseTsc.store(tsc, std::memory_order_relaxed);
  l.baseNs.store(ns, std::memory_order_relaxed);
  l.nsPerTick32.store(nsPerTick32, std::memory_order_relaxed);
  l.seq.store(s + 2, std::memory_order_release);
}

}  // namespace clock_detail

// Always inlined: left to GCC's heuristics, a change elsewhere in the capture's onStart made it an
// out-of-line call there (docs/performance.md, "c10d groups").
[[gnu::always_inline]] inline int64_t nowNs() noexcept {
  using namespace clock_detail;
  const TscLine& l = gLine;
  if (__builtin_expect(l.enabled.load(std::memory_order_relaxed), 1)) {
    for (;;) {
      const uint32_t s = l.seq.load(std::memory_order_acquire);
      const uint64_t baseTsc = l.baseTsc.load(std::memory_order_relaxed);
      const int64_t baseNs = l.baseNs.load(std::memory_order_relaxed);
      const uint64_t mult = l.nsPerTick32.load(std::memory_order_relaxed);
      // Inside the read section: a refit that published after this read makes it retry (a TSC
      // read after the section, on a thread preempted there, was mapped by a stale line).
      const uint64_t tsc = readTsc();
      std::atomic_thread_fence(std::memory_order_acquire);
      if (__builtin_expect((s & 1) == 0 && l.seq.load(std::memory_order_relaxed) == s, 1)) {
        return lineAt(tsc, baseTsc, baseNs, mult);
      }
    }
  }
  return monotonicNs();
}

inline bool tscClockEnabled() noexcept {
  return clock_detail::gLine.enabled.load(std::memory_order_relaxed);
}

// Switches nowNs() to the TSC when the kernel's CLOCK_MONOTONIC runs on an invariant TSC; measures
// the rate over `calibrateMs` (sleeping). Idempotent; returns whether the TSC is in use. Not
// thread-safe against itself or recalibrateClock() (the capture lifecycle lock serializes them).
// TRACERUN_CLOCK=monotonic keeps clock_gettime.
inline bool enableTscClock(int calibrateMs = 10) noexcept {
  using namespace clock_detail;
  TscLine& l = gLine;
  if (l.enabled.load(std::memory_order_relaxed)) return true;
#if !defined(__x86_64__)
  return false;
#else
  if (const char* v = std::getenv("TRACERUN_CLOCK"); v != nullptr && std::strcmp(v, "tsc") != 0) {
    return false;
  }
  if (!fileStartsWith("/sys/devices/system/clocksource/clocksource0/current_clocksource", "tsc") ||
      !cpuHasFlags()) {
    return false;
  }
  uint64_t t0 = 0, t1 = 0;
  int64_t n0 = 0, n1 = 0;
  readPair(&t0, &n0);
  const timespec pause{0, static_cast<long>(calibrateMs) * 1'000'000};
  nanosleep(&pause, nullptr);
  readPair(&t1, &n1);
  if (t1 <= t0 || n1 <= n0) return false;
  const uint64_t mult = static_cast<uint64_t>((Uint128(uint64_t(n1 - n0)) << 32) / (t1 - t0));
  l.anchorTsc = t0;
  l.anchorNs = n0;
  publish(t1, n1, mult);
  l.enabled.store(true, std::memory_order_release);
  return true;
#endif
}

// Back to clock_gettime (benchmarks compare the two); enableTscClock() fits a new line.
inline void disableTscClock() noexcept {
  clock_detail::gLine.enabled.store(false, std::memory_order_relaxed);
}

// A refit's measurement (see the top of this file): the line's error against CLOCK_MONOTONIC now,
// in ns, and the slope that meets CLOCK_MONOTONIC one period from now (0: keep the line). The
// far-off case (an error over 10 x the slew limit: a suspended VM?) steps the line here.
struct ClockRefit {
  int64_t error_ns = 0;
  uint64_t ns_per_tick32 = 0;
};
inline ClockRefit measureClockRefit(int64_t periodNs = 1'000'000'000) noexcept {
  using namespace clock_detail;
  TscLine& l = gLine;
  if (!l.enabled.load(std::memory_order_relaxed)) return {};
  uint64_t tsc = 0;
  int64_t real = 0;
  readPair(&tsc, &real);
  const int64_t onLine = lineAt(tsc, l.baseTsc.load(std::memory_order_relaxed),
                                l.baseNs.load(std::memory_order_relaxed),
                                l.nsPerTick32.load(std::memory_order_relaxed));
  if (tsc <= l.anchorTsc || real <= l.anchorNs) return {onLine - real, 0};
  const int64_t error = onLine - real;
  // The long-run rate (anchor to now), and the ticks one period spans at that rate.
  const Uint128 rate32 = (Uint128(uint64_t(real - l.anchorNs)) << 32) / (tsc - l.anchorTsc);
  const uint64_t periodTicks = static_cast<uint64_t>((Uint128(uint64_t(periodNs)) << 32) / rate32);
  // Meet CLOCK_MONOTONIC one period from now; limit the slew to 1/1000 so time never runs
  // backwards.
  const int64_t maxSlew = periodNs / 1000;
  if (error > 10 * maxSlew || error < -10 * maxSlew) {
    publish(tsc, real, static_cast<uint64_t>(rate32));  // far off (a suspended VM?): step
    return {error, 0};
  }
  int64_t catchUp = real + periodNs - onLine;
  if (catchUp < periodNs - maxSlew) catchUp = periodNs - maxSlew;
  if (catchUp > periodNs + maxSlew) catchUp = periodNs + maxSlew;
  const uint64_t mult =
      periodTicks > 0 ? static_cast<uint64_t>((Uint128(uint64_t(catchUp)) << 32) / periodTicks)
                      : static_cast<uint64_t>(rate32);
  return {error, mult};
}

// Refits the line; call about once a second while capturing. Returns the line's error against
// CLOCK_MONOTONIC just before the refit, in ns (for tests and stats).
inline int64_t recalibrateClock(int64_t periodNs = 1'000'000'000) noexcept {
  const ClockRefit refit = measureClockRefit(periodNs);
  if (refit.ns_per_tick32 != 0) clock_detail::republish(refit.ns_per_tick32);
  return refit.error_ns;
}

}  // namespace tracerun::core
