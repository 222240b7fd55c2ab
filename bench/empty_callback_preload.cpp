// libempty_callback.so: preloaded into a libtorch program by bench/capture_gpt_bench.py, it
// registers one empty RecordFunction callback for tracerun's scopes (ops, backward nodes, user
// scopes), with or without libtorch boxing the inputs (EMPTY_CALLBACK_INPUTS=1). The baseline that
// says what any RecordFunction-based tracer pays in that program before doing anything. With
// EMPTY_CALLBACK_CLOCK=1 it also reads tracerun's clock (core::nowNs(), the TSC where usable) at
// both ends: what any tracer that times every op pays at least.
#include <ATen/record_function.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "tracerun/core/clock.h"

namespace {

std::unique_ptr<at::ObserverContext> emptyStart(const at::RecordFunction&) {
  return nullptr;
}
void emptyEnd(const at::RecordFunction&, at::ObserverContext*) {}

// The difference is kept so that neither read is dead code.
thread_local int64_t tlsClockStart = 0;
thread_local int64_t tlsClockSum = 0;
std::unique_ptr<at::ObserverContext> clockStart(const at::RecordFunction&) {
  tlsClockStart = tracerun::core::nowNs();
  return nullptr;
}
void clockEnd(const at::RecordFunction&, at::ObserverContext*) {
  tlsClockSum += tracerun::core::nowNs() - tlsClockStart;
}

bool envIsOne(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

struct Register {
  Register() {
    const bool clock = envIsOne("EMPTY_CALLBACK_CLOCK");
    if (clock) tracerun::core::enableTscClock();
    at::addGlobalCallback(
        (clock ? at::RecordFunctionCallback(&clockStart, &clockEnd)
               : at::RecordFunctionCallback(&emptyStart, &emptyEnd))
            .needsInputs(envIsOne("EMPTY_CALLBACK_INPUTS"))
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  }
};
Register gRegister;

}  // namespace
