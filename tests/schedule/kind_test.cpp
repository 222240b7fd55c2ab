// The schedule words: each kind's one spelling, read back; anything else refused.
#include <catch2/catch.hpp>

#include "tracerun/schedule/kind.h"

using namespace tracerun::schedule;

TEST_CASE("schedule words: one per kind, read back to the same kind", "[schedule][kind]") {
  const std::vector<std::string> words = scheduleWords();
  CHECK(words ==
        std::vector<std::string>{"gpipe", "1f1b", "interleaved", "zb-h1", "2bw", "chimera"});
  for (const std::string& w : words) {
    CHECK(scheduleName(parseScheduleKind(w)) == w);
    REQUIRE(findScheduleKind(w).has_value());
    CHECK(*findScheduleKind(w) == parseScheduleKind(w));
  }
  CHECK(parseScheduleKind("zb-h1") == ScheduleKind::kZbH1);
  CHECK(std::string(scheduleName(ScheduleKind::kOneFOneB)) == "1f1b");
}

TEST_CASE("schedule words: anything else is no kind", "[schedule][kind]") {
  CHECK_FALSE(findScheduleKind("1F1B").has_value());
  CHECK_FALSE(findScheduleKind("").has_value());
  CHECK_THROWS_WITH(parseScheduleKind("pipedream"), "unknown pipeline schedule 'pipedream'");
}
