// Builds the neutral graph of one step's backward from the autograd analysis (autograd_graph.h).
// Plain loops over the analysis' vectors: no recursion, no Graphviz, no SQL.
#include "tracerun/dot/autograd_graph.h"

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "autograd_fold.h"
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

// The graph while it is built: the analysis, its folding, and the index maps between them.
class Builder {
 public:
  Builder(const trace::TraceReader& reader, const trace::analysis::AutogradGraph& ag,
          AutogradFolding folding)
      : r_(reader), ag_(ag), f_(std::move(folding)), drawnOf_(ag.nodes.size(), -1) {}

  Graph build() {
    g_.title =
        "autograd graph: rank " + std::to_string(ag_.rank) +
        (ag_.step >= 0 ? ", step " + std::to_string(ag_.step) : std::string(", whole trace"));
    g_.direction = Direction::kTopToBottom;
    addNodes();
    addEdges();
    caption();
    return std::move(g_);
  }

 private:
  // A module name as drawn: a folded node's layer scope with the number as '*'.
  std::string moduleName(int i, core::StringId m) const {
    const std::string name = r_.str(m);
    const int run = f_.run[static_cast<size_t>(i)];
    if (run < 0) return name;
    const AutogradRun& x = f_.runs[static_cast<size_t>(run)];
    const std::string& layer = x.members.front();
    const size_t slash = x.pattern.rfind('/');
    const std::string pattern =
        slash == std::string::npos ? x.pattern : x.pattern.substr(slash + 1);
    if (name.compare(0, layer.size(), layer) == 0 &&
        (name.size() == layer.size() || name[layer.size()] == '.')) {
      return pattern + name.substr(layer.size());
    }
    return name;
  }

  // Clusters: one per module scope chain prefix, outer ones first (created as nodes need them).
  int clusterFor(int i) {
    const auto& mods = ag_.nodes[static_cast<size_t>(i)].modules;
    const int run = f_.run[static_cast<size_t>(i)];
    int parent = -1;
    std::string id = "module";
    for (core::StringId m : mods) {
      const std::string name = moduleName(i, m);
      id += '/';
      id += name;
      auto it = clusterOf_.find(id);
      if (it == clusterOf_.end()) {
        Cluster c;
        c.id = id;
        c.label = name;
        c.tooltip = "module " + id.substr(7);
        c.parent = parent;
        c.role = Role::kScope;
        const AutogradRun* x = run >= 0 ? &f_.runs[static_cast<size_t>(run)] : nullptr;
        if (x != nullptr && x->pattern.size() >= name.size() &&
            x->pattern.compare(x->pattern.size() - name.size(), name.size(), name) == 0) {
          const AutogradRun& x = f_.runs[static_cast<size_t>(run)];
          c.fold = static_cast<int>(x.members.size());
          c.label += " \u00d7" + std::to_string(c.fold);
          c.tooltip += "\nfolded: " + std::to_string(c.fold) + " identical layers (" +
                       x.members.front() + " .. " + x.members.back() + ")";
        }
        it = clusterOf_.emplace(id, g_.addCluster(std::move(c))).first;
      }
      parent = it->second;
    }
    return parent;
  }

  void addNodes() {
    std::vector<int64_t> calls(ag_.nodes.size(), 0), time(ag_.nodes.size(), 0);
    for (size_t i = 0; i < ag_.nodes.size(); ++i) {
      const int rep = f_.rep[i];
      if (rep < 0) {
        ++otherCalls_;
        otherTime_ += ag_.nodes[i].dur_ns;
        continue;
      }
      ++calls[static_cast<size_t>(rep)];
      time[static_cast<size_t>(rep)] += ag_.nodes[i].dur_ns;
    }
    for (size_t i = 0; i < ag_.nodes.size(); ++i) {
      if (f_.rep[i] != static_cast<int>(i)) continue;
      drawnOf_[i] = g_.addNode(nodeFor(static_cast<int>(i), calls[i], time[i]));
    }
    if (otherCalls_ > 0) {
      Node o;
      o.id = "ag/other";
      o.label = "other\n" + std::to_string(f_.pruned) + " nodes (" + std::to_string(otherCalls_) +
                " autograd nodes)\n" + trace::formatDuration(otherTime_);
      o.tooltip = "pruned to fit the node budget: " + std::to_string(otherCalls_) +
                  " autograd nodes, backward " + trace::formatDuration(otherTime_);
      o.shape = NodeShape::kNote;
      o.role = Role::kOther;
      o.metrics.calls = otherCalls_;
      o.metrics.duration_ns = otherTime_;
      other_ = g_.addNode(std::move(o));
    }
    for (int& d : drawnOf_) {
      if (d < 0) d = other_;
    }
    for (size_t i = 0; i < ag_.nodes.size(); ++i) {
      if (f_.rep[i] >= 0) drawnOf_[i] = drawnOf_[static_cast<size_t>(f_.rep[i])];
    }
  }

