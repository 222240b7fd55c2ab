// The pipeline picture on a hand-built two-stage GPipe step whose critical path is worked out by
// hand below, plus the trace/ hunk it reads (pipelineStepActions) and its bad input.
#include <catch2/catch.hpp>

#include <algorithm>

#include "analysis_builder.h"
#include "tracerun/dot/pipeline_graph.h"
#include "tracerun/dot/theme.h"
#include "tracerun/trace/analysis/pipeline.h"

using namespace tracerun;
using namespace tracerun::testing;
using C = core::Category;

namespace {

// Two stages, two microbatches, GPipe. Times in ns (rank: action [start, end]):
//   r0: F0 [10,110] sendF0 [110,115] F1 [120,220] sendF1 [220,225] recvB0 [230,450]
//       B0 [450,650] recvB1 [650,655] B1 [655,855]
//   r1: recvF0 [5,130] F0 [130,230] recvF1 [230,240] F1 [240,340] B0 [340,440] sendB0 [440,445]
//       B1 [445,545] sendB1 [545,550]
// A receive weighs only what follows its send's end. Longest path:
//   F0@0 100 + sendF0 5 + recvF0 (130-115) 15 + F0@1 100 + recvF1 (240-230) 10 + F1@1 100
//   + B0@1 100 + sendB0 5 + recvB0 (450-445) 5 + B0@0 200 + recvB1 (655-650) 5 + B1@0 200 = 845
// of the window 855 - 5 = 850.
std::string gpipeTrace(const std::string& name) {
  TraceBuilder tb(2);
  auto phase = [&](int r, const char* what, int stage, int mb, int64_t s, int64_t e) {
    tb.span(r, BSpan{"main",
                     what,
                     C::kPhase,
                     s,
                     e,
                     1,
                     {{"stage", stage}, {"chunk", 0}, {"microbatch", mb}}});
  };
  auto msg = [&](int r, const char* what, int peer, int mb, int64_t s, int64_t e) {
    tb.span(
        r,
        BSpan{"main", what, C::kUser, s, e, 1, {{"peer", peer}, {"microbatch", mb}, {"chunk", 0}}});
  };
  for (int r = 0; r < 2; ++r) {
    tb.span(r, BSpan{"main", "step", C::kPhase, 0, 1000, 0, {{"step", 1}}});
  }
  phase(0, "forward", 0, 0, 10, 110);
  msg(0, "send_forward", 1, 0, 110, 115);
  phase(0, "forward", 0, 1, 120, 220);
  msg(0, "send_forward", 1, 1, 220, 225);
  msg(0, "recv_backward", 1, 0, 230, 450);
  phase(0, "backward", 0, 0, 450, 650);
  msg(0, "recv_backward", 1, 1, 650, 655);
  phase(0, "backward", 0, 1, 655, 855);
  msg(1, "recv_forward", 0, 0, 5, 130);
  phase(1, "forward", 1, 0, 130, 230);
  msg(1, "recv_forward", 0, 1, 230, 240);
  phase(1, "forward", 1, 1, 240, 340);
  phase(1, "backward", 1, 0, 340, 440);
  msg(1, "send_backward", 0, 0, 440, 445);
  phase(1, "backward", 1, 1, 445, 545);
  msg(1, "send_backward", 0, 1, 545, 550);
  return tb.write(scratchDir(name));
}

bool critical(const dot::Node& n) {
  return n.tooltip.find("critical: yes") != std::string::npos;
}

}  // namespace

TEST_CASE("pipeline analysis: one step's actions with messages matched (trace/ hunk)",
          "[dot][pipeline][trace]") {
  const auto reader = trace::TraceReader::open(gpipeTrace("pp_actions"));
  const auto sa = trace::analysis::pipelineStepActions(reader, 1);
  REQUIRE(sa.found);
  CHECK(sa.steps == std::vector<int>{1});
  CHECK(sa.ranks == std::vector<int>{0, 1});
  REQUIRE(sa.actions.size() == 16);
  int matched = 0;
  for (const auto& a : sa.actions) {
    if (a.match < 0) continue;
    ++matched;
    const auto& s = sa.actions[static_cast<size_t>(a.match)];
    CHECK(s.rank == a.peer);
    CHECK(s.peer == a.rank);
    CHECK(s.microbatch == a.microbatch);
  }
  CHECK(matched == 4);
  CHECK_FALSE(trace::analysis::pipelineStepActions(reader, 2).found);
}

