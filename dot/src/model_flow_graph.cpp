// The model diagram drawn from the dataflow (trace/'s ModelFlow): one node per module call (a
// module called twice is drawn twice, "relu (2)"), containers as clusters, functional ops between
// modules as small nodes, input and output nodes, and an edge wherever a tensor passes. Runs of
// identical consecutive calls fold into one ×N cluster. No Graphviz, no SQL; the call-order chain
// for traces without tensor identities is model_graph.cpp's.
#include "model_flow_graph.h"

#include <algorithm>
#include <map>
#include <set>

#include "model_labels.h"

namespace tracerun::dot {
namespace {

using trace::analysis::FlowEdge;
using trace::analysis::FlowNode;
using trace::analysis::ModelFlow;
using trace::analysis::ModelTree;
using trace::analysis::ModuleNode;
using Kind = trace::analysis::FlowNode::Kind;

class FlowBuilder {
 public:
  FlowBuilder(const ModelTree& tree, const ModelGraphOptions& o, ModelGraphMap* map)
      : t_(tree),
        f_(tree.flow),
        o_(o),
        map_(map),
        keep_(o.expand_folds.begin(), o.expand_folds.end()) {
    drawn_.assign(f_.nodes.size(), -1);
    folds_.assign(f_.nodes.size(), {});
    if (map_) {
      map_->node_of.assign(t_.modules.size(), -1);
      map_->cluster_of.assign(t_.modules.size(), -1);
    }
  }

  Graph build(const std::string& source) {
    g_.direction = Direction::kLeftToRight;
    g_.title = "model: " + source + (o_.rank >= 0 ? " (rank " + std::to_string(o_.rank) + ")" : "");
    drawEnd(0, "input");
    drawSiblings(f_.roots, -1, true);
    drawEnd(1, "output");
    edges();
    g_.caption = model_labels::captionOf(t_, o_.depth) +
                 "\ndataflow from tensor identities: boxes are module calls, ellipses the "
                 "functional ops between them";
    return std::move(g_);
  }

 private:
  const FlowNode& node(int n) const { return f_.nodes[static_cast<size_t>(n)]; }
  const ModuleNode& mod(int n) const { return t_.modules[static_cast<size_t>(node(n).module)]; }

  std::string uniqueId(const std::string& base) {
    std::string id = base;
    for (int k = 2; !ids_.insert(id).second; ++k) id = base + "#" + std::to_string(k);
    return id;
  }

  // "layer1.0.relu", "layer1.0.relu (2)" for its second call in the pass.
  std::string callName(int n) const {
    return mod(n).path + (node(n).call > 1 ? " (" + std::to_string(node(n).call) + ")" : "");
  }

  void drawEnd(int n, const std::string& label) {
    Node d;
    d.id = uniqueId(label);
    d.label = label;
    d.shape = NodeShape::kRoundedBox;
    d.role = Role::kInput;
    drawn_[static_cast<size_t>(n)] = g_.addNode(std::move(d));
  }

  // Pre-order list of `n` and everything inside it.
  void flatten(int n, std::vector<int>& out) const {
    out.push_back(n);
    for (int c : node(n).children) flatten(c, out);
  }

  // What must be equal for consecutive calls to fold: the module's structure (trace/'s runs of
  // identical modules), and inside the call the same calls and ops joined by the same edges.
  std::string signature(int n) const {
    std::vector<int> inside;
    flatten(n, inside);
    std::map<int, size_t> pos;
    std::string s;
    for (size_t i = 0; i < inside.size(); ++i) {
      pos[inside[i]] = i;
      const FlowNode& x = node(inside[i]);
      if (x.kind == Kind::kOp) {
        s += "op " + x.name + " " + x.shapes;
      } else if (i > 0) {  // the call's own path differs between members (layers.0, layers.1)
        s += "call " + trace::analysis::relativePath(t_, x.module) + " " + std::to_string(x.call);
      }
      s += ';';
    }
    for (const FlowEdge& e : f_.edges) {
      const auto a = pos.find(e.from), b = pos.find(e.to);
      if (a != pos.end() && b != pos.end())
        s += std::to_string(a->second) + ">" + std::to_string(b->second) + e.shape + ";";
    }
    return s;
  }

