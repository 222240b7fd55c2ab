// The model diagram: trace/'s model tree (buildModelTree) turned into a neutral Graph — modules
// nested as clusters (leaves as boxes) with path, type and parameter counts (logical and on the
// module's rank) and the parallel layout (pipeline stage and chunk clusters, TP split, ZeRO-3
// unit). With the tree's dataflow (tensor identities, ModelFlow) it draws each module call, the
// functional ops between modules and an edge wherever a tensor passes, left to right
// (model_flow_graph.cpp); without, edges chain consecutive modules in call order with the shapes
// between them. Runs of identical consecutive modules fold into one ×N cluster per stage. Counts
// nothing itself beyond folding; never lays out.
#pragma once

#include <string>
#include <vector>

#include "tracerun/dot/graph.h"
#include "tracerun/trace/analysis/model.h"
#include "tracerun/trace/reader.h"

namespace tracerun::dot {

struct ModelGraphOptions {
  int rank = -1;        // -1: the whole job (each module from the lowest rank that ran it)
  int depth = -1;       // module levels drawn (1: top-level modules only); -1: no limit
  bool expand = false;  // do not fold identical consecutive modules
  // Ids of ×N folds ("module/layers.0", the first member's) to draw unfolded (traceview's click).
  std::vector<std::string> expand_folds;
};

// Optional output for a reader that maps spans to the picture (traceview): for each module of the
// tree, the node or cluster that draws it (a fold's members all name the fold's), -1 for neither
// (a module below the depth drawn).
struct ModelGraphMap {
  std::vector<int> node_of, cluster_of;
};

// Throws trace::TraceError naming the file when the trace has no forward module scopes (or none
// on the rank asked for), or no such rank.
Graph buildModelGraph(const trace::TraceReader& reader, const ModelGraphOptions& options);

// The same from a tree already built; `source` names it in the title.
Graph buildModelGraph(const trace::analysis::ModelTree& tree, const ModelGraphOptions& options,
                      const std::string& source, ModelGraphMap* map = nullptr);

}  // namespace tracerun::dot
