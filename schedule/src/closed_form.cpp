// The closed-form bubble fractions (see closed_form.h); formulas only, nothing replayed.
#include "tracerun/schedule/closed_form.h"

#include <algorithm>

namespace tracerun::schedule {

double zbH1BubbleFraction(const PipelineShape& s, double f, double b, double w) {
  if (s.stages <= 0 || s.microbatches <= 0) return 0;
  const double p = s.stages, m = s.microbatches;
  const double idle = (p - 1) * (f + b - w);
  const double step = m * (f + b + w) + idle;
  return step > 0 ? std::max(0.0, idle / step) : 0.0;
}

double twoBwFillFraction(const PipelineShape& s, int batches) {
  const double p = s.stages, n = double(s.microbatches) * batches;
  return (p - 1) / (n + p - 1);
}

double idealBubbleFraction(ScheduleKind kind, const PipelineShape& s) {
  if (s.stages <= 0 || s.microbatches <= 0) return 0;
  const double p = s.stages, m = s.microbatches;
  switch (kind) {
    case ScheduleKind::kChimera:
      return (p - 2) / (2 * m + p - 2);
    case ScheduleKind::kZbH1:
      return zbH1BubbleFraction(s, 1, 1, 1);
    case ScheduleKind::kInterleaved: {
      const double x = (p - 1) / std::max(1, s.chunks);
      return x / (m + x);
    }
    case ScheduleKind::kGpipe:
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kTwoBw:
      break;
  }
  return (p - 1) / (m + p - 1);
}

std::string closedFormName(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kInterleaved:
      return "((p-1)/v)/(m+(p-1)/v)";
    case ScheduleKind::kZbH1:
      return "(p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W)), F B W the measured mean durations";
    case ScheduleKind::kChimera:
      return "(p-2)/(2m+p-2)";
    case ScheduleKind::kGpipe:
    case ScheduleKind::kOneFOneB:
    case ScheduleKind::kTwoBw:
      break;
  }
  return "(p-1)/(m+p-1)";
}

}  // namespace tracerun::schedule
