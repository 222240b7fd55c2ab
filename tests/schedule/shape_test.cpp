// Which shapes each schedule accepts: one line naming the problem, or nothing.
#include <catch2/catch.hpp>

#include "tracerun/schedule/shape.h"

using namespace tracerun::schedule;

namespace {
bool mentions(const std::string& error, const std::string& what) {
  return error.find(what) != std::string::npos;
}
}  // namespace

TEST_CASE("shapes: every schedule runs its plain shapes", "[schedule][shape]") {
  for (const std::string& w : scheduleWords()) {
    INFO(w);
    CHECK(scheduleError(parseScheduleKind(w), PipelineShape{4, 1, 8}) == "");
  }
  CHECK(scheduleError(ScheduleKind::kInterleaved, PipelineShape{4, 2, 8}) == "");
}

TEST_CASE("shapes: what each schedule refuses", "[schedule][shape]") {
  CHECK(scheduleError(ScheduleKind::kOneFOneB, PipelineShape{0, 1, 8}) == "empty pipeline");
  CHECK(mentions(scheduleError(ScheduleKind::kOneFOneB, PipelineShape{4, 2, 8}),
                 "--vp 2 needs --schedule interleaved"));
  CHECK(mentions(scheduleError(ScheduleKind::kInterleaved, PipelineShape{4, 2, 6}),
                 "multiple of --pp 4"));
  CHECK(mentions(scheduleError(ScheduleKind::kTwoBw, PipelineShape{4, 1, 3}),
                 "at least as many microbatches"));
  CHECK(mentions(scheduleError(ScheduleKind::kChimera, PipelineShape{3, 1, 6}), "even --pp"));
  CHECK(mentions(scheduleError(ScheduleKind::kChimera, PipelineShape{4, 1, 6}), "multiple of it"));
  CHECK(scheduleError(ScheduleKind::kZbH1, PipelineShape{4, 1, 2}) == "");  // a lower bound then
}
