// The dry run (--dry-run-costs F_MS,B_MS): the real schedules and messages on 4 real pipeline
// ranks with sleeping compute; each stage's idle fraction, on the dry run's virtual clock (each
// rank's time advances by its actions' costs and waits for the time its peer's message carries;
// trainer/pipeline/dry_run.h), must equal the closed form: GPipe and 1F1B (p-1)/(m+p-1),
// interleaved ((p-1)/v)/(m+(p-1)/v), zb-h1 (p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W)). The fractions are
// the trainer's own; the closed forms are computed here by hand. Exact whatever the machine's
// load: no wall-clock time enters them, so every step is checked (to the log's 6 decimals) and
// the sleeps are short (6 and 12 ms per microbatch).
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

using namespace gpttrain::testing;

namespace {

void checkBubble(const std::string& name, const std::vector<std::string>& schedule,
                 double closed_form, const std::string& costs = "6,12") {
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
  for (size_t i = 0; i < idle.size(); ++i) {
    INFO(name << " step " << i / 4 + 1 << " stage " << i % 4 << ": idle fraction " << idle[i]
              << ", closed form " << closed_form);
    CHECK(idle[i] == Approx(closed_form).margin(1e-6));
  }
}

}  // namespace

// p 4, m = 8 / 2 = 4 microbatches.
TEST_CASE("dry run: 1f1b's bubble is (p-1)/(m+p-1) on every stage", "[trainer][dry_run]") {
  checkBubble("1f1b", {"--schedule", "1f1b"}, 3.0 / 7.0);
}

TEST_CASE("dry run: gpipe's bubble is (p-1)/(m+p-1) on every stage", "[trainer][dry_run]") {
  checkBubble("gpipe", {"--schedule", "gpipe"}, 3.0 / 7.0);
}

TEST_CASE("dry run: interleaved v=2's bubble is ((p-1)/v)/(m+(p-1)/v) on every stage",
          "[trainer][dry_run]") {
  checkBubble("interleaved", {"--schedule", "interleaved", "--vp", "2"}, 1.5 / 5.5);
}

// ZB-H1 (p 4, m 4): idle (p-1)(F+B-W) over m(F+B+W) + (p-1)(F+B-W), computed here by hand.
// Two costs: B = 12 split into B = W = 6, so F = B = W and the bubble is (p-1)/(3m+p-1).
TEST_CASE("dry run: zb-h1's bubble is (p-1)/(3m+p-1) with F = B = W", "[trainer][dry_run][zbh1]") {
  checkBubble("zbh1", {"--schedule", "zb-h1"}, 3.0 / 15.0);
}

// Unequal costs, W <= min(F, B): F 6, B 8, W 4: (3 x 10) / (4 x 18 + 30) = 300 / 1020.
TEST_CASE("dry run: zb-h1's bubble is (p-1)(F+B-W)/(m(F+B+W)+(p-1)(F+B-W))",
          "[trainer][dry_run][zbh1]") {
  checkBubble("zbh1_costs", {"--schedule", "zb-h1"}, 300.0 / 1020.0, "6,8,4");
}