  Node nodeFor(int i, int64_t calls, int64_t time) {
    const trace::analysis::AutogradNode& n = ag_.nodes[static_cast<size_t>(i)];
    const std::string name = r_.str(n.name);
    std::string mods;
    for (core::StringId m : n.modules) mods += (mods.empty() ? "" : "/") + moduleName(i, m);
    const int run = f_.run[static_cast<size_t>(i)];
    Node node;
    node.id = "ag/" + (mods.empty() ? std::string() : mods + "/") + shortName(name) + "#" +
              std::to_string(i);
    node.label = shortName(name);
    node.tooltip = name;
    if (n.seq >= 0) node.tooltip += "\nseq " + std::to_string(n.seq);
    node.tooltip += "\nbackward " + trace::formatDuration(time);
    node.metrics.duration_ns = time;
    node.metrics.calls = calls;
    if (run >= 0) {
      const AutogradRun& x = f_.runs[static_cast<size_t>(run)];
      node.fold = static_cast<int>(x.members.size());
      node.tooltip += "\nfold: " + std::to_string(node.fold) + "\nmembers: " + x.members.front() +
                      " .. " + x.members.back() + "\nnodes: " + std::to_string(calls);
    }
    if (n.accumulate_grad) {
      node.shape = NodeShape::kEllipse;
      node.role = Role::kInput;
      const std::string shape = r_.str(n.shape);
      // The innermost scope names the parameter's module (scopes hold full paths: "layers.1.mlp").
      node.label +=
          "\n" + (mods.empty() ? std::string("parameter") : moduleName(i, n.modules.back()));
      if (!shape.empty()) node.label += "\n" + shape;
      node.tooltip += "\nparameter " + (mods.empty() ? std::string("(no module scope)") : mods) +
                      (shape.empty() ? std::string() : " " + shape);
    } else {
      node.shape = NodeShape::kBox;
      node.role = Role::kFunction;
      if (n.forward_name != 0) {
        node.label += "\n\u2190 " + r_.str(n.forward_name);
        node.tooltip += "\nforward " + r_.str(n.forward_name);
        const std::string detail = r_.str(n.forward_detail);
        if (!detail.empty()) node.tooltip += " (" + detail + ")";
      }
      if (!mods.empty()) node.tooltip += "\nmodule " + mods;
    }
    if (node.fold > 1) node.label += " \u00d7" + std::to_string(node.fold);
    if (n.recomputed) {
      node.accent = Accent::kRecomputed;
      node.penwidth = 2.0;
      node.label += "\nrecomputed";
    }
    if (!hasIn(i)) {
      node.penwidth = 2.5;  // a root: where a backward pass starts
      node.tooltip += "\nroot of backward pass " + std::to_string(n.pass);
    }
    node.cluster = clusterFor(i);
    return node;
  }

  bool hasIn(int i) {
    if (hasIn_.empty()) {
      hasIn_.assign(ag_.nodes.size(), 0);
      for (const auto& e : ag_.edges) hasIn_[static_cast<size_t>(e.to)] = 1;
    }
    return hasIn_[static_cast<size_t>(i)] != 0;
  }

