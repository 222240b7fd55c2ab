// The pipeline picture: one step of a pipeline-parallel run as a dependency graph of its actions
// (stage, microbatch, chunk, forward/backward, measured durations), with order-on-rank edges,
// send -> receive edges, the critical path (longest path by measured time) drawn red and bold, and
// each stage's bubble in the caption. Built on trace/'s pipeline analysis; never lays out.
#pragma once

#include "tracerun/dot/graph.h"
#include "tracerun/trace/reader.h"

namespace tracerun::dot {

struct PipelineGraphOptions {
  int step = -1;  // -1: the first complete step after the first one (warm-up excluded) or the only
  int replica = 0;      // which data-parallel copy of the pipeline (0..replicas-1)
  int max_nodes = 600;  // over it, sends and receives are not drawn (the caption says so)
};

// Throws trace::TraceError naming the file when the trace has no pipeline, not that step or not
// that replica.
Graph buildPipelineGraph(const trace::TraceReader& reader, const PipelineGraphOptions& options);

}  // namespace tracerun::dot
