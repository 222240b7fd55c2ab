// The pipeline view's data without a window: the plan (the trainer's schedules timed with uniform
// costs) has exactly the closed-form bubble of its schedule, and the view opens on the step behind
// the report's median bubble.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>

#include "views/pipeline_chart.h"

using namespace tracerun;
using viewer::PipelineBar;

namespace {

// One measured bar per stage, chunk and direction: forward `f`, backward `b` (the plan's costs).
std::vector<PipelineBar> uniformCosts(int p, int v, int64_t f, int64_t b) {
  std::vector<PipelineBar> out;
  for (int s = 0; s < p; ++s) {
    for (int c = 0; c < v; ++c) {
      for (bool bwd : {false, true}) {
        PipelineBar bar;
        bar.lane = s;
        bar.chunk = c;
        bar.backward = bwd;
        bar.t1 = bwd ? b : f;
        out.push_back(bar);
      }
    }
  }
  return out;
}

// 1 - compute / (p x makespan) of the planned bars.
double planBubble(const std::vector<PipelineBar>& plan, int p, int64_t t0) {
  int64_t end = t0;
  double compute = 0;
  for (const auto& b : plan) {
    end = std::max(end, b.t1);
    compute += double(b.t1 - b.t0);
  }
  return 1.0 - compute / (double(p) * double(end - t0));
}

}  // namespace

TEST_CASE("pipeline plan: uniform costs give the closed-form bubble of each schedule",
          "[viewer][pipeline]") {
  struct Case {
    const char* schedule;
    int p, v, m;
  };
  for (const Case c : {Case{"gpipe", 4, 1, 8}, Case{"1f1b", 4, 1, 8}, Case{"1f1b", 3, 1, 5},
                       Case{"interleaved", 4, 2, 8}, Case{"interleaved", 2, 3, 4}}) {
    INFO(c.schedule << " p " << c.p << " v " << c.v << " m " << c.m);
    std::string note;
    const int64_t t0 = 1000;
    // Per chunk 1/v of the work: forward 30, backward 60 per microbatch and stage.
    const auto plan = viewer::plannedBars(c.schedule, c.p, c.v, c.m,
                                          uniformCosts(c.p, c.v, 30 / c.v, 60 / c.v), t0, &note);
    INFO(note);
    REQUIRE(plan.size() == size_t(2 * c.p * c.v * c.m));
    CHECK(planBubble(plan, c.p, t0) ==
          Approx(trace::analysis::closedFormBubble(c.schedule, c.p, c.m, c.v)).margin(1e-12));
    // Every bar starts at or after t0 and no two bars of a stage overlap.
    std::map<int, int64_t> laneEnd;
    for (const auto& b : plan) {
      CHECK(b.t0 >= std::max(t0, laneEnd[b.lane]));
      laneEnd[b.lane] = b.t1;
    }
  }
}

TEST_CASE("pipeline plan: zb-h1, chimera and 2bw replay to their own closed forms",
          "[viewer][pipeline]") {
  const int64_t t0 = 500;
  std::string note;
  SECTION("zb-h1: F, B and W bars of their own, the step m(F+B+W) + (p-1)(F+B-W)") {
    for (const auto& [p, m] : {std::pair{4, 8}, std::pair{2, 4}, std::pair{4, 4}}) {
      INFO("p " << p << " m " << m);
      std::vector<PipelineBar> costs;  // F 30, B 20, W 10 on every stage (W <= min(F, B))
      for (int s = 0; s < p; ++s) {
        for (int k = 0; k < 3; ++k) {
          PipelineBar bar;
          bar.lane = s;
          bar.backward = k > 0;
          bar.weight = k == 2;
          bar.t1 = k == 0 ? 30 : k == 1 ? 20 : 10;
          costs.push_back(bar);
        }
      }
      const auto plan = viewer::plannedBars("zb-h1", p, 1, m, costs, t0, &note);
      INFO(note);
      REQUIRE(plan.size() == size_t(3 * p * m));
      CHECK(std::count_if(plan.begin(), plan.end(),
                          [](const PipelineBar& b) { return b.weight; }) == p * m);
      CHECK(planBubble(plan, p, t0) ==
            Approx(trace::analysis::zbH1Bubble(p, m, 30, 20, 10)).margin(1e-12));
    }
  }
  SECTION("chimera: two chunks (the pipelines), (p-2)/(2m+p-2) when F = B") {
    for (const auto& [p, m] : {std::pair{4, 4}, std::pair{4, 8}, std::pair{2, 4}}) {
      INFO("p " << p << " m " << m);
      const auto plan =
          viewer::plannedBars("chimera", p, 2, m, uniformCosts(p, 2, 40, 40), t0, &note);
      INFO(note);
      REQUIRE(plan.size() == size_t(2 * p * m));
      CHECK(planBubble(plan, p, t0) ==
            Approx(trace::analysis::closedFormBubble("chimera", p, m, 2)).margin(1e-12));
    }
  }
  SECTION("2bw: 1F1B over all the step span's microbatches, the fill once") {
    auto costs = uniformCosts(4, 1, 30, 60);
    costs[0].microbatch = 23;  // the measured step span holds 3 batches of 8
    const auto plan = viewer::plannedBars("2bw", 4, 1, 8, costs, t0, &note);
    INFO(note);
    REQUIRE(plan.size() == size_t(2 * 4 * 24));
    CHECK(planBubble(plan, 4, t0) ==
          Approx(trace::analysis::closedFormBubble("1f1b", 4, 24, 1)).margin(1e-12));
  }
}

TEST_CASE("pipeline plan: a shape the trainer cannot run has no plan and says why",
          "[viewer][pipeline]") {
  std::string note;
  CHECK(viewer::plannedBars("interleaved", 4, 2, 6, uniformCosts(4, 2, 1, 2), 0, &note).empty());
  CHECK(note.find("multiple") != std::string::npos);
  note.clear();
  CHECK(viewer::plannedBars("zb-v", 4, 1, 8, uniformCosts(4, 1, 1, 2), 0, &note).empty());
  CHECK(note.find("zb-v") != std::string::npos);
}

TEST_CASE("pipeline view opens on the step behind the report's median bubble",
          "[viewer][pipeline]") {
  trace::analysis::PipelineAnalysis a;
  auto step = [&](int s, int replica, double bubble) {
    trace::analysis::PipelineStep x;
    x.step = s;
    x.replica = replica;
    x.bubble = bubble;
    a.per_step.push_back(x);
  };
  CHECK(viewer::steadyStep(a) == -1);
  step(1, 0, 0.50);  // the first step: warm-up, the largest bubble
  step(2, 0, 0.30);
  step(3, 0, 0.35);
  CHECK(viewer::steadyStep(a) == 3);
  // Replicas are averaged first: step 2 becomes (0.30 + 0.42) / 2 = 0.36, the median.
  step(2, 1, 0.42);
  step(1, 1, 0.50);
  step(3, 1, 0.35);
  CHECK(viewer::steadyStep(a) == 2);
}
