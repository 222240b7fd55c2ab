// The C entry points through which the collective decorator (tracerun/traced_group.h) and the NCCL
// interposer (interpose/nccl/) record communication: one span per call on a named async track.
// No libtorch, no NCCL here; it does not decide what is a collective.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "capture.h"
#include "tracerun/core/records.h"
#include "tracerun/core/vocabulary.h"

#define TRACERUN_COMM_WEAK  // the definitions below are the strong ones
#include "tracerun/comm_event.h"

namespace tracerun::interpose {
namespace {

// Communication is recorded unless TRACERUN_CAPTURE lacks the word "comm" (read once).
bool commWanted() noexcept {
  static const bool wanted = captureWordsFromEnvironment().has(CaptureWord::kComm);
  return wanted;
}

}  // namespace

bool recordComm(const tracerun_comm_event& e) noexcept {
  if (!commWanted()) return false;
  ThreadState* t = threadState();
  if (t == nullptr || e.op == nullptr) return false;
  core::SpanRecord s;
  s.category = core::Category::kComm;
  s.name = t->intern(e.op);
  s.detail = e.group != nullptr ? t->intern(e.group) : 0;
  s.start_ns = e.start_ns;
  s.end_ns = e.end_ns < e.start_ns ? e.start_ns : e.end_ns;
  s.id = t->buffer->nextId();
  if (e.track != nullptr && e.track[0] != '\0') {
    try {
      s.track = t->session->tracks().findOrAdd(core::TrackKind::kAsync, 0, e.track);
    } catch (...) {
      s.track = asyncTrack();
    }
  } else {
    s.track = asyncTrack();
  }
  core::ArgsRecord::Arg args[9];
  int n = 0;
  auto add = [&](const char* key, int64_t value, bool always) {
    if (!always && value < 0) return;
    args[n].key = t->intern(key);
    args[n].value = value;
    ++n;
  };
  add(vocab::arg::kBytes, e.bytes, true);
  add(vocab::arg::kPeer, e.peer, false);
  add(vocab::arg::kRoot, e.root, false);
  add(vocab::arg::kGroupSize, e.group_size, false);
  add(vocab::arg::kGroupRank, e.group_rank, false);
  add(vocab::arg::kSeq, e.seq, false);
  add(vocab::arg::kDtype, e.dtype, false);
  add(vocab::arg::kTag, e.tag, false);
  pushSpanWithArgs(*t, s, args, n);
  return true;
}

}  // namespace tracerun::interpose

extern "C" {

__attribute__((visibility("default"))) int tracerun_comm_record(const tracerun_comm_event* e) {
  return e != nullptr && tracerun::interpose::recordComm(*e) ? 1 : 0;
}

__attribute__((visibility("default"))) int tracerun_comm_capturing(void) {
  return tracerun::interpose::capturing() && tracerun::interpose::commWanted() ? 1 : 0;
}

}  // extern "C"
