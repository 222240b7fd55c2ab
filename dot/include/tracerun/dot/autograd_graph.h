// The autograd builder: one step's backward graph (trace/analysis/autograd.h) as a neutral Graph —
// autograd nodes and their next edges, AccumulateGrad leaves with the parameter's module and shape,
// each node's forward op, clusters for the forward module scopes, recomputed nodes marked. No
// layout, no rendering, no SQL (the analysis reads the trace). Loops only: any depth builds.
#pragma once

#include "tracerun/dot/graph.h"
#include "tracerun/trace/analysis/autograd.h"
#include "tracerun/trace/reader.h"

namespace tracerun::dot {

// Builds the graph of an analysed step. Node ids are "ag/<module path>/<name>#<k>" (k: the node's
// index in start order), cluster ids "module/<path>"; edges point from a node to its next node
// (the direction gradients flow), labelled with the target's input number when it has several.
Graph buildAutogradGraph(const trace::TraceReader& reader,
                         const trace::analysis::AutogradGraph& autograd);

// Runs the analysis (which throws TraceError on a trace without backward nodes) and builds.
Graph autogradGraph(const trace::TraceReader& reader,
                    const trace::analysis::AutogradOptions& options = {});

}  // namespace tracerun::dot
