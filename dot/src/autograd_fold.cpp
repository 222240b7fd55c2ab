// Folding and pruning of an autograd graph for drawing (autograd_fold.h). Sorted maps and loops
// over the analysis' vectors; no Graphviz, no SQL.
#include "autograd_fold.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <tuple>

namespace tracerun::dot {

namespace {

using trace::analysis::AutogradGraph;

// Where a node's layer is: the first layer scope in its module chain, the chain above it, and
// the pass. Nodes outside any layer scope have no key.
struct LayerKey {
  int pass = 0;
  std::string above;    // the scopes above the layer scope, '/'-joined
  std::string pattern;  // "layers.*"
  bool operator<(const LayerKey& o) const {
    return std::tie(pass, above, pattern) < std::tie(o.pass, o.above, o.pattern);
  }
};

struct Layer {
  std::string name;        // "layers.3"
  std::vector<int> nodes;  // analysis nodes, in start order
  // Its autograd functions (not leaves), in start order, and its AccumulateGrad leaves by their
  // description (the parameter's shape and scope relative to the layer), in start order.
  std::vector<int> functions;
  std::map<std::string, std::vector<int>> leaves;
  std::string signature;  // what must be equal for two layers to fold
};

// The module name with the layer's own name replaced by its pattern ("layers.3.attn" ->
// "layers.*.attn"), so the same scope in two layers compares equal.
std::string relative(const std::string& module, const std::string& layer,
                     const std::string& pattern) {
  if (module.compare(0, layer.size(), layer) == 0 &&
      (module.size() == layer.size() || module[layer.size()] == '.')) {
    return pattern + module.substr(layer.size());
  }
  return module;
}

// A node's description with scopes relative to its layer.
std::string describe(const trace::TraceReader& reader, const AutogradGraph& ag, int i,
                     const std::string& layer, const std::string& pattern) {
  const auto& n = ag.nodes[static_cast<size_t>(i)];
  std::string d = std::to_string(n.name) + ',' + (n.recomputed ? 'R' : '-') +
                  std::to_string(n.shape) + ',' + std::to_string(n.forward_name);
  for (core::StringId m : n.modules) d += '/' + relative(reader.str(m), layer, pattern);
  return d;
}

// A layer's signature: its functions' descriptions in start order, then the edges between them
// by local index. Leaves are matched apart (foldRun): a pipeline stage's input arrives as a leaf
// used by its first layer, which the other layers do not have.
void sign(const trace::TraceReader& reader, const AutogradGraph& ag, Layer& layer,
          const std::string& pattern, const std::vector<std::vector<int>>& edgesFrom) {
  std::map<int, int> local;
  for (int i : layer.nodes) {
    if (ag.nodes[static_cast<size_t>(i)].accumulate_grad) {
      layer.leaves[describe(reader, ag, i, layer.name, pattern)].push_back(i);
    } else {
      local[i] = static_cast<int>(layer.functions.size());
      layer.functions.push_back(i);
      layer.signature += describe(reader, ag, i, layer.name, pattern) + ';';
    }
  }
  layer.signature += '|';
  for (int i : layer.functions) {
    for (int e : edgesFrom[static_cast<size_t>(i)]) {
      const auto& edge = ag.edges[static_cast<size_t>(e)];
      auto to = local.find(edge.to);
      if (to == local.end()) continue;
      layer.signature += std::to_string(local[i]) + '>' + std::to_string(to->second) + ':' +
                         std::to_string(edge.output_nr) + ',' + std::to_string(edge.input_nr) + ';';
    }
  }
}

// Folds the layers [first, end) (equal signatures) into the first: functions by position, leaves
// by description and occurrence where every member has them (the rest stay drawn alone).
void foldRun(std::map<int64_t, Layer>::const_iterator first,
             std::map<int64_t, Layer>::const_iterator end, int run, AutogradFolding& f) {
  auto join = [&](size_t i, int rep, int member) {
    f.rep[i] = rep;
    f.run[i] = run;
    f.member[i] = member;
  };
  int m = 0;
  for (auto k = first; k != end; ++k, ++m) {
    for (size_t j = 0; j < k->second.functions.size(); ++j) {
      join(static_cast<size_t>(k->second.functions[j]), first->second.functions[j], m);
    }
  }
  for (const auto& [what, reps] : first->second.leaves) {
    for (size_t o = 0; o < reps.size(); ++o) {
      bool everywhere = true;
      for (auto k = first; k != end && everywhere; ++k) {
        auto it = k->second.leaves.find(what);
        everywhere = it != k->second.leaves.end() && it->second.size() > o;
      }
      if (!everywhere) continue;
      m = 0;
      for (auto k = first; k != end; ++k, ++m) {
        join(static_cast<size_t>(k->second.leaves.at(what)[o]), reps[o], m);
      }
    }
  }
}

}  // namespace

bool layerScope(const std::string& name, std::string& pattern) {
  const size_t dot = name.rfind('.');
  if (dot == std::string::npos || dot + 1 == name.size()) return false;
  for (size_t k = dot + 1; k < name.size(); ++k) {
    if (!std::isdigit(static_cast<unsigned char>(name[k]))) return false;
  }
  pattern = name.substr(0, dot + 1) + "*";
  return true;
}

AutogradFolding noFolding(const AutogradGraph& ag) {
  AutogradFolding f;
  const size_t n = ag.nodes.size();
  f.rep.resize(n);
  for (size_t i = 0; i < n; ++i) f.rep[i] = static_cast<int>(i);
  f.run.assign(n, -1);
  f.member.assign(n, 0);
  return f;
}

AutogradFolding foldLayers(const trace::TraceReader& reader, const AutogradGraph& ag) {
  AutogradFolding f = noFolding(ag);
  std::vector<std::vector<int>> edgesFrom(ag.nodes.size());
  for (size_t e = 0; e < ag.edges.size(); ++e) {
    edgesFrom[static_cast<size_t>(ag.edges[e].from)].push_back(static_cast<int>(e));
  }
  // key -> layer number -> layer
  std::map<LayerKey, std::map<int64_t, Layer>> layers;
  for (size_t i = 0; i < ag.nodes.size(); ++i) {
    const auto& n = ag.nodes[i];
    LayerKey key;
    key.pass = n.pass;
    for (core::StringId m : n.modules) {
      const std::string name = reader.str(m);
      if (layerScope(name, key.pattern)) {
        const int64_t number = std::stoll(name.substr(key.pattern.size() - 1));
        Layer& layer = layers[key][number];
        layer.name = name;
        layer.nodes.push_back(static_cast<int>(i));
        break;
      }
      key.above += name + '/';
    }
  }
  for (auto& [key, byNumber] : layers) {
    for (auto& [number, layer] : byNumber) {
      sign(reader, ag, layer, key.pattern, edgesFrom);
    }
    // Runs of consecutive numbers with equal signatures.
    auto it = byNumber.begin();
    while (it != byNumber.end()) {
      auto end = std::next(it);
      int64_t last = it->first;
      while (end != byNumber.end() && end->first == last + 1 &&
             end->second.signature == it->second.signature) {
        last = end->first;
        ++end;
      }
      const int members = static_cast<int>(std::distance(it, end));
      if (members > 1) {
        const int run = static_cast<int>(f.runs.size());
        AutogradRun r;
        r.pattern = key.above + key.pattern;
        r.pass = key.pass;
        for (auto k = it; k != end; ++k) r.members.push_back(k->second.name);
        foldRun(it, end, run, f);
        f.runs.push_back(std::move(r));
      }
      it = end;
    }
  }
  return f;
}

void pruneToBudget(const AutogradGraph& ag, AutogradFolding& f, int budget) {
  std::vector<int64_t> time(ag.nodes.size(), 0);
  std::vector<int> drawn;
  for (size_t i = 0; i < ag.nodes.size(); ++i) {
    if (f.rep[i] < 0) continue;
    time[static_cast<size_t>(f.rep[i])] += ag.nodes[i].dur_ns;
    if (f.rep[i] == static_cast<int>(i)) drawn.push_back(static_cast<int>(i));
  }
  if (static_cast<int>(drawn.size()) <= budget) return;
  const size_t keep = static_cast<size_t>(std::max(1, budget - 1));
  std::stable_sort(drawn.begin(), drawn.end(), [&](int a, int b) {
    return time[static_cast<size_t>(a)] > time[static_cast<size_t>(b)];
  });
  std::vector<char> pruned(ag.nodes.size(), 0);
  for (size_t k = keep; k < drawn.size(); ++k) pruned[static_cast<size_t>(drawn[k])] = 1;
  f.pruned = static_cast<int64_t>(drawn.size() - keep);
  for (int& r : f.rep) {
    if (r >= 0 && pruned[static_cast<size_t>(r)]) r = -1;
  }
}

}  // namespace tracerun::dot
