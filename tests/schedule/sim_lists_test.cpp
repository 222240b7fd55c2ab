// The pipeline schedules as data, without processes or tensors: for every p <= 8 and m <= 32, all
// ranks' action lists are run together by the tests' simulator (schedule_sim.h) with the executor's
// semantics (sends post and go on, a receive blocks until its message was sent). It checks that
// every microbatch is forwarded, then backwarded, once per chunk; that dependencies hold; that
// nothing deadlocks; the in-flight bound each schedule promises; and, with forward taking F and
// backward B, that every stage's idle fraction is the closed form.
#include "schedule_sim.h"
#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/chimera.h"
#include "tracerun/schedule/closed_form.h"
#include "tracerun/schedule/two_bw.h"
#include "tracerun/schedule/zb_h1.h"

#include <catch2/catch.hpp>

#include <algorithm>

using namespace tracerun::schedule;
using namespace tracerun::schedule::testing;

namespace {

// Each chunk does its share of the rank's work: forward f / v, backward b / v.
SimResult simulateLists(const std::vector<std::vector<Action>>& lists, const PipelineShape& s,
                        double f, double b) {
  SimSpec spec = virtualStageSpec(s);
  spec.costs.forward = f / s.chunks;
  spec.costs.backward = b / s.chunks;
  return simulateSchedules(lists, spec);
}

SimResult simulate(ScheduleKind kind, const PipelineShape& s, double f, double b) {
  std::vector<std::vector<Action>> lists;
  for (int r = 0; r < s.stages; ++r) lists.push_back(buildSchedule(kind, s, r));
  return simulateLists(lists, s, f, b);
}

void checkSchedule(ScheduleKind kind, const PipelineShape& s) {
  // F != B so a schedule that only works for equal costs fails.
  const double f = 1.0, b = 2.0;
  const SimResult res = simulate(kind, s, f, b);
  INFO(scheduleName(kind) << " p " << s.stages << " v " << s.chunks << " m " << s.microbatches);
  REQUIRE(res.error == "");
  const double ideal = idealBubbleFraction(kind, s);
  for (int r = 0; r < s.stages; ++r) {
    INFO("rank " << r);
    CHECK(res.in_flight[r] <= inFlightBound(kind, s, r));
    CHECK(res.busy[r] == Approx(s.microbatches * (f + b)));
    CHECK((res.end - res.busy[r]) / res.end == Approx(ideal).margin(1e-9));
  }
}

}  // namespace

TEST_CASE("gpipe and 1f1b: every p <= 8, m <= 32 run to completion with the closed-form bubble",
          "[schedule][sim]") {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 32; ++m) checkSchedule(kind, PipelineShape{p, 1, m});
    }
  }
}

TEST_CASE("interleaved: every p <= 8, v <= 4, m <= 32 (a multiple of p) likewise",
          "[schedule][sim]") {
  for (int p = 2; p <= 8; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = p; m <= 32; m += p) {
        checkSchedule(ScheduleKind::kInterleaved, PipelineShape{p, v, m});
      }
    }
  }
}

TEST_CASE("in-flight microbatches: 1f1b holds at most p - rank, gpipe all m", "[schedule][sim]") {
  const PipelineShape s{4, 1, 8};
  for (int r = 0; r < 4; ++r) {
    CHECK(inFlightBound(ScheduleKind::kOneFOneB, s, r) == 4 - r);
    CHECK(inFlightBound(ScheduleKind::kGpipe, s, r) == 8);
    CHECK(simulate(ScheduleKind::kOneFOneB, s, 1, 2).in_flight[r] == 4 - r);
    CHECK(simulate(ScheduleKind::kGpipe, s, 1, 2).in_flight[r] == 8);
  }
  // Interleaved rank 0 of p 4, v 2: warm-up 2 * 3 + 4 = 10 forwards, then one more.
  CHECK(inFlightBound(ScheduleKind::kInterleaved, PipelineShape{4, 2, 8}, 0) == 11);
}

TEST_CASE("schedules are phases of one list: warm-up forwards, 1F1B pairs, cool-down backwards",
          "[schedule][sim]") {
  const PipelineShape s{4, 1, 6};
  const auto order = computeOrder(ScheduleKind::kOneFOneB, s, 1);  // warm-up 2
  std::string text;
  for (const Action& a : order) {
    text += (a.kind == ActionKind::kForward ? "F" : "B") + std::to_string(a.microbatch) + " ";
  }
  CHECK(text == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5 ");
  // Rank 1 of 4: receives activations from 0 and gradients from 2, sends the other way.
  const auto full = buildSchedule(ScheduleKind::kOneFOneB, s, 1);
  REQUIRE(full.size() == order.size() * 3);
  CHECK(full[0].kind == ActionKind::kRecvForward);
  CHECK(full[0].peer == 0);
  CHECK(full[2].kind == ActionKind::kSendForward);
  CHECK(full[2].peer == 2);
  // Interleaved: the last rank's chunk 0 feeds rank 0's chunk 1.
  const auto last = buildSchedule(ScheduleKind::kInterleaved, PipelineShape{2, 2, 2}, 1);
  CHECK(std::any_of(last.begin(), last.end(), [](const Action& a) {
    return a.kind == ActionKind::kSendForward && a.chunk == 0 && a.peer == 0;
  }));
  CHECK(scheduleError(ScheduleKind::kInterleaved, PipelineShape{4, 2, 6}) != "");
  CHECK(scheduleError(ScheduleKind::kOneFOneB, PipelineShape{4, 2, 8}) != "");
  CHECK(scheduleError(ScheduleKind::kInterleaved, PipelineShape{4, 2, 8}) == "");
}

TEST_CASE("the simulator catches broken lists: deadlock, missing work, wrong order",
          "[schedule][sim]") {
  const PipelineShape s{2, 1, 2};
  auto lists = [&] {
    return std::vector<std::vector<Action>>{buildSchedule(ScheduleKind::kOneFOneB, s, 0),
                                            buildSchedule(ScheduleKind::kOneFOneB, s, 1)};
  };
  CHECK(simulateLists(lists(), s, 1, 2).error == "");
  // Rank 0 waits for a gradient before sending the activation that produces it: deadlock.
  auto deadlock = lists();
  std::swap(deadlock[0][1], deadlock[0][2]);  // F0 and its send
  std::rotate(deadlock[0].begin(), deadlock[0].begin() + 4, deadlock[0].end());
  CHECK(simulateLists(deadlock, s, 1, 2).error != "");
  // A backward dropped: microbatch 1 never completes.
  auto missing = lists();
  missing[1].pop_back();
  CHECK(simulateLists(missing, s, 1, 2).error != "");
  // Rank 1 backwards microbatch 0 before forwarding it.
  auto order = lists();
  std::swap(order[1][1], order[1][2]);
  CHECK(order[1][1].kind == ActionKind::kBackward);
  CHECK(simulateLists(order, s, 1, 2).error != "");
}
