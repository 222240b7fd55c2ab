// Tests of the launcher's stop sequence (interpose/launcher/stop_sequence.h): what it sends and in
// which order, with grace periods of zero or of an hour (no timing is asserted).
#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <vector>

#include "stop_sequence.h"

using tracerun::launcher::StopSequence;

namespace {
std::vector<int> advanced(StopSequence& s) {
  std::vector<int> sent;
  s.advance([&](int sig) { sent.push_back(sig); });
  return sent;
}
constexpr double kHour = 3600;
}  // namespace

TEST_CASE(
    "the stop sequence sends nothing until it begins, then SIGTERM, then SIGKILL, once each") {
  StopSequence s(0);
  CHECK(advanced(s).empty());
  CHECK_FALSE(s.stopping());
  CHECK(s.begin());
  CHECK(s.stopping());
  CHECK(advanced(s) == std::vector<int>{SIGTERM, SIGKILL});  // a grace of 0: both due at once
  CHECK(advanced(s).empty());
  CHECK_FALSE(s.begin());  // a second reason changes nothing
  CHECK(advanced(s).empty());
}

TEST_CASE("the stop sequence waits the grace period after SIGTERM and the delay before it") {
  StopSequence s(kHour);
  s.begin();
  CHECK(advanced(s) == std::vector<int>{SIGTERM});
  CHECK(advanced(s).empty());  // SIGKILL is an hour away

  StopSequence delayed(0);
  delayed.begin(std::chrono::hours(1));  // the terminal's SIGINT reached the program: let it end
  CHECK(delayed.stopping());
  CHECK(advanced(delayed).empty());
  CHECK_FALSE(delayed.begin());  // the first deadline stands
  CHECK(advanced(delayed).empty());
}

TEST_CASE("killNow sends SIGKILL at once and no SIGTERM") {
  StopSequence s(kHour);
  s.killNow();
  CHECK(s.stopping());
  CHECK(advanced(s) == std::vector<int>{SIGKILL});
  CHECK(advanced(s).empty());

  StopSequence late(kHour);  // hurrying a sequence whose SIGTERM went out
  late.begin();
  CHECK(advanced(late) == std::vector<int>{SIGTERM});
  late.killNow();
  CHECK(advanced(late) == std::vector<int>{SIGKILL});
}
