// `tracedot autograd run.db -o ag.svg [--rank R] [--step S] [--expand]`: one step's backward graph
// (see dot/include/tracerun/dot/autograd_graph.h), identical layers folded ×N and pruned to the
// node budget unless --expand. Flags and output only.
#include <memory>
#include <string>

#include "dot_commands.h"
#include "tracerun/dot/autograd_graph.h"
#include "tracerun/dot/layout.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

Command addAutogradCommand(CLI::App& parent) {
  struct Flags {
    std::string path;
    GraphOutput out;
    int rank = 0;
    int step = -1;
    bool expand = false;
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
  app->add_flag("--expand", f->expand,
                "draw every autograd node: no xN folding of identical layers, no \"other\" node");
  return {app, [f] {
            return withPath(f->path, [&] {
              const auto reader = trace::TraceReader::open(f->path);
              trace::analysis::AutogradOptions o;
              o.rank = f->rank;
              o.step = f->step;
              dot::AutogradDrawOptions draw;
              draw.fold = !f->expand;
              draw.max_nodes = f->expand ? 0 : f->out.max_nodes;
              const dot::Graph g = dot::autogradGraph(reader, o, draw);
              if (f->expand && static_cast<int>(g.nodes.size()) > f->out.max_nodes) {
                throw dot::LayoutError("the graph has " + std::to_string(g.nodes.size()) +
                                       " nodes, more than the node budget of " +
                                       std::to_string(f->out.max_nodes) +
                                       "; drop --expand to fold identical layers, or raise "
                                       "--max-nodes");
              }
              writeGraph(g, f->out);
              return kExitOk;
            });
          }};
}

}  // namespace tracerun::tools
