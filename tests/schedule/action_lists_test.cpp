// The action lists, read as lists: the phases of each schedule on small shapes, and the messages
// around the compute (the whole-pipeline checks are the sim_*_test.cpp files').
#include <catch2/catch.hpp>

#include <string>

#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/chimera.h"
#include "tracerun/schedule/two_bw.h"

using namespace tracerun::schedule;

namespace {

// "F0 F1 B0 ...": the compute order as text (chunks as "F0c1" when v > 1).
std::string text(const std::vector<Action>& list, bool chunks = false) {
  std::string out;
  for (const Action& a : list) {
    if (!isCompute(a.kind)) continue;
    if (!out.empty()) out += ' ';
    out += a.kind == ActionKind::kForward ? "F" : a.kind == ActionKind::kBackwardWeight ? "W" : "B";
    out += std::to_string(a.microbatch);
    if (chunks) out += "c" + std::to_string(a.chunk);
  }
  return out;
}

}  // namespace

TEST_CASE("action lists: gpipe, 1f1b and zb-h1 of p 3, m 4", "[schedule][actions]") {
  const PipelineShape s{3, 1, 4};
  CHECK(text(computeOrder(ScheduleKind::kGpipe, s, 1)) == "F0 F1 F2 F3 B0 B1 B2 B3");
  CHECK(text(computeOrder(ScheduleKind::kOneFOneB, s, 0)) == "F0 F1 F2 B0 F3 B1 B2 B3");
  CHECK(text(computeOrder(ScheduleKind::kOneFOneB, s, 2)) == "F0 B0 F1 B1 F2 B2 F3 B3");
  CHECK(text(computeOrder(ScheduleKind::kZbH1, s, 2)) == "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3");
  CHECK(warmUpForwards(ScheduleKind::kOneFOneB, s, 0) == 2);
  CHECK(inFlightBound(ScheduleKind::kOneFOneB, s, 0) == 3);
  CHECK(inFlightBound(ScheduleKind::kGpipe, s, 0) == 4);
}

TEST_CASE("action lists: interleaved p 2, v 2, m 2 visits chunks in Megatron's order",
          "[schedule][actions]") {
  const PipelineShape s{2, 2, 2};
  CHECK(text(computeOrder(ScheduleKind::kInterleaved, s, 0), true) ==
        "F0c0 F1c0 F0c1 F1c1 B0c1 B1c1 B0c0 B1c0");
  CHECK(warmUpForwards(ScheduleKind::kInterleaved, s, 1) == 2);
}

TEST_CASE("action lists: messages around each compute, to the neighbouring stage",
          "[schedule][actions]") {
  const PipelineShape s{2, 1, 1};
  const auto first = buildSchedule(ScheduleKind::kOneFOneB, s, 0);
  const auto last = buildSchedule(ScheduleKind::kOneFOneB, s, 1);
  REQUIRE(first.size() == 4);
  CHECK(first[0].kind == ActionKind::kForward);
  CHECK(first[1].kind == ActionKind::kSendForward);
  CHECK(first[1].peer == 1);
  CHECK(first[2].kind == ActionKind::kRecvBackward);
  CHECK(first[3].kind == ActionKind::kBackward);
  REQUIRE(last.size() == 4);
  CHECK(last[0].kind == ActionKind::kRecvForward);
  CHECK(last[0].tag == first[1].tag);  // the receive names the send's tag
  CHECK(last[3].kind == ActionKind::kSendBackward);
  CHECK(last[3].tag == first[2].tag);
  CHECK(std::string(actionName(ActionKind::kRecvForward)) == "recv_forward");
}

TEST_CASE("action lists: chimera's two pipelines and 2bw's updates", "[schedule][actions]") {
  CHECK(chimeraStage(4, 1, 0) == 1);
  CHECK(chimeraStage(4, 1, 1) == 2);
  CHECK(chimeraRank(4, 1, 2) == 1);
  CHECK(chimeraChunk(4, 1) == 0);
  CHECK(chimeraChunk(4, 2) == 1);
  CHECK_THROWS(chimeraComputeOrder(PipelineShape{3, 1, 3}, 0));
  const auto list = buildTwoBwSchedule(PipelineShape{2, 1, 2}, 0, 0, 2);
  int updates = 0;
  for (const Action& a : list) updates += a.kind == ActionKind::kApplyUpdate;
  CHECK(updates == 2);
  CHECK(twoBwTiedTag(PipelineShape{2, 1, 2}, 2, 0, false) == 16);
}
