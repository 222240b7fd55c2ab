// The call graph picture: trace/'s call-graph analysis (buildCallGraph) turned into a neutral
// Graph — nodes with calls, inclusive and exclusive time, share and bytes, temperature colours,
// pruning that conserves totals ("other (k nodes, x%)"), identical sibling subtrees folded into one
// ×N node, forward -> backward links, collectives as hexagons, and an optional diff against a
// second trace. Computes no statistics of its own beyond pruning and folding; never lays out.
#pragma once

#include <string>
#include <vector>

#include "tracerun/dot/graph.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/reader.h"

namespace tracerun::dot {

enum class ColorBy { kSelf, kTotal, kBytes };

struct CallGraphGraphOptions {
  int rank = -1;              // -1: every rank merged
  int step = -1;              // -1: every step (the whole run)
  int depth = -1;             // deepest scope/op level drawn below the root (-1: no limit)
  double node_thres = 0.005;  // a node whose inclusive share is below this goes into "other"
  double edge_thres = 0.001;  // a link (forward -> backward...) below this share is not drawn
  ColorBy color_by = ColorBy::kTotal;
  bool expand = false;  // do not fold identical sibling subtrees
  int max_nodes = 600;  // the node budget: thresholds are raised until the graph fits
  // Ids of ×N nodes ("all/step/forward/layers.*") to draw unfolded (traceview's click on a fold).
  std::vector<std::string> expand_folds;
  // Weigh by GPU time: kernels under the ops that launched them (CallGraphOptions::gpu_time).
  bool gpu_time = false;
};

// Optional output for a reader that maps spans to nodes (traceview): trace/'s call graph the
// picture was built from and, for each of its nodes, the index of the drawn node that shows it
// (itself, the fold it was folded into, or the "other" node or ancestor that hides it).
struct CallGraphGraphMap {
  trace::analysis::CallGraph analysis;
  std::vector<int> drawn_of;
};

// Builds the picture of `reader`'s trace. With `base` (--diff), colours say how each node's time
// (or bytes with kBytes) changed from `base` to `reader`. Throws trace::TraceError naming the
// file for a rank or step the trace does not have.
Graph buildCallGraphGraph(const trace::TraceReader& reader, const CallGraphGraphOptions& options,
                          const trace::TraceReader* base = nullptr,
                          CallGraphGraphMap* map = nullptr);

}  // namespace tracerun::dot
