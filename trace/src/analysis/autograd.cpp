// The autograd graph of one step of one rank, from backward spans' graph arguments (autograd.h).
// Loops and sorted vectors only: no recursion, so graph depth costs nothing but time.
#include "tracerun/trace/analysis/autograd.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "span_select.h"

namespace tracerun::trace::analysis {

namespace {

constexpr int64_t kAddressMask = (int64_t{1} << 48) - 1;

enum Code : int { kNone = 0, kStep, kNode, kModule, kRecompute, kOp };

struct StepWindow {
  int number = 0;
  int64_t start = 0, end = 0;
};

struct Picked {
  PickedSpan p;
  std::vector<int64_t> next;  // ag_next values in order
  int64_t identity = 0, variable = 0;
  bool has_identity = false;
};

std::string stepList(const std::vector<int>& steps) {
  std::string s;
  for (size_t i = 0; i < steps.size() && i < 8; ++i)
    s += (i ? ", " : "") + std::to_string(steps[i]);
  if (steps.size() > 8) s += ", ...";
  return s;
}

// The rank's thread tracks; an unknown rank is an error.
std::vector<TrackRow> rankThreads(const TraceReader& reader, int rank) {
  std::vector<TrackRow> threads;
  bool rankSeen = false;
  for (const TrackRow& t : reader.tracks()) {
    if (t.rank != rank) continue;
    rankSeen = true;
    if (t.kind == core::TrackKind::kThread) threads.push_back(t);
  }
  if (!rankSeen) {
    throw TraceError(reader.path() + ": no rank " + std::to_string(rank) + " in the trace");
  }
  return threads;
}

// The "step" scopes of the rank in start order, numbered from their step argument (else 1, 2...).
std::vector<StepWindow> readStepWindows(const TraceReader& reader,
                                        const std::vector<TrackRow>& threads,
                                        const NameCodes& codes) {
  const core::StringId kStepKey = NameCodes::find(reader, "step");
  std::vector<StepWindow> steps;
  for (const TrackRow& t : threads) {
    auto picked = pickSpans(reader, t, [&](const SpanRow& s) -> int {
      const bool scope =
          s.category == core::Category::kPhase || s.category == core::Category::kUser;
      return scope && codes(s.name) == kStep ? kStep : kNone;
    });
    for (const PickedSpan& p : picked) {
      steps.push_back({static_cast<int>(p.arg(kStepKey, -1)), p.span.start_ns, p.span.end_ns()});
    }
  }
  std::sort(steps.begin(), steps.end(),
            [](const StepWindow& a, const StepWindow& b) { return a.start < b.start; });
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].number < 0) steps[i].number = static_cast<int>(i) + 1;
  }
  return steps;
}

// Every backward span of the rank with its graph arguments (ag_node, ag_next, ag_var).
std::vector<Picked> readBackwardSpans(const TraceReader& reader,
                                      const std::vector<TrackRow>& threads, int rank) {
  const core::StringId kNodeKey = NameCodes::find(reader, "ag_node");
  const core::StringId kNextKey = NameCodes::find(reader, "ag_next");
  const core::StringId kVarKey = NameCodes::find(reader, "ag_var");
  std::vector<Picked> all;
  for (const TrackRow& t : threads) {
    for (PickedSpan& p : pickSpans(reader, t, [](const SpanRow& s) -> int {
           return s.category == core::Category::kBackward ? kNode : kNone;
         })) {
      Picked q;
      for (const auto& [k, v] : p.args) {
        if (k == 0) continue;
        if (k == kNodeKey) {
          q.identity = v & kAddressMask;
          q.has_identity = true;
        } else if (k == kNextKey) {
          q.next.push_back(v);
        } else if (k == kVarKey) {
          q.variable = v;
        }
      }
      q.p = std::move(p);
      all.push_back(std::move(q));
    }
  }
  if (all.empty()) {
    throw TraceError(reader.path() + ": no autograd nodes (backward spans) on rank " +
                     std::to_string(rank) +
                     "; trace a program that runs backward, with --capture ops");
  }
  return all;
}

