// libempty_callback.so: preloaded into a libtorch program by bench/capture_gpt_bench.py, it
// registers one empty RecordFunction callback for tracerun's scopes (ops, backward nodes, user
// scopes), with or without libtorch boxing the inputs (EMPTY_CALLBACK_INPUTS=1). The baseline that
// says what any RecordFunction-based tracer pays in that program before doing anything.
#include <ATen/record_function.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace {

std::unique_ptr<at::ObserverContext> emptyStart(const at::RecordFunction&) {
  return nullptr;
}
void emptyEnd(const at::RecordFunction&, at::ObserverContext*) {}

struct Register {
  Register() {
    const char* inputs = std::getenv("EMPTY_CALLBACK_INPUTS");
    at::addGlobalCallback(
        at::RecordFunctionCallback(&emptyStart, &emptyEnd)
            .needsInputs(inputs != nullptr && std::strcmp(inputs, "1") == 0)
            .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                     at::RecordScope::USER_SCOPE}));
  }
};
Register gRegister;

}  // namespace
