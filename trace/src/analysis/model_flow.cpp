// The model's dataflow (see model.h, ModelFlow): module calls and the functional ops between them,
// joined by tensor identities (the `tensors` capture word). One forward pass per pipeline stage
// and chunk; reads through TraceReader only; draws nothing (dot/'s model builder does).
//
// Sections: reading a rank (spans, arguments, frames) · passes · units · edges (the sweep) ·
// joining stages and pruning.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/analysis/model.h"

namespace tracerun::trace::analysis {
namespace {

constexpr uint64_t kAddressMask = (uint64_t{1} << 48) - 1;
constexpr int kMaxIn = 8, kMaxOut = 4;
constexpr int kInputNode = 0, kOutputNode = 1;
constexpr int kBefore = -2;  // a producer outside every pass read

// String ids read: the identity argument keys and the phases that end a forward pass.
struct FlowKeys {
  explicit FlowKeys(const TraceReader& r) {
    for (int k = 0; k < kMaxIn; ++k) in[k] = NameCodes::find(r, "in" + std::to_string(k));
    for (int k = 0; k < kMaxOut; ++k) out[k] = NameCodes::find(r, "out" + std::to_string(k));
    ag_var = NameCodes::find(r, "ag_var");
    stage = NameCodes::find(r, vocab::arg::kStage);
    chunk = NameCodes::find(r, vocab::arg::kChunk);
    for (const char* p : {vocab::phase::kBackward, vocab::phase::kBackwardInput,
                          vocab::phase::kBackwardWeight, vocab::phase::kRecomputeForward}) {
      if (const core::StringId id = NameCodes::find(r, p)) backward.insert(id);
    }
  }
  bool any() const { return in[0] != 0 || out[0] != 0; }
  std::array<core::StringId, kMaxIn> in{};
  std::array<core::StringId, kMaxOut> out{};
  core::StringId ag_var = 0, stage = 0, chunk = 0;
  std::set<core::StringId> backward;
};

// The tensor arguments of an op's recorded input text, in order ("" for an undefined one):
// "f32[8,3], int[2], {f32[2], f32[3]}, undef, None" -> f32[8,3], f32[2], f32[3], "".
std::vector<std::string> tensorShapes(const std::string& text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() &&
           (text[i] == ' ' || text[i] == ',' || text[i] == '{' || text[i] == '}')) {
      ++i;
    }
    size_t end = i;
    int bracket = 0;
    while (end < text.size() && (bracket > 0 || (text[end] != ',' && text[end] != '}'))) {
      if (text[end] == '[') ++bracket;
      if (text[end] == ']') --bracket;
      ++end;
    }
    const std::string token = text.substr(i, end - i);
    const size_t open = token.find('[');
    if (token == "undef") out.emplace_back();
    if (open != std::string::npos && open > 0 && token.compare(0, open, "int") != 0)
      out.push_back(token);
    i = end;
  }
  return out;
}

// Ops that read only their input's shape and dtype: they consume no data.
bool shapeOnly(const std::string& op) {
  static const std::set<std::string> kOps = {
      "aten::empty_like", "aten::zeros_like", "aten::ones_like",    "aten::full_like",
      "aten::rand_like",  "aten::randn_like", "aten::randint_like", "aten::new_empty",
      "aten::new_zeros",  "aten::new_ones",   "aten::new_full",     "aten::new_empty_strided",
      "aten::size",       "aten::sym_size",   "aten::numel",        "aten::dim"};
  return kOps.count(op) != 0;
}

// "Conv2d in=f32[8,3,32,32];i64[8] out=..." -> {"f32[8,3,32,32]", "i64[8]"}.
std::vector<std::string> moduleInputs(const std::string& detail) {
  std::vector<std::string> out;
  const size_t at = detail.find(" in=");
  if (at == std::string::npos) return out;
  const size_t end = detail.find(' ', at + 4);
  const std::string list = detail.substr(at + 4, end == std::string::npos ? end : end - at - 4);
  size_t i = 0;
  while (i <= list.size()) {
    const size_t semi = std::min(list.find(';', i), list.size());
    if (semi > i) out.push_back(list.substr(i, semi - i));
    i = semi + 1;
  }
  return out;
}

// ---- reading a rank ----------------------------------------------------------------------------

