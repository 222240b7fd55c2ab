// Builds the neutral graph of one step's backward from the autograd analysis (autograd_graph.h).
// Plain loops over the analysis' vectors: no recursion, no Graphviz, no SQL.
#include "tracerun/dot/autograd_graph.h"

#include <algorithm>
#include <map>
#include <string>

#include "tracerun/trace/format.h"

namespace tracerun::dot {

namespace {

// "torch::autograd::AccumulateGrad" -> "AccumulateGrad",
// "torch::autograd::CppNode<ns::(anonymous namespace)::Fn>" -> "CppNode<Fn>" (labels only;
// tooltips keep the name).
std::string lastPart(const std::string& name) {
  const size_t colon = name.rfind("::");
  return colon == std::string::npos ? name : name.substr(colon + 2);
}
std::string shortName(const std::string& name) {
  const size_t open = name.find('<');
  if (open == std::string::npos || name.back() != '>') return lastPart(name);
  return lastPart(name.substr(0, open)) + "<" +
         lastPart(name.substr(open + 1, name.size() - open - 2)) + ">";
}

std::string modulePath(const trace::TraceReader& reader, const std::vector<core::StringId>& mods) {
  std::string path;
  for (core::StringId m : mods) {
    if (!path.empty()) path += '/';
    path += reader.str(m);
  }
  return path;
}

}  // namespace

Graph buildAutogradGraph(const trace::TraceReader& reader,
                         const trace::analysis::AutogradGraph& ag) {
  Graph g;
  g.title = "autograd graph: rank " + std::to_string(ag.rank) +
            (ag.step >= 0 ? ", step " + std::to_string(ag.step) : std::string(", whole trace"));
  g.direction = Direction::kTopToBottom;

  // Clusters: one per module scope chain prefix, outer ones first (created as nodes need them).
  std::map<std::string, int> clusterOf;  // "module/a/b" -> index
  auto clusterFor = [&](const std::vector<core::StringId>& mods) {
    int parent = -1;
    std::string id = "module";
    for (core::StringId m : mods) {
      id += '/';
      id += reader.str(m);
      auto it = clusterOf.find(id);
      if (it == clusterOf.end()) {
        Cluster c;
        c.id = id;
        c.label = reader.str(m);
        c.tooltip = "module " + id.substr(7);
        c.parent = parent;
        c.role = Role::kScope;
        it = clusterOf.emplace(id, g.addCluster(std::move(c))).first;
      }
      parent = it->second;
    }
    return parent;
  };

  // The largest input number each node receives (edges are labelled when a node has several).
  std::vector<int> maxInput(ag.nodes.size(), 0);
  std::vector<char> hasIn(ag.nodes.size(), 0);
  for (const auto& e : ag.edges) {
    maxInput[e.to] = std::max(maxInput[e.to], e.input_nr);
    hasIn[e.to] = 1;
  }

  int recomputed = 0, leaves = 0;
  for (size_t i = 0; i < ag.nodes.size(); ++i) {
    const trace::analysis::AutogradNode& n = ag.nodes[i];
    const std::string name = reader.str(n.name);
    const std::string mods = modulePath(reader, n.modules);
    Node node;
    node.id = "ag/" + (mods.empty() ? std::string() : mods + "/") + shortName(name) + "#" +
              std::to_string(i);
    node.label = shortName(name);
    node.tooltip = name;
    if (n.seq >= 0) node.tooltip += "\nseq " + std::to_string(n.seq);
    node.tooltip += "\nbackward " + trace::formatDuration(n.dur_ns);
    node.metrics.duration_ns = n.dur_ns;
    if (n.accumulate_grad) {
      ++leaves;
      node.shape = NodeShape::kEllipse;
      node.role = Role::kInput;
      const std::string shape = reader.str(n.shape);
      // The innermost scope names the parameter's module (scopes hold full paths: "layers.1.mlp").
      node.label += "\n" + (mods.empty() ? std::string("parameter") : reader.str(n.modules.back()));
      if (!shape.empty()) node.label += "\n" + shape;
      node.tooltip += "\nparameter " + (mods.empty() ? std::string("(no module scope)") : mods) +
                      (shape.empty() ? std::string() : " " + shape);
    } else {
      node.shape = NodeShape::kBox;
      node.role = Role::kFunction;
      if (n.forward_name != 0) {
        node.label += "\n\u2190 " + reader.str(n.forward_name);
        node.tooltip += "\nforward " + reader.str(n.forward_name);
        const std::string detail = reader.str(n.forward_detail);
        if (!detail.empty()) node.tooltip += " (" + detail + ")";
      }
      if (!mods.empty()) node.tooltip += "\nmodule " + mods;
    }
    if (n.recomputed) {
      ++recomputed;
      node.accent = Accent::kRecomputed;
      node.penwidth = 2.0;
      node.label += "\nrecomputed";
    }
    if (!hasIn[i]) {
      node.penwidth = 2.5;  // a root: where a backward pass starts
      node.tooltip += "\nroot of backward pass " + std::to_string(n.pass);
    }
    node.cluster = clusterFor(n.modules);
    g.addNode(std::move(node));
  }

  for (const auto& e : ag.edges) {
    Edge edge;
    edge.from = e.from;
    edge.to = e.to;
    if (maxInput[e.to] > 0) edge.label = "in " + std::to_string(e.input_nr);
    edge.tooltip =
        "output " + std::to_string(e.output_nr) + " -> input " + std::to_string(e.input_nr);
    g.addEdge(std::move(edge));
  }

  g.caption = std::to_string(ag.nodes.size()) + " nodes (" + std::to_string(leaves) +
              " AccumulateGrad), " + std::to_string(ag.edges.size()) + " edges, " +
              std::to_string(ag.passes) + (ag.passes == 1 ? " backward pass" : " backward passes");
  if (recomputed > 0) g.caption += ", " + std::to_string(recomputed) + " recomputed";
  if (ag.unresolved_edges > 0) {
    g.caption += "\n" + std::to_string(ag.unresolved_edges) +
                 " edges lead to nodes that did not run in the step (not drawn)";
  }
  if (ag.nodes_without_edges > 0) {
    g.caption +=
        "\n" + std::to_string(ag.nodes_without_edges) + " nodes were recorded without their edges";
  }
  return g;
}

Graph autogradGraph(const trace::TraceReader& reader,
                    const trace::analysis::AutogradOptions& options) {
  return buildAutogradGraph(reader, trace::analysis::buildAutogradGraph(reader, options));
}

}  // namespace tracerun::dot
