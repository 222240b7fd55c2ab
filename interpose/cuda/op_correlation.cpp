// The op correlation callback (op_correlation.h). Reads the innermost open frame of op capture's
// per-thread stack (read-only), never writes capture state.
#include "op_correlation.h"

#include <ATen/record_function.h>

#include <atomic>

#include "capture.h"
#include "cupti_translate.h"

namespace tracerun::interpose::cuda {
namespace {

// Set before the callback is added and never cleared: an op that started under the callback pops
// with the same function after stopOpCorrelation.
std::atomic<PushExternalIdFn> gPush{nullptr};
std::atomic<PopExternalIdFn> gPop{nullptr};
std::atomic<int64_t> gBaseNs{0};
std::atomic<bool> gRegistered{false};
std::atomic<uint64_t> gUncorrelated{0};
at::CallbackHandle gHandle = 0;

std::unique_ptr<at::ObserverContext> onOpStart(const at::RecordFunction& fn) {
  uint64_t id = 0;
  if (ThreadState* t = threadState()) {
    // Op capture's start callback ran first and opened this op's frame (key = the RecordFunction).
    if (const Frame* f = t->top(); f != nullptr && f->key == &fn) {
      id = opExternalId(t->buffer->track, f->start_ns, gBaseNs.load(std::memory_order_relaxed));
    }
  }
  if (id == 0) gUncorrelated.fetch_add(1, std::memory_order_relaxed);
  gPush.load(std::memory_order_relaxed)(kOpCorrelationKind, id);
  return nullptr;
}

void onOpEnd(const at::RecordFunction&, at::ObserverContext*) {
  uint64_t last = 0;
  gPop.load(std::memory_order_relaxed)(kOpCorrelationKind, &last);
}

}  // namespace

bool startOpCorrelation(PushExternalIdFn push, PopExternalIdFn pop, int64_t baseNs) {
  if (push == nullptr || pop == nullptr || gRegistered.exchange(true)) return false;
  gPush.store(push);
  gPop.store(pop);
  gBaseNs.store(baseNs);
  gUncorrelated.store(0);
  gHandle = at::addGlobalCallback(
      at::RecordFunctionCallback(&onOpStart, &onOpEnd).scopes({at::RecordScope::FUNCTION}));
  return true;
}

void stopOpCorrelation() {
  if (!gRegistered.load()) return;
  at::removeCallback(gHandle);
  gHandle = 0;
  gRegistered.store(false);
}

uint64_t uncorrelatedOps() noexcept {
  return gUncorrelated.load(std::memory_order_relaxed);
}

}  // namespace tracerun::interpose::cuda
