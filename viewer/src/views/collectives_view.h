// The collectives tab (--view collectives): one collective instance across ranks (arrival, start,
// end, wait, the last to arrive), a ranks x sequence heatmap of arrival lag, the stragglers and the
// point-to-point wait versus transfer. Numbers from trace/analysis/comm_instances.h and comm.h; not
// an analysis of its own.
#pragma once

#include <memory>

#include "app/view.h"

namespace tracerun::viewer {

std::unique_ptr<View> makeCollectivesView();

}  // namespace tracerun::viewer
