// The model tree from module scopes (see model.h for the rules). One pass over each thread track
// of the ranks read; no rendering, no SQL of its own.
#include "tracerun/trace/analysis/model.h"

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/error.h"

namespace tracerun::trace::analysis {
namespace {

// String ids of the argument keys and phase names read (0: not in this trace).
struct Keys {
  explicit Keys(const TraceReader& r)
      : params(NameCodes::find(r, vocab::arg::kParams)),
        shard(NameCodes::find(r, vocab::arg::kShard)),
        logical(NameCodes::find(r, vocab::arg::kLogical)),
        param_bytes(NameCodes::find(r, vocab::arg::kParamBytes)),
        trainable(NameCodes::find(r, vocab::arg::kTrainable)),
        tp_col(NameCodes::find(r, vocab::arg::kTpCol)),
        tp_row(NameCodes::find(r, vocab::arg::kTpRow)),
        tp_vocab(NameCodes::find(r, vocab::arg::kTpVocab)),
        zero_unit(NameCodes::find(r, vocab::arg::kZeroUnit)),
        stage(NameCodes::find(r, vocab::arg::kStage)),
        chunk(NameCodes::find(r, vocab::arg::kChunk)),
        dp(NameCodes::find(r, vocab::arg::kDp)),
        backward(NameCodes::find(r, vocab::phase::kBackward)),
        backward_input(NameCodes::find(r, vocab::phase::kBackwardInput)),
        backward_weight(NameCodes::find(r, vocab::phase::kBackwardWeight)),
        recompute(NameCodes::find(r, vocab::phase::kRecomputeForward)),
        grad_sync(NameCodes::find(r, vocab::phase::kGradSync)) {}
  core::StringId params, shard, logical, param_bytes, trainable, tp_col, tp_row, tp_vocab,
      zero_unit, stage, chunk, dp;
  core::StringId backward, backward_input, backward_weight, recompute, grad_sync;
};

using Args = std::vector<std::pair<core::StringId, int64_t>>;

int64_t argOf(const Args& args, core::StringId key, int64_t fallback) {
  if (key == 0) return fallback;
  for (const auto& [k, v] : args) {
    if (k == key) return v;
  }
  return fallback;
}

// "Conv2d in=f32[8,3,32,32] out=f32[8,64,16,16]" -> type, inputs, outputs.
void parseDetail(const std::string& detail, ModuleNode& m) {
  const size_t space = detail.find(' ');
  m.type = detail.substr(0, space);
  size_t pos = space;
  while (pos != std::string::npos) {
    const size_t start = pos + 1;
    pos = detail.find(' ', start);
    const std::string token = detail.substr(start, pos == std::string::npos ? pos : pos - start);
    if (token.rfind("in=", 0) == 0) m.inputs = token.substr(3);
    if (token.rfind("out=", 0) == 0) m.outputs = token.substr(4);
    if (token.rfind("global=", 0) == 0) m.inputs_global = token.substr(7);
  }
}

void fillFromArgs(const Args& args, const Keys& k, ModuleNode& m) {
  m.params_local = argOf(args, k.params, -1);
  m.shard = static_cast<int>(argOf(args, k.shard, -1));
  m.params_logical = argOf(args, k.logical, m.shard < 0 ? m.params_local : -1);
  m.param_bytes = argOf(args, k.param_bytes, -1);
  m.params_trainable = argOf(args, k.trainable, -1);
  const std::pair<core::StringId, TpSplit> splits[] = {
      {k.tp_col, TpSplit::kColumn}, {k.tp_row, TpSplit::kRow}, {k.tp_vocab, TpSplit::kVocab}};
  for (const auto& [key, split] : splits) {
    const int64_t dim = argOf(args, key, -1);
    if (dim >= 0) {
      m.tp_split = split;
      m.tp_dim = static_cast<int>(dim);
    }
  }
  m.zero_unit = static_cast<int>(argOf(args, k.zero_unit, -1));
}

// One rank's tree, built from its thread tracks.
struct RankTree {
  std::vector<ModuleNode> modules;
  std::vector<int> roots;
  int64_t skipped = 0;
  int dp = -1;
};

struct Frame {
  int module = -1;  // innermost enclosing module (local index)
  int stage = -1, chunk = -1;
  bool backward = false;
};

void readTrack(const TraceReader& reader, const Keys& k, int rank, int64_t track, RankTree& out,
               std::map<std::pair<int, std::string>, int>& index) {
  std::unordered_map<int64_t, Args> args;
  for (const ArgRow& a : reader.argsOfTrack(track)) args[a.span].emplace_back(a.key, a.value);
  static const Args kNone;
  auto argsOf = [&](int64_t span) -> const Args& {
    auto it = args.find(span);
    return it == args.end() ? kNone : it->second;
  };
  std::vector<Frame> stack;
  reader.forEachSpan(track, [&](const SpanRow& s) {
    const size_t depth = static_cast<size_t>(std::max(0, s.depth));
    if (stack.size() > depth) stack.resize(depth);
    Frame f = stack.empty() ? Frame{} : stack.back();
    stack.resize(depth, f);  // a gap (a parent not recorded) inherits from the nearest ancestor
    if (s.category == core::Category::kBackward ||
        (s.category == core::Category::kPhase && s.name != 0 &&
         (s.name == k.backward || s.name == k.backward_input || s.name == k.backward_weight ||
          s.name == k.recompute))) {
      f.backward = true;
    }
    if (s.category == core::Category::kPhase) {
      const Args& a = argsOf(s.id);
      if (s.name != 0 && s.name == k.grad_sync) out.dp = std::max<int>(out.dp, argOf(a, k.dp, -1));
      const int64_t stage = argOf(a, k.stage, -1);
      if (stage >= 0) {
        f.stage = static_cast<int>(stage);
        f.chunk = static_cast<int>(argOf(a, k.chunk, -1));
      }
    }
    if (s.category == core::Category::kModule) {
      if (f.backward) {
        ++out.skipped;
      } else {
        const std::string& path = reader.str(s.name);
        auto [it, fresh] =
            index.try_emplace({f.module, path}, static_cast<int>(out.modules.size()));
        if (fresh) {
          ModuleNode m;
          m.parent = f.module;
          m.depth = f.module < 0 ? 0 : out.modules[static_cast<size_t>(f.module)].depth + 1;
          m.path = path;
          parseDetail(reader.str(s.detail), m);
          fillFromArgs(argsOf(s.id), k, m);
          m.stage = f.stage;
          m.chunk = f.chunk;
          m.rank = rank;
          out.modules.push_back(std::move(m));
          if (f.module < 0) {
            out.roots.push_back(it->second);
          } else {
            out.modules[static_cast<size_t>(f.module)].children.push_back(it->second);
          }
        }
        ModuleNode& m = out.modules[static_cast<size_t>(it->second)];
        ++m.calls;
        m.total_ns += std::max<int64_t>(0, s.dur_ns);
        f.module = it->second;
      }
    }
    stack.push_back(f);
  });
}

RankTree readRank(const TraceReader& reader, const Keys& k, int rank,
                  const std::vector<TrackRow>& tracks) {
  RankTree out;
  std::map<std::pair<int, std::string>, int> index;  // (parent, path) -> module
  for (const TrackRow& t : tracks) {
    if (t.rank == rank && t.kind == core::TrackKind::kThread)
      readTrack(reader, k, rank, t.id, out, index);
  }
  return out;
}

// Appends `m` (of `from`) and its subtree to `tree` under `parent`.
int copySubtree(const RankTree& from, int m, int parent, ModelTree& tree) {
  const int at = static_cast<int>(tree.modules.size());
  ModuleNode node = from.modules[static_cast<size_t>(m)];
  node.parent = parent;
  node.children.clear();
  tree.modules.push_back(std::move(node));
  for (int c : from.modules[static_cast<size_t>(m)].children) {
    const int child = copySubtree(from, c, at, tree);
    tree.modules[static_cast<size_t>(at)].children.push_back(child);
  }
  return at;
}

// Notes the TP shard of every module of `from`'s subtree `m` on the matching subtree `at`.
void noteShards(const RankTree& from, int m, ModelTree& tree, int at,
                std::vector<std::vector<int>>& shards) {
  const ModuleNode& src = from.modules[static_cast<size_t>(m)];
  auto& seen = shards[static_cast<size_t>(at)];
  if (std::find(seen.begin(), seen.end(), src.shard) == seen.end()) seen.push_back(src.shard);
  const auto& kids = tree.modules[static_cast<size_t>(at)].children;
  for (int c : src.children) {
    const std::string& path = from.modules[static_cast<size_t>(c)].path;
    for (int t : kids) {
      if (tree.modules[static_cast<size_t>(t)].path == path) {
        noteShards(from, c, tree, t, shards);
        break;
      }
    }
  }
}

std::string signature(const ModelTree& tree, int m, std::vector<std::string>& memo) {
  std::string& sig = memo[static_cast<size_t>(m)];
  if (!sig.empty()) return sig;
  const ModuleNode& n = tree.modules[static_cast<size_t>(m)];
  std::string s = n.type + '|' + std::to_string(n.params_local) + '|' +
                  std::to_string(n.params_logical) + '|' + std::to_string(n.params_trainable) +
                  '|' + tpSplitName(n.tp_split) + std::to_string(n.tp_dim) + '|' +
                  std::to_string(n.stage) + '|' + std::to_string(n.chunk) + '|' +
                  (n.zero_unit >= 0 ? "z" : "") + '|' + n.inputs + '|' + n.outputs + '|' +
                  n.inputs_global + "|(";
  for (int c : n.children) s += relativePath(tree, c) + '=' + signature(tree, c, memo) + ',';
  s += ')';
  sig = std::move(s);
  return sig;
}

}  // namespace

const char* tpSplitName(TpSplit s) noexcept {
  switch (s) {
    case TpSplit::kColumn:
      return "column";
    case TpSplit::kRow:
      return "row";
    case TpSplit::kVocab:
      return "vocab";
    default:
      return "";
  }
}

int64_t ModelTree::logicalParams() const {
  int64_t n = 0;
  for (int r : roots) n += std::max<int64_t>(0, modules[static_cast<size_t>(r)].params_logical);
  return n;
}

int64_t ModelTree::trainableParams() const {
  int64_t n = -1;
  for (const ModuleNode& m : modules) {
    if (m.params_trainable >= 0) n = std::max<int64_t>(n, 0) + m.params_trainable;
  }
  return n;
}

int64_t ModelTree::localParams() const {
  int64_t n = 0;
  for (int r : roots) n += std::max<int64_t>(0, modules[static_cast<size_t>(r)].params_local);
  return n;
}

ModelTree buildModelTree(const TraceReader& reader, const ModelOptions& options) {
  const Keys keys(reader);
  std::vector<int> ranks;
  for (const RankInfo& r : reader.ranks()) ranks.push_back(r.rank);
  std::sort(ranks.begin(), ranks.end());
  if (options.rank >= 0) {
    if (std::find(ranks.begin(), ranks.end(), options.rank) == ranks.end()) {
      throw TraceError("no rank " + std::to_string(options.rank) + " in " + reader.path() +
                       " (it has " + std::to_string(ranks.size()) + " rank(s))");
    }
    ranks = {options.rank};
  }
  const std::vector<TrackRow> tracks = reader.tracks();
  ModelTree tree;
  // Top-level modules over the ranks: (virtual stage order, rank order, first call) -> module.
  std::map<std::tuple<int, int, int, std::string>, int> tops;  // (chunk, stage, -, path)
  std::vector<std::tuple<int, int, int, int>> order;           // (chunk, stage, seq, module)
  std::vector<std::vector<int>> shards;
  int seq = 0;
  for (int rank : ranks) {
    const RankTree rt = readRank(reader, keys, rank, tracks);
    tree.skipped_backward += rt.skipped;
    tree.dp = std::max(tree.dp, rt.dp);
    if (rt.modules.empty()) continue;
    tree.ranks.push_back(rank);
    for (int r : rt.roots) {
      const ModuleNode& m = rt.modules[static_cast<size_t>(r)];
      auto [it, fresh] = tops.try_emplace({m.chunk, m.stage, 0, m.path}, -1);
      if (fresh) {
        it->second = copySubtree(rt, r, -1, tree);
        shards.resize(tree.modules.size());
        order.emplace_back(std::max(0, m.chunk), std::max(0, m.stage), seq++, it->second);
      }
      noteShards(rt, r, tree, it->second, shards);
    }
  }
  for (size_t i = 0; i < tree.modules.size(); ++i) {
    tree.modules[i].tp_shards = std::max<int>(1, static_cast<int>(shards[i].size()));
  }
  std::vector<int> stagesSeen;
  for (const ModuleNode& m : tree.modules) {
    if (m.stage >= 0 &&
        std::find(stagesSeen.begin(), stagesSeen.end(), m.stage) == stagesSeen.end()) {
      stagesSeen.push_back(m.stage);
    }
  }
  tree.stages = static_cast<int>(stagesSeen.size());
  const int p = std::max(1, tree.stages);
  std::sort(order.begin(), order.end(), [p](const auto& a, const auto& b) {
    const int va = std::get<0>(a) * p + std::get<1>(a), vb = std::get<0>(b) * p + std::get<1>(b);
    return va != vb ? va < vb : std::get<2>(a) < std::get<2>(b);
  });
  for (const auto& o : order) tree.roots.push_back(std::get<3>(o));
  tree.flow = buildModelFlow(reader, tree);
  return tree;
}

std::string relativePath(const ModelTree& tree, int child) {
  const ModuleNode& c = tree.modules[static_cast<size_t>(child)];
  if (c.parent < 0) return c.path;
  const std::string& p = tree.modules[static_cast<size_t>(c.parent)].path;
  if (c.path.size() > p.size() + 1 && c.path.compare(0, p.size(), p) == 0 &&
      c.path[p.size()] == '.') {
    return c.path.substr(p.size() + 1);
  }
  return c.path;
}

std::vector<std::vector<int>> identicalRuns(const ModelTree& tree, int parent) {
  const std::vector<int>& kids =
      parent < 0 ? tree.roots : tree.modules[static_cast<size_t>(parent)].children;
  std::vector<std::string> memo(tree.modules.size());
  std::vector<std::vector<int>> runs;
  std::string last;
  for (int k : kids) {
    const std::string sig = signature(tree, k, memo);
    if (runs.empty() || sig != last) runs.emplace_back();
    runs.back().push_back(k);
    last = sig;
  }
  return runs;
}

}  // namespace tracerun::trace::analysis
