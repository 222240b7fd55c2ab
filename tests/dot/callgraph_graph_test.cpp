// The call graph picture on hand-built traces with exact times: the numbers drawn equal the
// analysis', pruning puts exactly the dropped children into "other" so a parent adds up, identical
// layers fold ×N but never across two pipeline stages, the budget raises the threshold and says
// so, --step keeps one step's spans (trace/'s CallGraphOptions::step), --diff, bad rank/step.
#include <catch2/catch.hpp>

#include <map>

#include "analysis_builder.h"
#include "tracerun/dot/callgraph_graph.h"
#include "tracerun/dot/theme.h"
#include "tracerun/trace/analysis/callgraph.h"

using namespace tracerun;
using namespace tracerun::testing;
using dot::buildCallGraphGraph;
using dot::CallGraphGraphOptions;
using C = core::Category;

namespace {

// "key: value" of a node's tooltip.
int64_t field(const dot::Node& n, const std::string& key) {
  const std::string k = "\n" + key + ": ";
  const size_t at = n.tooltip.find(k);
  if (at == std::string::npos) throw std::runtime_error("no " + key + " in " + n.id);
  return std::stoll(n.tooltip.substr(at + k.size()));
}

const dot::Node* byId(const dot::Graph& g, const std::string& id) {
  for (const auto& n : g.nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

std::vector<int> childrenOf(const dot::Graph& g, int n) {
  std::vector<int> out;
  for (const auto& e : g.edges) {
    if (e.from == n && e.style == dot::EdgeStyle::kSolid && e.constraint) out.push_back(e.to);
  }
  return out;
}

// A step with `layers` layers on each of `stages` ranks (rank k runs stage k), two ops a layer;
// layer i on every rank takes 100 + i ns in aten::mm so no two are equal in time.
std::string layeredTrace(const std::string& name, int stages, int layers, bool oddOneOut = false) {
  TraceBuilder tb(stages);
  for (int r = 0; r < stages; ++r) {
    for (int step = 1; step <= 2; ++step) {
      const int64_t t0 = (step - 1) * 100000;
      tb.span(r, BSpan{"main", "step", C::kPhase, t0, t0 + 90000, 0, {{"step", step}}});
      tb.span(r, BSpan{"main",
                       "forward",
                       C::kPhase,
                       t0 + 10,
                       t0 + 80000,
                       1,
                       {{"stage", r}, {"chunk", 0}, {"microbatch", 0}}});
      int64_t t = t0 + 100;
      for (int i = 0; i < layers; ++i) {
        const int index = r * layers + i;
        const std::string path = "layers." + std::to_string(index);
        const int64_t len = 1000 + index;
        tb.span(r, BSpan{"main", path, C::kModule, t, t + len, 2});
        tb.span(r, BSpan{"main", "aten::mm", C::kOp, t + 1, t + 1 + 100 + index, 3});
        tb.span(r, BSpan{"main", "aten::add", C::kOp, t + 200, t + 300, 3});
        if (oddOneOut && index == 1) {
          tb.span(r, BSpan{"main", "aten::relu", C::kOp, t + 400, t + 450, 3});
        }
        t += len + 10;
      }
    }
  }
  return tb.write(scratchDir(name));
}

std::vector<const dot::Node*> folds(const dot::Graph& g) {
  std::vector<const dot::Node*> out;
  for (const auto& n : g.nodes) {
    if (n.fold > 1) out.push_back(&n);
  }
  return out;
}

}  // namespace

TEST_CASE("callgraph picture: numbers equal the analysis', nodes add up to their parent",
          "[dot][callgraph]") {
  const auto reader = trace::TraceReader::open(layeredTrace("cgg_numbers", 1, 3));
  CallGraphGraphOptions o;
  o.expand = true;
  o.node_thres = 0;
  const dot::Graph g = buildCallGraphGraph(reader, o);
  const auto cg = trace::analysis::buildCallGraph(reader);
  // Every analysis node is drawn once, with its own numbers, under the id of its path.
  REQUIRE(g.nodes.size() == cg.nodes.size());
  for (size_t i = 1; i < cg.nodes.size(); ++i) {
    const std::string id = "all/" + cg.path(static_cast<int>(i), reader, "/");
    const dot::Node* n = byId(g, id);
    INFO(id);
    REQUIRE(n);
    CHECK(field(*n, "calls") == cg.nodes[i].count);
    CHECK(field(*n, "inclusive_ns") == cg.nodes[i].inclusive_ns);
    CHECK(field(*n, "exclusive_ns") == cg.nodes[i].exclusive_ns);
    // The typed metrics carry the same numbers as the tooltip's text.
    CHECK(n->metrics.calls == cg.nodes[i].count);
    CHECK(n->metrics.inclusive_ns == cg.nodes[i].inclusive_ns);
    CHECK(n->metrics.self_ns == cg.nodes[i].exclusive_ns);
    CHECK(n->role != dot::Role::kNone);
    CHECK(n->metrics.heat >= 0.0);
    CHECK(n->metrics.heat <= 1.0);
  }
  CHECK(g.nodes[0].role == dot::Role::kRoot);
  // A call edge carries its callee's numbers.
  for (const dot::Edge& e : g.edges) {
    if (e.role != dot::Role::kCall) continue;
    CHECK(e.metrics.inclusive_ns == g.nodes[static_cast<size_t>(e.to)].metrics.inclusive_ns);
    CHECK(e.metrics.calls == g.nodes[static_cast<size_t>(e.to)].metrics.calls);
  }
  const dot::Node* mm = byId(g, "all/step/forward/layers.2/aten::mm");
  REQUIRE(mm);
  CHECK(field(*mm, "inclusive_ns") == 2 * 102);  // two steps of 100 + 2 ns
  CHECK(mm->label.find("204 ns") != std::string::npos);
  CHECK(mm->label.find("2 calls") != std::string::npos);
}

TEST_CASE("callgraph picture: pruning puts the dropped children into one 'other' per parent",
          "[dot][callgraph]") {
  TraceBuilder tb;
  tb.span(0, BSpan{"main", "step", C::kPhase, 0, 10000, 0, {{"step", 1}}});
  tb.span(0, BSpan{"main", "big", C::kOp, 0, 9000, 1});
  tb.span(0, BSpan{"main", "mid", C::kOp, 0, 5000, 2});
  tb.span(0, BSpan{"main", "tiny1", C::kOp, 5000, 5010, 2});
  tb.span(0, BSpan{"main", "tiny2", C::kOp, 5010, 5030, 2});
  tb.span(0, BSpan{"main", "tiny2", C::kOp, 5030, 5050, 2});
  tb.span(0, BSpan{"main", "tiny3", C::kOp, 5050, 5080, 2});
  tb.span(0, BSpan{"main", "aten::x", C::kOp, 5051, 5060, 3});  // under tiny3
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("cgg_prune")));
  CallGraphGraphOptions o;
  o.node_thres = 0.01;  // 100 ns
  const dot::Graph g = buildCallGraphGraph(reader, o);
  const dot::Node* other = nullptr;
  int otherIndex = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].shape == dot::NodeShape::kNote) {
      CHECK(other == nullptr);  // exactly one
      other = &g.nodes[i];
      otherIndex = static_cast<int>(i);
    }
  }
  REQUIRE(other);
  CHECK(other->label.rfind("other (3 nodes, 0.80%)", 0) == 0);
  CHECK(field(*other, "inclusive_ns") == 10 + 40 + 30);
  CHECK(field(*other, "calls") == 1 + 2 + 1);
  CHECK(field(*other, "hidden_nodes") == 4);  // tiny1, tiny2, tiny3 and aten::x under it
  // big = self + mid + other.
  const int big = [&] {
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      if (g.nodes[i].id == "all/step/big") return static_cast<int>(i);
    }
    return -1;
  }();
  REQUIRE(big >= 0);
  int64_t sum = field(g.nodes[static_cast<size_t>(big)], "exclusive_ns");
  for (int c : childrenOf(g, big)) sum += field(g.nodes[static_cast<size_t>(c)], "inclusive_ns");
  CHECK(sum == field(g.nodes[static_cast<size_t>(big)], "inclusive_ns"));
  CHECK(std::find(childrenOf(g, big).begin(), childrenOf(g, big).end(), otherIndex) !=
        childrenOf(g, big).end());
}