  // Edges between drawn nodes; those inside a fold (one member to another) are not drawn, and
  // edges folded onto the same drawn pair and input count once (Metrics::calls: how many).
  void addEdges() {
    std::map<int, int> maxInput;  // drawn node -> its largest input number
    std::map<std::tuple<int, int, int>, int> seen;
    for (const auto& e : ag_.edges) {
      const auto a = static_cast<size_t>(e.from), b = static_cast<size_t>(e.to);
      if (f_.run[a] >= 0 && f_.run[a] == f_.run[b] && f_.member[a] != f_.member[b]) continue;
      const int from = drawnOf_[a], to = drawnOf_[b];
      if (from == to && from == other_) continue;
      const bool hidden = from == other_ || to == other_;
      const int input = hidden ? -1 : e.input_nr;
      auto [it, fresh] = seen.emplace(std::make_tuple(from, to, input), -1);
      if (!fresh) {
        ++g_.edges[static_cast<size_t>(it->second)].metrics.calls;
        continue;
      }
      Edge edge;
      edge.from = from;
      edge.to = to;
      edge.metrics.calls = 1;
      if (hidden) {
        edge.role = Role::kHiddenCall;
        edge.style = EdgeStyle::kDashed;
        edge.tooltip = "through pruned nodes";
      } else {
        maxInput[to] = std::max(maxInput[to], e.input_nr);
        edge.tooltip =
            "output " + std::to_string(e.output_nr) + " -> input " + std::to_string(e.input_nr);
        edge.label = std::to_string(e.input_nr);  // kept only where the target has several
      }
      it->second = g_.addEdge(std::move(edge));
    }
    for (Edge& edge : g_.edges) {
      if (edge.role == Role::kHiddenCall) continue;
      edge.label = maxInput[edge.to] > 0 ? "in " + edge.label : std::string();
    }
  }

  void caption() {
    g_.caption = std::to_string(ag_.nodes.size()) + " nodes (" + std::to_string(leavesTotal()) +
                 " AccumulateGrad), " + std::to_string(ag_.edges.size()) + " edges, " +
                 std::to_string(ag_.passes) +
                 (ag_.passes == 1 ? " backward pass" : " backward passes");
    if (recomputedTotal() > 0)
      g_.caption += ", " + std::to_string(recomputedTotal()) + " recomputed";
    if (!f_.runs.empty()) {
      std::map<std::string, std::vector<int>> byPattern;  // "layers.* ×4" -> passes
      for (const AutogradRun& x : f_.runs) {
        byPattern[x.pattern + " \u00d7" + std::to_string(x.members.size())].push_back(x.pass);
      }
      std::string list;
      for (const auto& [what, passes] : byPattern) {
        list += (list.empty() ? "" : ", ") + what + " (" + std::to_string(passes.size()) +
                (passes.size() == 1 ? " pass)" : " passes)");
      }
      g_.caption += "\nfolded identical layers: " + list + " (--expand draws each)";
    }
    if (otherCalls_ > 0) {
      g_.caption += "\nover the node budget: " + std::to_string(f_.pruned) + " nodes (" +
                    std::to_string(otherCalls_) + " autograd nodes, " +
                    trace::formatDuration(otherTime_) +
                    " of backward) drawn as \"other\"; --max-nodes draws more";
    }
    if (ag_.unresolved_edges > 0) {
      g_.caption += "\n" + std::to_string(ag_.unresolved_edges) +
                    " edges lead to nodes that did not run in the step (not drawn)";
    }
    if (ag_.nodes_without_edges > 0) {
      g_.caption += "\n" + std::to_string(ag_.nodes_without_edges) +
                    " nodes were recorded without their edges";
    }
  }

  int64_t leavesTotal() const {
    return std::count_if(ag_.nodes.begin(), ag_.nodes.end(),
                         [](const auto& n) { return n.accumulate_grad; });
  }
  int64_t recomputedTotal() const {
    return std::count_if(ag_.nodes.begin(), ag_.nodes.end(),
                         [](const auto& n) { return n.recomputed; });
  }

  const trace::TraceReader& r_;
  const trace::analysis::AutogradGraph& ag_;
  AutogradFolding f_;
  std::vector<int> drawnOf_;  // analysis node -> drawn node
  std::vector<char> hasIn_;
  std::map<std::string, int> clusterOf_;  // "module/a/b" -> index
  Graph g_;
  int other_ = -1;
  int64_t otherCalls_ = 0, otherTime_ = 0;
};

}  // namespace

Graph buildAutogradGraph(const trace::TraceReader& reader, const trace::analysis::AutogradGraph& ag,
                         const AutogradDrawOptions& draw) {
  AutogradFolding folding = draw.fold ? foldLayers(reader, ag) : noFolding(ag);
  if (draw.max_nodes > 0) pruneToBudget(ag, folding, draw.max_nodes);
  return Builder(reader, ag, std::move(folding)).build();
}

Graph autogradGraph(const trace::TraceReader& reader,
                    const trace::analysis::AutogradOptions& options,
                    const AutogradDrawOptions& draw) {
  return buildAutogradGraph(reader, trace::analysis::buildAutogradGraph(reader, options), draw);
}

}  // namespace tracerun::dot
