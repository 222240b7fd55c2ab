// The compare tab: a second trace beside the open one (`--compare b.db` or the tab's path field),
// steps aligned by ordinal per rank, per-name differences (trace/analysis/compare.h, the report's
// ops numbers) and two timeline strips on one time axis relative to the aligned step's start.
// Not a second timeline: the strips draw each run's span tracks only, without flows or counters.
#pragma once

#include <memory>

#include "app/view.h"

namespace tracerun::viewer {

std::unique_ptr<View> makeCompareView();

}  // namespace tracerun::viewer
