// C entry points that open and close a scope for callers that cannot hold an at::RecordFunction
// themselves (Python through ctypes: interpose/python/sitecustomize.py's module hooks). Not the C++
// API: C++ code uses the RAII classes of tracerun/annotate.h, which need none of this.
//
//   int64_t tracerun_annotate_scope_begin(kind, name, detail, args, n);   (annotate_abi.h)
//   void tracerun_annotate_scope_end(int64_t token, const char* detail);
//
// begin opens a RecordFunction user scope (so libtorch's own profiler sees it too) with the kind,
// detail and arguments of tracerun_annotate_attach, and returns a token (> 0), or 0 when nothing
// records user scopes. end(token, detail) closes that scope and every scope opened after it on this
// thread (a Python forward that raised never reached its end); a non-null detail replaces the
// scope's detail first (e.g. the module's type with its output shapes, known only at the end).
// Per thread, strictly nested, like the C++ scopes.
#include <ATen/record_function.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "capture.h"
#include "optimizer_steps.h"

#define TRACERUN_ANNOTATE_WEAK  // the definitions below are the strong ones
#include "tracerun/annotate_abi.h"

namespace {

// This thread's open scopes, innermost last. Destroyed (scopes closed) at thread exit.
thread_local std::vector<std::unique_ptr<at::RecordFunction>> tlsScopes;

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int64_t tracerun_annotate_scope_begin(
    int kind, const char* name, const char* detail, const tracerun_annotate_arg* args, int n) {
  if (name == nullptr) return 0;
  auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
  if (!callbacks.has_value()) return 0;
  auto rf = std::make_unique<at::RecordFunction>(std::move(*callbacks));
  rf->before(name);
  tracerun_annotate_attach(rf.get(), kind, detail, args, n < 0 ? 0 : n);
  tlsScopes.push_back(std::move(rf));
  return static_cast<int64_t>(tlsScopes.size());
}

// Closes the capture now (annotate_abi.h): this thread's open scopes first, innermost first, as
// its exit would have (a Python program's "step" phase still open when it ends), then the shard.
__attribute__((visibility("default"))) void tracerun_annotate_close(void) {
  while (!tlsScopes.empty()) tlsScopes.pop_back();
  tracerun::interpose::stopCapture();
}

__attribute__((visibility("default"))) void tracerun_annotate_scope_end(int64_t token,
                                                                        const char* detail) {
  if (token <= 0 || token > static_cast<int64_t>(tlsScopes.size())) return;
  const auto index = static_cast<size_t>(token - 1);
  if (detail != nullptr && index + 1 == tlsScopes.size()) {
    using namespace tracerun::interpose;
    ThreadState* t = threadState();
    Frame* f = t != nullptr ? t->top() : nullptr;
    if (f != nullptr && f->key == tlsScopes.back().get()) f->detail = t->intern(detail);
  }
  while (tlsScopes.size() > index) tlsScopes.pop_back();  // innermost first
}

// The thread's training begins: its next op opens step 1 (optimizer_steps.h).
__attribute__((visibility("default"))) void tracerun_annotate_training_begins(void) {
  tracerun::interpose::trainingBegins();
}

}  // extern "C"