TEST_CASE("pipeline picture: the critical path is the longest path by measured time",
          "[dot][pipeline]") {
  const auto reader = trace::TraceReader::open(gpipeTrace("pp_graph"));
  const dot::Graph g = dot::buildPipelineGraph(reader, {});
  REQUIRE(g.nodes.size() == 16);
  CHECK(g.clusters.size() == 2);
  std::vector<std::string> onPath;
  for (const auto& n : g.nodes) {
    if (critical(n)) onPath.push_back(n.id);
  }
  const std::vector<std::string> expected = {"rank0/F0",
                                             "rank0/send F0 \u2192 r1",
                                             "rank0/recv B0 \u2190 r1",
                                             "rank0/B0",
                                             "rank0/recv B1 \u2190 r1",
                                             "rank0/B1",
                                             "rank1/recv F0 \u2190 r0",
                                             "rank1/F0",
                                             "rank1/recv F1 \u2190 r0",
                                             "rank1/F1",
                                             "rank1/B0",
                                             "rank1/send B0 \u2192 r0"};
  CHECK(onPath == expected);
  CHECK(g.caption.find("step window 850 ns") != std::string::npos);
  CHECK(g.caption.find("critical path 845 ns = 99.4% of it") != std::string::npos);
  // Bubbles: r0 computes 600 of 850, r1 400 of 850.
  CHECK(g.caption.find("stage 0: 29.4% \u00b7 stage 1: 52.9%") != std::string::npos);
  CHECK(g.caption.find("(p-1)/(m+p-1) = 33.3%") != std::string::npos);
  int red = 0;
  for (const auto& e : g.edges) red += e.style == dot::EdgeStyle::kBold ? 1 : 0;
  CHECK(red == static_cast<int>(expected.size()) - 1);  // a chain
}

TEST_CASE("pipeline picture: over the budget, messages join the computes around them",
          "[dot][pipeline]") {
  const auto reader = trace::TraceReader::open(gpipeTrace("pp_budget"));
  dot::PipelineGraphOptions o;
  o.max_nodes = 10;
  const dot::Graph g = dot::buildPipelineGraph(reader, o);
  REQUIRE(g.nodes.size() == 8);  // the computes
  CHECK(g.caption.find("over the budget of 10 nodes (--max-nodes): 8 sends and receives not "
                       "drawn") != std::string::npos);
  CHECK(g.caption.find("critical path 845 ns") != std::string::npos);
  std::vector<std::string> onPath;
  for (const auto& n : g.nodes) {
    if (critical(n)) onPath.push_back(n.id);
  }
  CHECK(onPath == std::vector<std::string>{"rank0/F0", "rank0/B0", "rank0/B1", "rank1/F0",
                                           "rank1/F1", "rank1/B0"});
  std::vector<std::pair<std::string, std::string>> red;
  for (const auto& e : g.edges) {
    if (e.style == dot::EdgeStyle::kBold) {
      red.push_back(
          {g.nodes[static_cast<size_t>(e.from)].id, g.nodes[static_cast<size_t>(e.to)].id});
    }
  }
  std::sort(red.begin(), red.end());
  CHECK(red == std::vector<std::pair<std::string, std::string>>{{"rank0/B0", "rank0/B1"},
                                                                {"rank0/F0", "rank1/F0"},
                                                                {"rank1/B0", "rank0/B0"},
                                                                {"rank1/F0", "rank1/F1"},
                                                                {"rank1/F1", "rank1/B0"}});
}

