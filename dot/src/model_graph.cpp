// The model diagram builder (see model_graph.h): model tree -> clusters, boxes and dataflow edges.
// Reads only trace/'s model analysis; no Graphviz, no SQL.
#include "tracerun/dot/model_graph.h"

#include <algorithm>
#include <set>
#include <utility>

#include "model_flow_graph.h"
#include "model_labels.h"
#include "tracerun/trace/error.h"

namespace tracerun::dot {
namespace {

using trace::analysis::ModelTree;
using trace::analysis::ModuleNode;
using trace::analysis::TpSplit;
using namespace model_labels;

class Builder {
 public:
  Builder(const ModelTree& tree, const ModelGraphOptions& o, ModelGraphMap* map)
      : t_(tree), o_(o), map_(map), keep_(o.expand_folds.begin(), o.expand_folds.end()) {
    if (map_) {
      map_->node_of.assign(t_.modules.size(), -1);
      map_->cluster_of.assign(t_.modules.size(), -1);
    }
  }

  Graph build(const std::string& source) {
    g_.title = "model: " + source + (o_.rank >= 0 ? " (rank " + std::to_string(o_.rank) + ")" : "");
    drawSiblings(t_.roots, -1, -1);
    g_.caption = captionOf(t_, o_.depth);
    return std::move(g_);
  }

 private:
  const ModuleNode& mod(int m) const { return t_.modules[static_cast<size_t>(m)]; }

  std::string uniqueId(const std::string& base) {
    std::string id = base;
    for (int k = 2; !ids_.insert(id).second; ++k) id = base + "#" + std::to_string(k);
    return id;
  }

  std::vector<std::vector<int>> runsOf(const std::vector<int>& kids, int parent) const {
    std::vector<std::vector<int>> runs;
    if (!o_.expand) {
      for (std::vector<int>& run : trace::analysis::identicalRuns(t_, parent)) {
        if (run.size() < 2 || !keep_.count("module/" + mod(run.front()).path)) {
          runs.push_back(std::move(run));
          continue;
        }
        for (int k : run) runs.push_back({k});  // a fold the reader asked to see unfolded
      }
      return runs;
    }
    for (int k : kids) runs.push_back({k});
    return runs;
  }

  // Draws the modules `kids` of `parent` (-1: top level) in `cluster`, chained by dataflow edges;
  // returns the first entry and last exit node (-1, -1 when nothing was drawn).
  std::pair<int, int> drawSiblings(const std::vector<int>& kids, int parent, int cluster) {
    std::pair<int, int> ends{-1, -1};
    int stageCluster = -1, lastStage = -2, lastChunk = -2;
    const ModuleNode* prev = nullptr;
    for (const std::vector<int>& run : runsOf(kids, parent)) {
      const ModuleNode& first = mod(run.front());
      int into = cluster;
      if (parent < 0 && t_.stages > 1) {  // top level: one cluster per stage (and chunk)
        if (first.stage != lastStage || first.chunk != lastChunk) {
          lastStage = first.stage;
          lastChunk = first.chunk;
          stageCluster = stageClusterFor(first);
        }
        into = stageCluster;
      }
      const auto [entry, exit] = drawRun(run, into);
      if (entry < 0) continue;
      if (ends.second >= 0) dataflow(ends.second, entry, *prev, first);
      if (ends.first < 0) ends.first = entry;
      ends.second = exit;
      prev = &mod(run.back());
    }
    return ends;
  }

  int stageClusterFor(const ModuleNode& m) {
    Cluster c;
    const std::string name =
        m.stage < 0 ? std::string("no stage")
                    : "stage " + std::to_string(m.stage) +
                          (m.chunk > 0 || chunks() > 1 ? " chunk " + std::to_string(m.chunk) : "");
    c.id = uniqueId("stage/" + std::to_string(m.stage) + "." + std::to_string(m.chunk));
    c.label = "pipeline " + name;
    c.role = Role::kStage;
    c.index = std::max(0, m.stage);
    return g_.addCluster(std::move(c));
  }