bool inWindow(const Picked& q, int64_t a, int64_t b) {
  return q.p.span.start_ns >= a && q.p.span.end_ns() <= b;
}

// Sets g's step and window (the chosen step, else the first that ran backward nodes, else the
// whole trace when it has no steps) and returns the backward spans inside it, in start order.
std::vector<Picked> selectStep(AutogradGraph& g, const std::vector<StepWindow>& steps,
                               std::vector<Picked> all, const AutogradOptions& options,
                               const std::string& file) {
  if (steps.empty()) {
    if (options.step != -1) {
      throw TraceError(file + ": no step " + std::to_string(options.step) + " on rank " +
                       std::to_string(options.rank) + " (the trace has no \"step\" spans)");
    }
    g.step = -1;
    g.start_ns = INT64_MIN;
    g.end_ns = INT64_MAX;
  } else {
    const StepWindow* chosen = nullptr;
    for (const StepWindow& s : steps) {
      if (options.step != -1 ? s.number == options.step
                             : std::any_of(all.begin(), all.end(), [&](const Picked& q) {
                                 return inWindow(q, s.start, s.end);
                               })) {
        chosen = &s;
        break;
      }
    }
    if (chosen == nullptr) {
      throw TraceError(
          file + ": " +
          (options.step != -1
               ? "no step " + std::to_string(options.step) + " on rank " +
                     std::to_string(options.rank) + " (steps: " + stepList(g.steps) + ")"
               : "no step of rank " + std::to_string(options.rank) + " ran backward nodes"));
    }
    g.step = chosen->number;
    g.start_ns = chosen->start;
    g.end_ns = chosen->end;
  }
  std::vector<Picked> sel;
  for (Picked& q : all) {
    if (inWindow(q, g.start_ns, g.end_ns)) sel.push_back(std::move(q));
  }
  if (sel.empty()) {
    throw TraceError(file + ": no autograd nodes on rank " + std::to_string(options.rank) +
                     " in step " + std::to_string(g.step));
  }
  std::sort(sel.begin(), sel.end(), [](const Picked& a, const Picked& b) {
    return std::tie(a.p.span.start_ns, a.p.span.track, a.p.span.id) <
           std::tie(b.p.span.start_ns, b.p.span.track, b.p.span.id);
  });
  if (std::none_of(sel.begin(), sel.end(), [](const Picked& q) { return q.has_identity; })) {
    throw TraceError(file +
                     ": the backward nodes carry no graph edges (ag_node); record with a "
                     "tracerun that captures them (docs/capture.md, Autograd graph)");
  }
  return sel;
}

// One node per selected span, in start order; a node inside another on its track (a reentrant
// backward inside a node) is marked recomputed: a stack sweep per track.
void addNodes(const TraceReader& reader, AutogradGraph& g, const std::vector<Picked>& sel) {
  const core::StringId kAccumulate = NameCodes::find(reader, "torch::autograd::AccumulateGrad");
  g.nodes.reserve(sel.size());
  for (const Picked& q : sel) {
    AutogradNode n;
    n.span = q.p.span.id;
    n.track = q.p.span.track;
    n.start_ns = q.p.span.start_ns;
    n.dur_ns = q.p.span.dur_ns;
    n.name = q.p.span.name;
    n.seq = q.p.span.seq;
    n.identity = q.identity;
    n.variable = q.variable;
    n.accumulate_grad = kAccumulate != 0 && n.name == kAccumulate;
    if (n.accumulate_grad) n.shape = q.p.span.detail;
    if (!q.has_identity) ++g.nodes_without_edges;
    g.nodes.push_back(std::move(n));
  }

  std::map<int64_t, std::vector<int64_t>> open;  // track -> ends of enclosing nodes
  for (AutogradNode& n : g.nodes) {
    auto& stack = open[n.track];
    while (!stack.empty() && stack.back() <= n.start_ns) stack.pop_back();
    if (!stack.empty()) n.recomputed = true;
    stack.push_back(n.start_ns + n.dur_ns);
  }
}

