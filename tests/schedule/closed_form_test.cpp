// The closed forms against a brute-force replay of the action lists (replay.h): with forward F
// and backward B per microbatch (each chunk its share), every stage idles the closed-form fraction
// of the step.
#include <catch2/catch.hpp>

#include <functional>

#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/closed_form.h"
#include "tracerun/schedule/replay.h"
#include "tracerun/schedule/two_bw.h"

using namespace tracerun::schedule;

namespace {

struct Costs {
  double f = 1, b = 1, w = 0;  // w: zb-h1's W (its B is then b)
};

double costOf(const Action& a, const Costs& c, int chunks) {
  switch (a.kind) {
    case ActionKind::kForward:
      return c.f / chunks;
    case ActionKind::kBackward:
    case ActionKind::kBackwardInput:
      return c.b / chunks;
    case ActionKind::kBackwardWeight:
      return c.w / chunks;
    default:
      return 0;  // messages and updates: the executor's ideal
  }
}

// Every rank's idle fraction of the replayed step; REQUIREs that it ran to the end.
std::vector<double> idleFractions(const std::vector<std::vector<Action>>& lists, const Costs& c,
                                  int chunks) {
  const ScheduleTimes t =
      replaySchedule(lists, [&](int, const Action& a) { return costOf(a, c, chunks); });
  REQUIRE(t.complete);
  std::vector<double> out;
  for (double busy : t.busy) out.push_back((t.end_time - busy) / t.end_time);
  return out;
}

std::vector<std::vector<Action>> lists(ScheduleKind kind, const PipelineShape& s) {
  std::vector<std::vector<Action>> out;
  for (int r = 0; r < s.stages; ++r) out.push_back(buildSchedule(kind, s, r));
  return out;
}

void checkEveryStage(ScheduleKind kind, const PipelineShape& s, const Costs& c, double closed) {
  INFO(scheduleName(kind) << " p " << s.stages << " v " << s.chunks << " m " << s.microbatches);
  for (double idle : idleFractions(lists(kind, s), c, s.chunks)) {
    CHECK(idle == Approx(closed).margin(1e-12));
  }
}

}  // namespace

TEST_CASE("closed forms: gpipe and 1f1b idle (p-1)/(m+p-1), for F != B too",
          "[schedule][closed_form]") {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 12; ++m) {
        const PipelineShape s{p, 1, m};
        const double closed = double(p - 1) / (m + p - 1);
        CHECK(idealBubbleFraction(kind, s) == Approx(closed));
        checkEveryStage(kind, s, Costs{1, 2}, closed);
      }
    }
  }
}

TEST_CASE("closed forms: interleaved idles ((p-1)/v)/(m+(p-1)/v)", "[schedule][closed_form]") {
  for (int p = 2; p <= 6; ++p) {
    for (int v = 1; v <= 3; ++v) {
      for (int m = p; m <= 3 * p; m += p) {
        const PipelineShape s{p, v, m};
        const double x = double(p - 1) / v;
        CHECK(idealBubbleFraction(ScheduleKind::kInterleaved, s) == Approx(x / (m + x)));
        checkEveryStage(ScheduleKind::kInterleaved, s, Costs{1, 2}, x / (m + x));
      }
    }
  }
}

TEST_CASE("closed forms: zb-h1 idles (p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W)) for m >= p, W <= F, B",
          "[schedule][closed_form]") {
  for (int p = 2; p <= 6; ++p) {
    for (int m = p; m <= 3 * p; ++m) {
      const PipelineShape s{p, 1, m};
      CHECK(idealBubbleFraction(ScheduleKind::kZbH1, s) == Approx(double(p - 1) / (3 * m + p - 1)));
      checkEveryStage(ScheduleKind::kZbH1, s, Costs{1, 1, 1},
                      idealBubbleFraction(ScheduleKind::kZbH1, s));
      checkEveryStage(ScheduleKind::kZbH1, s, Costs{3, 2, 1}, zbH1BubbleFraction(s, 3, 2, 1));
    }
  }
  CHECK(zbH1BubbleFraction(PipelineShape{0, 1, 4}, 1, 1, 1) == 0);
  CHECK(zbH1BubbleFraction(PipelineShape{4, 1, 4}, 1, 1, 5) == 0);  // never negative
}

TEST_CASE("closed forms: chimera idles (p-2)/(2m+p-2) when F == B", "[schedule][closed_form]") {
  for (int p = 2; p <= 8; p += 2) {
    for (int m = p; m <= 3 * p; m += p) {
      const PipelineShape s{p, 1, m};
      const double closed = double(p - 2) / (2 * m + p - 2);
      CHECK(idealBubbleFraction(ScheduleKind::kChimera, s) == Approx(closed));
      checkEveryStage(ScheduleKind::kChimera, s, Costs{1, 1}, closed);
    }
  }
}

TEST_CASE("closed forms: 2bw fills once per run, (p-1)/(batches*m+p-1)",
          "[schedule][closed_form]") {
  for (int p = 2; p <= 5; ++p) {
    for (int batches = 1; batches <= 3; ++batches) {
      const PipelineShape s{p, 1, p + 1};
      std::vector<std::vector<Action>> run;
      for (int r = 0; r < p; ++r) run.push_back(buildTwoBwSchedule(s, r, 0, batches));
      for (double idle : idleFractions(run, Costs{1, 2}, 1)) {
        CHECK(idle == Approx(twoBwFillFraction(s, batches)).margin(1e-12));
      }
    }
  }
  CHECK(idealBubbleFraction(ScheduleKind::kTwoBw, PipelineShape{4, 1, 8}) ==
        twoBwFillFraction(PipelineShape{4, 1, 8}, 1));
}

TEST_CASE("closed forms: their formulas as words", "[schedule][closed_form]") {
  CHECK(closedFormName(ScheduleKind::kOneFOneB) == "(p-1)/(m+p-1)");
  CHECK(closedFormName(ScheduleKind::kInterleaved) == "((p-1)/v)/(m+(p-1)/v)");
  CHECK(closedFormName(ScheduleKind::kChimera) == "(p-2)/(2m+p-2)");
  CHECK(closedFormName(ScheduleKind::kZbH1).rfind("(p-1)(F+B-W)/", 0) == 0);
  CHECK(idealBubbleFraction(ScheduleKind::kOneFOneB, PipelineShape{4, 1, 0}) == 0);
}
