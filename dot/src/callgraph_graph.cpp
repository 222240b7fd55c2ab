// The call graph picture (see callgraph_graph.h): trace/'s CallGraph -> a view tree -> folding of
// identical sibling subtrees -> pruning under the node threshold and the budget -> a neutral Graph.
// The numbers are the analysis' own (sums of them for folded and "other" nodes); nothing here
// reads spans.
//
// Sections: view tree · folding · pruning and budget · diff · emitting the graph · entry point
#include "tracerun/dot/callgraph_graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include "tracerun/core/kernel_name.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/format.h"

namespace tracerun::dot {

namespace {

using trace::analysis::CallGraph;
using trace::analysis::CallNode;

// ---------------------------------------------------------------------------------------------
// view tree

struct VNode {
  std::string name;  // shown name (a fold's pattern, "layers.*")
  core::Category category = core::Category::kOther;
  int parent = -1;
  int depth = 0;  // 0 for the root
  int64_t count = 0, incl = 0, excl = 0;
  int64_t bytes_self = 0, bytes_incl = 0;
  int64_t comm_bytes = 0;
  std::string group;
  bool several_groups = false;
  int stage = trace::analysis::kNoStage, chunk = trace::analysis::kNoStage;
  int fold = 1;                      // > 1: this many identical siblings
  std::vector<std::string> members;  // a fold's member names, in order
  std::vector<int> sources;          // analysis nodes whose inclusive values sum to this one's
  std::vector<int> children;
  bool other = false;   // "other (k nodes, x%)"
  int64_t dropped = 0;  // other: how many nodes it stands for
};

// A kernel node (not an "other" node): labelled by its short name, as nsys' shortName and the
// report's kernel table show it (core/kernel_name.h), the full demangled name in the tooltip.
bool isKernel(const VNode& x) {
  return x.category == core::Category::kKernel && !x.other;
}

std::string shownName(const VNode& x) {
  return isKernel(x) ? core::kernelShortName(core::demangleKernelName(x.name)) : x.name;
}

int64_t sat(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

struct View {
  std::vector<VNode> nodes;  // nodes[0] is the root

  // One view node per analysis node (same indices).
  static View from(const CallGraph& cg, const trace::TraceReader& reader) {
    View v;
    v.nodes.resize(cg.nodes.size());
    for (size_t i = cg.nodes.size(); i-- > 0;) {
      const CallNode& c = cg.nodes[i];
      VNode& n = v.nodes[i];
      n.name = i == 0 ? "all" : reader.str(c.name);
      n.category = c.category;
      n.parent = c.parent;
      n.depth = c.depth + 1;
      n.count = c.count;
      n.incl = c.inclusive_ns;
      n.excl = c.exclusive_ns;
      n.bytes_self = c.alloc_bytes;
      n.bytes_incl = sat(n.bytes_incl, c.alloc_bytes);  // children were added already
      n.comm_bytes = c.comm_bytes;
      n.group = c.group ? reader.str(c.group) : "";
      n.several_groups = c.several_groups;
      n.stage = c.stage;
      n.chunk = c.chunk;
      n.sources = {static_cast<int>(i)};
      n.children = c.children;
      if (c.parent >= 0) {
        VNode& p = v.nodes[static_cast<size_t>(c.parent)];
        p.bytes_incl = sat(p.bytes_incl, n.bytes_incl);
      }
    }
    // The root's time is that of the top-level spans.
    VNode& root = v.nodes[0];
    root.depth = 0;
    root.incl = 0;
    root.excl = 0;
    for (int c : root.children) root.incl = sat(root.incl, v.nodes[static_cast<size_t>(c)].incl);
    return v;
  }

  int add(VNode n) {
    nodes.push_back(std::move(n));
    return static_cast<int>(nodes.size()) - 1;
  }
};

// ---------------------------------------------------------------------------------------------
// folding

// "layers.11" -> "layers.*": each run of digits becomes '*'.
std::string digitPattern(const std::string& name) {
  std::string out;
  for (size_t i = 0; i < name.size();) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      out += '*';
      while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
    } else {
      out += name[i++];
    }
  }
  return out;
}

// A name relative to its folded ancestor "layers.3": "layers.3" -> "layers.*", "layers.3.attn" ->
// "layers.*.attn"; other names stay.
std::string relativeName(const std::string& name, const std::string& root,
                         const std::string& pattern) {
  if (name == root) return pattern;
  if (name.size() > root.size() && name.compare(0, root.size(), root) == 0 &&
      name[root.size()] == '.') {
    return pattern + name.substr(root.size());
  }
  return name;
}

// The shape of a subtree: categories, relative names and call counts, children in order.
void signature(const View& v, int n, const std::string& root, const std::string& pattern,
               std::string& out) {
  const VNode& x = v.nodes[static_cast<size_t>(n)];
  out += std::to_string(static_cast<int>(x.category));
  out += ':';
  out += relativeName(x.name, root, pattern);
  out += '#';
  out += std::to_string(x.count);
  out += '[';
  for (int c : x.children) signature(v, c, root, pattern, out);
  out += ']';
}

// Adds y's sums and sources into x. `whole`: x is an "other" node standing for y's whole subtree,
// so y's inclusive time and bytes count as x's own.
void addSums(VNode& x, const VNode& y, bool whole) {
  x.count = sat(x.count, y.count);
  x.incl = sat(x.incl, y.incl);
  x.excl = sat(x.excl, whole ? y.incl : y.excl);
  x.bytes_incl = sat(x.bytes_incl, y.bytes_incl);
  x.bytes_self = sat(x.bytes_self, whole ? y.bytes_incl : y.bytes_self);
  x.comm_bytes = sat(x.comm_bytes, y.comm_bytes);
  x.sources.insert(x.sources.end(), y.sources.begin(), y.sources.end());
}

// Merges subtree `b` into the (identically shaped) subtree `a`: sums, sources.
void absorb(View& v, int a, int b) {
  VNode& x = v.nodes[static_cast<size_t>(a)];
  const VNode& y = v.nodes[static_cast<size_t>(b)];
  addSums(x, y, false);
  if (x.group != y.group || y.several_groups) x.several_groups = true;
  const std::vector<int> xc = x.children, yc = y.children;
  for (size_t k = 0; k < xc.size() && k < yc.size(); ++k) absorb(v, xc[k], yc[k]);
}

void renameUnder(View& v, int n, const std::string& root, const std::string& pattern) {
  VNode& x = v.nodes[static_cast<size_t>(n)];
  x.name = relativeName(x.name, root, pattern);
  for (int c : x.children) renameUnder(v, c, root, pattern);
}

// Folds runs of consecutive identical siblings (same category, same name up to digits, same
// stage and chunk, same subtree shape) into their first one, ×N. Returns the folds made. `path`
// is n's node id; a fold whose id would be in `keep` stays unfolded.
void fold(View& v, int n, std::vector<int>& folds, const std::set<std::string>& keep,
          const std::string& path);

std::string idPiece(const std::string& name);

void fold(View& v, int n, std::vector<int>& folds, const std::set<std::string>& keep,
          const std::string& path) {
  std::vector<int> kids = v.nodes[static_cast<size_t>(n)].children;
  std::vector<int> out;
  for (size_t i = 0; i < kids.size();) {
    const VNode& first = v.nodes[static_cast<size_t>(kids[i])];
    const std::string pattern = digitPattern(first.name);
    size_t j = i + 1;
    if (pattern != first.name) {
      std::string sig;
      signature(v, kids[i], first.name, pattern, sig);
      for (; j < kids.size(); ++j) {
        const VNode& x = v.nodes[static_cast<size_t>(kids[j])];
        if (x.category != first.category || x.stage != first.stage || x.chunk != first.chunk ||
            x.stage == trace::analysis::kSeveralStages || digitPattern(x.name) != pattern) {
          break;
        }
        std::string other;
        signature(v, kids[j], x.name, pattern, other);
        if (other != sig) break;
      }
    }
    if (j - i >= 2 && keep.count(path + "/" + idPiece(pattern))) j = i + 1;
    if (j - i >= 2) {
      const int keep = kids[i];
      const std::string rootName = v.nodes[static_cast<size_t>(keep)].name;
      std::vector<std::string> members;
      for (size_t k = i; k < j; ++k) members.push_back(v.nodes[static_cast<size_t>(kids[k])].name);
      for (size_t k = i + 1; k < j; ++k) absorb(v, keep, kids[k]);
      renameUnder(v, keep, rootName, pattern);
      VNode& f = v.nodes[static_cast<size_t>(keep)];
      f.fold = static_cast<int>(j - i);
      f.members = std::move(members);
      folds.push_back(keep);
    }
    out.push_back(kids[i]);
    i = j;
  }
  v.nodes[static_cast<size_t>(n)].children = out;
  for (int c : out) {
    fold(v, c, folds, keep, path + "/" + idPiece(v.nodes[static_cast<size_t>(c)].name));
  }
}

// ---------------------------------------------------------------------------------------------
// pruning and budget

double share(int64_t part, int64_t total) {
  return total > 0 ? double(part) / double(total) : 0.0;
}

// Nodes drawn at threshold t (including the root and one "other" per parent that drops any).
long countAt(const View& v, int n, double t, int maxDepth, int64_t total) {
  const VNode& x = v.nodes[static_cast<size_t>(n)];
  long count = 1;
  if (maxDepth >= 0 && x.depth >= maxDepth) return count;
  bool dropped = false;
  for (int c : x.children) {
    if (share(v.nodes[static_cast<size_t>(c)].incl, total) < t) {
      dropped = true;
    } else {
      count += countAt(v, c, t, maxDepth, total);
    }
  }
  return count + (dropped ? 1 : 0);
}

// The smallest threshold >= `wanted` at which the graph fits the budget: candidates are the
// nodes' own shares (the count only changes there), searched by bisection (countAt is
// non-increasing in the threshold).
double fitThreshold(const View& v, double wanted, int budget, int maxDepth, int64_t total) {
  if (countAt(v, 0, wanted, maxDepth, total) <= budget) return wanted;
  std::vector<double> cand;
  for (size_t i = 1; i < v.nodes.size(); ++i) {
    const double s = share(v.nodes[i].incl, total);
    if (s > wanted) cand.push_back(s);
  }
  std::sort(cand.begin(), cand.end());
  cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
  // A threshold just above a share drops the nodes of that share.
  size_t lo = 0, hi = cand.size();
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (countAt(v, 0, std::nextafter(cand[mid], 2.0), maxDepth, total) <= budget) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo < cand.size() ? std::nextafter(cand[lo], 2.0) : 2.0;
}

struct Pruned {
  std::vector<int> drawn;             // view nodes in drawing order (pre-order)
  std::vector<int> drawnParent;       // parallel: parent's index in `drawn`, -1 for the root
  std::map<int, int> representative;  // view node -> index in `drawn` (itself or its "other")
  int64_t hidden_nodes = 0, hidden_ns = 0;
};

// Counts the nodes of a subtree.
int64_t subtreeSize(const View& v, int n) {
  int64_t k = 1;
  for (int c : v.nodes[static_cast<size_t>(n)].children) k += subtreeSize(v, c);
  return k;
}

void mapSubtree(const View& v, int n, int to, std::map<int, int>& rep) {
  rep[n] = to;
  for (int c : v.nodes[static_cast<size_t>(n)].children) mapSubtree(v, c, to, rep);
}

void prune(View& v, int n, int drawnParent, double t, int maxDepth, int64_t total, Pruned& p) {
  const int self = static_cast<int>(p.drawn.size());
  p.drawn.push_back(n);
  p.drawnParent.push_back(drawnParent);
  p.representative[n] = self;
  const VNode x = v.nodes[static_cast<size_t>(n)];
  if (maxDepth >= 0 && x.depth >= maxDepth) {
    for (int c : x.children) mapSubtree(v, c, self, p.representative);
    return;
  }
  VNode other;
  other.other = true;
  other.parent = n;
  other.depth = x.depth + 1;
  std::vector<int> droppedKids;
  for (int c : x.children) {
    const VNode& y = v.nodes[static_cast<size_t>(c)];
    if (share(y.incl, total) >= t) {
      prune(v, c, self, t, maxDepth, total, p);
      continue;
    }
    droppedKids.push_back(c);
    addSums(other, y, true);
    other.dropped += subtreeSize(v, c);
    other.members.push_back(y.name);
  }
  if (droppedKids.empty()) return;
  const int64_t k = static_cast<int64_t>(droppedKids.size());
  other.name = "other (" + std::to_string(k) + (k == 1 ? " node, " : " nodes, ") +
               trace::formatShare(share(other.incl, total)) + ")";
  p.hidden_nodes += other.dropped;
  p.hidden_ns = sat(p.hidden_ns, other.incl);
  const int o = v.add(std::move(other));
  const int oi = static_cast<int>(p.drawn.size());
  p.drawn.push_back(o);
  p.drawnParent.push_back(self);
  p.representative[o] = oi;
  for (int c : droppedKids) mapSubtree(v, c, oi, p.representative);
}

// ---------------------------------------------------------------------------------------------
// diff

// Key of an analysis node independent of the file's string ids: names and categories from the
// top.
std::string pathKey(const CallGraph& cg, const trace::TraceReader& r, int n) {
  std::string key;
  std::vector<int> chain;
  for (int k = n; k > 0; k = cg.nodes[static_cast<size_t>(k)].parent) chain.push_back(k);
  for (size_t i = chain.size(); i-- > 0;) {
    const CallNode& c = cg.nodes[static_cast<size_t>(chain[i])];
    key += std::to_string(static_cast<int>(c.category)) + ":" + r.str(c.name) + "\x1f";
  }
  return key;
}

struct BaseValues {
  std::map<std::string, std::pair<int64_t, int64_t>> byPath;  // (inclusive ns, inclusive bytes)
  int64_t total_ns = 0, total_bytes = 0;
};

BaseValues baseValues(const CallGraph& cg, const trace::TraceReader& r) {
  BaseValues b;
  std::vector<int64_t> bytes(cg.nodes.size(), 0);
  for (size_t i = cg.nodes.size(); i-- > 0;) {
    bytes[i] = sat(bytes[i], cg.nodes[i].alloc_bytes);
    if (cg.nodes[i].parent >= 0) {
      bytes[static_cast<size_t>(cg.nodes[i].parent)] =
          sat(bytes[static_cast<size_t>(cg.nodes[i].parent)], bytes[i]);
    }
  }
  for (size_t i = 1; i < cg.nodes.size(); ++i) {
    b.byPath[pathKey(cg, r, static_cast<int>(i))] = {cg.nodes[i].inclusive_ns, bytes[i]};
  }
  for (int c : cg.nodes[0].children)
    b.total_ns = sat(b.total_ns, cg.nodes[static_cast<size_t>(c)].inclusive_ns);
  b.total_bytes = bytes[0];
  return b;
}

// ---------------------------------------------------------------------------------------------
// emitting the graph

std::string idPiece(const std::string& name) {
  std::string out;
  for (char c : name) out += (c == '/') ? '_' : c;
  return out;
}

std::string stageText(int stage, int chunk) {
  if (stage == trace::analysis::kNoStage) return "";
  if (stage == trace::analysis::kSeveralStages) return "stages: several";
  std::string s = "stage " + std::to_string(stage);
  if (chunk >= 0) s += ", chunk " + std::to_string(chunk);
  if (chunk == trace::analysis::kSeveralStages) s += ", several chunks";
  return s;
}

const char* categoryWord(core::Category c) {
  return core::categoryName(c);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// entry point

namespace {

// The analysis the picture draws, with one clear error for a rank or step the trace lacks or a
// trace without spans.
CallGraph readCallGraph(const trace::TraceReader& reader, const CallGraphGraphOptions& o) {
  const std::string file = reader.path();
  const auto ranks = reader.ranks();
  if (o.rank >= 0 &&
      std::none_of(ranks.begin(), ranks.end(), [&](const auto& r) { return r.rank == o.rank; })) {
    std::string list;
    for (const auto& r : ranks) list += (list.empty() ? "" : ", ") + std::to_string(r.rank);
    throw trace::TraceError(file + ": no rank " + std::to_string(o.rank) +
                            " in the trace (ranks: " + (list.empty() ? "none" : list) + ")");
  }
  trace::analysis::CallGraphOptions co;
  co.rank = o.rank;
  co.step = o.step;
  co.gpu_time = o.gpu_time;
  CallGraph cg = trace::analysis::buildCallGraph(reader, co);
  if (o.gpu_time && cg.gpu_activities == 0) {
    throw trace::TraceError(file +
                            ": no GPU kernels to weigh (was the run traced with --capture cuda?)");
  }
  if (o.step >= 0 && !cg.step_found) {
    std::string list;
    if (cg.steps.empty()) {
      list = "the trace has no 'step' spans";
    } else {
      list = "steps " + std::to_string(cg.steps.front()) + ".." + std::to_string(cg.steps.back());
    }
    throw trace::TraceError(file + ": no step " + std::to_string(o.step) +
                            (o.rank >= 0 ? " on rank " + std::to_string(o.rank) : "") +
                            " in the trace (" + list + ")");
  }
  if (cg.nodes.size() <= 1) {
    throw trace::TraceError(file + ": no spans to draw (was the run traced with --capture ops?)");
  }
  return cg;
}

// One call-graph picture while it is built: the options, the analysis, its folded and pruned
// view, the diff against a base trace, and the graph so far. The steps below each fill a part.
struct Picture {
  Picture(const trace::TraceReader& r, const CallGraphGraphOptions& options,
          const trace::TraceReader* b, CallGraph analysis)
      : reader(r), o(options), base(b), cg(std::move(analysis)) {}

  const trace::TraceReader& reader;
  const CallGraphGraphOptions& o;
  const trace::TraceReader* base;
  CallGraph cg;
  View v;
  int64_t total = 0;
  std::vector<int> folds;
  double wanted = 0, t = 0;
  int budget = 0;
  Pruned p;
  // Per drawn node: the relative change against the base, the base's value, whether it has one.
  std::vector<double> change;
  std::vector<int64_t> baseValue;
  std::vector<bool> inBase;
  int64_t onlyInBase = 0;  // paths only in the base trace
  double maxMetric = 0;    // the colouring metric's largest value over the drawn nodes
  Graph g;
  std::set<std::string> ids;
  std::vector<std::string> paths;  // per drawn node: its id

  // The steps, in the order buildCallGraphGraph runs them.
  void foldAndPrune();
  void diffAgainstBase();
  void scaleMetric();
  std::string drawnId(size_t i);
  std::string labelOf(size_t i) const;
  void addDrawnNode(size_t i);
  void addFlows(CallGraphGraphMap* map);
  void titleAndCaption(size_t rankCount);
};

// ×N folds (unless --expand), then pruning to the threshold that fits the node budget.
void Picture::foldAndPrune() {
  v = View::from(cg, reader);
  total = v.nodes[0].incl;
  if (!o.expand) {
    const std::set<std::string> keep(o.expand_folds.begin(), o.expand_folds.end());
    fold(v, 0, folds, keep, "all");
  }

  wanted = std::max(0.0, o.node_thres);
  budget = std::max(10, o.max_nodes);
  t = fitThreshold(v, wanted, budget, o.depth, total);
  prune(v, 0, -1, t, o.depth, total, p);
}

void Picture::diffAgainstBase() {
  // Diff values, per drawn node: the base trace's inclusive value summed over its sources.
  change.assign(p.drawn.size(), 0.0);
  baseValue.assign(p.drawn.size(), 0);
  inBase.assign(p.drawn.size(), false);
  if (base) {
    trace::analysis::CallGraphOptions co;
    co.rank = o.rank;
    co.step = o.step;
    co.gpu_time = o.gpu_time;
    const CallGraph bcg = trace::analysis::buildCallGraph(*base, co);
    const BaseValues bv = baseValues(bcg, *base);
    std::set<std::string> seen;
    for (size_t i = 0; i < p.drawn.size(); ++i) {
      const VNode& x = v.nodes[static_cast<size_t>(p.drawn[i])];
      int64_t b = 0;
      bool found = false;
      if (p.drawn[i] == 0) {
        b = o.color_by == ColorBy::kBytes ? bv.total_bytes : bv.total_ns;
        found = true;
      }
      for (int s : x.sources) {
        if (s == 0) continue;
        const std::string key = pathKey(cg, reader, s);
        seen.insert(key);
        auto it = bv.byPath.find(key);
        if (it == bv.byPath.end()) continue;
        found = true;
        b = sat(b, o.color_by == ColorBy::kBytes ? it->second.second : it->second.first);
      }
      const int64_t cur = o.color_by == ColorBy::kBytes ? x.bytes_incl : x.incl;
      const double denom = double(std::max<int64_t>(std::max(cur, b), 1));
      change[i] = found ? double(cur - b) / denom : 1.0;
      baseValue[i] = b;
      inBase[i] = found;
    }
    for (size_t i = 1; i < cg.nodes.size(); ++i) seen.insert(pathKey(cg, reader, int(i)));
    for (const auto& [key, val] : bv.byPath) onlyInBase += seen.count(key) ? 0 : 1;
  }
}

// The colouring metric of a view node.
double metricOf(const VNode& x, ColorBy by) {
  switch (by) {
    case ColorBy::kSelf:
      return double(x.excl);
    case ColorBy::kBytes:
      return double(x.bytes_incl);
    case ColorBy::kTotal:
      break;
  }
  return double(x.incl);
}

// Colour scale: the metric over the drawn nodes' maximum (the root excluded).
void Picture::scaleMetric() {
  maxMetric = 0;
  for (size_t i = 1; i < p.drawn.size(); ++i) {
    maxMetric = std::max(maxMetric, metricOf(v.nodes[static_cast<size_t>(p.drawn[i])], o.color_by));
  }
}

// Drawn node i's id: its drawn parent's id and its name, made unique with "~k".
std::string Picture::drawnId(size_t i) {
  const VNode& x = v.nodes[static_cast<size_t>(p.drawn[i])];
  const int dp = p.drawnParent[i];
  std::string id = dp < 0 ? "all" : paths[static_cast<size_t>(dp)] + "/" + idPiece(x.name);
  if (ids.count(id)) {
    const std::string stem = id + "~";
    for (int k = 2; ids.count(id); ++k) id = stem + std::to_string(k);
  }
  ids.insert(id);
  paths[i] = id;
  return id;
}

// Drawn node i's label: name (a kernel's short name), times and share, calls, bytes, what it
// sent, its change.
std::string Picture::labelOf(size_t i) const {
  const VNode& x = v.nodes[static_cast<size_t>(p.drawn[i])];
  const int dp = p.drawnParent[i];
  std::string label;
  if (dp < 0) {
    label = o.rank >= 0 ? "rank " + std::to_string(o.rank) : "all ranks";
    if (o.step >= 0) label += ", step " + std::to_string(o.step);
    label += "\n" + trace::formatDuration(x.incl) + " (100%)";
  } else {
    const std::string name = shownName(x);
    label = x.fold > 1 ? name + " \u00d7" + std::to_string(x.fold) : name;
    label += "\n" + trace::formatDuration(x.incl) + " (" +
             trace::formatShare(share(x.incl, total)) + ")";
    if (!x.other) label += " \u00b7 self " + trace::formatDuration(x.excl);
    label += "\n" + trace::formatCount(x.count) + (x.count == 1 ? " call" : " calls");
  }
  if (x.bytes_incl != 0) {
    label += "\nalloc " + trace::formatBytes(double(x.bytes_incl));
    if (!x.other && x.bytes_self != x.bytes_incl) {
      label += " (self " + trace::formatBytes(double(x.bytes_self)) + ")";
    }
  }
  if (x.category == core::Category::kComm && !x.other) {
    label += "\n" + trace::formatBytes(double(x.comm_bytes)) + " sent";
    if (!x.group.empty()) label += " \u00b7 group " + x.group + (x.several_groups ? " +" : "");
  }
  if (base) {
    label +=
        "\n\u0394 " + std::string(change[i] >= 0 ? "+" : "") + trace::formatShare(change[i]) +
        (inBase[i] ? " (was " +
                         (o.color_by == ColorBy::kBytes ? trace::formatBytes(double(baseValue[i]))
                                                        : trace::formatDuration(baseValue[i])) +
                         ")"
                   : " (new)");
  }
  return label;
}

// The tooltip: the exact numbers (tests read them) and the full detail; a kernel's full
// demangled name (its label shows the short one).
std::string tooltipOf(const VNode& x, bool root, const std::string& id) {
  const int dp = root ? -1 : 0;
  std::string tip = dp < 0 ? "all" : id.substr(4);
  if (isKernel(x)) tip += "\nkernel: " + core::demangleKernelName(x.name);
  tip += "\ncategory: " + std::string(dp < 0    ? "root"
                                      : x.other ? "other"
                                                : categoryWord(x.category));
  tip += "\ncalls: " + std::to_string(x.count);
  tip += "\ninclusive_ns: " + std::to_string(x.incl);
  tip += "\nexclusive_ns: " + std::to_string(x.excl);
  tip += "\nbytes: " + std::to_string(x.bytes_incl);
  tip += "\nbytes_self: " + std::to_string(x.bytes_self);
  if (x.category == core::Category::kComm) {
    tip += "\ncomm_bytes: " + std::to_string(x.comm_bytes);
    tip += "\ngroup: " + x.group + (x.several_groups ? " (and others)" : "");
  }
  if (x.fold > 1) tip += "\nfold: " + std::to_string(x.fold);
  if (x.other) tip += "\nhidden_nodes: " + std::to_string(x.dropped);
  const std::string st = stageText(x.stage, x.chunk);
  if (!st.empty() && !x.other) tip += "\n" + st;
  if (!x.members.empty()) {
    tip += x.other ? "\nholds:" : "\nmembers:";
    size_t shown = 0;
    for (const auto& m : x.members) {
      if (++shown > 24) {
        tip += " ...";
        break;
      }
      tip += " " + m;
    }
  }
  return tip;
}

// Drawn node i as a Node (its role and numbers) and the edge from its drawn parent.
void Picture::addDrawnNode(size_t i) {
  const VNode& x = v.nodes[static_cast<size_t>(p.drawn[i])];
  const int dp = p.drawnParent[i];
  Node node;
  node.id = drawnId(i);
  node.fold = x.fold;
  node.label = labelOf(i);
  node.tooltip = tooltipOf(x, dp < 0, node.id);
  node.metrics.inclusive_ns = x.incl;
  node.metrics.self_ns = x.excl;
  node.metrics.calls = x.count;
  node.metrics.bytes = x.bytes_incl;
  if (x.category == core::Category::kComm) node.metrics.comm_bytes = x.comm_bytes;
  if (x.other) {
    node.shape = NodeShape::kNote;
    node.role = Role::kOther;
  } else {
    const bool scope = x.category == core::Category::kPhase ||
                       x.category == core::Category::kModule || x.category == core::Category::kUser;
    const bool comm = x.category == core::Category::kComm;
    node.shape = comm                ? NodeShape::kHexagon
                 : (scope || dp < 0) ? NodeShape::kRoundedBox
                                     : NodeShape::kBox;
    node.role = dp < 0 ? Role::kRoot : comm ? Role::kComm : scope ? Role::kScope : Role::kOp;
    if (base) {
      node.metrics.change = std::isnan(change[i]) ? 0.0 : change[i];
    } else {
      node.metrics.heat = maxMetric > 0 ? metricOf(x, o.color_by) / maxMetric : 0.0;
    }
  }

  g.addNode(std::move(node));
  if (dp >= 0) {
    Edge e;
    e.from = dp;
    e.to = static_cast<int>(i);
    const double s = share(x.incl, total);
    e.penwidth = std::max(1.0, std::min(6.0, 1.0 + 5.0 * s));
    e.role = x.other ? Role::kHiddenCall : Role::kCall;
    e.metrics.inclusive_ns = x.incl;
    e.metrics.calls = x.count;
    g.addEdge(std::move(e));
  }
}

// Flows (forward -> backward and others) between the drawn representatives of their ends.
void Picture::addFlows(CallGraphGraphMap* map) {
  // Flows (forward -> backward and others) between the drawn representatives of their ends: each
  // analysis node belongs to one view node (folded copies to their first member), whose drawn
  // representative is itself or the "other" node or ancestor that hides it.
  std::map<int, int> owner;  // analysis node -> view node
  {
    std::vector<int> stack{0};
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      for (int s : v.nodes[static_cast<size_t>(n)].sources) owner[s] = n;
      for (int c : v.nodes[static_cast<size_t>(n)].children) stack.push_back(c);
    }
  }
  if (map) {
    map->drawn_of.assign(cg.nodes.size(), 0);
    for (const auto& [cgNode, viewNode] : owner) {
      map->drawn_of[static_cast<size_t>(cgNode)] = p.representative.at(viewNode);
    }
  }
  auto findRep = [&](int cgNode) {
    auto it = owner.find(cgNode);
    if (it == owner.end()) return std::make_pair(0, true);
    const int drawnIndex = p.representative.at(it->second);
    return std::make_pair(drawnIndex, p.drawn[static_cast<size_t>(drawnIndex)] != it->second);
  };
  std::map<std::tuple<int, int, int>, std::pair<int64_t, bool>> links;  // -> (count, residual)
  for (const auto& l : cg.links) {
    const double s = std::min(share(cg.nodes[static_cast<size_t>(l.from)].inclusive_ns, total),
                              share(cg.nodes[static_cast<size_t>(l.to)].inclusive_ns, total));
    if (s < o.edge_thres) continue;
    const auto [from, r1] = findRep(l.from);
    const auto [to, r2] = findRep(l.to);
    if (from == to) continue;
    auto& slot = links[{from, to, static_cast<int>(l.kind)}];
    slot.first += l.count;
    slot.second = slot.second || r1 || r2;
  }
  for (const auto& [key, val] : links) {
    Edge e;
    e.from = std::get<0>(key);
    e.to = std::get<1>(key);
    e.style = EdgeStyle::kDashed;
    e.constraint = false;
    e.role = Role::kFlow;
    e.metrics.calls = val.first;
    const auto kind = static_cast<core::FlowKind>(std::get<2>(key));
    e.label = "\u00d7" + trace::formatCount(val.first);
    e.tooltip = std::string(core::flowKindName(kind)) + ": " + std::to_string(val.first) +
                (val.second ? " (through nodes not drawn)" : "");
    g.addEdge(std::move(e));
  }
}

// The title and caption: the total, the colouring, what pruning, folds and the depth hid.
void Picture::titleAndCaption(size_t rankCount) {
  const std::string file = reader.path();
  // Title and caption.
  g.title = "call graph \u00b7 " + file + " \u00b7 " +
            (o.rank >= 0 ? "rank " + std::to_string(o.rank)
                         : "all ranks (" + std::to_string(rankCount) + ")") +
            " \u00b7 " + (o.step >= 0 ? "step " + std::to_string(o.step) : "all steps");
  std::string cap = "total " + trace::formatDuration(total) +
                    (o.gpu_time ? " (GPU time: kernels, copies and sets, summed over streams "
                                  "and ranks, under the ops that launched them); colour: "
                                : " (top-level spans, summed over threads and ranks); colour: ") +
                    (base                            ? std::string("change against ") + base->path()
                     : o.color_by == ColorBy::kSelf  ? std::string("self time")
                     : o.color_by == ColorBy::kBytes ? std::string("bytes allocated")
                                                     : std::string("total time"));
  cap += "\n" + std::to_string(p.drawn.size()) + " nodes drawn; node threshold " +
         trace::formatShare(t > 1.0 ? 1.0 : t) + ", edge threshold " +
         trace::formatShare(o.edge_thres);
  if (p.hidden_nodes > 0) {
    cap += "; 'other' nodes hold " + trace::formatCount(p.hidden_nodes) + " nodes (" +
           trace::formatShare(share(p.hidden_ns, total)) + " of the time)";
  }
  if (t > wanted) {
    cap += "\nover the budget of " + std::to_string(budget) + " nodes (--max-nodes): threshold " +
           "raised from " + trace::formatShare(wanted) + " to " +
           trace::formatShare(t > 1.0 ? 1.0 : t);
  }
  if (!folds.empty()) {
    std::string list;
    for (int f : folds) {
      const VNode& x = v.nodes[static_cast<size_t>(f)];
      if (p.representative.count(f) && p.drawn[static_cast<size_t>(p.representative[f])] == f) {
        list += (list.empty() ? "" : ", ") + shownName(x) + " \u00d7" + std::to_string(x.fold);
      }
    }
    if (!list.empty()) cap += "\nfolded identical siblings: " + list + " (--expand draws each)";
  }
  if (o.depth >= 0) cap += "\ndepth limited to " + std::to_string(o.depth) + " levels";
  if (cg.unattributed_bytes > 0) {
    cap += "\n" + trace::formatBytes(double(cg.unattributed_bytes)) + " allocated outside any span";
  }
  if (base && onlyInBase > 0) {
    cap +=
        "\n" + trace::formatCount(onlyInBase) + " paths only in " + base->path() + " (not drawn)";
  }
  g.caption = cap;
}

}  // namespace

Graph buildCallGraphGraph(const trace::TraceReader& reader, const CallGraphGraphOptions& o,
                          const trace::TraceReader* base, CallGraphGraphMap* map) {
  Picture pic(reader, o, base, readCallGraph(reader, o));
  pic.foldAndPrune();
  pic.diffAgainstBase();
  pic.scaleMetric();
  pic.paths.assign(pic.p.drawn.size(), std::string());
  for (size_t i = 0; i < pic.p.drawn.size(); ++i) pic.addDrawnNode(i);
  pic.addFlows(map);
  pic.titleAndCaption(reader.ranks().size());
  if (map) map->analysis = std::move(pic.cg);
  return std::move(pic.g);
}

}  // namespace tracerun::dot
