// The C entry points that tracerun/annotate.h declares weak: defined here, so they resolve when
// libtracerun.so is linked or preloaded. Each is a no-op when nothing is capturing. No libtorch.
#include <cstdint>

#include "capture.h"
#include "status_file.h"
#include "tracerun/core/clock.h"

extern "C" {

// Same layout as in tracerun/annotate.h (a C ABI: key pointer, then value).
struct tracerun_annotate_arg {
  const char* key;
  int64_t value;
};

__attribute__((visibility("default"))) void tracerun_annotate_attach(
    const void* record_function, int kind, const char* detail, const tracerun_annotate_arg* args,
    int n) {
  using namespace tracerun::interpose;
  ThreadState* t = threadState();
  if (t == nullptr) return;
  Frame* f = t->top();
  if (f == nullptr || f->key != record_function) return;  // this scope is not being recorded
  switch (kind) {
    case 1:
      f->category = tracerun::core::Category::kPhase;
      break;
    case 2:
      f->category = tracerun::core::Category::kModule;
      break;
    default:
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

__attribute__((visibility("default"))) int tracerun_annotate_capturing(void) {
  return tracerun::interpose::capturing() ? 1 : 0;
}

}  // extern "C"