// One span of a thread track with what its ancestors say about it.
struct Item {
  SpanRow span;
  int module = -1;  // innermost enclosing module span (index into Track::items), -1 none
  int anchor = -1;  // innermost enclosing span that is not a module, -1 none
  int outer = -1;   // the outermost enclosing span (depth 0), -1 for a span at depth 0
  int stage = -1, chunk = -1;
  bool backward = false;  // inside a backward span or a backward / recompute phase
  bool in_op = false;     // inside another op
  int nin = 0, nout = 0;
  std::array<int64_t, kMaxIn> in{};
  std::array<int64_t, kMaxOut> out{};
};

struct Track {
  std::vector<Item> items;               // start order
  std::vector<int64_t> backward_starts;  // start times of backward spans and phases
};

struct Frame {
  int module = -1, anchor = -1, outer = -1, stage = -1, chunk = -1;
  bool backward = false, op = false;
};

using ArgsBySpan = std::unordered_map<int64_t, std::vector<std::pair<core::StringId, int64_t>>>;
void readSpan(const SpanRow& s, const FlowKeys& k, std::vector<Frame>& stack,
              const ArgsBySpan& args, Track& t, std::unordered_set<int64_t>& params);

// A thread track's spans up to the first step's end (a module call or phase at depth 0 after a
// backward span): what the first passes and their consumers need, not the whole run.
Track readTrack(const TraceReader& reader, const FlowKeys& k, int64_t track,
                std::unordered_set<int64_t>& params) {
  ArgsBySpan args;
  for (const ArgRow& a : reader.argsOfTrack(track)) args[a.span].emplace_back(a.key, a.value);
  Track t;
  std::vector<Frame> stack;
  struct Enough {};  // the first step is read: its passes come before its first backward
  try {
    reader.forEachSpan(track, [&](const SpanRow& s) {
      readSpan(s, k, stack, args, t, params);
      if (s.depth <= 0 && !t.backward_starts.empty() && s.start_ns > t.backward_starts.front() &&
          (s.category == core::Category::kModule ||
           (s.category == core::Category::kPhase && !k.backward.count(s.name)))) {
        t.items.pop_back();
        throw Enough{};
      }
    });
  } catch (const Enough&) {
  }
  return t;
}

// One span of readTrack's walk: its frame (from its parent's), its identities and arguments.
void readSpan(const SpanRow& s, const FlowKeys& k, std::vector<Frame>& stack,
              const ArgsBySpan& args, Track& t, std::unordered_set<int64_t>& params) {
  const size_t depth = static_cast<size_t>(std::max(0, s.depth));
  if (stack.size() > depth) stack.resize(depth);
  Frame f = stack.empty() ? Frame{} : stack.back();
  stack.resize(depth, f);
  Item it;
  it.span = s;
  it.module = f.module;
  it.anchor = f.anchor;
  it.outer = f.outer;
  it.in_op = f.op;
  const auto found = args.find(s.id);
  const bool phaseBack = s.category == core::Category::kPhase && k.backward.count(s.name);
  if (s.category == core::Category::kBackward || phaseBack) {
    if (!f.backward) t.backward_starts.push_back(s.start_ns);
    f.backward = true;
  }
  if (found != args.end()) {
    for (const auto& [key, value] : found->second) {
      if (key == k.ag_var && key != 0) params.insert(static_cast<int64_t>(value & kAddressMask));
      if (s.category == core::Category::kPhase && key != 0 && key == k.stage)
        f.stage = static_cast<int>(value);
      if (s.category == core::Category::kPhase && key != 0 && key == k.chunk)
        f.chunk = static_cast<int>(value);
      for (int i = 0; i < kMaxIn; ++i) {
        if (key != 0 && key == k.in[i]) {
          it.in[i] = value;
          it.nin = std::max(it.nin, i + 1);
        }
      }
      for (int i = 0; i < kMaxOut; ++i) {
        if (key != 0 && key == k.out[i]) {
          it.out[i] = value;
          it.nout = std::max(it.nout, i + 1);
        }
      }
    }
  }
  it.stage = f.stage;
  it.chunk = f.chunk;
  it.backward = f.backward;
  const int index = static_cast<int>(t.items.size());
  if (f.outer < 0) f.outer = index;
  if (s.category == core::Category::kModule && !f.backward) {
    f.module = index;
  } else if (s.category != core::Category::kModule) {
    f.anchor = index;
  }
  f.op = f.op || s.category == core::Category::kOp;
  t.items.push_back(std::move(it));
  stack.push_back(f);
}

