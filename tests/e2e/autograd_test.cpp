// tracedot autograd end to end: a Python program traced by the built tracerun, its backward graph
// (trace/analysis/autograd.h and dot's builder) against torch's own walk of
// loss.grad_fn.next_functions written by the same program (autograd_truth.py); a 20,000-node chain;
// a trace without backward.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dot_test_util.h"
#include "e2e_common.h"
#include "tracerun/dot/autograd_graph.h"
#include "tracerun/trace/analysis/autograd.h"
#include "tracerun/trace/reader.h"

using tracerun::trace::TraceError;
using tracerun::trace::TraceReader;
namespace analysis = tracerun::trace::analysis;
namespace e2e = tracerun::e2e;

namespace {

struct Walk {
  std::vector<std::string> names, shapes;
  std::vector<int64_t> vars;
  std::vector<std::vector<int64_t>> edges;  // [src, k, dst, input_nr]
};

// The traced graph numbered like autograd_truth.py's walk: breadth-first from the root, next
// edges in order.
Walk walkTraced(const TraceReader& reader, const analysis::AutogradGraph& g) {
  std::vector<std::vector<const analysis::AutogradEdge*>> out(g.nodes.size());
  std::vector<char> hasIn(g.nodes.size(), 0);
  for (const auto& e : g.edges) {
    out[e.from].push_back(&e);
    hasIn[e.to] = 1;
  }
  for (auto& v : out) {
    std::stable_sort(v.begin(), v.end(),
                     [](auto* a, auto* b) { return a->output_nr < b->output_nr; });
  }
  const auto root = std::find(hasIn.begin(), hasIn.end(), 0) - hasIn.begin();
  REQUIRE(root < static_cast<long>(g.nodes.size()));
  std::vector<int> index(g.nodes.size(), -1);
  std::vector<int> order{static_cast<int>(root)};
  index[root] = 0;
  Walk w;
  for (size_t h = 0; h < order.size(); ++h) {
    for (const auto* e : out[order[h]]) {
      if (index[e->to] < 0) {
        index[e->to] = static_cast<int>(order.size());
        order.push_back(e->to);
      }
      w.edges.push_back({index[order[h]], e->output_nr, index[e->to], e->input_nr});
    }
  }
  for (int i : order) {
    const auto& n = g.nodes[i];
    w.names.push_back(reader.str(n.name));
    w.vars.push_back(n.accumulate_grad ? n.variable : 0);
    w.shapes.push_back(n.accumulate_grad ? reader.str(n.shape) : "");
  }
  // Every traced node of the step is reached from the root: nothing extra ran.
  CHECK(order.size() == g.nodes.size());
  return w;
}

Walk walkTruth(const nlohmann::json& step) {
  Walk w;
  for (const auto& n : step["nodes"]) {
    w.names.push_back(n["name"].get<std::string>());
    w.vars.push_back(n["var"].get<int64_t>());
    w.shapes.push_back(n["shape"].get<std::string>());
  }
  for (const auto& e : step["edges"]) w.edges.push_back(e.get<std::vector<int64_t>>());
  return w;
}

e2e::ProcessResult tracedot(const std::vector<std::string>& args) {
  return e2e::runProcess(TRACEDOT_BIN, args, e2e::scratch().path());
}

size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

e2e::ProcessResult tracePython(const std::string& db, const std::vector<std::string>& args) {
  std::vector<std::string> a{"-q", "-o", db, "--", TRACERUN_TEST_PYTHON, AUTOGRAD_TRUTH_PY};
  a.insert(a.end(), args.begin(), args.end());
  return e2e::runTracerun(a);
}

}  // namespace

