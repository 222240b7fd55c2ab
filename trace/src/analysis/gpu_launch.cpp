// gpuLaunchOf (gpu_launch.h): one activity's launch from the GPU analyses' own input
// (gpu_activity.h's readActivities), so it cannot differ from what analyzeGpu counts.
#include "tracerun/trace/analysis/gpu_launch.h"

#include <algorithm>

#include "gpu_activity.h"

namespace tracerun::trace::analysis {

std::optional<GpuLaunch> gpuLaunchOf(const TraceReader& reader, const SpanRow& span) {
  if (span.category != core::Category::kKernel && span.category != core::Category::kMemcpy)
    return std::nullopt;
  for (const gpu::StreamActivities& s : gpu::readActivities(reader, span.track)) {
    for (const gpu::Activity& a : s.items) {
      if (a.start != span.start_ns || a.name != span.name || a.end != span.end_ns()) continue;
      if (a.launch == gpu::kNoLaunch) return std::nullopt;
      GpuLaunch l;
      l.call_start_ns = a.launch;
      l.call_end_ns = a.launch_end;
      l.record = a.launch_record;
      int64_t d = 0;
      if (__builtin_sub_overflow(a.start, a.launch_end, &d)) d = a.start > 0 ? INT64_MAX : 0;
      l.delay_ns = std::max<int64_t>(0, d);
      return l;
    }
  }
  return std::nullopt;
}

}  // namespace tracerun::trace::analysis
