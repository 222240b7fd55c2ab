// PipeDream-2BW's action lists (two_bw.h) on their own, without processes or tensors: all
// ranks' lists over several batches run together by the tests' simulator (schedule_sim.h: a send
// posts and goes on, a receive blocks until its message was sent). Checked: every microbatch's F
// and B exactly once per stage, dependencies, no deadlock, the 1F1B in-flight bound, each batch's
// update after its last backward and before the next batch's backwards and batch b + 2's forwards
// (two weight versions suffice), and with forward F and backward B the idle fraction of the fill
// formula.
#include "schedule_sim.h"
#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/chimera.h"
#include "tracerun/schedule/closed_form.h"
#include "tracerun/schedule/two_bw.h"
#include "tracerun/schedule/zb_h1.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>

using namespace tracerun::schedule;
using namespace tracerun::schedule::testing;

namespace {

using Sim = SimResult;

// All ranks' lists of batches [first_batch, first_batch + batches) through the shared simulator,
// with 2bw's own rules on top: updates in batch order, each after its batch's m backwards and
// before the next batch's backwards, and batch b's forwards after update b - 2 (whose new version
// overwrites V_b's buffer otherwise still needed).
Sim simulate2bwLists(const std::vector<std::vector<Action>>& lists, const PipelineShape& s,
                     int first_batch, int batches, double f, double b) {
  const int p = s.stages, m = s.microbatches;
  SimSpec spec = virtualStageSpec(s);
  spec.microbatches = (first_batch + batches) * m;  // global microbatch indices
  spec.expected = [&](int, int, int mb) { return mb >= first_batch * m; };
  spec.costs.forward = f;
  spec.costs.backward = b;
  spec.allow_updates = true;
  std::vector<int> updates(p, 0);                // per rank: updates run, of batches first_batch..
  std::vector<std::map<int, int>> backwards(p);  // per rank and batch: backwards run
  spec.extra_check = [&](int r, const Action& a) -> std::string {
    const int batch = a.microbatch / m;
    switch (a.kind) {
      case ActionKind::kForward:  // V_b's buffer is rewritten by update b - 2: it must have run.
        if (batch - 2 >= first_batch && updates[r] < batch - 2 - first_batch + 1) {
          return "forward of batch b before update b - 2 (a third version needed)";
        }
        return "";
      case ActionKind::kBackward:
        if (updates[r] != batch - first_batch) return "backward in the wrong batch's window";
        ++backwards[r][batch];
        return "";
      case ActionKind::kApplyUpdate:  // Action::microbatch is the batch
        if (a.microbatch != first_batch + updates[r]) return "update out of order";
        if (backwards[r][a.microbatch] != m) return "update before the last backward";
        ++updates[r];
        return "";
      default:
        return "";
    }
  };
  Sim res = simulateSchedules(lists, spec);
  for (int r = 0; r < p && res.error.empty(); ++r) {
    if (updates[r] != batches) {
      res.error = "rank " + std::to_string(r) + " ran " + std::to_string(updates[r]) +
                  " updates of " + std::to_string(batches);
    }
  }
  return res;
}

Sim simulate2bw(const PipelineShape& s, int first_batch, int batches, double f, double b) {
  std::vector<std::vector<Action>> lists;
  for (int r = 0; r < s.stages; ++r) {
    lists.push_back(buildTwoBwSchedule(s, r, first_batch, batches));
  }
  return simulate2bwLists(lists, s, first_batch, batches, f, b);
}

}  // namespace

TEST_CASE("2bw: every p <= 6, p <= m <= 12, 1-4 batches: complete, ordered, two versions, fill",
          "[schedule][sim][2bw]") {
  for (int p = 1; p <= 6; ++p) {
    for (int m = p; m <= 12; ++m) {
      for (int batches = 1; batches <= 4; ++batches) {
        const PipelineShape s{p, 1, m};
        const double f = 1.0, b = 2.0;  // F != B
        const Sim res = simulate2bw(s, 3, batches, f, b);
        INFO("p " << p << " m " << m << " batches " << batches);
        REQUIRE(res.error == "");
        for (int r = 0; r < p; ++r) {
          INFO("rank " << r);
          CHECK(res.in_flight[r] <= std::min(p - r, m * batches));
          CHECK(res.busy[r] == Approx(batches * m * (f + b)));
          CHECK((res.end - res.busy[r]) / res.end ==
                Approx(twoBwFillFraction(s, batches)).margin(1e-9));
        }
      }
    }
  }
}

