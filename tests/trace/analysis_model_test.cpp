// Model tree against brute force: seeded random module hierarchies (nesting, types, parameter
// counts, repeated blocks with and without a variant) are written as module scopes inside
// "forward" phases on several ranks and pipeline stages, called over two microbatches, with
// recomputed modules inside "backward"; the analysis must give back the generator's own tree, and
// its runs of identical modules must equal a brute-force recursive comparison of the generated
// structures. Plus: TP arguments, --rank, a rank that does not exist.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <random>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/model.h"
#include "tracerun/trace/error.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using trace::analysis::buildModelTree;
using trace::analysis::identicalRuns;
using trace::analysis::ModelOptions;
using trace::analysis::ModelTree;

namespace {

struct GenModule {
  std::string name;  // relative
  std::string type;
  int64_t params = 0;
  std::vector<std::shared_ptr<GenModule>> children;
};
using GenPtr = std::shared_ptr<GenModule>;

GenPtr randomModule(std::mt19937& rng, int depth, const std::string& name) {
  auto m = std::make_shared<GenModule>();
  m->name = name;
  const char* types[] = {"Linear", "Conv2d", "ReLU", "Block"};
  m->type = types[rng() % 4];
  m->params = static_cast<int64_t>(rng() % 3) * 100;
  if (depth < 3) {
    const int n = static_cast<int>(rng() % 3);
    for (int i = 0; i < n; ++i) {
      if (rng() % 3 == 0) {  // a run of copies of one block, maybe with one variant
        const int copies = 2 + static_cast<int>(rng() % 4);
        GenPtr proto = randomModule(rng, depth + 1, "");
        const int variant = rng() % 2 ? static_cast<int>(rng() % copies) : -1;
        for (int c = 0; c < copies; ++c) {
          auto copy = std::make_shared<GenModule>(*proto);
          copy->name = "b" + std::to_string(i) + "_" + std::to_string(c);
          if (c == variant) copy->params += 1;
          m->children.push_back(copy);
        }
      } else {
        m->children.push_back(randomModule(rng, depth + 1, "c" + std::to_string(i)));
      }
    }
  }
  return m;
}

bool sameStructure(const GenModule& a, const GenModule& b) {  // the brute force
  if (a.type != b.type || a.params != b.params || a.children.size() != b.children.size()) {
    return false;
  }
  for (size_t i = 0; i < a.children.size(); ++i) {
    if (a.children[i]->name != b.children[i]->name) return false;
    if (!sameStructure(*a.children[i], *b.children[i])) return false;
  }
  return true;
}

// Emits `m` at `path` as a module span starting at t (depth d); returns its end.
int64_t emit(TraceBuilder& tb, int rank, const GenModule& m, const std::string& path, int64_t t,
             int d) {
  int64_t end = t + 1;
  for (const auto& c : m.children) end = emit(tb, rank, *c, path + "." + c->name, end, d + 1) + 1;
  tb.span(rank, BSpan{"main",
                      path,
                      core::Category::kModule,
                      t,
                      end,
                      d,
                      {{"params", m.params}, {"shard", -1}},
                      m.type + " in=f32[2," + std::to_string(m.params) + "]"});
  return end;
}

}  // namespace

