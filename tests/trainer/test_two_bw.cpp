// PipeDream-2BW (--schedule 2bw) end to end, as real multi-process runs on loopback: its losses
// against the single-process run of its update rule (--delayed-update), its resume from a
// checkpoint, its dry-run idle time against the fill formula, and its constraints.
#include "config.h"
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

using namespace gpttrain::testing;

namespace {

// The tiny model with 4 layers (so PP 4 divides them), 6 steps, no clipping (2bw has none).
std::vector<std::string> model() {
  return tinyModelArgs() +
         std::vector<std::string>{"--layers", "4", "--steps", "6", "--clip-grad", "0"};
}

std::vector<double> losses(const std::string& test, const std::vector<std::string>& args,
                           int ranks) {
  const std::string dir = scratchDir(test);
  auto run = launchRanks(
      kGpttrain, args + std::vector<std::string>{"--log-json", dir + "/log.json"}, ranks, dir);
  INFO(run.summary());
  REQUIRE(run.ok());
  return jsonValues(dir + "/log.json", "loss");
}

double maxDiff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
  return d;
}

}  // namespace

TEST_CASE("2bw at pp 2 and pp 4 trains with the losses of the single-process delayed update",
          "[trainer][2bw]") {
  const auto delayed =
      losses("twobw_delayed", model() + std::vector<std::string>{"--delayed-update"}, 0);
  const auto sync = losses("twobw_sync", model(), 0);
  REQUIRE(delayed.size() == 6);
  // The rule matters: from step 2 on the delayed run differs from the synchronous one.
  CHECK(delayed[0] == Approx(sync[0]).margin(1e-6));
  CHECK(maxDiff(delayed, sync) > 1e-3);
  for (const char* pp : {"2", "4"}) {
    INFO("pp " << pp);
    const auto got =
        losses(std::string("twobw_pp") + pp,
               model() + std::vector<std::string>{"--pp", pp, "--schedule", "2bw"}, std::stoi(pp));
    CHECK(maxDiff(delayed, got) < 1e-4);
  }
}

TEST_CASE("2bw with data parallelism inside each stage (pp 2 x dp 2) keeps the delayed losses",
          "[trainer][2bw]") {
  const auto delayed =
      losses("twobw_delayed_dp", model() + std::vector<std::string>{"--delayed-update"}, 0);
  const auto got = losses("twobw_pp2_dp2",
                          model() + std::vector<std::string>{"--pp", "2", "--schedule", "2bw"}, 4);
  CHECK(maxDiff(delayed, got) < 1e-4);
}

TEST_CASE(
    "2bw with tp 2 and sp inside each stage, and with full recomputation, keeps the delayed losses",
    "[trainer][2bw]") {
  const auto delayed =
      losses("twobw_delayed_tp", model() + std::vector<std::string>{"--delayed-update"}, 0);
  const auto tp = losses(
      "twobw_tp2_sp_pp2",
      model() + std::vector<std::string>{"--tp", "2", "--sp", "--pp", "2", "--schedule", "2bw"}, 4);
  CHECK(maxDiff(delayed, tp) < 1e-4);
  const auto recompute = losses(
      "twobw_pp2_recompute",
      model() + std::vector<std::string>{"--pp", "2", "--schedule", "2bw", "--recompute", "full"},
      2);
  CHECK(maxDiff(delayed, recompute) < 1e-4);
}

TEST_CASE("a resumed 2bw run (pp 2, dropout 0.1) continues with the losses of an uninterrupted one",
          "[trainer][2bw][checkpoint]") {
  const std::string dir = scratchDir("twobw_resume");
  const std::vector<std::string> common =
      tinyModelArgs() + std::vector<std::string>{"--pp",        "2", "--schedule",       "2bw",
                                                 "--clip-grad", "0", "--dropout",        "0.1",
                                                 "--warmup",    "2", "--lr-decay-steps", "6"};
  auto full = launchRanks(
      kGpttrain,
      common + std::vector<std::string>{"--steps", "6", "--log-json", dir + "/full.json"}, 2,
      dir + "/full");
  INFO(full.summary());
  REQUIRE(full.ok());
  auto first = launchRanks(kGpttrain,
                           common + std::vector<std::string>{"--steps", "3", "--save",
                                                             dir + "/ckpt", "--save-interval", "3"},
                           2, dir + "/first");
  INFO(first.summary());
  REQUIRE(first.ok());
  auto resumed =
      launchRanks(kGpttrain,
                  common + std::vector<std::string>{"--steps", "6", "--load", dir + "/ckpt",
                                                    "--log-json", dir + "/resumed.json"},
                  2, dir + "/resumed");
  INFO(resumed.summary());
  REQUIRE(resumed.ok());
  const auto want = jsonValues(dir + "/full.json", "loss");
  const auto got = jsonValues(dir + "/resumed.json", "loss");
  REQUIRE(want.size() == 6);
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("step " << i + 4 << ": uninterrupted " << want[i + 3] << ", resumed " << got[i]);
    CHECK(got[i] == want[i + 3]);  // the same two versions, moments and order of operations
  }
}