// ---- passes ------------------------------------------------------------------------------------

struct Pass {
  std::vector<int> tops;  // top-level module calls (items)
  int64_t start = 0, end = 0;
  int64_t next = INT64_MAX;  // the next pass's start on the track
  int stage = -1, chunk = -1;
};

std::vector<Pass> findPasses(const Track& t) {
  std::vector<Pass> passes;
  std::set<core::StringId> paths;
  int anchor = -2;
  for (size_t i = 0; i < t.items.size(); ++i) {
    const Item& it = t.items[i];
    if (it.span.category != core::Category::kModule || it.backward || it.module >= 0) continue;
    const bool backwardBetween =
        !passes.empty() &&
        std::any_of(t.backward_starts.begin(), t.backward_starts.end(),
                    [&](int64_t b) { return b >= passes.back().end && b < it.span.start_ns; });
    if (passes.empty() || it.anchor != anchor || backwardBetween || paths.count(it.span.name)) {
      passes.emplace_back();
      passes.back().start = it.span.start_ns;
      passes.back().stage = it.stage;
      passes.back().chunk = it.chunk;
      paths.clear();
      anchor = it.anchor;
    }
    paths.insert(it.span.name);
    passes.back().tops.push_back(static_cast<int>(i));
    passes.back().end = std::max(passes.back().end, it.span.end_ns());
  }
  for (size_t i = 0; i + 1 < passes.size(); ++i) passes[i].next = passes[i + 1].start;
  return passes;
}

// ---- units -------------------------------------------------------------------------------------

// Builds the flow of one rank's passes (those chosen) into `flow`.
class PassReader {
 public:
  PassReader(const TraceReader& reader, const ModelTree& tree, ModelFlow& flow)
      : reader_(reader), tree_(tree), flow_(flow) {
    for (size_t m = 0; m < tree.modules.size(); ++m) {
      byParentPath_[{tree.modules[m].parent, tree.modules[m].path}] = static_cast<int>(m);
    }
  }

  struct Result {
    std::vector<std::pair<int, std::string>> inputs, outputs;  // (unit, shape)
    std::vector<std::string> out_shapes;                       // the top-level calls' output shapes
    int stage = -1, chunk = -1;
    bool empty = true;
  };

  // The top-level nodes of the last pass read.
  const std::vector<int>& roots() const { return roots_; }

  // Adds the nodes of `pass` on `t` (a unit for every op and call item of the pass) and the edges
  // between them; returns its inputs and outputs.
  Result read(const Track& t, const Pass& pass, int rank,
              const std::unordered_set<int64_t>& params) {
    roots_.clear();
    first_ = -1;
    Result r;
    r.stage = pass.stage;
    r.chunk = pass.chunk;
    std::vector<int> top(t.items.size(), -1);  // the top-level call of a module item
    std::vector<bool> container(t.items.size(), false);
    for (int i : pass.tops) top[static_cast<size_t>(i)] = i;
    for (size_t i = 0; i < t.items.size(); ++i) {
      const Item& it = t.items[i];
      if (it.span.category != core::Category::kModule || it.backward || it.module < 0) continue;
      top[i] = top[static_cast<size_t>(it.module)];
      if (top[i] >= 0) container[static_cast<size_t>(it.module)] = true;
    }
    std::map<core::StringId, int> calls;  // path -> calls so far in this pass
    unit_.assign(t.items.size(), -1);
    for (size_t i = 0; i < t.items.size(); ++i) {
      const Item& it = t.items[i];
      if (it.span.start_ns < pass.start || it.span.start_ns > pass.end || it.backward) continue;
      if (it.span.category == core::Category::kModule) {
        if (top[i] < 0) continue;
        const int parent = it.module < 0 ? -1 : unit_[static_cast<size_t>(it.module)];
        const int module = moduleOf(it, parent);
        if (module < 0) continue;
        FlowNode n;
        n.kind = FlowNode::Kind::kCall;
        n.module = module;
        n.call = ++calls[it.span.name];
        n.parent = parent;
        n.span = it.span.id;
        n.rank = rank;
        unit_[i] = add(std::move(n));
        continue;
      }
      if (it.span.category != core::Category::kOp || it.in_op) continue;
      const int m = it.module;
      if (m >= 0 && top[static_cast<size_t>(m)] < 0) continue;  // another pass's call
      if (m >= 0 && !container[static_cast<size_t>(m)]) {
        unit_[i] = unit_[static_cast<size_t>(m)];  // a leaf call owns its ops
        continue;
      }
      FlowNode n;
      n.kind = FlowNode::Kind::kOp;
      n.parent = m < 0 ? -1 : unit_[static_cast<size_t>(m)];
      n.name = reader_.str(it.span.name);
      n.shapes = reader_.str(it.span.detail);
      n.span = it.span.id;
      n.rank = rank;
      unit_[i] = add(std::move(n));
    }
    r.empty = first_ < 0;
    sweep(t, pass, params, r);
    return r;
  }

