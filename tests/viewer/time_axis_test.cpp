// The ruler's ticks and the time texts (viewer/src/data/time_axis.h): spacing, units, parsing.
#include <catch2/catch.hpp>

#include "data/time_axis.h"

using namespace tracerun::viewer;

TEST_CASE("ruler ticks are on a 1-2-5 ladder, at least the asked spacing apart", "[viewer][axis]") {
  for (int64_t span :
       {int64_t{100}, int64_t{12'345}, int64_t{7'000'000}, int64_t{3'600'000'000'000}}) {
    const double width = 1200;
    const auto ticks = rulerTicks(1000, 1000 + span, width, 100, 1000);
    REQUIRE(!ticks.empty());
    int64_t prevMajor = -1;
    for (const auto& t : ticks) {
      REQUIRE(t.t >= 1000);
      REQUIRE(t.t <= 1000 + span);
      if (!t.major) continue;
      if (prevMajor >= 0) CHECK(static_cast<double>(t.t - prevMajor) / span * width >= 100 - 1e-9);
      prevMajor = t.t;
      CHECK(!t.label.empty());
    }
  }
  CHECK(majorStep(1.0, 100) == 100);
  CHECK(majorStep(1.5, 100) == 200);
  CHECK(majorStep(3.0, 100) == 500);
  CHECK(majorStep(1e7, 100) == 1'000'000'000);
}

TEST_CASE("time labels pick units and enough decimals", "[viewer][axis]") {
  CHECK(timeLabel(0, 100) == "0");
  CHECK(timeLabel(500, 100) == "500 ns");
  CHECK(timeLabel(1500, 500) == "1.5 us");
  CHECK(timeLabel(2'000'000, 1'000'000) == "2 ms");
  CHECK(timeLabel(2'500'000'000, 500'000'000) == "2.5 s");
  CHECK(durationText(1234) == "1.234 us");
}

TEST_CASE("times parse with units, and garbage does not", "[viewer][axis]") {
  CHECK(parseTime("1500") == 1500);
  CHECK(parseTime("1.5us") == 1500);
  CHECK(parseTime("2ms") == 2'000'000);
  CHECK(parseTime("0.5s") == 500'000'000);
  CHECK(!parseTime(""));
  CHECK(!parseTime("ms"));
  CHECK(!parseTime("3 parsecs"));
  CHECK(!parseTime("1e300s"));
}
