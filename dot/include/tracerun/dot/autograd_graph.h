// The autograd builder: one step's backward graph (trace/analysis/autograd.h) as a neutral Graph —
// autograd nodes and their next edges, AccumulateGrad leaves with the parameter's module and shape,
// each node's forward op, clusters for the forward module scopes, recomputed nodes marked;
// identical layers folded ×N and an "other" node under a budget when asked. No layout, no
// rendering, no SQL (the analysis reads the trace). Loops only: any depth builds.
#pragma once

#include "tracerun/dot/graph.h"
#include "tracerun/trace/analysis/autograd.h"
#include "tracerun/trace/reader.h"

namespace tracerun::dot {

// How the step is drawn. The defaults draw every node as itself (no folding, no budget).
struct AutogradDrawOptions {
  // Consecutive identical layers of each backward pass drawn once as ×N (autograd_fold.h); the
  // node's Metrics::calls is the number of autograd nodes it stands for and duration_ns their
  // summed backward time, so the drawn totals equal the analysis'.
  bool fold = false;
  // > 0: at most this many nodes are drawn; the shortest drawn nodes beyond it go into one
  // "other" node (its calls and duration_ns their sums), and the caption says so.
  int max_nodes = 0;
};

// Builds the graph of an analysed step. Node ids are "ag/<module path>/<name>#<k>" (k: the node's
// index in start order), cluster ids "module/<path>"; edges point from a node to its next node
// (the direction gradients flow), labelled with the target's input number when it has several.
// Folded nodes take the first layer's ids and clusters with the number as '*' ("layers.*").
Graph buildAutogradGraph(const trace::TraceReader& reader,
                         const trace::analysis::AutogradGraph& autograd,
                         const AutogradDrawOptions& draw = {});

// Runs the analysis (which throws TraceError on a trace without backward nodes) and builds.
Graph autogradGraph(const trace::TraceReader& reader,
                    const trace::analysis::AutogradOptions& options = {},
                    const AutogradDrawOptions& draw = {});

}  // namespace tracerun::dot