 private:
  int moduleOf(const Item& it, int parentNode) const {
    const std::string& path = reader_.str(it.span.name);
    if (parentNode >= 0) {
      const int pm = flow_.nodes[static_cast<size_t>(parentNode)].module;
      const auto found = byParentPath_.find({pm, path});
      return found == byParentPath_.end() ? -1 : found->second;
    }
    int best = -1;
    for (int r : tree_.roots) {
      const ModuleNode& m = tree_.modules[static_cast<size_t>(r)];
      if (m.path != path) continue;
      if (m.stage == it.stage && m.chunk == it.chunk) return r;
      if (best < 0) best = r;
    }
    return best;
  }

  int add(FlowNode n) {
    const int at = static_cast<int>(flow_.nodes.size());
    if (n.parent >= 0) {
      flow_.nodes[static_cast<size_t>(n.parent)].children.push_back(at);
    } else {
      roots_.push_back(at);
    }
    flow_.nodes.push_back(std::move(n));
    if (first_ < 0) first_ = at;
    return at;
  }

  void sweep(const Track& t, const Pass& pass, const std::unordered_set<int64_t>& params,
             Result& r);

  const TraceReader& reader_;
  const ModelTree& tree_;
  ModelFlow& flow_;
  std::map<std::pair<int, std::string>, int> byParentPath_;
  std::vector<int> unit_;                  // per item: its unit (flow node), -1 outside the pass
  std::vector<int> roots_;                 // top-level nodes of the pass being read, in order
  int first_ = -1;                         // its first node
  std::set<std::pair<int, int>> edgeSet_;  // edges added, over every pass
};

// ---- edges (the sweep) -------------------------------------------------------------------------

