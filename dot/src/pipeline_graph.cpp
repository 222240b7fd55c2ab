// The pipeline picture (see pipeline_graph.h): trace/'s pipeline actions of one step -> one node
// per action in a cluster per pipeline rank, order / message / stage-dependency edges, and the
// critical path.
//
// Critical path: the longest path through the dependency graph (order on a rank, send -> receive)
// where an action weighs its measured duration, except a receive, which weighs only the part after
// its send ended (the rest is waiting for that send, already counted on the sender's side). Every
// path is then a chain of disjoint intervals in time order, so its length is at most the step's
// pipeline window, and the longest one falls short of the window only by the gaps between actions.
#include "tracerun/dot/pipeline_graph.h"

#include <algorithm>
#include <map>

#include "tracerun/schedule/kind.h"
#include "tracerun/trace/analysis/critical_path.h"
#include "tracerun/trace/analysis/pipeline.h"
#include "tracerun/trace/format.h"

namespace tracerun::dot {

namespace {

using trace::analysis::PipelineAction;
using Kind = trace::analysis::PipelineActionKind;

bool isCompute(Kind k) {
  return k == Kind::kForward || k == Kind::kBackward || k == Kind::kBackwardInput ||
         k == Kind::kBackwardWeight;
}
bool isRecv(Kind k) {
  return k == Kind::kRecvForward || k == Kind::kRecvBackward;
}
bool isForwardMessage(Kind k) {
  return k == Kind::kSendForward || k == Kind::kRecvForward;
}

int64_t duration(const PipelineAction& a) {
  return std::max<int64_t>(0, a.end_ns - a.start_ns);
}

// Chimera's two chunks are its two pipelines: "F3 down" (chunk 0), "F3 up" (chunk 1).
std::string mbText(const PipelineAction& a, int v, bool chimera) {
  std::string s = (isForwardMessage(a.kind) || a.kind == Kind::kForward ? "F"
                   : a.kind == Kind::kBackwardWeight                    ? "W"
                                                                        : "B") +
                  std::to_string(a.microbatch);
  if (chimera) {
    s += a.chunk == 0 ? " down" : " up";
  } else if (v > 1) {
    s += " c" + std::to_string(a.chunk);
  }
  return s;
}

// One step's picture, built in steps from the analyses: a cluster per rank, a node per drawn
// action, then the order, message and stage-dependency edges, then the title and caption.
class PipelinePicture {
 public:
  PipelinePicture(const trace::analysis::PipelineAnalysis& pa,
                  const trace::analysis::PipelineStepActions& sa, const PipelineGraphOptions& o)
      : pa_(pa),
        sa_(sa),
        acts_(sa.actions),
        o_(o),
        cp_(trace::analysis::criticalPathOfActions(sa.actions)),
        nodeOf_(sa.actions.size(), -1) {}

  Graph build(const std::string& file, int step) {
    g_.direction = Direction::kLeftToRight;
    clusters();
    nodes();
    orderEdges();
    messageEdges();
    stageEdges();
    caption(file, step);
    return std::move(g_);
  }

 private:
  int stageOfRank(int r) const {
    const auto it = std::find_if(acts_.begin(), acts_.end(),
                                 [&](const PipelineAction& a) { return a.rank == r; });
    return it == acts_.end() ? -1 : it->stage;
  }

  void clusters() {
    for (int r : sa_.ranks) {
      Cluster c;
      c.id = "rank" + std::to_string(r);
      c.label = "stage " + std::to_string(stageOfRank(r)) + " (rank " + std::to_string(r) + ")";
      c.role = Role::kGroup;
      clusterOfRank_[r] = g_.addCluster(std::move(c));
    }
  }

  // Over the budget, sends and receives are not drawn: messages join the computes around them.
  void nodes() {
    const bool drawMessages = static_cast<long>(acts_.size()) <= o_.max_nodes;
    for (size_t i = 0; i < acts_.size(); ++i) {
      const PipelineAction& a = acts_[i];
      lo_ = std::min(lo_, a.start_ns);
      hi_ = std::max(hi_, a.end_ns);
      if (!drawMessages && !isCompute(a.kind)) {
        ++hiddenMessages_;
        continue;
      }
      nodeOf_[i] = g_.addNode(nodeOf(i));
    }
  }

