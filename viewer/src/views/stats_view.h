// The statistics view (issue 17, point 5): sortable tables of ops, collectives and ranks for the
// whole run, or for the timeline's range selection (Shift+drag). Declares only the factory; the
// view lives in stats_view.cpp, its tables as data in stats_tables.h.
#pragma once

#include <memory>

#include "app/view.h"

namespace tracerun::viewer {

std::unique_ptr<View> makeStatsView();

}  // namespace tracerun::viewer
