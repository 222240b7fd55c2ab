// `tracedot autograd run.db -o ag.svg [--rank R] [--step S]`: one step's backward graph (see
// dot/include/tracerun/dot/autograd_graph.h). Flags and output only.
#include <memory>

#include "dot_commands.h"
#include "tracerun/dot/autograd_graph.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

Command addAutogradCommand(CLI::App& parent) {
  struct Flags {
    std::string path;
    GraphOutput out;
    int rank = 0;
    int step = -1;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* app = parent.add_subcommand(
      "autograd",
      "One step's backward graph: autograd nodes, their edges, parameters, forward ops, modules");
  app->add_option("trace", f->path, "the trace file (run.db)")->required();
  addOutputOptions(app, f->out);
  app->add_option("--rank", f->rank, "the rank drawn (default 0)")->check(atLeast(0));
  app->add_option("--step", f->step, "the step drawn (default: the first that ran backward nodes)")
      ->check(atLeast(0));
  return {app, [f] {
            return withPath(f->path, [&] {
              const auto reader = trace::TraceReader::open(f->path);
              trace::analysis::AutogradOptions o;
              o.rank = f->rank;
              o.step = f->step;
              writeGraph(dot::autogradGraph(reader, o), f->out);
              return kExitOk;
            });
          }};
}

}  // namespace tracerun::tools
