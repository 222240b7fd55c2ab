// clock_read_bench: the cost of one core::nowNs() (the TSC line read under its seqlock) against
// clock_gettime and a bare rdtsc, and against the read order used before 2026-11-28 (the TSC read
// after the section's check, which let a preempted reader map a TSC by a stale line). Median ns per
// read of 21 interleaved runs of N reads each; prints the ratios. Not a test: no assertion.
//   build/bench/clock_read_bench [RUNS=21] [READS=2000000]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "tracerun/core/clock.h"

using namespace tracerun::core;

namespace {

// The read order before 2026-11-28: the section checked, then the TSC read (the baseline).
int64_t nowNsReadAfterSection() noexcept {
  using namespace clock_detail;
  const TscLine& l = gLine;
  for (;;) {
    const uint32_t s = l.seq.load(std::memory_order_acquire);
    const uint64_t baseTsc = l.baseTsc.load(std::memory_order_relaxed);
    const int64_t baseNs = l.baseNs.load(std::memory_order_relaxed);
    const uint64_t mult = l.nsPerTick32.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if ((s & 1) == 0 && l.seq.load(std::memory_order_relaxed) == s) {
      return lineAt(readTsc(), baseTsc, baseNs, mult);
    }
  }
}

double nsPerRead(const std::function<int64_t()>& read, int reads) {
  int64_t sink = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < reads; ++i) sink += read();
  const auto t1 = std::chrono::steady_clock::now();
  if (sink == 42) std::puts("");  // keeps the reads
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / reads;
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 21;
  const int reads = argc > 2 ? std::atoi(argv[2]) : 2'000'000;
  if (runs < 1 || reads < 1) {
    std::fprintf(stderr, "usage: clock_read_bench [RUNS>=1] [READS>=1]\n");
    return 2;
  }
  if (!enableTscClock()) {
    std::fprintf(stderr,
                 "clock_read_bench: the TSC clock is not usable here; nothing to compare\n");
    return 1;
  }
  struct Row {
    const char* name;
    std::function<int64_t()> read;
    std::vector<double> ns;
  };
  std::vector<Row> rows = {
      {"clock_gettime(CLOCK_MONOTONIC)", [] { return monotonicNs(); }, {}},
      {"rdtsc alone", [] { return static_cast<int64_t>(clock_detail::readTsc()); }, {}},
      {"nowNs, TSC read after the section", [] { return nowNsReadAfterSection(); }, {}},
      {"nowNs (TSC read inside)", [] { return nowNs(); }, {}},
  };
  for (int r = 0; r < runs; ++r) {
    for (auto& row : rows) row.ns.push_back(nsPerRead(row.read, reads));
  }
  std::printf("ns per read, median of %d interleaved runs of %d reads\n", runs, reads);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double before = median(rows[2].ns);
  for (const auto& row : rows) {
    std::printf("  %-36s %6.2f  (x%.3f the read order before)\n", row.name, median(row.ns),
                median(row.ns) / before);
  }
  return 0;
}