// Top-level ops of the track in start order (they do not overlap): each input's producer is the
// latest op that output the identity before.
void PassReader::sweep(const Track& t, const Pass& pass, const std::unordered_set<int64_t>& params,
                       Result& r) {
  std::unordered_map<int64_t, int> producer;        // identity -> unit (kBefore: outside the pass)
  std::unordered_map<int64_t, int64_t> producedAt;  // identity -> when its producer ended
  // A parameter (an ag_var) is one made before the outermost span around the pass (gpttrain's
  // step): a pipeline stage's received input is a leaf too, made inside the step.
  const Item& first = t.items[static_cast<size_t>(pass.tops.front())];
  const int64_t paramsBefore =
      first.outer >= 0 ? t.items[static_cast<size_t>(first.outer)].span.start_ns : INT64_MAX;
  std::vector<std::string> topInputs;
  for (int i : pass.tops) {
    for (std::string& s : moduleInputs(reader_.str(t.items[static_cast<size_t>(i)].span.detail)))
      topInputs.push_back(std::move(s));
  }
  std::vector<std::string> topOutputs;
  for (int i : pass.tops) {
    const std::string& d = reader_.str(t.items[static_cast<size_t>(i)].span.detail);
    const size_t at = d.find(" out=");
    if (at == std::string::npos) continue;
    const std::string list = d.substr(at + 5, d.find(' ', at + 5) - (at + 5));
    for (std::string& x : moduleInputs(" in=" + list)) topOutputs.push_back(std::move(x));
  }
  // Consumers of the pass's outputs: forward ops after it, before the next backward span or pass
  // (an address freed and reused by a producer that is not a recorded op would link them).
  int64_t afterEnd = pass.next;
  for (int64_t b : t.backward_starts) {
    if (b > pass.end) afterEnd = std::min(afterEnd, b);
  }
  int lastUnit = -1;
  std::set<std::pair<int, std::string>> seenIn, seenOut;
  for (size_t i = 0; i < t.items.size(); ++i) {
    const Item& it = t.items[i];
    if (it.span.category != core::Category::kOp || it.in_op) continue;
    const int u = unit_[i];
    const bool after = it.span.start_ns > pass.end && it.span.start_ns < afterEnd && !it.backward;
    const std::string& name = reader_.str(it.span.name);
    if ((u >= 0 || after) && !shapeOnly(name) && it.nin > 0) {
      const std::vector<std::string> shapes = tensorShapes(reader_.str(it.span.detail));
      for (int k = 0; k < it.nin; ++k) {
        const int64_t id = it.in[static_cast<size_t>(k)];
        if (id == 0) continue;
        const std::string shape = static_cast<size_t>(k) < shapes.size() ? shapes[k] : "";
        const auto p = producer.find(id);
        const int from = p == producer.end() ? kBefore : p->second;
        if (u >= 0 && from >= 0 && from != u) {
          if (edgeSet_.insert({from, u}).second) flow_.edges.push_back({from, u, shape});
        } else if (u >= 0 && from == kBefore) {
          const auto made = producedAt.find(id);
          const bool param = params.count(static_cast<int64_t>(id & kAddressMask)) != 0 &&
                             (made == producedAt.end() || made->second < paramsBefore);
          const bool input =
              std::find(topInputs.begin(), topInputs.end(), shape) != topInputs.end();
          if (!param && input && seenIn.insert({u, shape}).second) r.inputs.emplace_back(u, shape);
        } else if (after && from >= 0 &&
                   (topOutputs.empty() ||
                    std::find(topOutputs.begin(), topOutputs.end(), shape) != topOutputs.end()) &&
                   seenOut.insert({from, shape}).second) {
          r.outputs.emplace_back(from, shape);
        }
      }
    }
    for (int k = 0; k < it.nout; ++k) {
      const int64_t id = it.out[static_cast<size_t>(k)];
      if (id == 0) continue;
      producer[id] = u >= 0 ? u : kBefore;
      producedAt[id] = it.span.end_ns();
    }
    if (u >= 0 && it.nout > 0) lastUnit = u;
  }
  if (r.outputs.empty() && lastUnit >= 0) r.outputs.emplace_back(lastUnit, "");
  r.out_shapes = topOutputs;
  if (r.inputs.empty() && first_ >= 0) {
    for (int n = first_; n < static_cast<int>(flow_.nodes.size()); ++n) {
      const FlowNode& f = flow_.nodes[static_cast<size_t>(n)];
      if (f.kind == FlowNode::Kind::kOp ||
          (f.kind == FlowNode::Kind::kCall && f.children.empty())) {
        r.inputs.emplace_back(n, "");
        break;
      }
    }
  }
}

// ---- joining stages and pruning ----------------------------------------------------------------

// Drops functional nodes on no path from a call or the input to a call or the output.
void prune(ModelFlow& flow) {
  const size_t n = flow.nodes.size();
  auto isOp = [&](int i) { return flow.nodes[static_cast<size_t>(i)].kind == FlowNode::Kind::kOp; };
  std::vector<std::vector<int>> out(n), in(n);
  for (const FlowEdge& e : flow.edges) {
    out[static_cast<size_t>(e.from)].push_back(e.to);
    in[static_cast<size_t>(e.to)].push_back(e.from);
  }
  auto reach = [&](const std::vector<std::vector<int>>& next, int terminal) {
    std::vector<bool> seen(n, false);
    std::vector<int> work;
    for (size_t i = 0; i < n; ++i) {
      if (!isOp(static_cast<int>(i)) && (static_cast<int>(i) == terminal || i > 1)) {
        seen[i] = true;
        work.push_back(static_cast<int>(i));
      }
    }
    while (!work.empty()) {
      const int at = work.back();
      work.pop_back();
      for (int k : next[static_cast<size_t>(at)]) {
        if (!seen[static_cast<size_t>(k)] && isOp(k)) {
          seen[static_cast<size_t>(k)] = true;
          work.push_back(k);
        }
      }
    }
    return seen;
  };
  const std::vector<bool> fromSource = reach(out, kInputNode), toSink = reach(in, kOutputNode);
  std::vector<int> remap(n, -1);
  ModelFlow kept;
  for (size_t i = 0; i < n; ++i) {
    if (isOp(static_cast<int>(i)) && !(fromSource[i] && toSink[i])) continue;
    remap[i] = static_cast<int>(kept.nodes.size());
    kept.nodes.push_back(std::move(flow.nodes[i]));
  }
  for (FlowNode& f : kept.nodes) {
    if (f.parent >= 0) f.parent = remap[static_cast<size_t>(f.parent)];
    std::vector<int> kids;
    for (int c : f.children) {
      if (remap[static_cast<size_t>(c)] >= 0) kids.push_back(remap[static_cast<size_t>(c)]);
    }
    f.children = std::move(kids);
  }
  for (int r : flow.roots) {
    if (remap[static_cast<size_t>(r)] >= 0) kept.roots.push_back(remap[static_cast<size_t>(r)]);
  }
  for (const FlowEdge& e : flow.edges) {
    const int a = remap[static_cast<size_t>(e.from)], b = remap[static_cast<size_t>(e.to)];
    if (a >= 0 && b >= 0) kept.edges.push_back({a, b, e.shape});
  }
  flow = std::move(kept);
}

}  // namespace

