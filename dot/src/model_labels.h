// What a model diagram writes about a module: its label (path, type, parameters, TP/ZeRO layout),
// tooltip and accent, and the diagram's caption. Shared by the two model builders (the call-order
// chain, model_graph.cpp, and the dataflow, model_flow_graph.cpp); draws and lays out nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/dot/graph.h"
#include "tracerun/trace/analysis/model.h"

namespace tracerun::dot::model_labels {

std::string grouped(int64_t n);  // 11181642 -> "11,181,642"

// `run`: module indices drawn as one (a ×N fold when more than one). `first_line` replaces the
// first line (the path) when not empty.
std::string labelOf(const trace::analysis::ModelTree& tree, const std::vector<int>& run,
                    const std::string& first_line = "");
std::string tooltipOf(const trace::analysis::ModelTree& tree, const std::vector<int>& run);
Accent accentOf(const trace::analysis::ModuleNode& m);

// The caption: parameters, module counts, the parallel layout, ranks read, depth.
std::string captionOf(const trace::analysis::ModelTree& tree, int depth);

}  // namespace tracerun::dot::model_labels