  Node nodeOf(size_t i) {
    const PipelineAction& a = acts_[i];
    Node n;
    std::string what;
    const std::string mb =
        mbText(a, pa_.virtual_stages, pa_.schedule_kind == schedule::ScheduleKind::kChimera);
    if (isCompute(a.kind)) {
      computeOfRank_[a.rank] += duration(a);
      what = mb;
      n.role = a.kind == Kind::kForward          ? Role::kForward
               : a.kind == Kind::kBackwardWeight ? Role::kWeightGradient
                                                 : Role::kBackward;
      n.shape = NodeShape::kBox;
      computeNode_[{a.virtual_stage, static_cast<int>(a.kind), a.microbatch}] =
          static_cast<int>(g_.nodes.size());
    } else {
      what = std::string(isRecv(a.kind) ? "recv " : "send ") + mb +
             (isRecv(a.kind) ? " \u2190 r" : " \u2192 r") + std::to_string(a.peer);
      n.role = Role::kTransfer;
      n.shape = NodeShape::kHexagon;
    }
    n.label = what + "\n" + trace::formatDuration(duration(a));
    std::string id = "rank" + std::to_string(a.rank) + "/" + what;
    const int dup = seenIds_[id]++;
    if (dup > 0) id += "~" + std::to_string(dup + 1);
    n.id = id;
    n.tooltip = id + "\nstart_ns: " + std::to_string(a.start_ns) +
                "\nduration_ns: " + std::to_string(duration(a)) +
                "\nstage: " + std::to_string(a.stage) + "\nchunk: " + std::to_string(a.chunk) +
                "\nmicrobatch: " + std::to_string(a.microbatch) +
                (cp_.on_path[i] ? "\ncritical: yes" : "");
    n.cluster = clusterOfRank_.count(a.rank) ? clusterOfRank_[a.rank] : -1;
    n.metrics.start_ns = a.start_ns;
    n.metrics.duration_ns = duration(a);
    n.metrics.stage = a.stage;
    n.metrics.microbatch = a.microbatch;
    if (cp_.on_path[i]) {
      n.accent = Accent::kCritical;
      n.penwidth = 3.0;
    }
    return n;
  }

  // Whether the critical path runs from action `from` to action `to` through undrawn actions only.
  bool critical(size_t from, size_t to) const {
    if (!cp_.on_path[to]) return false;
    for (long k = cp_.via[to]; k >= 0; k = cp_.via[static_cast<size_t>(k)]) {
      if (!cp_.on_path[static_cast<size_t>(k)]) return false;
      if (static_cast<size_t>(k) == from) return true;
      if (nodeOf_[static_cast<size_t>(k)] >= 0) return false;
    }
    return false;
  }
  // The drawn action at or before / at or after `i` on its rank, -1 when none.
  long drawnBefore(size_t i) const {
    for (size_t k = i + 1; k-- > 0 && acts_[k].rank == acts_[i].rank;) {
      if (nodeOf_[k] >= 0) return static_cast<long>(k);
    }
    return -1L;
  }
  long drawnAfter(size_t i) const {
    for (size_t k = i; k < acts_.size() && acts_[k].rank == acts_[i].rank; ++k) {
      if (nodeOf_[k] >= 0) return static_cast<long>(k);
    }
    return -1L;
  }

  // An edge between drawn actions `from` and `to`, bold and red where the critical path runs.
  void addActionEdge(Edge e, long from, long to) {
    e.from = nodeOf_[static_cast<size_t>(from)];
    e.to = nodeOf_[static_cast<size_t>(to)];
    if (critical(static_cast<size_t>(from), static_cast<size_t>(to))) {
      e.style = EdgeStyle::kBold;
      e.accent = Accent::kCritical;
      e.penwidth = 3.0;
    }
    g_.addEdge(std::move(e));
  }

  // Order on a rank (between drawn actions).
  void orderEdges() {
    for (size_t i = 1; i < acts_.size(); ++i) {
      if (nodeOf_[i] < 0) continue;
      const long prev = drawnBefore(i - 1);
      if (acts_[i].rank != acts_[i - 1].rank || prev < 0) continue;
      Edge e;
      e.style = EdgeStyle::kDotted;
      e.role = Role::kOrder;
      e.tooltip = "order on rank " + std::to_string(acts_[i].rank);
      addActionEdge(std::move(e), prev, static_cast<long>(i));
    }
  }

  // Send -> receive.
  void messageEdges() {
    for (size_t i = 0; i < acts_.size(); ++i) {
      if (!isRecv(acts_[i].kind) || acts_[i].match < 0) continue;
      const size_t s = static_cast<size_t>(acts_[i].match);
      const long from = drawnBefore(s), to = drawnAfter(i);
      if (from < 0 || to < 0) continue;
      Edge e;
      e.role = Role::kMessage;
      e.metrics.duration_ns = std::max<int64_t>(0, acts_[i].end_ns - acts_[s].start_ns);
      e.tooltip = "send -> receive, arrived " +
                  trace::formatDuration(std::max<int64_t>(0, acts_[i].end_ns - acts_[s].start_ns)) +
                  " after the send began";
      addActionEdge(std::move(e), from, to);
    }
  }

