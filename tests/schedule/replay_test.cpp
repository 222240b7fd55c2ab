// The one replay: lanes in order, waits on other lanes' steps, deadlock stopped or broken, and
// per-rank action lists matched by (from, to, tag).
#include <catch2/catch.hpp>

#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/replay.h"

using namespace tracerun::schedule;

TEST_CASE("replay: a step starts when its lane is free and what it waits for has ended",
          "[schedule][replay]") {
  // lane 0: a (2), b (1); lane 1: c (3) waits for a, d (1) waits for b.
  const std::vector<TimedStep> steps{{0, 2, -1}, {0, 1, -1}, {1, 3, 0}, {1, 1, 1}};
  const ReplayTimes t = replay(steps, 2, 10);
  REQUIRE(t.complete);
  CHECK(t.start == std::vector<double>{10, 12, 12, 15});
  CHECK(t.end == std::vector<double>{12, 13, 15, 16});
  CHECK(t.lane_end == std::vector<double>{13, 16});
  CHECK(t.end_time == 16);
}

TEST_CASE("replay: a cycle stops, or is broken at the first blocked lane", "[schedule][replay]") {
  // lane 0: a waits for c; lane 1: c waits for a.
  const std::vector<TimedStep> steps{{0, 1, 1}, {1, 2, 0}};
  const ReplayTimes stopped = replay(steps, 2);
  CHECK_FALSE(stopped.complete);
  CHECK(stopped.ran == std::vector<bool>{false, false});
  const ReplayTimes broken = replay(steps, 2, 0, OnDeadlock::kBreak);
  REQUIRE(broken.complete);
  CHECK(broken.start == std::vector<double>{0, 1});
  CHECK(broken.end_time == 3);
}

TEST_CASE("replay: action lists, receives matched to their sends by tag", "[schedule][replay]") {
  const PipelineShape s{2, 1, 2};
  std::vector<std::vector<Action>> lists;
  for (int r = 0; r < 2; ++r) lists.push_back(buildSchedule(ScheduleKind::kGpipe, s, r));
  const auto cost = [](int, const Action& a) {
    return a.kind == ActionKind::kForward ? 1.0 : a.kind == ActionKind::kBackward ? 2.0 : 0.0;
  };
  const ScheduleTimes t = replaySchedule(lists, cost);
  REQUIRE(t.complete);
  // rank 1: F0 [1,2] F1 [2,3] B0 [3,5] B1 [5,7]; rank 0: F0 F1 by 2, B0 [5,7], B1 [7,9].
  CHECK(t.end_time == 9);
  CHECK(t.busy == std::vector<double>{6, 6});
  CHECK(t.ran == std::vector<size_t>{lists[0].size(), lists[1].size()});
  lists[0].erase(lists[0].begin() + 1);  // rank 0's first send: rank 1 waits for ever
  const ScheduleTimes stuck = replaySchedule(lists, cost);
  CHECK_FALSE(stuck.complete);
  CHECK(stuck.ran[1] == 0);
}
