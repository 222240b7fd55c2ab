// Call graph (see callgraph.h): one streamed pass per track with a depth-indexed stack; the rank's
// allocations are walked alongside each thread track to find the span they happened in.
#include "tracerun/trace/analysis/callgraph.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "gpu_activity.h"  // parseStreamTrackName, isLaunchApiTrackName
#include "span_select.h"

namespace tracerun::trace::analysis {

namespace {

struct Alloc {
  int64_t ts = 0, bytes = 0;
  core::StringId op = 0, scope = 0;
  bool attributed = false;
};

struct FlowEnd {
  size_t flow = 0;
  bool source = false;
};

struct Open {
  int node = 0;  // -1: a span outside the chosen step (its descendants are skipped too)
  int64_t end = 0;
  core::StringId name = 0;
  int stage = kNoStage, chunk = kNoStage;
};

using Window = std::pair<int64_t, int64_t>;  // [start, end] of the chosen step on one rank

uint64_t trackTimeKey(int64_t track, int64_t ts) {
  return static_cast<uint64_t>(track) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(ts);
}

class Builder {
 public:
  Builder(const TraceReader& reader, const CallGraphOptions& o) : reader_(reader), o_(o) {
    CallNode root;
    root.name = 0;
    g_.nodes.push_back(root);
    forwardId_ = NameCodes::find(reader, "forward");
    backwardId_ = NameCodes::find(reader, "backward");
    stageKey_ = NameCodes::find(reader, "stage");
    chunkKey_ = NameCodes::find(reader, "chunk");
    bytesKey_ = NameCodes::find(reader, "bytes");
  }

  CallGraph run() {
    const auto tracks = reader_.tracks();
    std::vector<int64_t> chosen;
    for (const TrackRow& t : tracks) {
      if (o_.rank >= 0 && t.rank != o_.rank) continue;
      if (t.kind == core::TrackKind::kCounter || t.kind == core::TrackKind::kMemory) continue;
      // CUDA launch calls ("cuda api thread T") happen inside the ops that made them: counting
      // them as top-level spans would count that time twice.
      if (gpu::isLaunchApiTrackName(t.name)) continue;
      chosen.push_back(t.id);
      rankOf_[t.id] = t.rank;
    }
    if (o_.step >= 0) {
      findStep(tracks);
      if (!g_.step_found) return std::move(g_);
    }
    indexFlows(chosen);
    std::map<int, std::vector<const TrackRow*>> byRank;
    for (const TrackRow& t : tracks) {
      if (std::find(chosen.begin(), chosen.end(), t.id) != chosen.end()) {
        byRank[t.rank].push_back(&t);
      }
    }
    for (auto& [rank, list] : byRank) {
      const Window* w = window(rank);
      if (o_.step >= 0 && !w) continue;  // this rank never ran the step
      std::vector<Alloc> allocs;
      if (o_.attribute_memory) {
        reader_.forEachMemory(rank, w ? w->first : INT64_MIN, w ? w->second : INT64_MAX,
                              [&](const MemoryRow& m) {
                                if (m.bytes > 0)
                                  allocs.push_back({m.ts_ns, m.bytes, m.op, m.scope, false});
                              });
      }
      for (const TrackRow* t : list) {
        if (o_.gpu_time && isStream(*t)) continue;  // after every op is placed: walkStream
        walk(*t, t->kind == core::TrackKind::kThread ? &allocs : nullptr, w);
      }
      for (const Alloc& a : allocs) {
        if (a.attributed) continue;
        g_.unattributed_bytes = satAdd(g_.unattributed_bytes, a.bytes);
        ++g_.unattributed_allocs;
      }
    }
    if (o_.gpu_time) {
      for (auto& [rank, list] : byRank) {
        const Window* w = window(rank);
        if (o_.step >= 0 && !w) continue;
        for (const TrackRow* t : list) {
          if (isStream(*t)) walkStream(*t, w);
        }
      }
      gpuTimes();
    }
    finishLinks();
    return std::move(g_);
  }