TEST_CASE("model tree equals the generated modules, runs equal brute force", "[analysis][model]") {
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const int stages = 1 + static_cast<int>(seed % 3);
    // Stage s holds top-level modules top[s]; rank = stage.
    std::vector<std::vector<GenPtr>> top(static_cast<size_t>(stages));
    for (int s = 0; s < stages; ++s) {
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int i = 0; i < n; ++i) {
        top[static_cast<size_t>(s)].push_back(
            randomModule(rng, 1, "s" + std::to_string(s) + "m" + std::to_string(i)));
      }
    }
    TraceBuilder tb(stages);
    for (int s = 0; s < stages; ++s) {
      int64_t t = 0;
      for (int mb = 0; mb < 2; ++mb) {
        const int64_t start = t;
        int64_t end = t + 1;
        for (const auto& m : top[static_cast<size_t>(s)])
          end = emit(tb, s, *m, m->name, end, 1) + 1;
        tb.span(s, BSpan{"main",
                         "forward",
                         core::Category::kPhase,
                         start,
                         end,
                         0,
                         {{"stage", s}, {"chunk", 0}, {"microbatch", mb}}});
        t = end + 10;
      }
      // Recomputation in backward: module scopes that must not count.
      const int64_t start = t;
      const int64_t end = emit(tb, s, *top[static_cast<size_t>(s)][0], "recomputed", t + 1, 1) + 1;
      tb.span(s, BSpan{"main", "backward", core::Category::kPhase, start, end, 0, {{"stage", s}}});
    }
    const auto reader = trace::TraceReader::open(tb.write(scratchDir("model_random")));
    const ModelTree tree = buildModelTree(reader);
    CHECK(tree.stages == stages);
    CHECK(tree.skipped_backward > 0);

    // Walk the generated and analysed trees side by side.
    int64_t expectedTotal = 0;
    std::function<void(const GenModule&, int, const std::string&, int)> check =
        [&](const GenModule& g, int node, const std::string& path, int stage) {
          const auto& m = tree.modules[static_cast<size_t>(node)];
          CHECK(m.path == path);
          CHECK(m.type == g.type);
          CHECK(m.params_local == g.params);
          CHECK(m.params_logical == g.params);
          CHECK(m.stage == stage);
          CHECK(m.rank == stage);
          CHECK(m.calls == 2);
          CHECK(m.inputs == "f32[2," + std::to_string(g.params) + "]");
          REQUIRE(m.children.size() == g.children.size());
          for (size_t i = 0; i < g.children.size(); ++i) {
            check(*g.children[i], m.children[i], path + "." + g.children[i]->name, stage);
          }
          // Runs against the brute force: consecutive children alike by sameStructure.
          std::vector<std::vector<int>> expected;
          for (size_t i = 0; i < g.children.size(); ++i) {
            if (i == 0 || !sameStructure(*g.children[i - 1], *g.children[i]))
              expected.emplace_back();
            expected.back().push_back(m.children[i]);
          }
          CHECK(identicalRuns(tree, node) == expected);
        };
    size_t root = 0;
    for (int s = 0; s < stages; ++s) {
      for (const auto& g : top[static_cast<size_t>(s)]) {
        REQUIRE(root < tree.roots.size());
        check(*g, tree.roots[root++], g->name, s);
        expectedTotal += g->params;
      }
    }
    CHECK(root == tree.roots.size());
    CHECK(tree.logicalParams() == expectedTotal);
  }
}

TEST_CASE("model tree: TP arguments, shards over ranks, --rank", "[analysis][model]") {
  // TP 2: ranks 0 and 1 run the same stage with shard 0 and 1.
  TraceBuilder tb(2);
  for (int r = 0; r < 2; ++r) {
    tb.span(r, BSpan{"main", "forward", core::Category::kPhase, 0, 100, 0, {{"stage", 0}}});
    tb.span(r, BSpan{"main",
                     "layers.0",
                     core::Category::kModule,
                     1,
                     90,
                     1,
                     {{"params", 50 + r}, {"shard", r}, {"logical", 101}},
                     "TransformerLayer"});
    tb.span(r, BSpan{"main",
                     "layers.0.qkv",
                     core::Category::kModule,
                     2,
                     40,
                     2,
                     {{"params", 30}, {"shard", r}, {"tp_col", 0}},
                     "ColumnParallelLinear"});
    tb.span(r, BSpan{"main",
                     "layers.0.proj",
                     core::Category::kModule,
                     41,
                     80,
                     2,
                     {{"params", 20}, {"shard", r}, {"tp_row", 1}},
                     "RowParallelLinear"});
    tb.span(
        r, BSpan{"main", "grad_sync", core::Category::kPhase, 200, 300, 0, {{"dp", 3}, {"tp", 2}}});
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("model_tp")));
  const ModelTree all = buildModelTree(reader);
  REQUIRE(all.roots.size() == 1);
  const auto& layer = all.modules[static_cast<size_t>(all.roots[0])];
  CHECK(layer.params_local == 50);  // from rank 0, the lowest
  CHECK(layer.params_logical == 101);
  CHECK(layer.tp_shards == 2);
  CHECK(all.dp == 3);
  REQUIRE(layer.children.size() == 2);
  const auto& qkv = all.modules[static_cast<size_t>(layer.children[0])];
  const auto& proj = all.modules[static_cast<size_t>(layer.children[1])];
  CHECK(qkv.tp_split == trace::analysis::TpSplit::kColumn);
  CHECK(qkv.tp_dim == 0);
  CHECK(qkv.params_logical == -1);  // sharded, no "logical": unknown, not guessed
  CHECK(proj.tp_split == trace::analysis::TpSplit::kRow);
  CHECK(proj.tp_dim == 1);
  CHECK(qkv.tp_shards == 2);

  ModelOptions one;
  one.rank = 1;
  const ModelTree r1 = buildModelTree(reader, one);
  REQUIRE(r1.roots.size() == 1);
  CHECK(r1.modules[static_cast<size_t>(r1.roots[0])].params_local == 51);
  CHECK(r1.modules[static_cast<size_t>(r1.roots[0])].tp_shards == 1);

  ModelOptions missing;
  missing.rank = 7;
  CHECK_THROWS_AS(buildModelTree(reader, missing), trace::TraceError);
}
