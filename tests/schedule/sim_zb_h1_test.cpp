// ZB-H1's action lists as data, run by the tests' simulator (schedule_sim.h) with the executor's
// semantics (sends post and go on, a receive blocks until its message was sent) and the split
// backward (B: gradient of the
// input, sends on; W: gradient of the weights, after its B, no messages). It checks, for every
// p <= 8 and m <= 32, each microbatch's F, B and W exactly once per rank in dependency order, no
// deadlock, at most min(p, m) microbatches forwarded and not yet W'd, and the step time against
// the closed form m(F+B+W) + (p-1)(F+B-W) computed here, independently of schedule.cpp.
#include "schedule_sim.h"
#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/chimera.h"
#include "tracerun/schedule/closed_form.h"
#include "tracerun/schedule/two_bw.h"
#include "tracerun/schedule/zb_h1.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

using namespace tracerun::schedule;
using namespace tracerun::schedule::testing;

namespace {

struct Costs {
  double f, b, w;  // kBackward (1F1B) costs b + w
};

using Sim = SimResult;

// The shared simulator with B and W, and kBackward costing B + W; zb-h1 splits every backward,
// so each rank must also run m each of F, B and W.
Sim simulateZb(const std::vector<std::vector<Action>>& lists, const PipelineShape& s, Costs c) {
  SimSpec spec = virtualStageSpec(s);
  spec.costs = SimCosts{c.f, c.b + c.w, c.b, c.w};
  spec.allow_split_backward = true;
  Sim res = simulateSchedules(lists, spec);
  for (int r = 0; r < s.stages && res.error.empty(); ++r) {
    for (ActionKind k :
         {ActionKind::kForward, ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
      if (res.error.empty() && res.count(r, k) != s.microbatches) {
        res.error = "rank " + std::to_string(r) + ": " + std::to_string(res.count(r, k)) + " " +
                    actionName(k) + ", not " + std::to_string(s.microbatches);
      }
    }
  }
  return res;
}

std::vector<std::vector<Action>> lists(ScheduleKind kind, const PipelineShape& s) {
  std::vector<std::vector<Action>> out;
  for (int r = 0; r < s.stages; ++r) out.push_back(buildSchedule(kind, s, r));
  return out;
}

// The paper's ZB-H1 step, (p-1)(F+B-W) of bubble over m(F+B+W) of work.
double closedFormStep(const PipelineShape& s, Costs c) {
  return s.microbatches * (c.f + c.b + c.w) + (s.stages - 1) * (c.f + c.b - c.w);
}

std::string text(const std::vector<Action>& order) {
  std::string t;
  for (const Action& a : order) {
    const char* k = a.kind == ActionKind::kForward          ? "F"
                    : a.kind == ActionKind::kBackwardInput  ? "B"
                    : a.kind == ActionKind::kBackwardWeight ? "W"
                                                            : "?";
    t += k + std::to_string(a.microbatch) + " ";
  }
  return t;
}

}  // namespace

TEST_CASE("zb-h1: every p <= 8, m <= 32: F, B, W once each, in order, at most p in flight",
          "[schedule][sim][zbh1]") {
  const Costs c{1.0, 2.0, 0.5};  // unequal, so an order that works only for F = B = W fails
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      const PipelineShape s{p, 1, m};
      INFO("p " << p << " m " << m);
      const Sim res = simulateZb(lists(ScheduleKind::kZbH1, s), s, c);
      REQUIRE(res.error == "");
      for (int r = 0; r < p; ++r) {
        INFO("rank " << r);
        CHECK(res.in_flight[r] <= std::min(p, m));
        CHECK(res.in_flight[r] <= inFlightBound(ScheduleKind::kZbH1, s, r));
        CHECK(res.busy[r] == Approx(m * (c.f + c.b + c.w)));
      }
      if (m >= p) CHECK(res.in_flight[0] == p);  // 1F1B's peak on rank 0, not more
    }
  }
}

TEST_CASE("zb-h1: with F = B = W the step is 3m+p-1 and every stage idles (p-1)/(3m+p-1)",
          "[schedule][sim][zbh1]") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 32; ++m) {
      const PipelineShape s{p, 1, m};
      INFO("p " << p << " m " << m);
      const Sim res = simulateZb(lists(ScheduleKind::kZbH1, s), s, {1, 1, 1});
      REQUIRE(res.error == "");
      CHECK(res.end == Approx(3 * m + p - 1));
      const double ideal = double(p - 1) / (3 * m + p - 1);
      CHECK(idealBubbleFraction(ScheduleKind::kZbH1, s) == Approx(ideal));
      for (int r = 0; r < p; ++r) CHECK((res.end - res.busy[r]) / res.end == Approx(ideal));
      // 1F1B with the same work (backward = B + W) idles (p-1)(F+B+W): ZB-H1 saves 2(p-1)W.
      const Sim one = simulateZb(lists(ScheduleKind::kOneFOneB, s), s, {1, 1, 1});
      CHECK(one.end - res.end == Approx(2 * (p - 1)));
    }
  }
}