// Edges: target = the first node with that identity starting at or after the source.
void addEdges(AutogradGraph& g, const std::vector<Picked>& sel) {
  std::unordered_map<int64_t, std::vector<int>> byIdentity;  // in start order
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (sel[i].has_identity) byIdentity[g.nodes[i].identity].push_back(static_cast<int>(i));
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const std::vector<int64_t>& next = sel[i].next;
    for (size_t k = 0; k < next.size(); ++k) {
      if (next[k] == 0) continue;  // an input that needs no gradient
      const int64_t target = next[k] & kAddressMask;
      const int inputNr = static_cast<int>(static_cast<uint64_t>(next[k]) >> 48);
      auto it = byIdentity.find(target);
      int to = -1;
      if (it != byIdentity.end()) {
        for (int j : it->second) {
          if (g.nodes[j].start_ns >= g.nodes[i].start_ns && j != static_cast<int>(i)) {
            to = j;
            break;
          }
        }
      }
      if (to < 0) {
        ++g.unresolved_edges;
        continue;
      }
      g.edges.push_back({static_cast<int>(i), to, static_cast<int>(k), inputNr});
    }
  }
}

// Passes: each root (no incoming edge) and what it reaches, roots in start order.
void numberPasses(AutogradGraph& g) {
  std::vector<std::vector<int>> out(g.nodes.size());
  std::vector<char> hasIn(g.nodes.size(), 0);
  for (const AutogradEdge& e : g.edges) {
    out[e.from].push_back(e.to);
    hasIn[e.to] = 1;
  }
  std::vector<int> pass(g.nodes.size(), -1);
  std::vector<int> queue;
  for (size_t r = 0; r < g.nodes.size(); ++r) {
    if (hasIn[r] || pass[r] >= 0) continue;
    const int p = g.passes++;
    queue.assign(1, static_cast<int>(r));
    pass[r] = p;
    for (size_t h = 0; h < queue.size(); ++h) {
      for (int to : out[queue[h]]) {
        if (pass[to] < 0) {
          pass[to] = p;
          queue.push_back(to);
        }
      }
    }
  }
  for (size_t i = 0; i < g.nodes.size(); ++i) g.nodes[i].pass = pass[i] < 0 ? 0 : pass[i];
}

// Forward ops (flow sources) of the nodes, their module scopes and recompute phases.
void attachForwardOps(const TraceReader& reader, AutogradGraph& g, int rank,
                      const NameCodes& codes) {
  // C++ custom functions (torch::autograd::Function<T>) take a sequence number without any op
  // carrying it (their forward runs with grad mode off), so a flow to one names an unrelated op.
  NameCodes cppNode(reader, [](const std::string& s) -> int {
    return s.rfind("torch::autograd::CppNode<", 0) == 0 ? 1 : 0;
  });
  std::map<std::pair<int64_t, int64_t>, int> nodeByStart;  // (track, start) -> node
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    nodeByStart.emplace(std::make_pair(g.nodes[i].track, g.nodes[i].start_ns), static_cast<int>(i));
  }
  std::map<int64_t, std::vector<std::pair<int64_t, int>>> sources;  // src track -> (ts, node)
  for (const FlowRow& f : reader.flows()) {
    if (f.kind != core::FlowKind::kForwardBackward) continue;
    auto it = nodeByStart.find({f.dst_track, f.dst_ts_ns});
    if (it == nodeByStart.end() || cppNode(g.nodes[it->second].name) != 0) continue;
    sources[f.src_track].emplace_back(f.src_ts_ns, it->second);
  }
  for (auto& [trackId, list] : sources) {
    std::sort(list.begin(), list.end());
    const int64_t lo = list.front().first, hi = list.back().first;
    // Ops starting at a source time; module spans and recompute phases that may enclose one.
    std::set<int64_t> times;
    for (const auto& s : list) times.insert(s.first);
    TrackRow track;
    track.id = trackId;
    track.rank = rank;
    auto picked = pickSpans(reader, track, [&](const SpanRow& s) -> int {
      if (s.start_ns > hi || s.end_ns() < lo) return kNone;
      if (s.category == core::Category::kModule) return kModule;
      if (s.category == core::Category::kPhase && codes(s.name) == kRecompute) return kRecompute;
      if (s.category == core::Category::kOp && times.count(s.start_ns)) return kOp;
      return kNone;
    });
    std::multimap<int64_t, const PickedSpan*> opsAt;
    std::vector<const PickedSpan*> enclosers;  // module spans and recompute phases, start order
    for (const PickedSpan& p : picked) {
      if (p.code == kOp) {
        opsAt.emplace(p.span.start_ns, &p);
      } else {
        enclosers.push_back(&p);
      }
    }
    // Sources in time order against a stack of the spans enclosing the current time (spans on one
    // track nest), so each op finds its modules without a scan.
    std::vector<const PickedSpan*> stack;
    size_t next = 0;
    for (const auto& [ts, ni] : list) {
      AutogradNode& n = g.nodes[ni];
      const PickedSpan* op = nullptr;  // the op carrying the node's seq (the deepest if several)
      for (auto [a, b] = opsAt.equal_range(ts); a != b; ++a) {
        const PickedSpan& p = *a->second;
        if (op == nullptr ||
            (p.span.seq == n.seq && (op->span.seq != n.seq || p.span.depth > op->span.depth))) {
          op = &p;
        }
      }
      while (next < enclosers.size() && enclosers[next]->span.start_ns <= ts) {
        stack.push_back(enclosers[next++]);
      }
      while (!stack.empty() && stack.back()->span.end_ns() < ts) stack.pop_back();
      if (op == nullptr) continue;
      n.forward_span = op->span.id;
      n.forward_name = op->span.name;
      n.forward_detail = op->span.detail;
      for (const PickedSpan* p : stack) {
        if (p->span.end_ns() < op->span.end_ns() || p->span.depth >= op->span.depth) continue;
        if (p->code == kModule) {
          n.modules.push_back(p->span.name);
        } else {
          n.recomputed = true;
        }
      }
    }
  }
}

