// One hand-built two-stage 1F1B pipeline step (m = 2), shared by the report's tests
// (tests/e2e/report_diff_test.cpp's pipeline fixture and report_test.cpp's every-section trace):
// the phases and the stages' send/recv spans with exact times, spelled out by hand so the tests
// check the analyses against a schedule they did not compute. Not a schedule generator (the
// schedule library's action lists are that) and it writes no step span: callers add what else
// the trace holds (ops inside the phases through `inside`, memory, collectives, the step).
#pragma once

#include <cstdint>
#include <functional>

#include "analysis_builder.h"

namespace tracerun::testing {

// The step's shape: starts at t, forward phases last F, backward phases B (ns); the last backward
// ends at end().
struct TwoStage1F1B {
  int64_t t = 1000, F = 10000, B = 20000;
  int first_rank = 0;  // the builder's rank of stage 0 (stage 1: the next); peers stay 0 and 1
  int64_t end() const { return t + 3 * F + 3 * B; }
};

// What a caller puts inside a phase right after its span: rank, forward (else backward), start,
// length, microbatch.
using PhaseFiller = std::function<void(int rank, bool forward, int64_t start, int64_t len, int mb)>;

// Stage 0 runs F0 F1 B0 B1 (warm-up p - 1 = 1 forward, then 1F1B), stage 1 F0 B0 F1 B1, on ranks
// first_rank and first_rank + 1 of `tb` (`inside` gets those ranks).
inline void addTwoStage1F1B(TraceBuilder& tb, const TwoStage1F1B& s = {},
                            const PhaseFiller& inside = {}) {
  using core::Category;
  const int64_t t = s.t, F = s.F, B = s.B;
  auto phase = [&](int rank, bool forward, int64_t start, int64_t len, int mb) {
    tb.span(s.first_rank + rank, BSpan{"main",
                                       forward ? "forward" : "backward",
                                       Category::kPhase,
                                       start,
                                       start + len,
                                       1,
                                       {{"stage", rank}, {"chunk", 0}, {"microbatch", mb}}});
    if (inside) inside(s.first_rank + rank, forward, start, len, mb);
  };
  auto msg = [&](int rank, const char* name, int peer, int mb, int64_t start, int64_t end) {
    tb.span(s.first_rank + rank, BSpan{"main",
                                       name,
                                       Category::kUser,
                                       start,
                                       end,
                                       1,
                                       {{"peer", peer}, {"microbatch", mb}, {"chunk", 0}}});
  };
  phase(0, true, t, F, 0);
  msg(0, "send_forward", 1, 0, t + F, t + F);
  phase(0, true, t + F, F, 1);
  msg(0, "send_forward", 1, 1, t + 2 * F, t + 2 * F);
  msg(0, "recv_backward", 1, 0, t + 2 * F, t + 2 * F + B);
  phase(0, false, t + 2 * F + B, B, 0);
  msg(0, "recv_backward", 1, 1, t + 2 * F + 2 * B, t + 3 * F + 2 * B);
  phase(0, false, t + 3 * F + 2 * B, B, 1);
  msg(1, "recv_forward", 0, 0, t, t + F);
  phase(1, true, t + F, F, 0);
  phase(1, false, t + 2 * F, B, 0);
  msg(1, "send_backward", 0, 0, t + 2 * F + B, t + 2 * F + B);
  msg(1, "recv_forward", 0, 1, t + 2 * F + B, t + 2 * F + B);
  phase(1, true, t + 2 * F + B, F, 1);
  phase(1, false, t + 3 * F + B, B, 1);
  msg(1, "send_backward", 0, 1, t + 3 * F + 2 * B, t + 3 * F + 2 * B);
}

}  // namespace tracerun::testing
