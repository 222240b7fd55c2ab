// End-to-end runs of gpttrain other than equivalence: checkpoint/resume gives exactly the losses
// of an uninterrupted run; a text file trains with validation; bad flags and impossible layouts
// give one line and exit code 2.
#include "trainer_test_util.h"

#include <torch/cuda.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>

using namespace gpttrain::testing;

namespace {

// `losses` of a run that saves at step 3 and is resumed to step 6 equal the uninterrupted run's.
void checkResume(const std::string& test, int ranks, const std::vector<std::string>& layout) {
  const std::string dir = scratchDir(test);
  const std::vector<std::string> common =
      tinyModelArgs() + layout +
      std::vector<std::string>{"--dropout", "0.1", "--warmup", "2", "--lr-decay-steps", "6"};
  auto full = launchRanks(
      kGpttrain,
      common + std::vector<std::string>{"--steps", "6", "--log-json", dir + "/full.json"}, ranks,
      dir + "/full");
  INFO(full.summary());
  REQUIRE(full.ok());
  auto first = launchRanks(kGpttrain,
                           common + std::vector<std::string>{"--steps", "3", "--save",
                                                             dir + "/ckpt", "--save-interval", "3"},
                           ranks, dir + "/first");
  INFO(first.summary());
  REQUIRE(first.ok());
  // What a rank killed in the middle of a later save leaves behind: a partial file of step 5.
  // DIR/latest still names step 3, so the resume must not see it.
  std::filesystem::create_directories(dir + "/ckpt/step_5");
  std::ofstream(dir + "/ckpt/step_5/rank_0.pt") << "partial";
  auto resumed =
      launchRanks(kGpttrain,
                  common + std::vector<std::string>{"--steps", "6", "--load", dir + "/ckpt",
                                                    "--log-json", dir + "/resumed.json"},
                  ranks, dir + "/resumed");
  INFO(resumed.summary());
  REQUIRE(resumed.ok());
  const auto want = jsonValues(dir + "/full.json", "loss");
  const auto got = jsonValues(dir + "/resumed.json", "loss");
  REQUIRE(want.size() == 6);
  REQUIRE(got.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    INFO("step " << i + 4 << ": uninterrupted " << want[i + 3] << ", resumed " << got[i]);
    CHECK(got[i] == want[i + 3]);  // identical, not close: same state, same order of operations
  }
}

struct Failure {
  int code;
  std::string output;
};
Failure runExpectingFailure(const std::string& test, const std::vector<std::string>& args,
                            int ranks = 0) {
  auto run = launchRanks(kGpttrain, args, ranks, scratchDir(test));
  return Failure{run.exit_codes[0], run.logs[0]};
}

int lineCount(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

}  // namespace

TEST_CASE("a resumed run continues with the losses of an uninterrupted one",
          "[trainer][checkpoint]") {
  checkResume("resume_single", 0, {});
}

TEST_CASE("a resumed tp=2 sp run (2 ranks, dropout 0.1) continues with identical losses",
          "[trainer][checkpoint]") {
  checkResume("resume_tp2_sp", 2, {"--tp", "2", "--sp"});
}

TEST_CASE("a resumed pp=2 x dp=2 zero-2 run (4 ranks, dropout 0.1) continues with identical losses",
          "[trainer][checkpoint][pp][zero]") {
  checkResume("resume_pp2_dp2_zero2", 4, {"--pp", "2", "--zero", "2"});
}

TEST_CASE("a resumed pp=2 x dp=2 zero-1 gpipe run continues with identical losses",
          "[trainer][checkpoint][pp][zero]") {
  checkResume("resume_pp2_dp2_zero1", 4, {"--pp", "2", "--zero", "1", "--schedule", "gpipe"});
}

TEST_CASE("a resumed pp=2 interleaved v=2 run (4 layers) continues with identical losses",
          "[trainer][checkpoint][pp]") {
  checkResume("resume_pp2_interleaved", 2,
              {"--pp", "2", "--schedule", "interleaved", "--vp", "2", "--layers", "4"});
}

TEST_CASE("a resumed pp=2 x dp=2 chimera run continues with identical losses",
          "[trainer][checkpoint][pp][chimera]") {
  checkResume("resume_pp2_dp2_chimera", 4, {"--pp", "2", "--schedule", "chimera"});
}

TEST_CASE("a resumed pp=2 x dp=2 zero-3 run continues with identical losses",
          "[trainer][checkpoint][pp][zero]") {
  checkResume("resume_pp2_dp2_zero3", 4, {"--pp", "2", "--zero", "3"});
}

TEST_CASE("recomputation with dropout 0.1 repeats the masks: losses identical to no recompute",
          "[trainer][recompute]") {
  const std::string dir = scratchDir("recompute_dropout");
  std::vector<std::vector<double>> losses;
  for (const char* mode : {"none", "full", "selective"}) {
    const std::string json = dir + "/" + mode + ".json";
    auto run =
        launchRanks(kGpttrain,
                    tinyModelArgs() + std::vector<std::string>{"--dropout", "0.1", "--recompute",
                                                               mode, "--log-json", json},
                    0, dir + "/" + mode);
    INFO(mode << "\n" << run.summary());
    REQUIRE(run.ok());
    losses.push_back(jsonValues(json, "loss"));
    REQUIRE(losses.back().size() == 5);
  }
  CHECK(losses[1] == losses[0]);  // same masks, same order of operations: bit-identical
  CHECK(losses[2] == losses[0]);
}

TEST_CASE("gpttrain trains on a text file with validation loss, tp=2 with sp like one process",
          "[trainer][data]") {
  const std::string dir = scratchDir("text_file");
  {
    std::ofstream text(dir + "/corpus.txt");
    for (int i = 0; i < 400; ++i) {
      text << "Line " << i << ": the quick brown fox jumps over the lazy dog; pack my box.\n";
    }
  }
  const std::vector<std::string> args{"--data",
                                      dir + "/corpus.txt",
                                      "--vocab",
                                      "256",
                                      "--layers",
                                      "2",
                                      "--hidden",
                                      "32",
                                      "--heads",
                                      "4",
                                      "--seq-len",
                                      "32",
                                      "--dropout",
                                      "0",
                                      "--global-batch",
                                      "4",
                                      "--micro-batch-size",
                                      "2",
                                      "--steps",
                                      "4",
                                      "--eval-interval",
                                      "2",
                                      "--eval-iters",
                                      "2",
                                      "--quiet"};
  auto single =
      launchRanks(kGpttrain, args + std::vector<std::string>{"--log-json", dir + "/single.json"}, 0,
                  dir + "/single");
  INFO(single.summary());
  REQUIRE(single.ok());
  auto parallel = launchRanks(
      kGpttrain,
      args + std::vector<std::string>{"--tp", "2", "--sp", "--log-json", dir + "/parallel.json"}, 2,
      dir + "/parallel");
  INFO(parallel.summary());
  REQUIRE(parallel.ok());
  const auto want = jsonValues(dir + "/single.json", "val_loss");
  const auto got = jsonValues(dir + "/parallel.json", "val_loss");
  REQUIRE(want.size() == 2);
  REQUIRE(got.size() == 2);
  // Byte-level model at init: loss near ln(256) = 5.55.
  CHECK(want[0] > 3.0);
  CHECK(want[0] < 7.0);
  for (size_t i = 0; i < 2; ++i) CHECK(std::abs(want[i] - got[i]) <= 1e-4);
  const auto want_train = jsonValues(dir + "/single.json", "loss");
  const auto got_train = jsonValues(dir + "/parallel.json", "loss");
  REQUIRE(want_train.size() == 4);
  REQUIRE(got_train.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(std::abs(want_train[i] - got_train[i]) <= 1e-4);
}

TEST_CASE("unknown flags and impossible layouts: one line, exit code 2", "[trainer][cli]") {
  auto unknown = runExpectingFailure("cli_unknown", {"--layerz", "4"});
  CHECK(unknown.code == 2);
  CHECK(lineCount(unknown.output) == 1);
  CHECK(unknown.output.find("--layerz") != std::string::npos);

  // Numeric bounds in words, not CLI11's 309-digit maximum of a double.
  auto negative = runExpectingFailure("cli_negative", {"--tp", "-1"});
  CHECK(negative.code == 2);
  CHECK(lineCount(negative.output) == 1);
  CHECK(negative.output.find("--tp: must be a whole number >= 1, not '-1'") != std::string::npos);
  CHECK(negative.output.size() < 200);
  auto bucket = runExpectingFailure("cli_bucket", {"--bucket-mb", "0"});
  CHECK(bucket.code == 2);
  CHECK(bucket.output.find("--bucket-mb: must be a number > 0, not '0'") != std::string::npos);

  auto heads = runExpectingFailure(
      "cli_heads", {"--heads", "4", "--tp", "3", "--hidden", "48", "--vocab", "96"});
  // WORLD_SIZE 1 is not divisible by tp 3: that is named first.
  CHECK(heads.code == 2);
  CHECK(lineCount(heads.output) == 1);
  CHECK(heads.output.find("WORLD_SIZE 1") != std::string::npos);

  auto world = runExpectingFailure("cli_world", {"--tp", "2", "--heads", "3", "--hidden", "48"}, 2);
  CHECK(world.code == 2);
  CHECK(lineCount(world.output) == 1);
  CHECK(world.output.find("--heads 3 is not divisible by --tp 2") != std::string::npos);

  auto layers = runExpectingFailure("cli_pp_layers", {"--pp", "2", "--layers", "3"}, 2);
  CHECK(layers.code == 2);
  CHECK(lineCount(layers.output) == 1);
  CHECK(layers.output.find("--layers 3 is not divisible by pp x vp = 2") != std::string::npos);

  auto interleaved =
      runExpectingFailure("cli_interleaved",
                          {"--pp", "2", "--schedule", "interleaved", "--vp", "2", "--layers", "4",
                           "--global-batch", "6", "--micro-batch-size", "2"},
                          2);
  CHECK(interleaved.code == 2);
  CHECK(interleaved.output.find("(3) to be a multiple of --pp 2") != std::string::npos);

  auto vp = runExpectingFailure("cli_vp", {"--vp", "2", "--layers", "4"});
  CHECK(vp.code == 2);
  CHECK(vp.output.find("--vp 2 needs --pp > 1") != std::string::npos);

  auto costs = runExpectingFailure("cli_costs", {"--dry-run-costs", "5"});
  CHECK(costs.code == 2);
  CHECK(costs.output.find("is not F_MS,B_MS") != std::string::npos);

  auto missing = runExpectingFailure("cli_data", {"--data", "/nonexistent/corpus.txt"});
  CHECK(missing.code == 2);
  CHECK(missing.output.find("/nonexistent/corpus.txt") != std::string::npos);

  // DIR/latest names a step whose files are not there (a copy that lost them, say).
  const std::string ckpt = scratchDir("cli_ckpt_dir");
  std::ofstream(ckpt + "/latest") << "7\n";
  auto lost = runExpectingFailure("cli_ckpt", {"--load", ckpt});
  CHECK(lost.code == 2);
  CHECK(lineCount(lost.output) == 1);
  CHECK(lost.output.find("latest names step 7") != std::string::npos);
}

TEST_CASE("bf16 autocast trains in every layout and tracks the fp32 losses", "[trainer][bf16]") {
  // bf16 keeps 8 bits of mantissa (relative rounding 4e-3): losses near 4.2 stay within 0.02 of
  // fp32 over 5 steps; a broken cast path (e.g. Gloo refusing bf16) fails the run outright.
  const std::string dir = scratchDir("bf16");
  auto fp32 = launchRanks(
      kGpttrain, tinyModelArgs() + std::vector<std::string>{"--log-json", dir + "/fp32.json"}, 0,
      dir + "/fp32");
  INFO(fp32.summary());
  REQUIRE(fp32.ok());
  const auto want = jsonValues(dir + "/fp32.json", "loss");
  REQUIRE(want.size() == 5);
  struct Layout {
    const char* name;
    int ranks;
    std::vector<std::string> flags;
  };
  for (const Layout& layout : {Layout{"single", 0, {}}, Layout{"tp2_sp", 2, {"--tp", "2", "--sp"}},
                               Layout{"dp2", 2, {}}}) {
    const std::string json = dir + "/" + layout.name + ".json";
    auto run = launchRanks(
        kGpttrain,
        tinyModelArgs() + layout.flags + std::vector<std::string>{"--bf16", "--log-json", json},
        layout.ranks, dir + "/" + layout.name);
    INFO(layout.name << "\n" << run.summary());
    REQUIRE(run.ok());
    const auto got = jsonValues(json, "loss");
    REQUIRE(got.size() == want.size());
    double largest = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(layout.name << " step " << i + 1 << ": fp32 " << want[i] << ", bf16 " << got[i]);
      CHECK(std::abs(got[i] - want[i]) <= 0.02);
      largest = std::max(largest, std::abs(got[i] - want[i]));
    }
    // Autocast really ran: bf16 rounding moves the losses off the fp32 ones.
    CHECK(largest > 1e-5);
  }
}

TEST_CASE("the backend flag: gloo by default, nccl refused with one line where it cannot run",
          "[trainer][cli]") {
#if defined(TRACERUN_TORCH_HAS_NCCL)
  if (!torch::cuda::is_available()) {
    auto nccl = runExpectingFailure("cli_backend_nccl", {"--backend", "nccl"});
    CHECK(nccl.code == 2);
    CHECK(lineCount(nccl.output) == 1);
    CHECK(nccl.output.find("gpttrain: --backend nccl needs a CUDA device") != std::string::npos);
  }
  // NCCL takes CUDA tensors only.
  auto cpu = runExpectingFailure("cli_backend_nccl_cpu", {"--backend", "nccl", "--device", "cpu"});
  CHECK(cpu.code == 2);
  CHECK(lineCount(cpu.output) == 1);
  CHECK(cpu.output.find("gpttrain: --backend nccl") != std::string::npos);
#else
  auto nccl = runExpectingFailure("cli_backend_nccl", {"--backend", "nccl"});
  CHECK(nccl.code == 2);
  CHECK(lineCount(nccl.output) == 1);
  CHECK(nccl.output.find("gpttrain: --backend nccl needs a libtorch built with CUDA") !=
        std::string::npos);
#endif
  auto typo = runExpectingFailure("cli_backend_typo", {"--backend", "mpi"});
  CHECK(typo.code == 2);
  CHECK(lineCount(typo.output) == 1);
  CHECK(typo.output.find("--backend") != std::string::npos);
}