TEST_CASE("2bw: no flush between batches, and updates sit right after the batch's last backward",
          "[schedule][sim][2bw]") {
  const PipelineShape s{2, 1, 2};
  std::string text;
  for (const Action& a : buildTwoBwSchedule(s, 0, 0, 2)) {
    if (a.kind == ActionKind::kForward) text += "F" + std::to_string(a.microbatch) + " ";
    if (a.kind == ActionKind::kBackward) text += "B" + std::to_string(a.microbatch) + " ";
    if (a.kind == ActionKind::kApplyUpdate) text += "U" + std::to_string(a.microbatch) + " ";
  }
  // Batch 1's forwards (microbatches 2, 3) start before batch 0 has drained.
  CHECK(text == "F0 F1 B0 F2 B1 U0 F3 B2 B3 U1 ");
  // Message tags stay unique over the run (a later batch does not reuse batch 0's).
  std::set<int> tags;
  for (const Action& a : buildTwoBwSchedule(PipelineShape{3, 1, 4}, 1, 0, 5)) {
    if (a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward) {
      CHECK(tags.insert(a.tag).second);
    }
  }
}

TEST_CASE("2bw: fewer microbatches than stages, or virtual chunks, are one-line errors",
          "[schedule][sim][2bw]") {
  CHECK(twoBwShapeError(PipelineShape{4, 1, 4}) == "");
  CHECK(twoBwShapeError(PipelineShape{4, 1, 3}).find("at least as many microbatches") !=
        std::string::npos);
  CHECK(twoBwShapeError(PipelineShape{2, 2, 4}).find("--vp") != std::string::npos);
  CHECK(scheduleError(ScheduleKind::kTwoBw, PipelineShape{4, 1, 3}) != "");
  CHECK(twoBwFillFraction(PipelineShape{4, 1, 8}, 10) == Approx(3.0 / 83.0));
}

TEST_CASE("2bw's simulator catches broken lists: updates early, late, swapped or missing",
          "[schedule][sim][2bw]") {
  auto isUpdate = [](const Action& a) { return a.kind == ActionKind::kApplyUpdate; };
  auto isBackward = [](const Action& a) { return a.kind == ActionKind::kBackward; };
  using Catch::Matchers::Contains;
  // One stage, one microbatch a batch: F0 B0 U0 F1 B1 U1 F2 B2 U2, no messages.
  const PipelineShape one{1, 1, 1};
  const auto base = buildTwoBwSchedule(one, 0, 0, 3);
  REQUIRE(base.size() == 9);
  REQUIRE(isUpdate(base[2]));
  CHECK(simulate2bwLists({base}, one, 0, 3, 1, 2).error == "");
  auto third = base;  // F2 before U0: batch 2 would need a third weight version
  std::rotate(third.begin() + 2, third.begin() + 6, third.begin() + 7);
  CHECK_THAT(simulate2bwLists({third}, one, 0, 3, 1, 2).error, Contains("before update b - 2"));
  auto late = base;  // U0 after B1: batch 1's backward on the wrong version
  std::rotate(late.begin() + 2, late.begin() + 3, late.begin() + 5);
  CHECK_THAT(simulate2bwLists({late}, one, 0, 3, 1, 2).error, Contains("wrong batch's window"));

  // Two stages, two microbatches, two batches: the order of the text test above.
  const PipelineShape s{2, 1, 2};
  auto lists = [&] {
    return std::vector<std::vector<Action>>{buildTwoBwSchedule(s, 0, 0, 2),
                                            buildTwoBwSchedule(s, 1, 0, 2)};
  };
  CHECK(simulate2bwLists(lists(), s, 0, 2, 1, 2).error == "");
  auto early = lists();  // rank 0's U0 before its last backward of batch 0
  auto u = std::find_if(early[0].begin(), early[0].end(), isUpdate);
  auto b = std::find_if(std::make_reverse_iterator(u), early[0].rend(), isBackward);
  std::rotate(b.base() - 1, u, u + 1);
  CHECK_THAT(simulate2bwLists(early, s, 0, 2, 1, 2).error, Contains("before the last backward"));
  auto swapped = lists();  // rank 1 says U1 where U0 belongs
  for (Action& a : swapped[1]) {
    if (isUpdate(a)) a.microbatch = 1 - a.microbatch;
  }
  CHECK_THAT(simulate2bwLists(swapped, s, 0, 2, 1, 2).error, Contains("out of order"));
  auto missing = lists();
  REQUIRE(isUpdate(missing[1].back()));
  missing[1].pop_back();
  CHECK_THAT(simulate2bwLists(missing, s, 0, 2, 1, 2).error, Contains("ran 1 updates of 2"));
}
