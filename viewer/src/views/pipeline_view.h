// The pipeline tab (issue 17 point 1): a stage x time chart of one step's executed schedule, the
// bubble of each stage, and the plan overlaid. Not the analysis (trace/analysis/pipeline.h) and
// not its data (pipeline_chart.h); only the drawing and the clicks.
#pragma once

#include <memory>

#include "app/view.h"

namespace tracerun::viewer {

std::unique_ptr<View> makePipelineView();

}  // namespace tracerun::viewer