TEST_CASE("zb-h1: the closed form (p-1)(F+B-W) holds for m >= p and W <= min(F, B)",
          "[schedule][sim][zbh1]") {
  const double values[] = {0.5, 1.0, 1.5, 3.0};
  for (double f : values) {
    for (double b : values) {
      for (double w : values) {
        for (int p = 2; p <= 6; ++p) {
          for (int m = 1; m <= 2 * p + 1; ++m) {
            const PipelineShape s{p, 1, m};
            const Costs c{f, b, w};
            INFO("F " << f << " B " << b << " W " << w << " p " << p << " m " << m);
            const Sim res = simulateZb(lists(ScheduleKind::kZbH1, s), s, c);
            REQUIRE(res.error == "");
            const double form = closedFormStep(s, c);
            if (m >= p && w <= std::min(f, b)) {
              CHECK(res.end == Approx(form));
              CHECK(zbH1BubbleFraction(s, f, b, w) == Approx((form - m * (f + b + w)) / form));
            } else {
              CHECK(res.end >= form - 1e-9);  // outside its conditions: a lower bound
            }
          }
        }
      }
    }
  }
  // Where it fails: m < p (the first microbatch's F and B chain through every stage) ...
  CHECK(simulateZb(lists(ScheduleKind::kZbH1, {4, 1, 2}), {4, 1, 2}, {1, 1, 1}).end > 9.0 + 1e-9);
  // ... and W > F (a deferred W holds back the next F on the critical path).
  CHECK(simulateZb(lists(ScheduleKind::kZbH1, {2, 1, 4}), {2, 1, 4}, {1, 1, 2}).end >
        closedFormStep({2, 1, 4}, {1, 1, 2}) + 0.5);
}

TEST_CASE("zb-h1: the lists of p 4, m 6: 1F1B's warm-up, B on the critical path, W deferred",
          "[schedule][sim][zbh1]") {
  const PipelineShape s{4, 1, 6};
  CHECK(text(computeOrder(ScheduleKind::kZbH1, s, 0)) ==
        "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5 ");
  CHECK(text(computeOrder(ScheduleKind::kZbH1, s, 3)) ==
        "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5 ");
  // Messages: B receives the gradient and sends its own on; W has none.
  const auto full = buildSchedule(ScheduleKind::kZbH1, s, 1);
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i].kind == ActionKind::kBackwardInput) {
      CHECK(full[i - 1].kind == ActionKind::kRecvBackward);
      CHECK(full[i + 1].kind == ActionKind::kSendBackward);
    }
    if (full[i].kind == ActionKind::kBackwardWeight) CHECK(full[i].peer == -1);
  }
  CHECK(parseScheduleKind("zb-h1") == ScheduleKind::kZbH1);
  CHECK(std::string(scheduleName(ScheduleKind::kZbH1)) == "zb-h1");
  CHECK(scheduleError(ScheduleKind::kZbH1, PipelineShape{4, 2, 8}) != "");
}

TEST_CASE("zb-h1's simulator catches broken lists: W before B, a W missing, too many deferred",
          "[schedule][sim][zbh1]") {
  const PipelineShape s{4, 1, 8};
  CHECK(simulateZb(lists(ScheduleKind::kZbH1, s), s, {1, 1, 1}).error == "");
  auto early = lists(ScheduleKind::kZbH1, s);  // rank 3: W0 moved before B0
  auto w = std::find_if(early[3].begin(), early[3].end(),
                        [](const Action& a) { return a.kind == ActionKind::kBackwardWeight; });
  const Action moved = *w;
  early[3].erase(w);
  early[3].insert(early[3].begin() + 1, moved);
  CHECK(simulateZb(early, s, {1, 1, 1}).error != "");
  auto missing = lists(ScheduleKind::kZbH1, s);
  missing[2].pop_back();
  CHECK(simulateZb(missing, s, {1, 1, 1}).error != "");
  // Every W of rank 3 at the end: legal, but 8 in flight, over ZB-H1's bound of p = 4.
  auto late = lists(ScheduleKind::kZbH1, s);
  std::stable_partition(late[3].begin(), late[3].end(),
                        [](const Action& a) { return a.kind != ActionKind::kBackwardWeight; });
  const Sim res = simulateZb(late, s, {1, 1, 1});
  CHECK(res.error == "");
  CHECK(res.in_flight[3] > inFlightBound(ScheduleKind::kZbH1, s, 3));
}
