// gpttrain's checkpoints loaded at another data-parallel size (checkpoint.h): a run saved at
// DP = a and resumed at DP = b continues with the losses of an uninterrupted run at a and of one at
// b (within 1e-5: only the order of the DP reductions differs), with ZeRO 0-3 shards re-cut; two
// resumes at b from the same checkpoint are identical; another tp or zero stage is refused with
// one line and exit code 2. Not the elastic launcher (tests/interpose/launcher_elastic_test.cpp).
#include "run_losses.h"
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

using namespace gpttrain::testing;

namespace {

std::vector<std::string> commonArgs(int zero) {
  return tinyModelArgs() + std::vector<std::string>{"--zero", std::to_string(zero), "--warmup",
                                                    "2",      "--lr-decay-steps",   "6"};
}

void checkClose(const std::vector<double>& want, size_t offset, const std::vector<double>& got,
                const char* what) {
  REQUIRE(want.size() >= offset + got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(what << ", step " << offset + i + 1 << ": " << want[offset + i] << " vs " << got[i]);
    CHECK(std::abs(got[i] - want[offset + i]) <= 1e-5);
  }
}

// Saved after step 3 of 6 at `from` ranks (DP = from), resumed at `to` ranks.
void checkReshard(const std::string& test, int zero, int from, int to) {
  const std::string dir = scratchDir(test);
  const auto common = commonArgs(zero);
  const auto steps6 = std::vector<std::string>{"--steps", "6"};
  const auto before = runLosses(dir, "full_from", from, common + steps6);
  const auto after = runLosses(dir, "full_to", to, common + steps6);
  REQUIRE(before.size() == 6);
  REQUIRE(after.size() == 6);
  auto save = launchRanks(
      kGpttrain, common + std::vector<std::string>{"--steps", "3", "--save", dir + "/ckpt"}, from,
      dir + "/save");
  INFO(save.summary());
  REQUIRE(save.ok());
  const auto load = common + steps6 + std::vector<std::string>{"--load", dir + "/ckpt"};
  const auto resumed = runLosses(dir, "resumed", to, load);
  const auto again = runLosses(dir, "again", to, load);
  REQUIRE(resumed.size() == 3);
  REQUIRE(again == resumed);  // the same checkpoint, the same layout: bit for bit
  checkClose(before, 3, resumed, "uninterrupted at the saved DP");
  checkClose(after, 3, resumed, "uninterrupted at the new DP");
}

}  // namespace

TEST_CASE("a plain DDP checkpoint of 2 ranks resumes on 1", "[trainer][checkpoint][reshard]") {
  checkReshard("reshard_z0_2to1", 0, 2, 1);
}

TEST_CASE("a ZeRO-1 checkpoint of 2 ranks resumes on 4 with its optimizer shards re-cut",
          "[trainer][checkpoint][reshard]") {
  checkReshard("reshard_z1_2to4", 1, 2, 4);
}

TEST_CASE("a ZeRO-2 checkpoint of 4 ranks resumes on 2", "[trainer][checkpoint][reshard]") {
  checkReshard("reshard_z2_4to2", 2, 4, 2);
}

TEST_CASE("a ZeRO-3 checkpoint of 2 ranks resumes on 1 with its parameter shards re-cut",
          "[trainer][checkpoint][reshard]") {
  checkReshard("reshard_z3_2to1", 3, 2, 1);
}

TEST_CASE("a ZeRO-3 checkpoint of 1 rank resumes on 2", "[trainer][checkpoint][reshard]") {
  checkReshard("reshard_z3_1to2", 3, 1, 2);
}

TEST_CASE("another tp or zero stage at load is refused with one line and exit code 2",
          "[trainer][checkpoint][reshard]") {
  const std::string dir = scratchDir("reshard_refused");
  auto save = launchRanks(kGpttrain,
                          commonArgs(1) + std::vector<std::string>{"--tp", "2", "--steps", "1",
                                                                   "--save", dir + "/ckpt"},
                          2, dir + "/save");
  INFO(save.summary());
  REQUIRE(save.ok());
  const std::pair<int, int> cases[] = {{1, 1}, {2, 2}};  // tp, zero (saved: tp 2, zero 1)
  for (const auto& [tp, zero] : cases) {
    auto run = launchRanks(
        kGpttrain,
        commonArgs(zero) + std::vector<std::string>{"--tp", std::to_string(tp), "--steps", "2",
                                                    "--load", dir + "/ckpt"},
        2, dir + "/load");
    INFO(run.logs[0]);
    CHECK(run.exit_codes[0] == 2);
    CHECK(run.logs[0].find("only the data-parallel size may change on load") != std::string::npos);
    size_t lines = 0;
    for (char ch : run.logs[0]) lines += ch == '\n';
    CHECK(lines == 1);
  }
}
