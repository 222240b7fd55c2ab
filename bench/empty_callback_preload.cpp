// libempty_callback.so: preloaded into a libtorch program by bench/capture_gpt_bench.py, it
// registers one empty RecordFunction callback for tracerun's scopes (ops, backward nodes, user
// scopes), with or without libtorch boxing the inputs (EMPTY_CALLBACK_INPUTS=1). The baseline that
// says what any RecordFunction-based tracer pays in that program before doing anything. With
// EMPTY_CALLBACK_CLOCK=1 it also reads tracerun's clock (core::nowNs(), the TSC where usable) at
// both ends: what any tracer that times every op pays at least.
#include <ATen/record_function.h>

#include <cstdlib>
#include <cstring>

#include "baseline_callbacks.h"
#include "tracerun/core/clock.h"

namespace {

using namespace tracerun::bench;

bool envIsOne(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

struct Register {
  Register() {
    const bool clock = envIsOne("EMPTY_CALLBACK_CLOCK");
    if (clock) tracerun::core::enableTscClock();
    at::addGlobalCallback((clock ? at::RecordFunctionCallback(&clockStart, &clockEnd)
                                 : at::RecordFunctionCallback(&emptyStart, &emptyEnd))
                              .needsInputs(envIsOne("EMPTY_CALLBACK_INPUTS"))
                              .scopes(kTracerunScopes));
  }
};
Register gRegister;

}  // namespace
