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
// - A cluster may nest in another (parent index); a node belongs to at most one (innermost)
// cluster.
// - Builders give each element a role and its numbers (Metrics), never a colour: the renderers
//   (layout.h's Graphviz output, traceview) colour it through a Theme (theme.h) at output, as
//   gprof2dot's DotWriter does. Shapes, pen widths and line styles are the builder's.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tracerun::dot {

struct Rgb {
  uint8_t r = 255, g = 255, b = 255;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

// What a node, edge or cluster stands for. One enum for all three: a theme maps each to colours.
enum class Role : uint8_t {
  kNone,  // plain (white box, black ink in the light theme)
  // call graph nodes (coloured by Metrics::heat, or Metrics::change in a diff)
  kRoot,   // the "all" node above the top-level spans
  kOp,     // an operator or kernel
  kScope,  // a phase, module or user scope
  kComm,   // a collective or point-to-point communication
  kOther,  // "other (k nodes, x%)": what pruning folded away
  // model diagram and autograd graph nodes
  kModule,    // an nn.Module (its accent tells TP splits and ZeRO units)
  kFunction,  // an autograd node (a backward function)
  kInput,     // an autograd leaf (AccumulateGrad: a parameter's gradient enters here)
  // pipeline graph nodes
  kForward,         // a forward action
  kBackward,        // a backward action (B, or the input half of a split backward)
  kWeightGradient,  // the weight half of a split backward (W)
  kTransfer,        // a send or receive between stages
  // edges
  kCall,        // caller -> callee (call graph), autograd data flow
  kHiddenCall,  // a call into an "other" node
  kFlow,        // a link that is not a call: forward -> backward, dataflow, stage dependency
  kOrder,       // order of actions on one rank
  kMessage,     // send -> receive
  // clusters
  kGroup,  // a scope around nodes: a module, a rank's actions
  kStage,  // a pipeline stage (Cluster::index picks its tint)
};

// A second colour on top of the role: a border (nodes, clusters) or the line itself (edges).
enum class Accent : uint8_t {
  kNone,
  kCritical,     // on the critical path
  kColumnSplit,  // tensor-parallel column-split module
  kRowSplit,     // tensor-parallel row-split module
  kVocabSplit,   // vocabulary-parallel embedding or head
  kZeroUnit,     // a ZeRO-3 / FSDP unit
  kRecomputed,   // recomputed in backward (activation recomputation)
};

// The numbers an element stands for, typed (consumers read these, never the tooltip's text). -1
// (or NaN for the doubles) means "not measured for this graph".
struct Metrics {
  int64_t inclusive_ns = -1;        // call graph: time including callees
  int64_t self_ns = -1;             // call graph: time without callees
  int64_t calls = -1;               // call graph: spans folded in; model: forward calls
  int64_t bytes = -1;               // call graph: allocated bytes, inclusive
  int64_t comm_bytes = -1;          // call graph: bytes a communication moved
  int64_t params = -1;              // model: parameters on this rank
  int64_t start_ns = -1;            // pipeline: action start
  int64_t duration_ns = -1;         // pipeline action, autograd node (backward time), model module
  int stage = -1, microbatch = -1;  // pipeline: where the action ran
  // The colouring share in [0, 1] (the call graph's temperature: metric / largest metric), and
  // the relative change against a base trace in a diff ([-1, 1]).
  double heat = std::numeric_limits<double>::quiet_NaN();
  double change = std::numeric_limits<double>::quiet_NaN();
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
  Role role = Role::kNone;
  Accent accent = Accent::kNone;
  Metrics metrics;
  double penwidth = 1.0;
  int cluster = -1;  // index into Graph::clusters, -1 for none
  int fold = 1;      // > 1 when this node stands for that many identical siblings ("×N")
};

struct Edge {
  int from = 0, to = 0;  // indices into Graph::nodes
  std::string label;
  std::string tooltip;
  EdgeStyle style = EdgeStyle::kSolid;
  Role role = Role::kCall;
  Accent accent = Accent::kNone;
  Metrics metrics;  // call: the callee's inclusive_ns and calls; flow: calls = links folded in
  double penwidth = 1.0;
  bool constraint = true;  // false: the edge does not influence the ranking (Graphviz constraint)
};

struct Cluster {
  std::string id;  // stable path, unique among clusters
  std::string label;
  std::string tooltip;
  int parent = -1;  // enclosing cluster, -1 for a top-level cluster
  Role role = Role::kNone;
  Accent accent = Accent::kNone;
  int index = 0;  // kStage: the stage number (tints cycle)
  int fold = 1;   // > 1 when this cluster stands for that many identical siblings ("×N")
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
