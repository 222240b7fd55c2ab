// The call graph and model tabs' data (see graph_scene.h): dot/'s builders, the layout service, and
// one streamed pass over the spans to tie each span to the element that shows it.
#include "graph/graph_scene.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <stdexcept>
#include <unordered_map>

#include "tracerun/dot/callgraph_graph.h"
#include "tracerun/dot/model_graph.h"
#include "tracerun/trace/analysis/model.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {

namespace {

class Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

void checkCancel(const std::atomic<bool>& cancel) {
  if (cancel.load(std::memory_order_relaxed)) throw Cancelled();
}

// Spans of every track that holds spans (not counters, not memory), in start order per track.
template <typename Fn>
void forEachSpanTrack(const trace::TraceReader& reader, const std::atomic<bool>& cancel, Fn&& fn) {
  for (const trace::TrackRow& t : reader.tracks()) {
    if (t.kind == core::TrackKind::kCounter || t.kind == core::TrackKind::kMemory) continue;
    checkCancel(cancel);
    fn(t);
  }
}

void noteLongest(std::vector<int64_t>& spans, std::vector<int64_t>& durs, int index,
                 const trace::SpanRow& s) {
  auto& best = durs[static_cast<size_t>(index)];
  if (spans[static_cast<size_t>(index)] < 0 || s.dur_ns > best) {
    spans[static_cast<size_t>(index)] = s.id;
    best = s.dur_ns;
  }
}

// The call graph: a span's node in trace/'s analysis is found the way the analysis makes it
// (parent node, name, category on the track's depth stack), then mapped to its drawn node.
void mapCallGraph(const trace::TraceReader& reader, const dot::CallGraphGraphMap& map,
                  GraphScene& scene, const std::atomic<bool>& cancel) {
  const auto& nodes = map.analysis.nodes;
  auto key = [](int parent, core::Category c, core::StringId name) {
    return (static_cast<uint64_t>(parent) << 36) | (static_cast<uint64_t>(c) << 32) |
           static_cast<uint64_t>(name);
  };
  std::unordered_map<uint64_t, int> index;
  index.reserve(nodes.size());
  for (size_t i = 1; i < nodes.size(); ++i) {
    index.emplace(key(nodes[i].parent, nodes[i].category, nodes[i].name), static_cast<int>(i));
  }
  std::vector<int64_t> durs(scene.graph.nodes.size(), 0);
  forEachSpanTrack(reader, cancel, [&](const trace::TrackRow& t) {
    std::vector<int> stack;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      const size_t depth = static_cast<size_t>(std::max(0, s.depth));
      if (stack.size() > depth) stack.resize(depth);
      const int parent = stack.empty() ? 0 : stack.back();
      int node = -1;
      if (parent >= 0) {
        auto it = index.find(key(parent, s.category, s.name));
        if (it != index.end()) node = it->second;
      }
      stack.push_back(node);
      if (node < 0 || static_cast<size_t>(node) >= map.drawn_of.size()) return;
      const int drawn = map.drawn_of[static_cast<size_t>(node)];
      scene.span_element.push_back({s.id, {GraphElement::kNode, drawn}});
      noteLongest(scene.node_span, durs, drawn, s);
    });
  });
}