 private:
  // The chosen step's window on each chosen rank, and every step number seen.
  void findStep(const std::vector<TrackRow>& tracks) {
    const core::StringId stepId = NameCodes::find(reader_, "step");
    std::set<int> seen;
    for (const TrackRow& t : tracks) {
      if (t.kind != core::TrackKind::kThread || !rankOf_.count(t.id) || stepId == 0) continue;
      std::vector<SpanRow> stepSpans;
      reader_.forEachSpan(t.id, [&](const SpanRow& s) {
        if (s.depth == 0 && s.category == core::Category::kPhase && s.name == stepId) {
          stepSpans.push_back(s);
        }
      });
      for (size_t i = 0; i < stepSpans.size(); ++i) {
        int64_t number = static_cast<int64_t>(i) + 1;
        for (const ArgRow& a : reader_.args(stepSpans[i].id)) {
          if (a.key == stepId) number = a.value;
        }
        if (number < INT32_MIN || number > INT32_MAX) continue;
        seen.insert(static_cast<int>(number));
        if (number != o_.step) continue;
        auto [it, inserted] =
            windows_.try_emplace(t.rank, stepSpans[i].start_ns, stepSpans[i].end_ns());
        if (!inserted) {  // the same step on two threads of a rank: their union
          it->second.first = std::min(it->second.first, stepSpans[i].start_ns);
          it->second.second = std::max(it->second.second, stepSpans[i].end_ns());
        }
      }
    }
    g_.steps.assign(seen.begin(), seen.end());
    g_.step_found = !windows_.empty();
  }

  const Window* window(int rank) const {
    auto it = windows_.find(rank);
    return it == windows_.end() ? nullptr : &it->second;
  }

  bool inWindow(int64_t track, int64_t ts) const {
    if (o_.step < 0) return true;
    auto r = rankOf_.find(track);
    const Window* w = r == rankOf_.end() ? nullptr : window(r->second);
    return w && ts >= w->first && ts <= w->second;
  }

  int child(int parent, core::StringId name, core::Category category, int depth) {
    const uint64_t key = (static_cast<uint64_t>(parent) << 36) |
                         (static_cast<uint64_t>(category) << 32) | static_cast<uint64_t>(name);
    auto [it, inserted] = index_.try_emplace(key, static_cast<int>(g_.nodes.size()));
    if (inserted) {
      CallNode n;
      n.parent = parent;
      n.name = name;
      n.category = category;
      n.depth = depth;
      g_.nodes.push_back(n);
      g_.nodes[static_cast<size_t>(parent)].children.push_back(it->second);
    }
    return it->second;
  }

  void indexFlows(const std::vector<int64_t>& tracks) {
    flows_ = reader_.flows();
    ends_.assign(flows_.size() * 2, -1);
    endSeq_.assign(flows_.size() * 2, false);
    relevant_.assign(flows_.size(), false);
    for (size_t i = 0; i < flows_.size(); ++i) {
      const FlowRow& f = flows_[i];
      const bool src = std::find(tracks.begin(), tracks.end(), f.src_track) != tracks.end() &&
                       inWindow(f.src_track, f.src_ts_ns);
      const bool dst = std::find(tracks.begin(), tracks.end(), f.dst_track) != tracks.end() &&
                       inWindow(f.dst_track, f.dst_ts_ns);
      if (!src && !dst) continue;  // another rank's
      relevant_[i] = true;
      if (src) byEnd_.emplace(trackTimeKey(f.src_track, f.src_ts_ns), FlowEnd{i, true});
      if (dst) byEnd_.emplace(trackTimeKey(f.dst_track, f.dst_ts_ns), FlowEnd{i, false});
    }
  }

  void resolveFlows(const TrackRow& t, const SpanRow& s, int node) {
    if (byEnd_.empty()) return;
    auto range = byEnd_.equal_range(trackTimeKey(t.id, s.start_ns));
    for (auto it = range.first; it != range.second; ++it) {
      const FlowRow& f = flows_[it->second.flow];
      const bool src = it->second.source;
      if ((src ? f.src_track : f.dst_track) != t.id) continue;
      if ((src ? f.src_ts_ns : f.dst_ts_ns) != s.start_ns) continue;
      const size_t slot = it->second.flow * 2 + (src ? 0 : 1);
      // Several spans may start at the same nanosecond: prefer one with a sequence number (the
      // forward op and its autograd node carry one), else the outermost.
      const bool seq = s.seq >= 0;
      if (ends_[slot] < 0 || (seq && !endSeq_[slot])) {
        ends_[slot] = node;
        endSeq_[slot] = seq;
      }
    }
  }

