// Renderers: a Graph to bytes in the format asked (svg/png/pdf/dot through the layout service, txt
// as an indented tree without Graphviz), and writing them to a file or stdout. No trace reading,
// no graph building.
#pragma once

#include <string>

#include "tracerun/dot/graph.h"
#include "tracerun/dot/layout.h"

namespace tracerun::dot {

// Lays the graph out (unless txt) and renders it. Throws LayoutError.
std::string renderGraph(const Graph& graph, Format format, const LayoutOptions& options = {});

// The graph as an indented tree: the title and caption, then each node that no tree edge reaches,
// its tree children indented below (tree edges: solid or bold, constraint on). A node reached
// twice is printed in full once; later it appears as "-> LABEL (above)". Labels' lines are joined
// with " | ". Dashed and dotted edges are listed after the tree, one per line.
std::string renderText(const Graph& graph);

// Writes bytes to `path` ("-" = stdout), through a temporary file renamed into place so that a
// failed run never leaves half a picture. Throws std::runtime_error naming the path.
void writeOutput(const std::string& path, const std::string& bytes);

}  // namespace tracerun::dot
