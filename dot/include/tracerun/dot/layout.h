// The layout service: runs Graphviz (gvc + cgraph, in process, never the `dot` program) once on a
// neutral Graph and gives back the positions — node boxes, edge Bézier splines, cluster boxes —
// that traceview draws itself, and the same layout rendered by Graphviz (SVG/PNG/PDF/dot). Builds
// no graph of its own and reads no trace.
//
// Budget: a graph with more nodes than LayoutOptions::max_nodes is refused (LayoutError) —
// builders prune to the budget first. From `large_nodes` nodes on, Graphviz's iteration limits
// (nslimit, nslimit1, mclimit, searchsize) are applied and remincross is off; splines are never
// orthogonal (ortho routing is quadratic and ignores ports).
//
// Coordinates in Layout are points (1/72 inch) with the origin at the top-left corner of the
// drawing and y growing downwards (Graphviz's own y grows upwards; it is flipped here).
//
// Threading: Graphviz keeps process-wide state (its plugin registry, the current graph's
// attribute dictionaries); the service serialises every call into it behind one lock of its own,
// so graphs may be laid out, rendered and destroyed from any thread without the caller locking.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "tracerun/dot/graph.h"
#include "tracerun/dot/theme.h"

namespace tracerun::dot {

// A graph over the budget, an unknown format, or a Graphviz failure; the text is one line.
class LayoutError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct LayoutOptions {
  int max_nodes = 2000;          // refuse larger graphs (builders prune to this first)
  int large_nodes = 300;         // from here on: iteration limits, remincross off, newrank
  Theme theme = Theme::light();  // the colours Graphviz's own output (render) gives the roles
};

struct Point {
  double x = 0, y = 0;
};

struct NodeBox {
  Point center;
  double width = 0, height = 0;  // points
};

// One edge's route: cubic Bézier pieces (3k+1 control points each, as Graphviz gives them) and
// the tips of its arrowheads when it has them.
struct EdgeRoute {
  std::vector<std::vector<Point>> beziers;
  bool has_head_arrow = false, has_tail_arrow = false;
  Point head_arrow, tail_arrow;  // where the arrowhead's tip is
  bool has_label = false;
  Point label;                               // the centre of the label
  double label_width = 0, label_height = 0;  // points
};

struct ClusterBox {
  Point min, max;  // top-left and bottom-right corners
  bool has_label = false;
  Point label;                               // the centre of the label (the cluster's title)
  double label_width = 0, label_height = 0;  // points
};

// Everything a custom renderer needs; vectors are parallel to Graph::nodes / edges / clusters.
struct Layout {
  double width = 0, height = 0;  // the drawing's bounding box, points
  std::vector<NodeBox> nodes;
  std::vector<EdgeRoute> edges;
  std::vector<ClusterBox> clusters;
  bool limited = false;  // Graphviz's iteration limits were applied (a large graph)
};

enum class Format { kSvg, kPng, kPdf, kDot, kTxt };

// "svg", "png", "pdf", "dot", "txt" -> Format; throws LayoutError naming the accepted values.
Format parseFormat(const std::string& name);
// The format a file name asks for by its extension ("cg.svg" -> kSvg), or `fallback`.
Format formatOfPath(const std::string& path, Format fallback);

// A graph laid out once; rendered (any number of times, any format) from that same layout.
class LaidOutGraph {
 public:
  // Converts the graph to cgraph and runs gvLayout ("dot"). Throws LayoutError.
  static LaidOutGraph layout(const Graph& graph, const LayoutOptions& options = {});
  ~LaidOutGraph();
  LaidOutGraph(LaidOutGraph&&) noexcept;
  LaidOutGraph& operator=(LaidOutGraph&&) noexcept;

  const Layout& positions() const;
  // SVG, PNG, PDF or dot source through gvRenderData; kTxt is not a Graphviz format (see
  // render.h's renderText). Throws LayoutError.
  std::string render(Format format) const;

 private:
  struct Impl;
  explicit LaidOutGraph(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracerun::dot
