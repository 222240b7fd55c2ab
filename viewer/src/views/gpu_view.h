// The GPU tab (issue 28, point 2): per rank and device, the temporal breakdown (compute, NCCL
// communication, memory, idle) and HTA's idle breakdown (host wait, kernel wait, other) as bars,
// launch delays and overlap in one line, and the kernel table (click a row: its longest instance
// is selected on the timeline). Every number is trace/analysis/gpu.h's analyzeGpu, the report's
// gpu section. Declares only the factory; the view and its pure layout live in gpu_view.cpp and
// gpu_bars.h.
#pragma once

#include <memory>

#include "app/view.h"

namespace tracerun::viewer {

std::unique_ptr<View> makeGpuView();

}  // namespace tracerun::viewer