TEST_CASE("callgraph picture: identical layers fold xN, never across a pipeline stage",
          "[dot][callgraph][fold]") {
  SECTION("one stage: exactly one x4") {
    const auto reader = trace::TraceReader::open(layeredTrace("cgg_fold1", 1, 4));
    CallGraphGraphOptions all;
    all.node_thres = 0;
    const dot::Graph g = buildCallGraphGraph(reader, all);
    const auto f = folds(g);
    REQUIRE(f.size() == 1);
    CHECK(f[0]->fold == 4);
    CHECK(f[0]->label.rfind("layers.* \u00d74", 0) == 0);
    CHECK(field(*f[0], "calls") == 4 * 2);
    CHECK(field(*f[0], "inclusive_ns") == 2 * (1000 + 1001 + 1002 + 1003));
    // The ops under the fold sum the four layers' ops.
    const dot::Node* mm = byId(g, "all/step/forward/layers.*/aten::mm");
    REQUIRE(mm);
    CHECK(field(*mm, "inclusive_ns") == 2 * (100 + 101 + 102 + 103));
    CHECK(g.caption.find("layers.* \u00d74") != std::string::npos);
    CallGraphGraphOptions o;
    o.expand = true;
    CHECK(folds(buildCallGraphGraph(reader, o)).empty());
  }
  SECTION("two stages merged: x3 + x3, one per stage") {
    const auto reader = trace::TraceReader::open(layeredTrace("cgg_fold2", 2, 3));
    const dot::Graph g = buildCallGraphGraph(reader, {});
    const auto f = folds(g);
    REQUIRE(f.size() == 2);
    CHECK(f[0]->fold == 3);
    CHECK(f[1]->fold == 3);
    CHECK(f[0]->tooltip.find("members: layers.0 layers.1 layers.2") != std::string::npos);
    CHECK(f[1]->tooltip.find("members: layers.3 layers.4 layers.5") != std::string::npos);
    CHECK(f[0]->tooltip.find("stage 0") != std::string::npos);
    CHECK(f[1]->tooltip.find("stage 1") != std::string::npos);
  }
  SECTION("a layer of another shape breaks the run") {
    const auto reader = trace::TraceReader::open(layeredTrace("cgg_fold3", 1, 4, true));
    const auto f = folds(buildCallGraphGraph(reader, {}));
    REQUIRE(f.size() == 1);
    CHECK(f[0]->fold == 2);  // layers.2, layers.3; layers.0 stands alone, layers.1 differs
  }
}