  // Runs of consecutive siblings to draw as one: alike calls (same run of trace/'s identical
  // modules, same inside) unless --expand or the reader asked to see the fold unfolded.
  std::vector<std::vector<int>> runsOf(const std::vector<int>& kids) const {
    std::vector<std::vector<int>> runs;
    std::map<int, int> runOfModule;  // module -> its run among its siblings in the tree
    auto alike = [&](int a, int b) {
      const FlowNode& x = node(a);
      const FlowNode& y = node(b);
      if (x.kind != Kind::kCall || y.kind != Kind::kCall) return false;
      const int parent = t_.modules[static_cast<size_t>(x.module)].parent;
      if (parent != t_.modules[static_cast<size_t>(y.module)].parent) return false;
      int k = 0;
      for (const std::vector<int>& run : trace::analysis::identicalRuns(t_, parent)) {
        for (int m : run) runOfModule[m] = k;
        ++k;
      }
      return runOfModule[x.module] == runOfModule[y.module] && signature(a) == signature(b);
    };
    for (int k : kids) {
      if (!o_.expand && !runs.empty() && alike(runs.back().back(), k)) {
        runs.back().push_back(k);
      } else {
        runs.push_back({k});
      }
    }
    std::vector<std::vector<int>> out;
    for (std::vector<int>& run : runs) {
      if (run.size() > 1 && keep_.count("module/" + mod(run.front()).path)) {
        for (int k : run) out.push_back({k});
      } else {
        out.push_back(std::move(run));
      }
    }
    return out;
  }

  void drawSiblings(const std::vector<int>& kids, int cluster, bool top) {
    int lastStage = -2, lastChunk = -2;
    for (const std::vector<int>& run : runsOf(kids)) {
      const FlowNode& first = node(run.front());
      if (top && t_.stages > 1 && first.kind == Kind::kCall &&
          (mod(run.front()).stage != lastStage || mod(run.front()).chunk != lastChunk)) {
        lastStage = mod(run.front()).stage;
        lastChunk = mod(run.front()).chunk;
        cluster = stageCluster(mod(run.front()));
      }
      if (first.kind == Kind::kOp) {
        drawOp(run.front(), cluster);
      } else {
        drawCall(run, cluster);
      }
    }
  }

  int stageCluster(const ModuleNode& m) {
    int chunks = 0;
    for (const ModuleNode& x : t_.modules) chunks = std::max(chunks, x.chunk + 1);
    Cluster c;
    const std::string name =
        m.stage < 0 ? std::string("no stage")
                    : "stage " + std::to_string(m.stage) +
                          (m.chunk > 0 || chunks > 1 ? " chunk " + std::to_string(m.chunk) : "");
    c.id = uniqueId("stage/" + std::to_string(m.stage) + "." + std::to_string(m.chunk));
    c.label = "pipeline " + name;
    c.role = Role::kStage;
    c.index = std::max(0, m.stage);
    return g_.addCluster(std::move(c));
  }

  void drawOp(int n, int cluster) {
    Node d;
    std::string name = node(n).name;
    if (name.rfind("aten::", 0) == 0) name = name.substr(6);
    const std::string where = node(n).parent < 0 ? "" : mod(node(n).parent).path + "/";
    d.id = uniqueId("op/" + where + name);
    d.label = name;
    d.tooltip = node(n).name + "(" + node(n).shapes + ")";
    d.shape = NodeShape::kEllipse;
    d.role = Role::kFunction;
    d.cluster = cluster;
    drawn_[static_cast<size_t>(n)] = g_.addNode(std::move(d));
  }

