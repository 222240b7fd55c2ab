// --save/--load with --offload-optimizer nvme:DIR (issue 31): on 2 ranks, a run saved after step 3
// and resumed gives steps 4-6 of the uninterrupted run bit for bit; the checkpoint is the sharded
// optimizer's (the same names, the same numbers), so one saved with offload resumes without it and
// one saved without resumes with it, with the same losses (fp32 ZeRO 1 and 3, whose master weights
// are the parameter shards, and ZeRO 2 bf16-mixed, whose fp32 master weights are saved); a ZeRO-3
// checkpoint of 2 ranks resumes with offload on 1 within 1e-5 of the uninterrupted runs at both
// sizes (checkpoint.h re-cuts the shards). Not the offload update itself (test_offload.cpp).
#include "run_losses.h"
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using namespace gpttrain::testing;

namespace {

// The tiny model with several buckets a rank and a schedule whose learning rate differs at every
// step; with dropout (its generators are in the checkpoint too) unless the DP size changes (each
// DP rank draws its own masks).
std::vector<std::string> commonArgs(const std::vector<std::string>& layout,
                                    const char* dropout = "0.1") {
  return tinyModelArgs() + layout +
         std::vector<std::string>{"--bucket-mb", "0.01", "--dropout",        dropout,
                                  "--warmup",    "2",    "--lr-decay-steps", "6"};
}

// --offload-optimizer into a fresh directory DIR/states/NAME for one run's state files.
std::vector<std::string> offloadInto(const std::string& dir, const std::string& name) {
  const std::string states = dir + "/states/" + name;
  std::filesystem::create_directories(states);
  return {"--offload-optimizer", "nvme:" + states};
}

// State files left under DIR/states (each run removes its own when it ends).
int stateFiles(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/states")) {
    n += e.is_regular_file();
  }
  return n;
}

void save(const std::string& dir, const std::string& name, int ranks,
          const std::vector<std::string>& args) {
  auto run = launchRanks(
      kGpttrain, args + std::vector<std::string>{"--steps", "3", "--save", dir + "/" + name}, ranks,
      dir + "/" + name + "_run");
  INFO(name << ": " << run.summary());
  REQUIRE(run.ok());
}

// Steps 4-6 of `full` against `resumed`, equal to the bit.
void checkEqual(const std::vector<double>& full, const std::vector<double>& resumed,
                const char* what) {
  REQUIRE(full.size() == 6);
  REQUIRE(resumed.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO(what << ", step " << i + 4 << ": uninterrupted " << full[i + 3] << ", resumed "
              << resumed[i]);
    CHECK(resumed[i] == full[i + 3]);
  }
}

// Saved at step 3 with and without offload, each resumed with and without it, against the
// uninterrupted offloaded run.
void checkResumes(const std::string& test, const std::vector<std::string>& layout) {
  const std::string dir = scratchDir(test);
  const auto common = commonArgs(layout);
  const auto steps6 = std::vector<std::string>{"--steps", "6"};
  const auto full = runLosses(dir, "full", 2, common + steps6 + offloadInto(dir, "full"));
  save(dir, "ckpt_offload", 2, common + offloadInto(dir, "save"));
  save(dir, "ckpt_plain", 2, common);
  const auto from = [&](const std::string& ckpt) {
    return steps6 + std::vector<std::string>{"--load", dir + "/" + ckpt};
  };
  checkEqual(
      full,
      runLosses(dir, "offload_offload", 2, common + from("ckpt_offload") + offloadInto(dir, "oo")),
      "saved and resumed with offload");
  checkEqual(full, runLosses(dir, "offload_plain", 2, common + from("ckpt_offload")),
             "saved with offload, resumed without");
  checkEqual(
      full,
      runLosses(dir, "plain_offload", 2, common + from("ckpt_plain") + offloadInto(dir, "po")),
      "saved without offload, resumed with");
  CHECK(stateFiles(dir) == 0);
}

}  // namespace

TEST_CASE("nvme offload checkpoints: ZeRO-1 resumes bit for bit, with or without offload",
          "[trainer][offload][checkpoint]") {
  checkResumes("offload_ckpt_z1", {"--zero", "1"});
}

TEST_CASE("nvme offload checkpoints: ZeRO-3 resumes bit for bit, with or without offload",
          "[trainer][offload][checkpoint]") {
  checkResumes("offload_ckpt_z3", {"--zero", "3"});
}

TEST_CASE(
    "nvme offload checkpoints: ZeRO-2 bf16-mixed (fp32 master weights saved) resumes bit for bit, "
    "with or without offload",
    "[trainer][offload][checkpoint]") {
  checkResumes("offload_ckpt_z2_bf16", {"--zero", "2", "--precision", "bf16-mixed"});
}

TEST_CASE("an offloaded ZeRO-3 checkpoint of 2 ranks resumes with offload on 1",
          "[trainer][offload][checkpoint][reshard]") {
  const std::string dir = scratchDir("offload_ckpt_reshard");
  const auto common = commonArgs({"--zero", "3"}, "0");
  const auto steps6 = std::vector<std::string>{"--steps", "6"};
  const auto at2 = runLosses(dir, "full_2", 2, common + steps6 + offloadInto(dir, "2"));
  const auto at1 = runLosses(dir, "full_1", 1, common + steps6 + offloadInto(dir, "1"));
  save(dir, "ckpt", 2, common + offloadInto(dir, "save"));
  const auto resumed = runLosses(
      dir, "resumed", 1,
      common + steps6 + std::vector<std::string>{"--load", dir + "/ckpt"} + offloadInto(dir, "r"));
  REQUIRE(at2.size() == 6);
  REQUIRE(at1.size() == 6);
  REQUIRE(resumed.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("step " << i + 4 << ": uninterrupted at 2 " << at2[i + 3] << ", at 1 " << at1[i + 3]
                 << ", resumed at 1 " << resumed[i]);
    CHECK(std::abs(resumed[i] - at2[i + 3]) <= 1e-5);  // only the DP reductions' order differs
    CHECK(std::abs(resumed[i] - at1[i + 3]) <= 1e-5);
  }
  CHECK(stateFiles(dir) == 0);
}
