// The launch of one GPU activity (a kernel, copy or set span on a "cuda:D stream S" track), as
// analyzeGpu (gpu.h) times it: its CUPTI launch API record when the trace keeps one, else the
// start of the op that launched it. For a viewer's details of one selected span, so that the
// delay it shows is the one the report's launch statistics count. Not the statistics (gpu.h).
#pragma once

#include <cstdint>
#include <optional>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct GpuLaunch {
  int64_t call_start_ns = 0, call_end_ns = 0;  // the launch call (both the op's start without one)
  bool record = false;                         // from a launch API record (else the op's start)
  int64_t delay_ns = 0;  // the activity's start - call_end_ns, clipped at 0 (gpu.h's delay)
};

// nullopt when `span` is not GPU activity on a stream track or nothing launched it. Reads the
// span's stream track and the launch records (one call per selected span, not per frame).
std::optional<GpuLaunch> gpuLaunchOf(const TraceReader& reader, const SpanRow& span);

}  // namespace tracerun::trace::analysis