  // Stage dependencies: F(s, m) -> F(s+1, m); B(s+1, m) -> B(s, m) (virtual stages).
  void stageEdges() {
    for (const auto& [key, idx] : computeNode_) {
      const auto [vs, kind, m] = key;
      if (kind != static_cast<int>(Kind::kForward) && kind != static_cast<int>(Kind::kBackward) &&
          kind != static_cast<int>(Kind::kBackwardInput)) {
        continue;
      }
      auto it = computeNode_.find({vs + 1, kind, m});
      if (it == computeNode_.end()) continue;
      Edge e;
      const bool fwd = kind == static_cast<int>(Kind::kForward);
      e.from = fwd ? idx : it->second;
      e.to = fwd ? it->second : idx;
      e.style = EdgeStyle::kDashed;
      e.constraint = false;
      e.role = Role::kFlow;
      e.tooltip = "stage dependency";
      g_.addEdge(std::move(e));
    }
  }

  void caption(const std::string& file, int step) {
    const int v = pa_.virtual_stages;
    const int64_t window = hi_ > lo_ ? hi_ - lo_ : 0;
    double compute = 0;
    std::string perStage;
    for (int r : sa_.ranks) {
      const double c = double(computeOfRank_[r]);
      compute += c;
      perStage += std::string(perStage.empty() ? "" : " \u00b7 ") + "stage " +
                  std::to_string(stageOfRank(r)) + ": " +
                  trace::formatShare(window > 0 ? 1.0 - c / double(window) : 0.0);
    }
    const double bubble = window > 0 && !sa_.ranks.empty()
                              ? 1.0 - compute / (double(sa_.ranks.size()) * window)
                              : 0.0;
    g_.title = "pipeline \u00b7 " + file + " \u00b7 step " + std::to_string(step) + " \u00b7 " +
               pa_.schedule + " p=" + std::to_string(pa_.stages) +
               " m=" + std::to_string(pa_.microbatches) + (v > 1 ? " v=" + std::to_string(v) : "");
    std::string cap =
        "step window " + trace::formatDuration(window) +
        " (first action start to last action end); critical path " +
        trace::formatDuration(cp_.length_ns) + " = " +
        trace::formatShare(window > 0 ? double(cp_.length_ns) / double(window) : 0.0) +
        " of it (red)";
    cap += "\nbubble per stage: " + perStage;
    cap += "\nstep bubble " + trace::formatShare(bubble) + " measured; closed form " +
           pa_.bubble_formula + " = " + trace::formatShare(pa_.bubble_theory);
    if (sa_.replicas > 1) {
      cap += "\nreplica " + std::to_string(o_.replica) + " of " + std::to_string(sa_.replicas) +
             " (data-parallel copies of the pipeline)";
    }
    if (hiddenMessages_ > 0) {
      cap += "\nover the budget of " + std::to_string(o_.max_nodes) +
             " nodes (--max-nodes): " + std::to_string(hiddenMessages_) +
             " sends and receives not drawn; messages join the computes around them";
    }
    g_.caption = cap;
  }

  const trace::analysis::PipelineAnalysis& pa_;
  const trace::analysis::PipelineStepActions& sa_;
  const std::vector<PipelineAction>& acts_;
  const PipelineGraphOptions& o_;
  const trace::analysis::PipelineCriticalPath cp_;
  Graph g_;
  std::map<int, int> clusterOfRank_;
  std::vector<int> nodeOf_;  // action -> graph node, -1 when not drawn
  int64_t lo_ = INT64_MAX, hi_ = INT64_MIN;
  std::map<int, int64_t> computeOfRank_;
  std::map<std::tuple<int, int, int>, int> computeNode_;  // (virtual stage, kind, microbatch)
  std::map<std::string, int> seenIds_;
  int64_t hiddenMessages_ = 0;
};

}  // namespace

Graph buildPipelineGraph(const trace::TraceReader& reader, const PipelineGraphOptions& o) {
  const std::string file = reader.path();
  const auto pa = trace::analysis::analyzePipeline(reader);
  if (!pa.present) {
    throw trace::TraceError(file +
                            ": no pipeline in the trace (no forward/backward phases with a stage "
                            "argument on two or more stages; run with --pp 2 or more)");
  }
  const auto first = trace::analysis::pipelineStepActions(reader, -1, o.replica);
  if (first.steps.empty()) throw trace::TraceError(file + ": no pipeline steps in the trace");
  if (o.replica < 0 || o.replica >= first.replicas) {
    throw trace::TraceError(file + ": no replica " + std::to_string(o.replica) +
                            " in the pipeline (replicas 0.." + std::to_string(first.replicas - 1) +
                            ", the data-parallel copies; see --replica)");
  }
  const int step = o.step >= 0 ? o.step : first.steps.size() > 1 ? first.steps[1] : first.steps[0];
  const auto sa = trace::analysis::pipelineStepActions(reader, step, o.replica);
  if (!sa.found) {
    throw trace::TraceError(file + ": no step " + std::to_string(step) +
                            " in the pipeline (steps " + std::to_string(first.steps.front()) +
                            ".." + std::to_string(first.steps.back()) + ")");
  }
  return PipelinePicture(pa, sa, o).build(file, step);
}

}  // namespace tracerun::dot
