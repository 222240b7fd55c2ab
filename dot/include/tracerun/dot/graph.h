// The neutral graph every tracedot builder produces and every consumer reads: the layout service
// (Graphviz, in process), the renderers (SVG/PNG/PDF/dot/txt) and traceview, which draws the same
// layout itself. Plain data: no Graphviz types, no trace types, no I/O.
//
// Contract for builders (dot/src/*_graph.cpp):
// - Node ids are stable paths, unique within the graph ("step/forward/layers.0/aten::linear");
//   they become the SVG group ids, so the same trace always gives the same ids in the same order.
// - Labels and tooltips are plain UTF-8 text; lines are separated by '\n'. Builders never escape:
//   each renderer escapes for its format (< > & { } | and quotes).
// - Order is meaning: nodes, edges and clusters are emitted in the order they were added, and that
//   order must depend only on the trace (never on pointer values or hash order), so output is
//   byte-identical between runs.
// - A cluster may nest in another (parent index); a node belongs to at most one (innermost) cluster.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tracerun::dot {

struct Rgb {
  uint8_t r = 255, g = 255, b = 255;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
};

enum class NodeShape : uint8_t {
  kBox,         // an op, a module, an autograd node
  kRoundedBox,  // a scope or phase
  kHexagon,     // a collective or point-to-point communication
  kEllipse,     // a tensor / AccumulateGrad leaf
  kNote,        // "other (k nodes, x%)": what pruning folded away
  kPlain,       // text only (captions inside the graph)
};

enum class EdgeStyle : uint8_t {
  kSolid,
  kDashed,  // a link that is not a call: forward -> backward, a residual through pruned nodes
  kDotted,  // order on one rank (pipeline graphs)
  kBold,    // the critical path
};

struct Node {
  std::string id;       // stable path, unique in the graph (the SVG group id)
  std::string label;    // '\n'-separated lines
  std::string tooltip;  // the full detail (shapes, arguments); may be empty
  NodeShape shape = NodeShape::kBox;
  Rgb fill{255, 255, 255};
  Rgb font{0, 0, 0};
  Rgb border{0, 0, 0};
  double penwidth = 1.0;
  int cluster = -1;  // index into Graph::clusters, -1 for none
  int fold = 1;      // > 1 when this node stands for that many identical siblings ("×N")
};

struct Edge {
  int from = 0, to = 0;  // indices into Graph::nodes
  std::string label;
  std::string tooltip;
  EdgeStyle style = EdgeStyle::kSolid;
  Rgb color{0, 0, 0};
  double penwidth = 1.0;
  bool constraint = true;  // false: the edge does not influence the ranking (Graphviz constraint)
};

struct Cluster {
  std::string id;  // stable path, unique among clusters
  std::string label;
  std::string tooltip;
  int parent = -1;  // enclosing cluster, -1 for a top-level cluster
  Rgb fill{255, 255, 255};
  Rgb border{0, 0, 0};
  int fold = 1;  // > 1 when this cluster stands for that many identical siblings ("×N")
};

enum class Direction : uint8_t { kTopToBottom, kLeftToRight };

struct Graph {
  std::string title;    // the first caption line
  std::string caption;  // further '\n'-separated lines: totals, what pruning hid, bubbles
  Direction direction = Direction::kTopToBottom;
  std::vector<Node> nodes;
  std::vector<Edge> edges;
  std::vector<Cluster> clusters;

  int addNode(Node node) {
    nodes.push_back(std::move(node));
    return static_cast<int>(nodes.size()) - 1;
  }
  int addEdge(Edge edge) {
    edges.push_back(std::move(edge));
    return static_cast<int>(edges.size()) - 1;
  }
  int addCluster(Cluster cluster) {
    clusters.push_back(std::move(cluster));
    return static_cast<int>(clusters.size()) - 1;
  }
};

}  // namespace tracerun::dot
