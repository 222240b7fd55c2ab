// The dry run (--dry-run-costs F_MS,B_MS): the real schedules and messages on 4 real pipeline
// ranks with sleeping compute; each stage's measured idle fraction must be the closed form within
// 2 points: GPipe and 1F1B (p-1)/(m+p-1), interleaved ((p-1)/v)/(m+(p-1)/v). The fractions are
// the trainer's own measurements; the sleeps (60 and 120 ms per microbatch) are long against the
// ~0.5 ms a message takes on a loaded 2-core machine. Step 1 (Gloo connects pairs lazily) is
// left out; steps 2 and 3 are averaged.
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

using namespace gpttrain::testing;

namespace {

void checkBubble(const std::string& name, const std::vector<std::string>& schedule,
                 double closed_form, const std::string& costs = "60,120") {
  const std::string dir = scratchDir("dry_run_" + name);
  const std::string json = dir + "/log.json";
  auto run = launchRanks(kGpttrain,
                         tinyModelArgs() + schedule +
                             std::vector<std::string>{"--pp", "4", "--layers", "8", "--steps", "3",
                                                      "--dry-run-costs", costs, "--log-json", json},
                         4, dir);
  INFO(name << "\n" << run.summary());
  REQUIRE(run.ok());
  const auto idle = jsonValues(json, "idle_fraction");
  const auto logged_form = jsonValues(json, "closed_form");
  REQUIRE(idle.size() == 3 * 4);  // 3 steps x 4 stages
  CHECK(logged_form[0] == Approx(closed_form).margin(1e-6));
  for (int stage = 0; stage < 4; ++stage) {
    const double measured = (idle[4 + stage] + idle[8 + stage]) / 2;
    INFO(name << " stage " << stage << ": measured idle fraction " << measured << ", closed form "
              << closed_form);
    CHECK(std::abs(measured - closed_form) <= 0.02);
  }
}

}  // namespace

// p 4, m = 8 / 2 = 4 microbatches.
TEST_CASE("dry run: 1f1b's measured bubble is (p-1)/(m+p-1) on every stage", "[trainer][dry_run]") {
  checkBubble("1f1b", {"--schedule", "1f1b"}, 3.0 / 7.0);
}

TEST_CASE("dry run: gpipe's measured bubble is (p-1)/(m+p-1) on every stage",
          "[trainer][dry_run]") {
  checkBubble("gpipe", {"--schedule", "gpipe"}, 3.0 / 7.0);
}

TEST_CASE("dry run: interleaved v=2's measured bubble is ((p-1)/v)/(m+(p-1)/v) on every stage",
          "[trainer][dry_run]") {
  checkBubble("interleaved", {"--schedule", "interleaved", "--vp", "2"}, 1.5 / 5.5);
}

// ZB-H1 (p 4, m 4): idle (p-1)(F+B-W) over m(F+B+W) + (p-1)(F+B-W), computed here by hand.
// Two costs: B = 120 split into B = W = 60, so F = B = W and the bubble is (p-1)/(3m+p-1).
TEST_CASE("dry run: zb-h1's measured bubble is (p-1)/(3m+p-1) with F = B = W",
          "[trainer][dry_run][zbh1]") {
  checkBubble("zbh1", {"--schedule", "zb-h1"}, 3.0 / 15.0);
}

// Unequal costs, W <= min(F, B): F 60, B 80, W 40: (3 x 100) / (4 x 180 + 300).
TEST_CASE("dry run: zb-h1's measured bubble is (p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W))",
          "[trainer][dry_run][zbh1]") {
  checkBubble("zbh1_costs", {"--schedule", "zb-h1"}, 300.0 / 1020.0, "60,80,40");
}
