// Folding of one step's autograd graph (trace/analysis/autograd.h) for drawing: in each backward
// pass, consecutive identical layers ("layers.3", "layers.4", ...: same nodes in the same order,
// joined by the same edges) are drawn once as ×N, and when even that exceeds the node budget the
// shortest drawn nodes go into one "other" node that keeps their counts and time. Index maps only:
// builds no Graph (autograd_graph.cpp does), lays out nothing, reads no SQL.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/autograd.h"
#include "tracerun/trace/reader.h"

namespace tracerun::dot {

struct AutogradRun {
  std::string pattern;               // the layers' scope with the number as '*': "layers.*"
  std::vector<std::string> members;  // "layers.0", "layers.1", ... in order
  int pass = 0;                      // the backward pass it belongs to
};

struct AutogradFolding {
  // Per analysis node: the analysis node drawn for it (itself, or its twin in the run's first
  // layer), or -1 when pruned into "other".
  std::vector<int> rep;
  // Per analysis node: the run its layer belongs to (index into runs), -1 when not folded, and
  // which member of that run (0 = the drawn one).
  std::vector<int> run, member;
  std::vector<AutogradRun> runs;
  // The number of drawn nodes pruned into "other" (0: no "other" node).
  int64_t pruned = 0;
};

// A layer scope: a module name ending in ".<digits>" ("layers.12"); its pattern is "layers.*".
// Returns false for other names.
bool layerScope(const std::string& name, std::string& pattern);

// The identity mapping: every node drawn as itself (--expand).
AutogradFolding noFolding(const trace::analysis::AutogradGraph& ag);

// Folds runs of consecutive identical layers within each backward pass.
AutogradFolding foldLayers(const trace::TraceReader& reader,
                           const trace::analysis::AutogradGraph& ag);

// When more than `budget` nodes would be drawn, keeps the budget - 1 drawn nodes with the longest
// (summed) backward time and maps the rest to "other" (rep -1).
void pruneToBudget(const trace::analysis::AutogradGraph& ag, AutogradFolding& folding, int budget);

}  // namespace tracerun::dot
