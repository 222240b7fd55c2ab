// The GPU tab's data without ImGui (gpu_view.cpp draws it): each device's bars as segments in
// pixels, from trace/analysis/gpu.h's numbers, and the longest instance of a kernel (what a click
// on a kernel row selects). Not the analysis itself (analyzeGpu) and not the drawing.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/gpu.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {

// One part of a bar: [x0, x1) pixels from the bar's left, `ns` its time.
struct GpuBarSegment {
  std::string part;  // compute, comm, memory, idle | host_wait, kernel_wait, other
  int64_t ns = 0;
  float x0 = 0, x1 = 0;
};

// The device's window [start, end] split into disjoint parts across `width` pixels: compute (the
// union of compute kernels), comm not under compute (comm_ns - overlap), memory under neither
// (busy - |compute ∪ comm|), idle (window - busy). They add up to the window. A part's pixels
// are its share of the window; parts are laid left to right in that order.
std::vector<GpuBarSegment> gpuTemporalBar(const trace::analysis::GpuDevice& d, float width);
// The device's idle time split as HTA (host wait, kernel wait, other) across `width` pixels:
// each part's share of the idle time. Empty without idle time.
std::vector<GpuBarSegment> gpuIdleBar(const trace::analysis::GpuDevice& d, float width);

// The longest span named `name` (a kernel, copy or set) on the GPU stream tracks of `rank` (-1:
// every rank); the first in track then start order among equals. nullopt when there is none.
std::optional<trace::SpanRow> longestGpuInstance(const trace::TraceReader& reader,
                                                 core::StringId name, int rank,
                                                 const std::atomic<bool>* cancel = nullptr);

// The --dump-view text of the tab: per device a "device" line and its "bar" lines (segments of
// a bar `width` pixels wide), then one "kernel" line per kernel row:
//   device RANK DEV window W busy B idle I compute C comm M memory Y overlap O host_wait H
//          kernel_wait K other O kernels N copies N launch_count N launch_p50 P launch_p95 P
//          launch_max M launch_outliers N   (one line)
//   bar RANK DEV temporal|idle PART NS X0 X1
//   kernel KIND COUNT TOTAL MEAN MIN P50 MAX RANKS NAME
std::string gpuDumpText(const trace::analysis::GpuAnalysis& g, float width);

}  // namespace tracerun::viewer