TEST_CASE("autograd graph of a traced Python model equals torch's next_functions walk",
          "[autograd]") {
  e2e::ScratchDir dir("autograd");
  const std::string db = dir.file("run.db"), truthFile = dir.file("truth.json");
  const auto r = tracePython(db, {truthFile, "--steps", "2"});
  REQUIRE(r.exit_code == 0);
  const auto truth = nlohmann::json::parse(e2e::readFile(truthFile));
  REQUIRE(truth["steps"].size() == 2);
  const auto reader = TraceReader::open(db);
  for (int step = 1; step <= 2; ++step) {
    INFO("step " << step);
    analysis::AutogradOptions o;
    o.step = step;
    const auto g = analysis::buildAutogradGraph(reader, o);
    CHECK(g.step == step);
    CHECK(g.passes == 1);
    CHECK(g.unresolved_edges == 0);
    CHECK(g.nodes_without_edges == 0);
    const Walk traced = walkTraced(reader, g);
    const Walk expected = walkTruth(truth["steps"][step - 1]);
    CHECK(traced.names == expected.names);
    CHECK(traced.edges == expected.edges);
    CHECK(traced.vars == expected.vars);
    CHECK(traced.shapes == expected.shapes);
    // Every node but AccumulateGrad knows its forward op (aten::addmm -> AddmmBackward0...).
    for (const auto& n : g.nodes) {
      if (!n.accumulate_grad) CHECK(n.forward_name != 0);
    }

    // The builder: one node per autograd node, one edge per next edge, leaves as ellipses.
    const auto graph = tracerun::dot::buildAutogradGraph(reader, g);
    CHECK(graph.nodes.size() == g.nodes.size());
    CHECK(graph.edges.size() == g.edges.size());
    const auto leaves = std::count_if(graph.nodes.begin(), graph.nodes.end(), [](const auto& n) {
      return n.shape == tracerun::dot::NodeShape::kEllipse;
    });
    CHECK(leaves == std::count(expected.names.begin(), expected.names.end(),
                               "torch::autograd::AccumulateGrad"));
    std::vector<std::string> ids;
    for (const auto& n : graph.nodes) ids.push_back(n.id);
    std::sort(ids.begin(), ids.end());
    CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  }
  SECTION("tracedot autograd writes the step's graph") {
    const std::string svg = dir.file("ag.svg"), dotFile = dir.file("ag.dot");
    const auto t = tracedot({"autograd", db, "-o", svg, "--step", "2"});
    REQUIRE(t.exit_code == 0);
    const auto g = [&] {
      analysis::AutogradOptions o;
      o.step = 2;
      return analysis::buildAutogradGraph(reader, o);
    }();
    // Parsed as XML (python3's xml.etree): one group per node, with the builder's ids.
    const auto parsed = tracerun::dottest::parseSvg(svg, dir.path());
    const auto built = tracerun::dot::buildAutogradGraph(reader, g);
    REQUIRE(parsed.nodes.size() == g.nodes.size());
    CHECK(parsed.edges == static_cast<int>(g.edges.size()));
    for (const auto& n : built.nodes) CHECK(parsed.byId(n.id) != nullptr);
    const auto* root = parsed.byId(built.nodes[0].id);
    REQUIRE(root != nullptr);
    CHECK(root->text == std::vector<std::string>{"MseLossBackward0", "\u2190 aten::mse_loss"});
    // The same trace gives the same bytes.
    REQUIRE(tracedot({"autograd", db, "-o", dotFile, "--step", "2"}).exit_code == 0);
    const std::string once = e2e::readFile(dotFile);
    REQUIRE(tracedot({"autograd", db, "-o", dotFile, "--step", "2"}).exit_code == 0);
    CHECK(e2e::readFile(dotFile) == once);
  }
  SECTION("tracedot autograd --step 9: one line, non-zero exit") {
    const auto t = tracedot({"autograd", db, "-o", dir.file("x.svg"), "--step", "9"});
    CHECK(t.exit_code == 1);
    CHECK(t.errLines().size() == 1);
    CHECK(t.err.find("no step 9 on rank 0 (steps: 1, 2)") != std::string::npos);
  }
  SECTION("no such step: one line naming it") {
    analysis::AutogradOptions o;
    o.step = 7;
    CHECK_THROWS_WITH(analysis::buildAutogradGraph(reader, o),
                      Catch::Contains("no step 7 on rank 0 (steps: 1, 2)"));
  }
}

TEST_CASE("a 20,000-node chain builds without recursion", "[autograd]") {
  e2e::ScratchDir dir("autograd_chain");
  const std::string db = dir.file("run.db"), truthFile = dir.file("truth.json");
  // The chain pushes ~500k records through one thread in well under a second, about twice the
  // default ring (2^18 records): a ring of 64 MiB holds them all, so a writer that falls behind on
  // a loaded machine cannot drop the spans this test counts (the ring is not what it tests).
  ::setenv("TRACERUN_BUFFER_MB", "64", 1);
  const auto r = tracePython(db, {truthFile, "--chain", "20000"});
  ::unsetenv("TRACERUN_BUFFER_MB");
  REQUIRE(r.exit_code == 0);
  const auto truth = nlohmann::json::parse(e2e::readFile(truthFile));
  const auto reader = TraceReader::open(db);
  const auto g = analysis::buildAutogradGraph(reader);
  REQUIRE(g.nodes.size() == 20000);
  CHECK(g.edges.size() == 19999);
  const Walk traced = walkTraced(reader, g);
  const Walk expected = walkTruth(truth["steps"][0]);
  CHECK(traced.names == expected.names);
  CHECK(traced.edges == expected.edges);
  const auto graph = tracerun::dot::buildAutogradGraph(reader, g);
  CHECK(graph.nodes.size() == 20000);
  // Laid out and rendered in full when the budget allows it.
  const std::string svg = dir.file("chain.svg");
  const auto t = tracedot({"autograd", db, "-o", svg, "--max-nodes", "20000"});
  REQUIRE(t.exit_code == 0);
  CHECK(countOf(e2e::readFile(svg), "class=\"node\"") == 20000);
}

