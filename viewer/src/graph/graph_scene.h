// The data of the call graph and model tabs (graph_view.cpp): tracedot's picture of the trace (the
// same builders and Graphviz layout as `tracedot callgraph|model`) and the maps between its
// elements and the trace's spans. Built on a background thread; no ImGui, no drawing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tracerun/dot/graph.h"
#include "tracerun/dot/layout.h"

namespace tracerun::viewer {

enum class GraphKind { kCallGraph, kModel };

// A node or a cluster of the picture (clusters are the model's open modules and its ×N folds).
struct GraphElement {
  enum Kind : uint8_t { kNone, kNode, kCluster } kind = kNone;
  int index = -1;
  bool operator==(const GraphElement& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const GraphElement& o) const { return !(*this == o); }
};

struct GraphScene {
  dot::Graph graph;
  dot::Layout layout;
  // Per node / cluster: the longest span it stands for (-1 none) and its duration.
  std::vector<int64_t> node_span, cluster_span;
  // Every span the picture shows, sorted by span id, with the element that shows it (the call
  // graph: the span's node; the model: the innermost module around it).
  std::vector<std::pair<int64_t, GraphElement>> span_element;
  // Where the view opens when the whole picture is too small to read (graph_view.cpp): the
  // heaviest root (a node no edge enters: the most inclusive time, then the most nodes reached,
  // then the first; -1 for an empty graph), the layout's top (points) and its lowest node box
  // (points; 0 when every node is plain text).
  int root = -1;
  double top = 0, min_node_height = 0;

  GraphElement elementOfSpan(int64_t span) const;
  // The element's stable id (node or cluster id), "" for none.
  const std::string& idOf(GraphElement e) const;
};

// Opens the trace on the calling thread, builds the picture with the ×N folds `expand` (ids) drawn
// unfolded, lays it out (dot/'s layout service serialises Graphviz itself, so both tabs may build
// at once) and maps spans to elements. Throws (TraceError, LayoutError) with one line.
GraphScene buildGraphScene(const std::string& tracePath, GraphKind kind,
                           const std::vector<std::string>& expand, const std::atomic<bool>& cancel);

// Fills scene.root, top and min_node_height from its graph and layout (buildGraphScene does).
void findRoot(GraphScene& scene);

// "key: value" lines of a tooltip whose value is an integer (calls, inclusive_ns, ...), as
// " key=value" pairs: the numbers a node shows, for --dump-view.
std::string tooltipNumbers(const std::string& tooltip);

}  // namespace tracerun::viewer