  // Attributes the allocations before `until` (exclusive) to the open spans on this track.
  void attribute(std::vector<Alloc>& allocs, size_t& next, int64_t until,
                 std::vector<Open>& stack) {
    for (; next < allocs.size() && allocs[next].ts < until; ++next) {
      Alloc& a = allocs[next];
      if (a.attributed) continue;
      while (!stack.empty() && stack.back().end < a.ts) stack.pop_back();
      const core::StringId want = a.op != 0 ? a.op : a.scope;
      if (want == 0) continue;
      for (size_t k = stack.size(); k-- > 0;) {
        if (stack[k].name != want || stack[k].node < 0) continue;
        CallNode& n = g_.nodes[static_cast<size_t>(stack[k].node)];
        n.alloc_bytes = satAdd(n.alloc_bytes, a.bytes);
        ++n.alloc_count;
        a.attributed = true;
        break;
      }
    }
  }

  void walk(const TrackRow& t, std::vector<Alloc>* allocs, const Window* w) {
    std::vector<Open> stack;
    size_t next = 0;
    reader_.forEachSpan(t.id, [&](const SpanRow& s) {
      if (allocs) attribute(*allocs, next, s.start_ns, stack);
      const size_t depth = static_cast<size_t>(std::max(0, s.depth));
      if (stack.size() > depth) stack.resize(depth);
      if ((!stack.empty() && stack.back().node < 0) ||
          (w && (s.start_ns < w->first || s.end_ns() > w->second))) {
        stack.push_back({-1, s.end_ns(), s.name});
        return;
      }
      const int parent = stack.empty() ? 0 : stack.back().node;
      const int node = child(parent, s.name, s.category, static_cast<int>(stack.size()));
      int stage = stack.empty() ? kNoStage : stack.back().stage;
      int chunk = stack.empty() ? kNoStage : stack.back().chunk;
      const bool staged = s.category == core::Category::kPhase && s.name != 0 &&
                          (s.name == forwardId_ || s.name == backwardId_);
      const bool comm = s.category == core::Category::kComm;
      int64_t bytes = 0;
      if ((staged && stageKey_ != 0) || (comm && bytesKey_ != 0)) {
        for (const ArgRow& a : reader_.args(s.id)) {
          const bool small = a.value >= 0 && a.value <= INT32_MAX;
          if (staged && a.key == stageKey_ && small) stage = static_cast<int>(a.value);
          if (staged && a.key == chunkKey_ && small) chunk = static_cast<int>(a.value);
          if (comm && a.key == bytesKey_) bytes = a.value;
        }
      }
      CallNode& n = g_.nodes[static_cast<size_t>(node)];
      if (n.count == 0) {
        n.stage = stage;
        n.chunk = chunk;
        if (comm) n.group = s.detail;
      } else {
        if (n.stage != stage) n.stage = kSeveralStages;
        if (n.chunk != chunk) n.chunk = kSeveralStages;
        if (comm && n.group != s.detail) n.several_groups = true;
      }
      if (comm) n.comm_bytes = satAdd(n.comm_bytes, bytes);
      ++n.count;
      n.inclusive_ns = satAdd(n.inclusive_ns, s.dur_ns);
      n.exclusive_ns = satAdd(n.exclusive_ns, s.dur_ns);
      if (!stack.empty()) {
        int64_t& parentExclusive = g_.nodes[static_cast<size_t>(parent)].exclusive_ns;
        parentExclusive = satSub(parentExclusive, s.dur_ns);
      }
      stack.push_back({node, s.end_ns(), s.name, stage, chunk});
      resolveFlows(t, s, node);
    });
    if (allocs) attribute(*allocs, next, INT64_MAX, stack);
  }

  static bool isStream(const TrackRow& t) {
    int device = 0;
    int64_t stream = 0;
    return gpu::parseStreamTrackName(t.name, &device, &stream);
  }