TEST_CASE("pipeline picture: bad input names the problem", "[dot][pipeline]") {
  const auto reader = trace::TraceReader::open(gpipeTrace("pp_bad"));
  dot::PipelineGraphOptions o;
  o.step = 4;
  CHECK_THROWS_WITH(dot::buildPipelineGraph(reader, o),
                    Catch::Contains("no step 4 in the pipeline (steps 1..1)"));
  TraceBuilder tb;
  tb.span(0, BSpan{"main", "step", C::kPhase, 0, 100, 0, {{"step", 1}}});
  const auto plain = trace::TraceReader::open(tb.write(scratchDir("pp_none")));
  CHECK_THROWS_WITH(dot::buildPipelineGraph(plain, {}),
                    Catch::Contains("no pipeline in the trace"));
}

// ZB-H1's split backward on two stages, one microbatch (ns): B0 (backward_input) is on the
// gradient's path, W0 (backward_weight) after it with no messages.
//   r0: F0 [10,110] sendF0 [110,115] recvB0 [120,330] B0 [330,340] W0 [340,440]
//   r1: recvF0 [5,130] F0 [130,230] B0 [230,320] sendB0 [320,325] W0 [325,425]
TEST_CASE("pipeline picture and analysis: zb-h1's B and W apart, its closed form named",
          "[dot][pipeline][zbh1]") {
  TraceBuilder tb(2);
  auto phase = [&](int r, const char* what, int stage, int64_t s, int64_t e) {
    tb.span(
        r,
        BSpan{
            "main", what, C::kPhase, s, e, 1, {{"stage", stage}, {"chunk", 0}, {"microbatch", 0}}});
  };
  auto msg = [&](int r, const char* what, int peer, int64_t s, int64_t e) {
    tb.span(
        r,
        BSpan{"main", what, C::kUser, s, e, 1, {{"peer", peer}, {"microbatch", 0}, {"chunk", 0}}});
  };
  for (int r = 0; r < 2; ++r) {
    tb.span(r, BSpan{"main", "step", C::kPhase, 0, 1000, 0, {{"step", 1}}});
  }
  phase(0, "forward", 0, 10, 110);
  msg(0, "send_forward", 1, 110, 115);
  msg(0, "recv_backward", 1, 120, 330);
  phase(0, "backward_input", 0, 330, 340);
  phase(0, "backward_weight", 0, 340, 440);
  msg(1, "recv_forward", 0, 5, 130);
  phase(1, "forward", 1, 130, 230);
  phase(1, "backward_input", 1, 230, 320);
  msg(1, "send_backward", 0, 320, 325);
  phase(1, "backward_weight", 1, 325, 425);
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("pp_zbh1")));

  const auto a = trace::analysis::analyzePipeline(reader);
  CHECK(a.schedule == "zb-h1");
  CHECK(a.bubble_formula.find("(p-1)(F+B-W)") != std::string::npos);
  REQUIRE(a.per_stage.size() == 2);
  CHECK(a.per_stage[0].backward_ns == Approx(110));  // B 10 + W 100
  CHECK(a.per_stage[1].backward_ns == Approx(190));  // B 90 + W 100
  // Mean F 100, B 50, W 100, p 2, m 1: (F+B-W) / ((F+B+W) + (F+B-W)) = 50 / 300.
  CHECK(a.bubble_theory == Approx(50.0 / 300.0));

  const dot::Graph g = dot::buildPipelineGraph(reader, {});
  const dot::Node* b = nullptr;
  const dot::Node* w = nullptr;
  for (const auto& n : g.nodes) {
    if (n.id == "rank1/B0") b = &n;
    if (n.id == "rank1/W0") w = &n;
  }
  REQUIRE(b != nullptr);
  REQUIRE(w != nullptr);
  CHECK(b->role == dot::Role::kBackward);
  CHECK(w->role == dot::Role::kWeightGradient);
  const dot::Theme light = dot::Theme::light();
  CHECK_FALSE(dot::nodePaint(light, *b).fill == dot::nodePaint(light, *w).fill);
  CHECK(g.title.find("zb-h1") != std::string::npos);
  CHECK(g.caption.find("(p-1)(F+B-W)") != std::string::npos);
}
