// `tracedot model run.db -o model.svg [--depth D] [--rank R] [--expand]`: the network as nested
// module clusters with parameters, shapes and the parallel layout (see
// dot/include/tracerun/dot/model_graph.h). Flags and output only.
#include <memory>

#include "dot_commands.h"
#include "tracerun/dot/model_graph.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

Command addModelCommand(CLI::App& parent) {
  struct Flags {
    std::string path;
    GraphOutput out;
    dot::ModelGraphOptions options;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* app = parent.add_subcommand(
      "model", "The model's modules as nested clusters: parameters, shapes, stage/TP/ZeRO layout");
  app->add_option("trace", f->path, "the trace file (run.db) with module scopes")->required();
  addOutputOptions(app, f->out);
  app->add_option("--rank", f->options.rank,
                  "draw only this rank's modules (default: the whole job, each module from the "
                  "lowest rank that ran it)")
      ->check(atLeast(0));
  app->add_option("--depth", f->options.depth,
                  "module levels drawn (1: top-level modules only; default: all)")
      ->check(atLeast(1));
  app->add_flag("--expand", f->options.expand, "do not fold identical consecutive modules (xN)");
  return {app, [f] {
            return withPath(f->path, [&] {
              const auto reader = trace::TraceReader::open(f->path);
              writeGraph(dot::buildModelGraph(reader, f->options), f->out);
              return kExitOk;
            });
          }};
}

}  // namespace tracerun::tools
