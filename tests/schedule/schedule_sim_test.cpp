// The schedule tests' simulator (schedule_sim.h) on its own: each generic check fed one broken
// list that only it catches, named by its message. Not a test of any schedule; the lists are
// 1F1B's, zb-h1's and 2bw's of two ranks, edited by hand.
#include "schedule_sim.h"
#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/chimera.h"
#include "tracerun/schedule/closed_form.h"
#include "tracerun/schedule/two_bw.h"
#include "tracerun/schedule/zb_h1.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>

using namespace tracerun::schedule;
using namespace tracerun::schedule::testing;
using Catch::Matchers::Contains;

namespace {

using Lists = std::vector<std::vector<Action>>;

const PipelineShape kShape{2, 1, 2};

Lists lists(ScheduleKind kind) {
  return {buildSchedule(kind, kShape, 0), buildSchedule(kind, kShape, 1)};
}

// Where rank list `l` has action `kind` of microbatch `mb`.
std::vector<Action>::iterator find(std::vector<Action>& l, ActionKind kind, int mb) {
  auto it = std::find_if(l.begin(), l.end(),
                         [&](const Action& a) { return a.kind == kind && a.microbatch == mb; });
  REQUIRE(it != l.end());
  return it;
}

// Moves the action at `from` to just before `to` (to <= from).
void moveBefore(std::vector<Action>::iterator to, std::vector<Action>::iterator from) {
  std::rotate(to, from, std::next(from));
}

// Repeats that action right after itself, its tag moved by `tag_shift` (0: the same message again).
void repeat(std::vector<Action>& l, ActionKind kind, int mb, int tag_shift) {
  const auto at = find(l, kind, mb);
  Action again = *at;
  again.tag += tag_shift;
  l.insert(std::next(at), again);
}

std::string errorOf(const Lists& l, const SimSpec& spec = virtualStageSpec(kShape)) {
  return simulateSchedules(l, spec).error;
}

}  // namespace

TEST_CASE("schedule simulator: a whole list runs, with counts, busy time and in-flight",
          "[schedule][sim]") {
  const SimResult res = simulateSchedules(lists(ScheduleKind::kOneFOneB), virtualStageSpec(kShape));
  REQUIRE(res.error == "");
  CHECK(res.count(0, ActionKind::kForward) == 2);
  CHECK(res.count(1, ActionKind::kBackward) == 2);
  CHECK(res.count(0, ActionKind::kRecvBackward) == 2);
  CHECK(res.count(0, ActionKind::kRecvForward) == 0);
  CHECK(res.in_flight == std::vector<int>{2, 1});
  CHECK(res.busy == std::vector<double>{6.0, 6.0});
  // Rank 1 runs F0 B0 F1 B1 from t = 1 to 7 (F 1, B 2), rank 0's B1 waits for it: 7 + 2.
  CHECK(res.end == Approx(9.0));
}

