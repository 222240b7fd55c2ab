// The memory view (issue 17 point 2): per rank, stacked live bytes by category on the timeline's
// time axis, the peak, the ZeRO closed form, and what was live at a clicked time. The data comes
// from trace/analysis/memory_live.h on a background thread; this file only draws and asks.
#pragma once

#include <memory>

#include "app/view.h"

namespace tracerun::viewer {

std::unique_ptr<View> makeMemoryView();

}  // namespace tracerun::viewer