// On the dry run's virtual clock (trainer/pipeline/dry_run.h): exact whatever the machine's load.
TEST_CASE("a 2bw dry run over 10 steps idles as the fill formula says", "[trainer][2bw][dry_run]") {
  const std::string dir = scratchDir("twobw_dry_run");
  // pp 4, m = 16 / 2 = 8, 10 steps: closed form (p - 1) / (steps * m + p - 1) = 3 / 83.
  auto run = launchRanks(
      kGpttrain,
      model() + std::vector<std::string>{"--pp", "4", "--schedule", "2bw", "--global-batch", "16",
                                         "--steps", "10", "--dry-run-costs", "2,4", "--log-json",
                                         dir + "/log.json"},
      4, dir);
  INFO(run.summary());
  REQUIRE(run.ok());
  const auto idle = jsonValues(dir + "/log.json", "idle_fraction");
  const auto closed = jsonValues(dir + "/log.json", "closed_form");
  REQUIRE(idle.size() == 4);  // one drained run: one line per stage
  for (size_t k = 0; k < idle.size(); ++k) {
    INFO("stage " << k << ": idle fraction " << idle[k]);
    CHECK(closed[k] == Approx(3.0 / 83.0).margin(1e-6));
    CHECK(idle[k] == Approx(3.0 / 83.0).margin(1e-6));
  }
}

TEST_CASE("2bw's impossible combinations are one line and exit code 2", "[trainer][2bw]") {
  struct Case {
    std::vector<std::string> args;
    int ranks;
    const char* says;
  };
  const std::vector<Case> cases = {
      {{"--schedule", "2bw", "--clip-grad", "1"}, 0, "leave --clip-grad out or give 0"},
      {{"--schedule", "2bw", "--clip-grad", "0", "--zero", "1"}, 0, "--zero 1"},
      {{"--delayed-update", "--precision", "bf16-mixed"}, 0, "bf16-mixed"},
      {{"--pp", "2", "--schedule", "2bw", "--clip-grad", "0", "--global-batch", "2"},
       2,
       "at least as many microbatches"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string dir = scratchDir("twobw_error_" + std::to_string(i++));
    auto run = launchRanks(kGpttrain, tinyModelArgs() + c.args, c.ranks, dir);
    INFO(run.logs[0]);
    CHECK(run.exit_codes[0] == 2);
    CHECK(run.logs[0].find(c.says) != std::string::npos);
    CHECK(std::count(run.logs[0].begin(), run.logs[0].end(), '\n') == 1);
  }
}

TEST_CASE("2bw's gradient clip is off unless given, and only a given one is refused",
          "[trainer][2bw]") {
  auto parse = [](std::vector<std::string> args) {
    args.insert(args.begin(), "gpttrain");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    gpttrain::TrainConfig c;
    REQUIRE_FALSE(gpttrain::parseArgs(static_cast<int>(argv.size()), argv.data(), c).has_value());
    return c;
  };
  CHECK(parse({}).clip_grad == 1.0);  // every other schedule keeps the default clip
  CHECK(parse({"--schedule", "1f1b"}).clip_grad == 1.0);
  const gpttrain::TrainConfig two_bw = parse({"--schedule", "2bw"});
  CHECK(two_bw.clip_grad == 0.0);
  CHECK(gpttrain::layoutError(two_bw, 1).find("clip") == std::string::npos);
  const gpttrain::TrainConfig asked = parse({"--schedule", "2bw", "--clip-grad", "0.5"});
  CHECK(asked.clip_grad == 0.5);
  CHECK(gpttrain::layoutError(asked, 1).find("leave --clip-grad out") != std::string::npos);
  CHECK(parse({"--delayed-update"}).clip_grad == 1.0);  // the truth run may clip
}
