// tracedot autograd end to end: a Python program traced by the built tracerun, its backward graph
// (trace/analysis/autograd.h and dot's builder) against torch's own walk of
// loss.grad_fn.next_functions written by the same program (autograd_truth.py); a 20,000-node chain;
// a trace without backward.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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
    std::stable_sort(v.begin(), v.end(), [](auto* a, auto* b) { return a->output_nr < b->output_nr; });
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
  const auto r = tracePython(db, {truthFile, "--chain", "20000"});
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
}

TEST_CASE("a trace without backward: one line naming the problem", "[autograd]") {
  e2e::ScratchDir dir("autograd_none");
  const std::string db = dir.file("run.db"), truthFile = dir.file("truth.json");
  const auto r = tracePython(db, {truthFile, "--steps", "1", "--no-backward"});
  REQUIRE(r.exit_code == 0);
  const auto reader = TraceReader::open(db);
  CHECK_THROWS_WITH(analysis::buildAutogradGraph(reader),
                    Catch::Contains("no autograd nodes (backward spans) on rank 0"));
  analysis::AutogradOptions o;
  o.rank = 3;
  CHECK_THROWS_WITH(analysis::buildAutogradGraph(reader, o), Catch::Contains("no rank 3"));
}