ModelFlow buildModelFlow(const TraceReader& reader, const ModelTree& tree) {
  ModelFlow flow;
  const FlowKeys keys(reader);
  if (!keys.any() || tree.roots.empty()) return flow;
  flow.nodes.resize(2);
  flow.nodes[kInputNode].kind = FlowNode::Kind::kInput;
  flow.nodes[kInputNode].name = "input";
  flow.nodes[kOutputNode].kind = FlowNode::Kind::kOutput;
  flow.nodes[kOutputNode].name = "output";
  std::set<std::pair<int, int>> wanted;  // (stage, chunk) of the tree's top-level modules
  for (int r : tree.roots) {
    wanted.insert(
        {tree.modules[static_cast<size_t>(r)].stage, tree.modules[static_cast<size_t>(r)].chunk});
  }
  // (virtual stage, roots, inputs, outputs) of each pass read
  using Stage = std::tuple<int, std::vector<int>, PassReader::Result>;
  std::vector<Stage> stages;
  const int p = std::max(1, tree.stages);
  PassReader pr(reader, tree, flow);
  for (int rank : tree.ranks) {
    if (wanted.empty()) break;
    std::unordered_set<int64_t> params;
    std::vector<Track> tracks;
    for (const TrackRow& t : reader.tracks()) {
      if (t.rank == rank && t.kind == core::TrackKind::kThread)
        tracks.push_back(readTrack(reader, keys, t.id, params));
    }
    for (const Track& t : tracks) {
      for (const Pass& pass : findPasses(t)) {
        if (!wanted.count({pass.stage, pass.chunk})) continue;
        wanted.erase({pass.stage, pass.chunk});
        PassReader::Result r = pr.read(t, pass, rank, params);
        if (r.empty) continue;
        stages.emplace_back(std::max(0, pass.chunk) * p + std::max(0, pass.stage), pr.roots(),
                            std::move(r));
      }
    }
  }
  std::stable_sort(stages.begin(), stages.end(),
                   [](const Stage& a, const Stage& b) { return std::get<0>(a) < std::get<0>(b); });
  std::set<std::pair<int, int>> joined;
  for (size_t s = 0; s < stages.size(); ++s) {
    const std::vector<int>& roots = std::get<1>(stages[s]);
    const PassReader::Result& r = std::get<2>(stages[s]);
    flow.roots.insert(flow.roots.end(), roots.begin(), roots.end());
    std::set<std::string> prevShapes;  // what the stage before hands on
    if (s > 0) {
      const PassReader::Result& prev = std::get<2>(stages[s - 1]);
      for (const auto& o : prev.outputs) prevShapes.insert(o.second);
      prevShapes.insert(prev.out_shapes.begin(), prev.out_shapes.end());
      prevShapes.insert("");
    }
    for (const auto& [unit, shape] : r.inputs) {
      if (s == 0 || !prevShapes.count(shape)) {  // the job's own input (a loss's targets)
        if (joined.insert({kInputNode, unit}).second)
          flow.edges.push_back({kInputNode, unit, shape});
        continue;
      }
      for (const auto& prev : std::get<2>(stages[s - 1]).outputs) {
        if (joined.insert({prev.first, unit}).second)
          flow.edges.push_back({prev.first, unit, shape});
      }
    }
    if (s + 1 == stages.size()) {
      for (const auto& [unit, shape] : r.outputs) {
        if (joined.insert({unit, kOutputNode}).second)
          flow.edges.push_back({unit, kOutputNode, shape});
      }
    }
  }
  if (flow.roots.empty()) return {};
  prune(flow);
  return flow;
}

}  // namespace tracerun::trace::analysis
