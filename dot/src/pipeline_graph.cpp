// The pipeline picture (see pipeline_graph.h).
#include "tracerun/dot/pipeline_graph.h"

#include "tracerun/trace/error.h"

namespace tracerun::dot {

Graph buildPipelineGraph(const trace::TraceReader& reader, const PipelineGraphOptions&) {
  throw trace::TraceError(reader.path() + ": tracedot pipeline is not written yet");
}

}  // namespace tracerun::dot