  int chunks() const {
    int n = 0;
    for (const ModuleNode& m : t_.modules) n = std::max(n, m.chunk + 1);
    return n;
  }

  void dataflow(int from, int to, const ModuleNode& before, const ModuleNode& after) {
    Edge e;
    e.from = from;
    e.to = to;
    // The next module's inputs (else the previous one's outputs); where TP splits them, the shape
    // on this rank and over the TP group.
    std::string shapes = after.inputs.empty() ? before.outputs : after.inputs;
    for (char& ch : shapes) {
      if (ch == ';') ch = '\n';
    }
    if (!after.inputs.empty() && !after.inputs_global.empty()) {
      shapes = after.inputs + " on this rank\n" + after.inputs_global + " global";
    }
    e.label = shapes;
    e.tooltip = before.path + " -> " + after.path + (shapes.empty() ? "" : ": " + shapes);
    e.role = Role::kFlow;
    g_.addEdge(std::move(e));
  }

  std::pair<int, int> drawRun(const std::vector<int>& run, int cluster) {
    const ModuleNode& m = mod(run.front());
    const bool open = !m.children.empty() && (o_.depth < 0 || m.depth + 1 < o_.depth);
    if (open) {
      Cluster c;
      c.id = uniqueId("module/" + m.path);
      c.label = labelOf(t_, run);
      c.tooltip = tooltipOf(t_, run);
      c.parent = cluster;
      c.role = Role::kGroup;
      if (m.zero_unit >= 0) c.accent = Accent::kZeroUnit;
      c.fold = static_cast<int>(run.size());
      const int at = g_.addCluster(std::move(c));
      if (map_) {
        for (int r : run) map_->cluster_of[static_cast<size_t>(r)] = at;
      }
      return drawSiblings(m.children, run.front(), at);
    }
    Node node;
    node.id = uniqueId("module/" + m.path);
    node.label = labelOf(t_, run);
    node.tooltip = tooltipOf(t_, run);
    node.shape = NodeShape::kBox;
    node.cluster = cluster;
    node.role = Role::kModule;
    node.accent = accentOf(m);
    node.penwidth = node.accent == Accent::kNone ? 1.0 : 2.0;
    node.metrics.params = m.params_local;
    node.metrics.calls = m.calls;
    node.metrics.duration_ns = m.total_ns;
    node.fold = static_cast<int>(run.size());
    const int id = g_.addNode(std::move(node));
    if (map_) {
      for (int r : run) map_->node_of[static_cast<size_t>(r)] = id;
    }
    return {id, id};
  }

  const ModelTree& t_;
  const ModelGraphOptions& o_;
  ModelGraphMap* map_;
  std::set<std::string> keep_;  // folds drawn unfolded
  Graph g_;
  std::set<std::string> ids_;
};

}  // namespace

Graph buildModelGraph(const trace::analysis::ModelTree& tree, const ModelGraphOptions& options,
                      const std::string& source, ModelGraphMap* map) {
  if (tree.modules.empty()) {
    throw trace::TraceError(
        source + ": no module scopes" +
        (options.rank >= 0 ? " on rank " + std::to_string(options.rank) : std::string()) +
        " (record them with tracerun::ModuleScope in C++; Python nn.Modules are recorded when "
        "tracerun runs the script)");
  }
  if (!tree.flow.empty()) return buildModelFlowGraph(tree, options, source, map);
  return Builder(tree, options, map).build(source);
}

Graph buildModelGraph(const trace::TraceReader& reader, const ModelGraphOptions& options) {
  trace::analysis::ModelOptions mo;
  mo.rank = options.rank;
  return buildModelGraph(trace::analysis::buildModelTree(reader, mo), options, reader.path());
}

}  // namespace tracerun::dot
