// The measured critical path (see critical_path.h): a step's actions -> the schedule library's
// longest path -> the chain and its length. No replay, no drawing, no report formatting.
#include "tracerun/trace/analysis/critical_path.h"

#include <algorithm>
#include <map>

#include "tracerun/schedule/critical_path.h"

namespace tracerun::trace::analysis {

namespace {

using Kind = PipelineActionKind;

bool isRecv(Kind k) {
  return k == Kind::kRecvForward || k == Kind::kRecvBackward;
}

// The chain from the path's last action back through `via`: the on-path action no other on-path
// action names as its predecessor.
std::vector<CriticalPathLink> chainOf(const PipelineCriticalPath& p,
                                      const std::vector<int64_t>& weights) {
  const size_t n = p.actions.size();
  std::vector<bool> isVia(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (p.on_path[i] && p.via[i] >= 0) isVia[static_cast<size_t>(p.via[i])] = true;
  }
  long end = -1;
  for (size_t i = 0; i < n && end < 0; ++i) {
    if (p.on_path[i] && !isVia[i]) end = long(i);
  }
  std::vector<CriticalPathLink> chain;
  std::vector<bool> seen(n, false);
  for (long k = end; k >= 0 && p.on_path[static_cast<size_t>(k)] && !seen[size_t(k)];
       k = p.via[static_cast<size_t>(k)]) {
    seen[size_t(k)] = true;
    chain.push_back({static_cast<size_t>(k), weights[static_cast<size_t>(k)]});
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

// An action weighs the time it adds after what it waits for: from the later of its start, the
// effective end of the action before it on its rank (the lane order the longest path follows) and,
// for a receive, the effective end of its send, to its own end. An action's effective end is the
// later of its end and that start, so an action that ends inside a longer one before it (an
// isend's span running past the next forward) adds nothing and hands on the longer one's end. So
// the weights along any chain telescope and a path is never longer than the step's window (the
// plain end made the path 0.4% longer than the step in CI, and a clamp to zero without the
// effective end 0.05% longer in a loaded dry run).
std::vector<int64_t> criticalPathWeights(const std::vector<PipelineAction>& actions) {
  const size_t n = actions.size();
  std::vector<int64_t> w(n), effectiveEnd(n);
  std::map<int, int64_t> laneEnd;  // rank -> effective end of its previous action (vector order)
  for (size_t i = 0; i < n; ++i) {
    const PipelineAction& a = actions[i];
    int64_t from = a.start_ns;
    const auto prev = laneEnd.find(a.rank);
    if (prev != laneEnd.end()) from = std::max(from, prev->second);
    if (isRecv(a.kind) && a.match >= 0 && static_cast<size_t>(a.match) < n) {
      const size_t send = static_cast<size_t>(a.match);
      from = std::max(from, send < i ? effectiveEnd[send] : actions[send].end_ns);
    }
    w[i] = std::max<int64_t>(0, a.end_ns - from);
    effectiveEnd[i] = std::max(a.end_ns, from);
    laneEnd[a.rank] = effectiveEnd[i];
  }
  return w;
}

PipelineCriticalPath criticalPathOfActions(std::vector<PipelineAction> actions) {
  PipelineCriticalPath p;
  p.actions = std::move(actions);
  const size_t n = p.actions.size();
  const std::vector<int64_t> weights = criticalPathWeights(p.actions);
  std::vector<schedule::TimedStep> steps(n);
  int64_t lo = 0, hi = 0;
  for (size_t i = 0; i < n; ++i) {
    const PipelineAction& a = p.actions[i];
    steps[i].lane = a.rank;
    steps[i].cost = double(weights[i]);
    if (isRecv(a.kind) && a.match >= 0 && static_cast<size_t>(a.match) < n)
      steps[i].after = a.match;
    lo = i == 0 ? a.start_ns : std::min(lo, a.start_ns);
    hi = i == 0 ? a.end_ns : std::max(hi, a.end_ns);
  }
  const schedule::CriticalPath cp = schedule::criticalPath(steps);
  p.on_path = cp.on_path;
  p.via = cp.via;
  p.chain = chainOf(p, weights);
  for (const CriticalPathLink& l : p.chain) p.length_ns += l.weight_ns;
  p.step_ns = hi - lo;
  p.found = n > 0;
  return p;
}

PipelineCriticalPath pipelineCriticalPath(const TraceReader& reader, int step, int replica) {
  if (step < 0) {
    const PipelineStepActions first = pipelineStepActions(reader, -1, replica);
    if (first.steps.empty()) return {};
    step = first.steps.size() > 1 ? first.steps[1] : first.steps[0];
  }
  PipelineStepActions sa = pipelineStepActions(reader, step, replica);
  if (!sa.found) return {};
  PipelineCriticalPath p = criticalPathOfActions(std::move(sa.actions));
  p.step = step;
  p.replica = replica;
  return p;
}

std::string criticalPathActionName(const PipelineAction& a, bool chunks) {
  const bool fwd =
      a.kind == Kind::kForward || a.kind == Kind::kSendForward || a.kind == Kind::kRecvForward;
  std::string s = a.kind == Kind::kSendForward || a.kind == Kind::kSendBackward ? "send "
                  : isRecv(a.kind)                                              ? "recv "
                                                                                : "";
  s += (fwd                               ? "F"
        : a.kind == Kind::kBackwardWeight ? "W"
                                          : "B") +
       std::to_string(a.microbatch) + " s" + std::to_string(a.stage);
  if (chunks) s += " c" + std::to_string(a.chunk);
  return s;
}

std::string criticalPathChainText(const PipelineCriticalPath& p, size_t max_links) {
  bool chunks = false;
  for (const PipelineAction& a : p.actions) chunks = chunks || a.chunk > 0;
  const size_t n = p.chain.size();
  const bool elide = max_links > 0 && n > max_links;
  const size_t head = elide ? (max_links + 1) / 2 : n, tail = elide ? max_links / 2 : 0;
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (elide && i == head) {
      out += " -> ... (" + std::to_string(n - head - tail) + " more)";
      i = n - tail - 1;
      continue;
    }
    if (!out.empty()) out += " -> ";
    out += criticalPathActionName(p.actions[p.chain[i].action], chunks);
  }
  return out;
}

}  // namespace tracerun::trace::analysis
