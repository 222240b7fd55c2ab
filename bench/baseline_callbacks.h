// The RecordFunction callbacks the capture benchmarks measure tracerun against, shared by
// capture_bench and libempty_callback.so (capture_gpt_bench.py's preload):
// - empty: what any RecordFunction-based tracer pays before doing anything;
// - clock-only: the empty callback plus one read of tracerun's clock (core::nowNs(), on the TSC
//   where tracerun uses it; call core::enableTscClock() first) at each end — the least any tracer
//   that times each op pays. The difference is kept so that neither read is dead code.
#pragma once

#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <unordered_set>

#include "tracerun/core/clock.h"

namespace tracerun::bench {

// The scopes tracerun registers for: ops, backward nodes, user scopes.
inline const std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> kTracerunScopes = {
    at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION, at::RecordScope::USER_SCOPE};

inline std::unique_ptr<at::ObserverContext> emptyStart(const at::RecordFunction&) {
  return nullptr;
}
inline void emptyEnd(const at::RecordFunction&, at::ObserverContext*) {}

inline thread_local int64_t tlsClockStart = 0;
inline thread_local int64_t tlsClockSum = 0;
inline std::unique_ptr<at::ObserverContext> clockStart(const at::RecordFunction&) {
  tlsClockStart = core::nowNs();
  return nullptr;
}
inline void clockEnd(const at::RecordFunction&, at::ObserverContext*) {
  tlsClockSum += core::nowNs() - tlsClockStart;
}

}  // namespace tracerun::bench