// The model: the innermost module scope around a span (its path names the module) gives the
// element that draws that module, or the nearest drawn ancestor.
void mapModel(const trace::TraceReader& reader, const trace::analysis::ModelTree& tree,
              const dot::ModelGraphMap& map, GraphScene& scene, const std::atomic<bool>& cancel) {
  std::vector<GraphElement> of(tree.modules.size());
  for (size_t m = 0; m < tree.modules.size(); ++m) {
    for (int k = static_cast<int>(m); k >= 0; k = tree.modules[static_cast<size_t>(k)].parent) {
      if (map.node_of[static_cast<size_t>(k)] >= 0) {
        of[m] = {GraphElement::kNode, map.node_of[static_cast<size_t>(k)]};
        break;
      }
      if (map.cluster_of[static_cast<size_t>(k)] >= 0) {
        of[m] = {GraphElement::kCluster, map.cluster_of[static_cast<size_t>(k)]};
        break;
      }
    }
  }
  std::unordered_map<std::string, int> byPath;
  for (size_t m = 0; m < tree.modules.size(); ++m) {
    byPath.emplace(tree.modules[m].path, static_cast<int>(m));
  }
  // Inside the second and later members of a ×N fold ("layers.1.attn.qkv"), the same module of
  // the fold's first member ("layers.0.attn.qkv", the one drawn) where that is drawn.
  const std::string kPrefix = "module/";
  for (size_t m = 0; m < tree.modules.size(); ++m) {
    const auto& path = tree.modules[m].path;
    for (int k = tree.modules[m].parent; k >= 0; k = tree.modules[static_cast<size_t>(k)].parent) {
      const int c = map.cluster_of[static_cast<size_t>(k)];
      if (c < 0 && map.node_of[static_cast<size_t>(k)] < 0) continue;
      if (c < 0) break;  // an ancestor drawn as a node: it draws m too
      const std::string& id = scene.graph.clusters[static_cast<size_t>(c)].id;
      const std::string& member = tree.modules[static_cast<size_t>(k)].path;
      if (id.rfind(kPrefix, 0) != 0 || id.compare(kPrefix.size(), std::string::npos, member) == 0)
        break;  // k is the fold's first member (or no fold): m is drawn as computed
      const auto it = byPath.find(id.substr(kPrefix.size()) + path.substr(member.size()));
      if (it != byPath.end() && of[static_cast<size_t>(it->second)].kind != GraphElement::kNone)
        of[m] = of[static_cast<size_t>(it->second)];
      break;
    }
  }
  std::vector<int64_t> nodeDur(scene.graph.nodes.size(), 0);
  std::vector<int64_t> clusterDur(scene.graph.clusters.size(), 0);
  forEachSpanTrack(reader, cancel, [&](const trace::TrackRow& t) {
    std::vector<GraphElement> stack;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      const size_t depth = static_cast<size_t>(std::max(0, s.depth));
      if (stack.size() > depth) stack.resize(depth);
      GraphElement e = stack.empty() ? GraphElement{} : stack.back();
      bool own = false;
      if (s.category == core::Category::kModule) {
        auto it = byPath.find(reader.str(s.name));
        if (it != byPath.end() && of[static_cast<size_t>(it->second)].kind != GraphElement::kNone) {
          e = of[static_cast<size_t>(it->second)];
          own = true;
        }
      }
      stack.push_back(e);
      if (e.kind == GraphElement::kNone) return;
      scene.span_element.push_back({s.id, e});
      if (!own) return;
      if (e.kind == GraphElement::kNode) {
        noteLongest(scene.node_span, nodeDur, e.index, s);
      } else {
        noteLongest(scene.cluster_span, clusterDur, e.index, s);
      }
    });
  });
}

// The window's font holds Latin-1 only (ImGui's default ranges): the builders' few other
// characters get ASCII stand-ins in what is drawn (labels, tooltips); ids stay as built.
void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
}

void latin1Text(std::string& s) {
  replaceAll(s, "\u2026", "...");
  replaceAll(s, "\u2192", "->");
  replaceAll(s, "\u0394", "change");
}

void latin1Texts(dot::Graph& g) {
  latin1Text(g.title);
  latin1Text(g.caption);
  for (auto& n : g.nodes) {
    latin1Text(n.label);
    latin1Text(n.tooltip);
  }
  for (auto& e : g.edges) {
    latin1Text(e.label);
    latin1Text(e.tooltip);
  }
  for (auto& c : g.clusters) {
    latin1Text(c.label);
    latin1Text(c.tooltip);
  }
}

}  // namespace

GraphElement GraphScene::elementOfSpan(int64_t span) const {
  auto it = std::lower_bound(
      span_element.begin(), span_element.end(), span,
      [](const std::pair<int64_t, GraphElement>& p, int64_t id) { return p.first < id; });
  return it != span_element.end() && it->first == span ? it->second : GraphElement{};
}

const std::string& GraphScene::idOf(GraphElement e) const {
  static const std::string kNone;
  if (e.kind == GraphElement::kNode) return graph.nodes[static_cast<size_t>(e.index)].id;
  if (e.kind == GraphElement::kCluster) return graph.clusters[static_cast<size_t>(e.index)].id;
  return kNone;
}

