// The call graph and model tabs: tracedot's two pictures of the trace, laid out off the UI thread
// and drawn with ImGui (graph_view.cpp). Not the builders or the layout (dot/ owns them).
#pragma once

#include <memory>
#include <vector>

#include "app/view.h"

namespace tracerun::viewer {

// Appends the "callgraph" and "model" views (one implementation; they share the Graphviz lock).
void appendGraphViews(std::vector<std::unique_ptr<View>>& views);

}  // namespace tracerun::viewer
