// The C entry points that tracerun/annotate_abi.h declares weak: defined here, so they resolve when
// libtracerun.so is linked or preloaded. Each is a no-op when nothing is capturing. No libtorch.
#include <cstdint>

#include "capture.h"
#include "collective_groups.h"
#include "status_file.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/records.h"

#define TRACERUN_ANNOTATE_WEAK  // the definitions below are the strong ones
#include "tracerun/annotate_abi.h"

namespace {

// annotate.h's copy of the memory categories is core's, value for value (the integer crosses the
// C ABI), and it has them all.
using AbiCategory = tracerun::MemoryCategory;
using CoreCategory = tracerun::core::MemoryCategory;
constexpr bool sameCategory(AbiCategory a, CoreCategory c) {
  return static_cast<int>(a) == static_cast<int>(c);
}
static_assert(sameCategory(AbiCategory::kUnknown, CoreCategory::kUnknown));
static_assert(sameCategory(AbiCategory::kParameter, CoreCategory::kParameter));
static_assert(sameCategory(AbiCategory::kGradient, CoreCategory::kGradient));
static_assert(sameCategory(AbiCategory::kOptimizerState, CoreCategory::kOptimizerState));
static_assert(sameCategory(AbiCategory::kActivation, CoreCategory::kActivation));
static_assert(sameCategory(AbiCategory::kTemporary, CoreCategory::kTemporary));
static_assert(sameCategory(AbiCategory::kOther, CoreCategory::kOther));
static_assert(sameCategory(AbiCategory::kInput, CoreCategory::kInput));
static_assert(static_cast<int>(AbiCategory::kInput) + 1 == static_cast<int>(CoreCategory::kCount),
              "core::MemoryCategory has a category that tracerun/annotate_abi.h lacks");

}  // namespace

extern "C" {

__attribute__((visibility("default"))) void tracerun_annotate_attach(
    const void* record_function, int kind, const char* detail, const tracerun_annotate_arg* args,
    int n) {
  using namespace tracerun::interpose;
  ThreadState* t = threadState();
  if (t == nullptr) return;
  Frame* f = t->top();
  if (f == nullptr || f->key != record_function) return;  // this scope is not being recorded
  switch (static_cast<tracerun::ScopeKind>(kind)) {
    case tracerun::ScopeKind::kPhase:
      f->category = tracerun::core::Category::kPhase;
      break;
    case tracerun::ScopeKind::kModule:
      f->category = tracerun::core::Category::kModule;
      break;
    case tracerun::ScopeKind::kUser:
    default:  // an unknown kind from a newer header: a plain user scope
      f->category = tracerun::core::Category::kUser;
      break;
  }
  if (detail != nullptr) f->detail = t->intern(detail);
  int count = 0;
  for (int i = 0; i < n && count < kMaxFrameArgs; ++i) {
    if (args[i].key == nullptr) continue;
    f->args[count].key = t->intern(args[i].key);
    f->args[count].value = args[i].value;
    ++count;
  }
  f->nargs = static_cast<uint8_t>(count);
}

__attribute__((visibility("default"))) void tracerun_annotate_counter(const char* name,
                                                                      double value) {
  using namespace tracerun::interpose;
  ThreadState* t = threadState();
  if (t == nullptr || name == nullptr) return;
  tracerun::core::CounterRecord c;
  c.name = t->intern(name);
  c.ts_ns = tracerun::core::nowNs();
  c.value = value;
  t->buffer->ring.tryPush(tracerun::core::Record::from(c));
  noteStatusCounter(name, value);  // the launcher's status line (TRACERUN_STATUS)
}

__attribute__((visibility("default"))) int tracerun_annotate_set_memory_category(int category) {
  using namespace tracerun::interpose;
  const int previous = tlsMemoryCategory;
  if (category >= 0 && category < static_cast<int>(tracerun::core::MemoryCategory::kCount)) {
    tlsMemoryCategory = static_cast<uint8_t>(category);
  }
  return previous;
}

__attribute__((visibility("default"))) void tracerun_annotate_process_group(uint64_t address,
                                                                            int64_t group_id) {
  // Remembered whether or not a capture runs now: a later one may see the group's calls.
  tracerun::interpose::nameProcessGroup(address, group_id);
}

__attribute__((visibility("default"))) int tracerun_annotate_capturing(void) {
  return tracerun::interpose::capturing() ? 1 : 0;
}

}  // extern "C"
