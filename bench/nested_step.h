// The span nest of one generated training step, shared by the benchmarks that need a
// trainer-shaped trace (timeline_bench, range_stats_bench): step ⊃ 4 phases ⊃ 50 module scopes ⊃
// 3-5 ops of 0.2-20 us. Only the shape and the time arithmetic; each benchmark pushes the spans
// its own way. Not a trace writer.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tracerun/core/records.h"

namespace tracerun::bench {

// Pushes one step starting at `t` and advances `t` past it. `names`: [0] step, [1..3] phases,
// [4..5] module scopes; `opName(rng)` picks each op's name (after its length is drawn).
// push(start, end, depth, name) is called innermost first, as spans end.
template <typename OpName, typename Push>
void pushNestedStep(int64_t& t, std::mt19937_64& rng, const std::vector<core::StringId>& names,
                    OpName opName, Push push) {
  const int64_t step0 = t;
  for (int phase = 0; phase < 4; ++phase) {
    const int64_t p0 = t;
    for (int m = 0; m < 50; ++m) {
      const int64_t m0 = t;
      const int n = 3 + static_cast<int>(rng() % 3);
      for (int op = 0; op < n; ++op) {
        const int64_t len = 200 + static_cast<int64_t>(rng() % 20'000);
        push(t + 100, t + 100 + len, uint16_t{3}, opName(rng));
        t += len + 300;
      }
      push(m0, t + 50, uint16_t{2}, names[4 + m % 2]);
      t += 400;
    }
    push(p0, t + 50, uint16_t{1}, names[1 + phase % 3]);
    t += 2'000;
  }
  push(step0, t + 100, uint16_t{0}, names[0]);
  t += 50'000;
}

}  // namespace tracerun::bench