  void drawCall(const std::vector<int>& run, int cluster) {
    const int c = run.front();
    const ModuleNode& m = mod(c);
    std::vector<int> modules;
    for (int r : run) modules.push_back(node(r).module);
    const std::string first = run.size() > 1 ? "\u00d7" + std::to_string(run.size()) + " " +
                                                   callName(c) + " \u2026 " + callName(run.back())
                                             : callName(c);
    const bool open = !node(c).children.empty() && (o_.depth < 0 || m.depth + 1 < o_.depth);
    const int fold = folds_count_++;
    if (open) {
      Cluster k;
      k.id = uniqueId("module/" + callName(c));
      k.label = model_labels::labelOf(t_, modules, first);
      k.tooltip = model_labels::tooltipOf(t_, modules);
      k.parent = cluster;
      k.role = Role::kGroup;
      if (m.zero_unit >= 0) k.accent = Accent::kZeroUnit;
      k.fold = static_cast<int>(run.size());
      const int at = g_.addCluster(std::move(k));
      noteMap(run, -1, at);
      drawSiblings(node(c).children, at, false);
    } else {
      Node d;
      d.id = uniqueId("module/" + callName(c));
      d.label = model_labels::labelOf(t_, modules, first);
      d.tooltip = model_labels::tooltipOf(t_, modules);
      d.shape = NodeShape::kBox;
      d.cluster = cluster;
      d.role = Role::kModule;
      d.accent = model_labels::accentOf(m);
      d.penwidth = d.accent == Accent::kNone ? 1.0 : 2.0;
      d.metrics.params = m.params_local;
      d.metrics.calls = m.calls;
      d.metrics.duration_ns = m.total_ns;
      d.fold = static_cast<int>(run.size());
      const int at = g_.addNode(std::move(d));
      noteMap(run, at, -1);
      std::vector<int> inside;
      flatten(c, inside);
      for (int i : inside) drawn_[static_cast<size_t>(i)] = at;
    }
    // Members after the first are drawn by the first: the same position inside each.
    std::vector<int> lead;
    flatten(c, lead);
    for (size_t k = 0; k < run.size(); ++k) {
      std::vector<int> member;
      flatten(run[k], member);
      for (size_t i = 0; i < member.size() && i < lead.size(); ++i) {
        if (k > 0) drawn_[static_cast<size_t>(member[i])] = drawn_[static_cast<size_t>(lead[i])];
        if (run.size() > 1) folds_[static_cast<size_t>(member[i])].push_back({fold, int(k)});
      }
    }
  }

  void noteMap(const std::vector<int>& run, int nodeAt, int clusterAt) {
    if (!map_) return;
    for (int r : run) {
      auto& n = map_->node_of[static_cast<size_t>(node(r).module)];
      auto& c = map_->cluster_of[static_cast<size_t>(node(r).module)];
      if (n < 0 && c < 0) {
        n = nodeAt;
        c = clusterAt;
      }
    }
  }

  // Between two members of one fold: drawn inside the ×N, not as an edge.
  bool acrossMembers(int a, int b) const {
    for (const auto& [fa, ka] : folds_[static_cast<size_t>(a)]) {
      for (const auto& [fb, kb] : folds_[static_cast<size_t>(b)]) {
        if (fa == fb && ka != kb) return true;
      }
    }
    return false;
  }

  // Edges carry their tensor's shape; the label shows it where it changes (an edge out of a unit
  // that received no tensor of that shape), the tooltip always.
  void edges() {
    std::vector<std::set<std::string>> into(f_.nodes.size());
    for (const FlowEdge& e : f_.edges) into[static_cast<size_t>(e.to)].insert(e.shape);
    std::set<std::pair<int, int>> seen;
    for (const FlowEdge& e : f_.edges) {
      const int a = drawn_[static_cast<size_t>(e.from)], b = drawn_[static_cast<size_t>(e.to)];
      if (a < 0 || b < 0 || a == b || acrossMembers(e.from, e.to)) continue;
      if (!seen.insert({a, b}).second) continue;
      Edge d;
      d.from = a;
      d.to = b;
      if (node(e.from).kind == Kind::kInput || !into[static_cast<size_t>(e.from)].count(e.shape))
        d.label = e.shape;
      d.tooltip = g_.nodes[static_cast<size_t>(a)].id + " -> " +
                  g_.nodes[static_cast<size_t>(b)].id + (e.shape.empty() ? "" : ": " + e.shape);
      d.role = Role::kFlow;
      g_.addEdge(std::move(d));
    }
  }

  const ModelTree& t_;
  const ModelFlow& f_;
  const ModelGraphOptions& o_;
  ModelGraphMap* map_;
  std::set<std::string> keep_;  // folds drawn unfolded
  Graph g_;
  std::set<std::string> ids_;
  std::vector<int> drawn_;                               // flow node -> graph node
  std::vector<std::vector<std::pair<int, int>>> folds_;  // flow node -> (fold, member) it is in
  int folds_count_ = 0;
};

}  // namespace

Graph buildModelFlowGraph(const trace::analysis::ModelTree& tree, const ModelGraphOptions& options,
                          const std::string& source, ModelGraphMap* map) {
  return FlowBuilder(tree, options, map).build(source);
}

}  // namespace tracerun::dot