TEST_CASE("a trace without backward: one line naming the problem", "[autograd]") {
  e2e::ScratchDir dir("autograd_none");
  const std::string db = dir.file("run.db"), truthFile = dir.file("truth.json");
  const auto r = tracePython(db, {truthFile, "--steps", "1", "--no-backward"});
  REQUIRE(r.exit_code == 0);
  const auto reader = TraceReader::open(db);
  CHECK_THROWS_WITH(analysis::buildAutogradGraph(reader),
                    Catch::Contains("no autograd nodes (backward spans) on rank 0"));
  const auto t = tracedot({"autograd", db, "-o", dir.file("none.svg")});
  CHECK(t.exit_code == 1);
  CHECK(t.errLines().size() == 1);
  CHECK(t.err.find("no autograd nodes (backward spans) on rank 0") != std::string::npos);
  analysis::AutogradOptions o;
  o.rank = 3;
  CHECK_THROWS_WITH(analysis::buildAutogradGraph(reader, o), Catch::Contains("no rank 3"));
}

#ifdef GPTTRAIN_BIN
TEST_CASE("gpttrain --recompute full: recomputed nodes marked, nodes clustered by module",
          "[autograd]") {
  e2e::ScratchDir dir("autograd_gpt");
  const std::vector<std::string> model{
      "--layers",           "2", "--hidden", "32", "--heads",        "2",
      "--seq-len",          "8", "--vocab",  "64", "--global-batch", "2",
      "--micro-batch-size", "2", "--steps",  "2"};
  auto run = [&](const std::string& db, const std::string& recompute) {
    std::vector<std::string> args = model;
    args.insert(args.end(), {"--recompute", recompute});
    const auto r = e2e::runGpttrain({"-q", "-o", db}, GPTTRAIN_BIN, args);
    REQUIRE(r.exit_code == 0);
    return TraceReader::open(db);
  };
  auto moduleNames = [](const TraceReader& reader, const analysis::AutogradGraph& g) {
    std::vector<std::string> names;
    for (const auto& n : g.nodes) {
      if (!n.modules.empty()) names.push_back(reader.str(n.modules.back()));
    }
    return names;
  };
  const auto plainReader = run(dir.file("plain.db"), "none");
  const auto plain = analysis::buildAutogradGraph(plainReader);
  CHECK(plain.step == 1);
  CHECK(plain.unresolved_edges == 0);
  CHECK(std::none_of(plain.nodes.begin(), plain.nodes.end(),
                     [](const auto& n) { return n.recomputed; }));
  const auto plainModules = moduleNames(plainReader, plain);
  for (const char* m : {"layers.0.attn", "layers.0.mlp", "layers.1.attn", "layers.1.mlp"}) {
    INFO(m);
    CHECK(std::count(plainModules.begin(), plainModules.end(), m) > 0);
  }

  const auto recReader = run(dir.file("recompute.db"), "full");
  const auto rec = analysis::buildAutogradGraph(recReader);
  CHECK(rec.unresolved_edges == 0);
  // Each of the 2 layers re-runs its forward in backward, with a nested backward of its own.
  CHECK(rec.passes == 1 + 2);
  const auto recomputed =
      std::count_if(rec.nodes.begin(), rec.nodes.end(), [](const auto& n) { return n.recomputed; });
  CHECK(recomputed > 0);
  // What is recomputed is the layers' insides: every plain-run node of the layers appears again,
  // marked, in the recomputed run.
  auto layerNodes = [&](const TraceReader& reader, const analysis::AutogradGraph& g, bool marked) {
    int64_t n = 0;
    for (const auto& node : g.nodes) {
      // Nodes with a forward op (custom functions' modules are a guess: their feeder's).
      if (node.forward_span == 0 || node.modules.empty()) continue;
      const std::string top = reader.str(node.modules.front());
      if (top.rfind("layers.", 0) == 0 && (!marked || node.recomputed)) ++n;
    }
    return n;
  };
  CHECK(layerNodes(recReader, rec, true) == layerNodes(plainReader, plain, false));
  for (const auto& n : rec.nodes) {
    if (!n.recomputed || n.forward_span == 0) continue;
    INFO(recReader.str(n.name));
    REQUIRE(!n.modules.empty());
    CHECK(recReader.str(n.modules.front()).rfind("layers.", 0) == 0);
  }
}
#endif
