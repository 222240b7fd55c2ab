// The dataflow model diagram (model_flow_graph.cpp): buildModelGraph's picture when the tree has a
// dataflow (trace/'s ModelFlow). Private to dot/; the public entry is model_graph.h.
#pragma once

#include <string>

#include "tracerun/dot/model_graph.h"

namespace tracerun::dot {

Graph buildModelFlowGraph(const trace::analysis::ModelTree& tree, const ModelGraphOptions& options,
                          const std::string& source, ModelGraphMap* map);

}  // namespace tracerun::dot
