// `tracedot callgraph run.db -o cg.svg [...]`: the dispatcher call graph of a trace (see
// dot/include/tracerun/dot/callgraph_graph.h for what it draws). Flags and output only.
#include <memory>

#include "dot_commands.h"
#include "tracerun/dot/callgraph_graph.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

namespace {

struct CallgraphFlags {
  std::string path;
  std::string diff;
  GraphOutput out;
  int rank = -1, step = -1, depth = -1;
  std::string node_thres = "0.5%", edge_thres = "0.1%";
  std::string color_by = "total";
  std::string time = "cpu";
  bool expand = false;
};

int runCallgraph(const CallgraphFlags& f) {
  const auto reader = trace::TraceReader::open(f.path);
  dot::CallGraphGraphOptions o;
  o.rank = f.rank;
  o.step = f.step;
  o.depth = f.depth;
  o.node_thres = parseShare(f.node_thres);
  o.edge_thres = parseShare(f.edge_thres);
  o.color_by = f.color_by == "self"    ? dot::ColorBy::kSelf
               : f.color_by == "bytes" ? dot::ColorBy::kBytes
                                       : dot::ColorBy::kTotal;
  o.expand = f.expand;
  o.gpu_time = f.time == "gpu";
  o.max_nodes = f.out.max_nodes;
  dot::Graph g;
  if (f.diff.empty()) {
    g = dot::buildCallGraphGraph(reader, o);
  } else {
    const auto base = trace::TraceReader::open(f.diff);  // its errors name f.diff
    g = dot::buildCallGraphGraph(reader, o, &base);
  }
  writeGraph(g, f.out);
  return kExitOk;
}

}  // namespace

Command addCallgraphCommand(CLI::App& parent) {
  auto f = std::make_shared<CallgraphFlags>();
  CLI::App* app = parent.add_subcommand(
      "callgraph", "The call graph: phases, module scopes, ops and nested ops with time and bytes");
  app->add_option("trace", f->path, "the trace file (run.db)")->required();
  addOutputOptions(app, f->out);
  app->add_option("--rank", f->rank, "one rank only (default: every rank merged)")
      ->check(atLeast(0));
  app->add_option("--step", f->step, "one training step only (its 'step' argument)")
      ->check(atLeast(0));
  app->add_option("--depth", f->depth, "levels drawn below the top (default: all)")
      ->check(atLeast(1));
  app->add_option("--node-thres", f->node_thres,
                  "nodes under this share of the total go into 'other' (default 0.5%)")
      ->check(shareCheck());
  app->add_option("--edge-thres", f->edge_thres,
                  "links (forward -> backward) under this share are not drawn (default 0.1%)")
      ->check(shareCheck());
  app->add_option("--color-by", f->color_by, "self, total (time) or bytes (default total)")
      ->check(CLI::IsMember({"self", "total", "bytes"}));
  app->add_option("--time", f->time,
                  "cpu (op time) or gpu (kernels, by short name, under the ops that launched "
                  "them; default cpu)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
  app->add_flag("--expand", f->expand, "do not fold identical sibling subtrees into one xN node");
  app->add_option("--diff", f->diff,
                  "colour by the change against this trace (blue: less, red: more)");
  return {app, [f] { return withPath(f->path, [&] { return runCallgraph(*f); }); }};
}

}  // namespace tracerun::tools