GraphScene buildGraphScene(const std::string& tracePath, GraphKind kind,
                           const std::vector<std::string>& expand,
                           const std::atomic<bool>& cancel) {
  const auto reader = trace::TraceReader::open(tracePath);
  GraphScene scene;
  dot::CallGraphGraphMap cgMap;
  dot::ModelGraphMap modelMap;
  trace::analysis::ModelTree tree;
  if (kind == GraphKind::kCallGraph) {
    dot::CallGraphGraphOptions o;
    o.expand_folds = expand;
    scene.graph = dot::buildCallGraphGraph(reader, o, nullptr, &cgMap);
  } else {
    dot::ModelGraphOptions o;
    o.expand_folds = expand;
    tree = trace::analysis::buildModelTree(reader, {});
    scene.graph = dot::buildModelGraph(tree, o, reader.path(), &modelMap);
  }
  checkCancel(cancel);
  scene.layout = dot::LaidOutGraph::layout(scene.graph).positions();  // locks Graphviz itself
  scene.node_span.assign(scene.graph.nodes.size(), -1);
  scene.cluster_span.assign(scene.graph.clusters.size(), -1);
  if (kind == GraphKind::kCallGraph) {
    mapCallGraph(reader, cgMap, scene, cancel);
  } else {
    mapModel(reader, tree, modelMap, scene, cancel);
  }
  latin1Texts(scene.graph);
  findRoot(scene);
  std::sort(scene.span_element.begin(), scene.span_element.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return scene;
}

void findRoot(GraphScene& scene) {
  const dot::Graph& g = scene.graph;
  const dot::Layout& l = scene.layout;
  const size_t n = std::min(g.nodes.size(), l.nodes.size());
  scene.root = -1;
  scene.top = 0;
  scene.min_node_height = 0;
  if (n == 0) return;
  std::vector<char> entered(n, 0);
  std::vector<std::vector<int>> out(n);
  for (const dot::Edge& e : g.edges) {
    if (e.from < 0 || e.to < 0 || static_cast<size_t>(e.from) >= n ||
        static_cast<size_t>(e.to) >= n || e.from == e.to)
      continue;
    entered[static_cast<size_t>(e.to)] = 1;
    out[static_cast<size_t>(e.from)].push_back(e.to);
  }
  // A root's weight: its inclusive time (the call graph's metric; 0 where the graph has none),
  // then the nodes it reaches.
  auto inclusive = [&](size_t i) -> int64_t {
    return std::max<int64_t>(0, g.nodes[i].metrics.inclusive_ns);
  };
  std::vector<char> seen(n, 0);
  std::vector<int> stack;
  auto reached = [&](size_t from) {
    std::fill(seen.begin(), seen.end(), 0);
    stack.assign(1, static_cast<int>(from));
    seen[from] = 1;
    size_t count = 0;
    while (!stack.empty()) {
      const size_t v = static_cast<size_t>(stack.back());
      stack.pop_back();
      ++count;
      for (const int w : out[v]) {
        if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = 1;
          stack.push_back(w);
        }
      }
    }
    return count;
  };
  int64_t bestTime = -1;
  size_t bestReach = 0;
  for (size_t i = 0; i < n; ++i) {
    if (entered[i] || g.nodes[i].shape == dot::NodeShape::kPlain) continue;
    const int64_t t = inclusive(i);
    if (t < bestTime) continue;
    const size_t r = reached(i);
    if (t > bestTime || r > bestReach) {
      bestTime = t;
      bestReach = r;
      scene.root = static_cast<int>(i);
    }
  }
  if (scene.root < 0) {  // every node is entered (a cycle): the topmost node
    for (size_t i = 0; i < n; ++i) {
      if (scene.root < 0 || l.nodes[i].center.y < l.nodes[static_cast<size_t>(scene.root)].center.y)
        scene.root = static_cast<int>(i);
    }
  }
  double top = 1e300, low = 1e300;
  for (size_t i = 0; i < n; ++i) {
    top = std::min(top, l.nodes[i].center.y - l.nodes[i].height / 2);
    if (g.nodes[i].shape != dot::NodeShape::kPlain && l.nodes[i].height > 0)
      low = std::min(low, l.nodes[i].height);
  }
  for (const dot::ClusterBox& c : l.clusters) top = std::min(top, c.min.y);
  scene.top = top;
  scene.min_node_height = low < 1e300 ? low : 0;
}

std::string tooltipNumbers(const std::string& tooltip) {
  std::string out;
  size_t at = 0;
  while (at <= tooltip.size()) {
    size_t nl = tooltip.find('\n', at);
    if (nl == std::string::npos) nl = tooltip.size();
    const std::string line = tooltip.substr(at, nl - at);
    at = nl + 1;
    const size_t colon = line.find(": ");
    if (colon == std::string::npos || colon == 0) continue;
    const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key.find(' ') != std::string::npos || value.empty()) continue;
    const bool number =
        std::all_of(value.begin() + (value[0] == '-' ? 1 : 0), value.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
    if (number && value != "-") out += " " + key + "=" + value;
  }
  return out;
}

}  // namespace tracerun::viewer