TEST_CASE("callgraph picture: the budget raises the threshold and says so", "[dot][callgraph]") {
  TraceBuilder tb;
  tb.span(0, BSpan{"main", "step", C::kPhase, 0, 1000000, 0, {{"step", 1}}});
  for (int i = 0; i < 200; ++i) {
    const int64_t t = 10 + i * 4000;
    tb.span(0, BSpan{"main", "op" + std::to_string(i) + "x", C::kOp, t, t + 100 + 10 * i, 1});
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("cgg_budget")));
  CallGraphGraphOptions o;
  o.node_thres = 0;
  o.expand = true;  // op0x..op199x differ only in digits: they would fold
  o.max_nodes = 50;
  const dot::Graph g = buildCallGraphGraph(reader, o);
  CHECK(g.nodes.size() <= 50);
  CHECK(g.nodes.size() >= 45);
  CHECK(g.caption.find("over the budget of 50 nodes") != std::string::npos);
  // What is drawn still adds up: step = self + shown ops + other.
  int64_t sum = field(g.nodes[1], "exclusive_ns");
  for (int c : childrenOf(g, 1)) sum += field(g.nodes[static_cast<size_t>(c)], "inclusive_ns");
  CHECK(sum == field(g.nodes[1], "inclusive_ns"));
  o.max_nodes = 1000;
  CHECK(buildCallGraphGraph(reader, o).nodes.size() == 202);
}

TEST_CASE("callgraph analysis: step restriction and stages (trace/ hunk)",
          "[dot][callgraph][trace]") {
  const auto reader = trace::TraceReader::open(layeredTrace("cgg_step", 2, 2));
  trace::analysis::CallGraphOptions co;
  co.step = 2;
  const auto cg = trace::analysis::buildCallGraph(reader, co);
  CHECK(cg.step_found);
  CHECK(cg.steps == std::vector<int>{1, 2});
  int64_t steps = 0;
  for (size_t i = 1; i < cg.nodes.size(); ++i) {
    const auto& n = cg.nodes[i];
    const std::string name = reader.str(n.name);
    if (name == "step") steps += n.count;
    if (name == "aten::mm") CHECK(n.count == 1);  // one step, one call per layer
    if (name == "layers.0" || name == "layers.1") CHECK(n.stage == 0);
    if (name == "layers.2" || name == "layers.3") CHECK(n.stage == 1);
    if (name == "forward") CHECK(n.stage == trace::analysis::kSeveralStages);
    if (name == "step") CHECK(n.stage == trace::analysis::kNoStage);
  }
  CHECK(steps == 2);  // one per rank
  co.step = 7;
  CHECK_FALSE(trace::analysis::buildCallGraph(reader, co).step_found);
  CallGraphGraphOptions o;
  o.step = 7;
  CHECK_THROWS_WITH(buildCallGraphGraph(reader, o),
                    Catch::Contains("no step 7 in the trace (steps 1..2)"));
  o.step = -1;
  o.rank = 5;
  CHECK_THROWS_WITH(buildCallGraphGraph(reader, o),
                    Catch::Contains("no rank 5 in the trace (ranks: 0, 1)"));
}

