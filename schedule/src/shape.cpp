// Which shapes each schedule accepts (see shape.h); the messages name gpttrain's flags. Not the
// trainer's other flag checks (ZeRO, recompute: trainer/config.cpp).
#include "tracerun/schedule/shape.h"

#include "tracerun/schedule/two_bw.h"

namespace tracerun::schedule {

std::string scheduleError(ScheduleKind kind, const PipelineShape& s) {
  if (s.stages < 1 || s.chunks < 1 || s.microbatches < 1) return "empty pipeline";
  if (kind != ScheduleKind::kInterleaved && s.chunks != 1) {
    return "--vp " + std::to_string(s.chunks) + " needs --schedule interleaved";
  }
  if (kind == ScheduleKind::kTwoBw) return twoBwShapeError(s);
  if (kind == ScheduleKind::kInterleaved && s.microbatches % s.stages != 0) {
    return "--schedule interleaved needs the microbatches per step (" +
           std::to_string(s.microbatches) + ") to be a multiple of --pp " +
           std::to_string(s.stages);
  }
  if (kind == ScheduleKind::kChimera &&
      (s.stages < 2 || s.stages % 2 != 0 || s.microbatches % s.stages != 0)) {
    return "--schedule chimera needs an even --pp >= 2 (got " + std::to_string(s.stages) +
           ") and the microbatches per step (" + std::to_string(s.microbatches) +
           ") a multiple of it";
  }
  return "";
}

}  // namespace tracerun::schedule