TEST_CASE("schedule simulator: order, completion, deadlock, messages", "[schedule][sim]") {
  SECTION("an action moved before what it needs (microbatch 0)") {
    struct Move {
      int rank;
      ActionKind before, moved;
      const char* error;
    };
    for (const Move& mv : {
             Move{1, ActionKind::kRecvForward, ActionKind::kForward, "forward without its input"},
             Move{1, ActionKind::kForward, ActionKind::kBackward, "backward without forward"},
             Move{0, ActionKind::kForward, ActionKind::kSendForward, "sent before its compute"},
         }) {
      auto l = lists(ScheduleKind::kOneFOneB);
      moveBefore(find(l[mv.rank], mv.before, 0), find(l[mv.rank], mv.moved, 0));
      CHECK_THAT(errorOf(l), Contains(mv.error));
    }
  }
  SECTION("an input received twice") {
    auto l = lists(ScheduleKind::kOneFOneB);  // a second message (its own tag), received too
    repeat(l[0], ActionKind::kSendForward, 0, 1000);
    repeat(l[1], ActionKind::kRecvForward, 0, 1000);
    CHECK_THAT(errorOf(l), Contains("input received twice"));
  }
  SECTION("a microbatch nobody runs") {
    auto l = lists(ScheduleKind::kOneFOneB);
    for (auto& rank : l) {
      rank.erase(std::remove_if(rank.begin(), rank.end(),
                                [](const Action& a) { return a.microbatch == 1; }),
                 rank.end());
    }
    CHECK_THAT(errorOf(l), Contains("rank 0 chunk 0 mb 1 not complete"));
  }
  SECTION("a receive that never gets its message") {
    auto l = lists(ScheduleKind::kOneFOneB);
    l[0].erase(find(l[0], ActionKind::kSendForward, 1));
    CHECK_THAT(errorOf(l), Contains("deadlock: rank"));
  }
  SECTION("a message nobody receives") {
    auto l = lists(ScheduleKind::kOneFOneB);
    repeat(l[0], ActionKind::kSendForward, 1, 1000);
    CHECK_THAT(errorOf(l), Contains("1 messages never received"));
  }
  SECTION("a tag sent twice") {
    auto l = lists(ScheduleKind::kOneFOneB);
    repeat(l[0], ActionKind::kSendForward, 1, 0);
    CHECK_THAT(errorOf(l), Contains("message tag sent twice"));
  }
  SECTION("a receive matched to another microbatch's message") {
    auto l = lists(ScheduleKind::kOneFOneB);
    std::swap(find(l[1], ActionKind::kRecvForward, 0)->tag,
              find(l[1], ActionKind::kRecvForward, 1)->tag);
    CHECK_THAT(errorOf(l), Contains("got the activation of mb 1"));
  }
  SECTION("a peer that does not hold the neighbouring stage") {
    auto l = lists(ScheduleKind::kOneFOneB);
    find(l[1], ActionKind::kSendBackward, 0)->peer = 1;  // to itself
    CHECK_THAT(errorOf(l), Contains("peer 1, but stage 0 of pipe 0 is on rank 0"));
  }
}

TEST_CASE("schedule simulator: what the spec allows and expects", "[schedule][sim]") {
  SECTION("a microbatch the rank is not expected to run") {
    SimSpec spec = virtualStageSpec(kShape);
    spec.expected = [](int rank, int, int mb) { return rank == 0 || mb == 0; };
    CHECK_THAT(errorOf(lists(ScheduleKind::kOneFOneB), spec), Contains("not this rank's to run"));
  }
  SECTION("split backward and updates only where allowed") {
    const Lists zb = lists(ScheduleKind::kZbH1);
    CHECK_THAT(errorOf(zb), Contains("split backward"));
    SimSpec split = virtualStageSpec(kShape);
    split.allow_split_backward = true;
    CHECK(errorOf(zb, split) == "");
    auto early = zb;  // W0 before its B0
    moveBefore(find(early[1], ActionKind::kBackwardInput, 0),
               find(early[1], ActionKind::kBackwardWeight, 0));
    CHECK_THAT(errorOf(early, split), Contains("W before its B"));
    const Lists two = {buildTwoBwSchedule(kShape, 0, 0, 1), buildTwoBwSchedule(kShape, 1, 0, 1)};
    CHECK_THAT(errorOf(two), Contains("weight update"));
    SimSpec updates = virtualStageSpec(kShape);
    updates.allow_updates = true;
    CHECK(errorOf(two, updates) == "");
  }
  SECTION("the spec itself: a stage held twice, a stage missing") {
    SimSpec twice = virtualStageSpec(kShape);
    twice.stage_of = [](int, int) { return 0; };
    CHECK_THAT(errorOf(lists(ScheduleKind::kOneFOneB), twice), Contains("is held twice"));
    SimSpec gap = virtualStageSpec(kShape);
    gap.stage_of = [](int rank, int) { return 2 * rank; };
    CHECK_THAT(errorOf(lists(ScheduleKind::kOneFOneB), gap), Contains("one numbered 2"));
  }
}