TEST_CASE("callgraph picture: --diff colours by the change", "[dot][callgraph]") {
  const auto a = trace::TraceReader::open(layeredTrace("cgg_diff_a", 1, 2));
  const auto b = trace::TraceReader::open(layeredTrace("cgg_diff_b", 1, 2, true));
  CallGraphGraphOptions o;
  o.expand = true;
  o.node_thres = 0;
  const dot::Graph g = buildCallGraphGraph(b, o, &a);
  const dot::Node* relu = byId(g, "all/step/forward/layers.1/aten::relu");
  REQUIRE(relu);
  CHECK(relu->label.find("(new)") != std::string::npos);
  const dot::Theme light = dot::Theme::light();
  CHECK(relu->metrics.change == Approx(1.0));
  CHECK(dot::nodePaint(light, *relu).fill == dot::Rgb{178, 24, 43});  // +100%: full red
  const dot::Node* mm = byId(g, "all/step/forward/layers.0/aten::mm");
  REQUIRE(mm);
  CHECK(mm->label.find("\u0394 +0.0%") != std::string::npos);
  CHECK(dot::nodePaint(light, *mm).fill == dot::Rgb{255, 255, 255});  // unchanged: white
}

TEST_CASE("callgraph picture --time gpu: kernels by short name, the full one in the tooltip",
          "[dot][callgraph][gpu]") {
  // The demangled names as c++filt prints them; short names as nsys' shortName (by hand).
  const std::string fill =
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
      "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)";
  const std::string gemm =
      "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>("
      "cutlass_80_simt_sgemm_128x64_8x5_nt_align1::Params)";
  TraceBuilder tb(1);
  tb.span(0, {"main", "aten::fill_", C::kOp, 0, 100});
  tb.span(0, {"main", "aten::mm", C::kOp, 200, 300});
  tb.span(0, {"cuda:0 stream 7", fill, C::kKernel, 1000, 1400});
  tb.span(0, {"cuda:0 stream 7", gemm, C::kKernel, 2000, 2600});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", "cuda:0 stream 7", 0, 1000});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", "cuda:0 stream 7", 200, 2000});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("cgg_gpu_names")));
  CallGraphGraphOptions o;
  o.gpu_time = true;
  o.node_thres = 0;
  const dot::Graph g = buildCallGraphGraph(reader, o);
  std::map<std::string, const dot::Node*> byFirstLine;
  for (const auto& n : g.nodes) byFirstLine[n.label.substr(0, n.label.find('\n'))] = &n;
  REQUIRE(byFirstLine.count("vectorized_elementwise_kernel") == 1);
  REQUIRE(byFirstLine.count("Kernel2") == 1);
  CHECK(byFirstLine.count(fill) == 0);
  CHECK(byFirstLine["vectorized_elementwise_kernel"]->tooltip.find("\nkernel: " + fill) !=
        std::string::npos);
  CHECK(byFirstLine["Kernel2"]->tooltip.find("\nkernel: " + gemm) != std::string::npos);
  CHECK(field(*byFirstLine["Kernel2"], "inclusive_ns") == 600);
  CHECK(byFirstLine.count("aten::mm") == 1);  // ops keep their names
  // The caption says what the total is: GPU time, not top-level spans.
  CHECK(g.caption.find("GPU time") != std::string::npos);
  CHECK(g.caption.find("top-level spans") == std::string::npos);
  CallGraphGraphOptions cpu;
  cpu.node_thres = 0;
  CHECK(buildCallGraphGraph(reader, cpu).caption.find("top-level spans") != std::string::npos);
}