  // GPU time: each kernel, copy or set under the op its op -> kernel flow names (resolved by the
  // thread tracks' walks), else under the root when it lies in the step's window.
  void walkStream(const TrackRow& t, const Window* w) {
    reader_.forEachSpan(t.id, [&](const SpanRow& s) {
      if (s.category != core::Category::kKernel && s.category != core::Category::kMemcpy) return;
      int parent = -1;
      auto range = byEnd_.equal_range(trackTimeKey(t.id, s.start_ns));
      for (auto it = range.first; it != range.second; ++it) {
        const FlowRow& f = flows_[it->second.flow];
        if (it->second.source || f.kind != core::FlowKind::kOpKernel || f.dst_track != t.id ||
            f.dst_ts_ns != s.start_ns)
          continue;
        relevant_[it->second.flow] = false;  // drawn as the parent link, not as a CallLink
        if (ends_[it->second.flow * 2] >= 0) parent = ends_[it->second.flow * 2];
      }
      if (parent < 0) {
        if (w && (s.start_ns < w->first || s.start_ns > w->second)) return;
        parent = 0;
        ++g_.gpu_without_op;
      }
      const int depth = g_.nodes[static_cast<size_t>(parent)].depth + 1;
      const int node = child(parent, s.name, s.category, depth);
      gpuSelf_.resize(g_.nodes.size(), 0);
      // A damaged negative duration counts 0, as in analyzeGpu.
      gpuSelf_[static_cast<size_t>(node)] =
          satAdd(gpuSelf_[static_cast<size_t>(node)], std::max<int64_t>(0, s.dur_ns));
      ++g_.nodes[static_cast<size_t>(node)].count;
      ++g_.gpu_activities;
    });
  }

  // Every node's times become GPU times: exclusive its own activities', inclusive its subtree's
  // (a parent's index is below its children's, so one backward pass sums them).
  void gpuTimes() {
    gpuSelf_.resize(g_.nodes.size(), 0);
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      g_.nodes[i].exclusive_ns = i == 0 ? 0 : gpuSelf_[i];
      g_.nodes[i].inclusive_ns = g_.nodes[i].exclusive_ns;
    }
    for (size_t i = g_.nodes.size(); i-- > 1;) {
      const int parent = g_.nodes[i].parent;
      if (parent <= 0) continue;  // the root's time stays its top-level nodes' (as for CPU time)
      int64_t& incl = g_.nodes[static_cast<size_t>(parent)].inclusive_ns;
      incl = satAdd(incl, g_.nodes[i].inclusive_ns);
    }
  }

  void finishLinks() {
    std::map<std::tuple<int, int, int>, int64_t> counts;
    for (size_t i = 0; i < flows_.size(); ++i) {
      if (!relevant_[i]) continue;
      const int from = ends_[i * 2], to = ends_[i * 2 + 1];
      if (from < 0 || to < 0) {
        ++g_.unresolved_flows;
        continue;
      }
      ++counts[{from, to, static_cast<int>(flows_[i].kind)}];
    }
    for (const auto& [key, n] : counts) {
      g_.links.push_back(
          {std::get<0>(key), std::get<1>(key), static_cast<core::FlowKind>(std::get<2>(key)), n});
    }
  }

  const TraceReader& reader_;
  CallGraphOptions o_;
  core::StringId forwardId_ = 0, backwardId_ = 0, stageKey_ = 0, chunkKey_ = 0, bytesKey_ = 0;
  std::map<int64_t, int> rankOf_;  // chosen track -> rank
  std::map<int, Window> windows_;  // with a step: rank -> its window
  CallGraph g_;
  std::unordered_map<uint64_t, int> index_;
  std::vector<FlowRow> flows_;
  std::unordered_multimap<uint64_t, FlowEnd> byEnd_;
  std::vector<int> ends_;  // per flow: source node, destination node (-1 unresolved)
  std::vector<bool> endSeq_;
  std::vector<bool> relevant_;    // the flow touches a track in the graph
  std::vector<int64_t> gpuSelf_;  // with gpu_time: per node, its own activities' GPU time
};

}  // namespace

std::string CallGraph::path(int node, const TraceReader& reader, const std::string& sep) const {
  std::vector<int> chain;
  for (int n = node; n > 0; n = nodes[static_cast<size_t>(n)].parent) chain.push_back(n);
  std::string out;
  for (size_t i = chain.size(); i-- > 0;) {
    if (!out.empty()) out += sep;
    out += reader.str(nodes[static_cast<size_t>(chain[i])].name);
  }
  return out;
}

int64_t CallGraph::subtreeBytes(int node) const {
  int64_t n = nodes[static_cast<size_t>(node)].alloc_bytes;
  for (int c : nodes[static_cast<size_t>(node)].children) n = satAdd(n, subtreeBytes(c));
  return n;
}

CallGraph buildCallGraph(const TraceReader& reader, const CallGraphOptions& options) {
  return Builder(reader, options).run();
}

}  // namespace tracerun::trace::analysis
