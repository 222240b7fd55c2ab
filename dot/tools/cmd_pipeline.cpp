// `tracedot pipeline run.db -o pp.svg [--step S] [--replica R]`: one step of a pipeline-parallel
// run as a dependency graph with its critical path (see dot/include/tracerun/dot/pipeline_graph.h).
// Flags and output only.
#include <memory>

#include "dot_commands.h"
#include "tracerun/dot/pipeline_graph.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

Command addPipelineCommand(CLI::App& parent) {
  struct Flags {
    std::string path;
    GraphOutput out;
    int step = -1;
    int replica = 0;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* app = parent.add_subcommand(
      "pipeline", "One step's pipeline schedule as a dependency graph, critical path in red");
  app->add_option("trace", f->path, "the trace file (run.db) of a pipeline-parallel run")
      ->required();
  addOutputOptions(app, f->out);
  app->add_option("--step", f->step, "the step drawn (default: the second, or the only one)")
      ->check(atLeast(0));
  app->add_option("--replica", f->replica,
                  "the data-parallel copy of the pipeline drawn (default 0; the caption says how "
                  "many there are)")
      ->check(atLeast(0));
  return {app, [f] {
            return withPath(f->path, [&] {
              const auto reader = trace::TraceReader::open(f->path);
              dot::PipelineGraphOptions o;
              o.step = f->step;
              o.replica = f->replica;
              o.max_nodes = f->out.max_nodes;
              writeGraph(dot::buildPipelineGraph(reader, o), f->out);
              return kExitOk;
            });
          }};
}

}  // namespace tracerun::tools