// Nodes without a forward op (AccumulateGrad leaves, custom autograd functions, whose forward
// is no dispatcher op). A leaf: the modules of the first node that feeds it (the parameter's
// user). A function: the scopes its first feeder and its first next node with a forward op
// share (a dropout between the embedding and layers.0 is in neither), else the feeder's. Edges
// are in source start order and a node starts after its feeders, so one pass settles chains.
void inheritModules(AutogradGraph& g) {
  std::vector<int> firstNext(g.nodes.size(), -1);
  for (const AutogradEdge& e : g.edges) {
    if (firstNext[e.from] < 0 && g.nodes[e.to].forward_span != 0) firstNext[e.from] = e.to;
  }
  for (const AutogradEdge& e : g.edges) {
    AutogradNode& to = g.nodes[e.to];
    const std::vector<core::StringId>& feeder = g.nodes[e.from].modules;
    if (to.forward_span != 0 || !to.modules.empty() || feeder.empty()) continue;
    to.modules = feeder;
    if (to.accumulate_grad || firstNext[e.to] < 0) continue;
    const std::vector<core::StringId>& next = g.nodes[firstNext[e.to]].modules;
    size_t common = 0;
    while (common < feeder.size() && common < next.size() && feeder[common] == next[common]) {
      ++common;
    }
    to.modules.resize(common);
  }
}

}  // namespace

AutogradGraph buildAutogradGraph(const TraceReader& reader, const AutogradOptions& options) {
  AutogradGraph g;
  g.rank = options.rank;
  const std::vector<TrackRow> threads = rankThreads(reader, options.rank);
  const NameCodes codes(reader, [](const std::string& s) -> int {
    if (s == "step") return kStep;
    if (s == "recompute_forward") return kRecompute;
    return kNone;
  });
  const std::vector<StepWindow> steps = readStepWindows(reader, threads, codes);
  for (const StepWindow& s : steps) g.steps.push_back(s.number);
  const std::vector<Picked> sel = selectStep(
      g, steps, readBackwardSpans(reader, threads, options.rank), options, reader.path());
  addNodes(reader, g, sel);
  addEdges(g, sel);
  numberPasses(g);
  attachForwardOps(reader, g, options.rank, codes);
  inheritModules(g);
  return g;
}

}  // namespace tracerun::trace::analysis
