// --precision bf16-mixed (bf16 working parameters and gradients, fp32 master weights and AdamW
// states): every layout's losses against the fp32 run and against each other, what a rank holds,
// and the independent reference GPT (reference_gpt_mixed.py) trained the same way. The trace's
// memory categories are tests/e2e/mixed_precision_memory_test.cpp's.
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>

using namespace gpttrain::testing;

namespace {

// The bf16 tolerance on a loss (docs/trainer.md, "Mixed precision"): bf16 keeps 8 significant
// bits (relative rounding 2^-9 = 2e-3 per operation), but the loss is an fp32 mean over 8 x 16
// tokens whose bf16 roundings largely average out: measured, every layout's 5 losses (~4.16) stay
// within 3.5e-4 of the fp32 run and of each other, the reference within 1.4e-4. 2e-3 (5e-4
// relative) leaves 6x that margin and stays 5x below what the 5 steps move the loss (1.1e-2): a
// run whose updates do not reach the parameters fails it.
constexpr double kTolerance = 2e-3;

struct Layout {
  const char* name;
  int ranks;
  std::vector<std::string> flags;
};

const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {"single", 0, {}},
      {"dp2", 2, {}},
      {"dp2_zero1", 2, {"--zero", "1"}},
      {"dp2_zero2", 2, {"--zero", "2"}},
      {"dp2_zero3", 2, {"--zero", "3"}},
      {"tp2", 2, {"--tp", "2"}},
      {"tp2_sp", 2, {"--tp", "2", "--sp"}},
      {"pp2", 2, {"--pp", "2"}},
  };
  return all;
}

// "rank R at the optimizer step holds parameters P B, gradients G B, optimizer states O B (...,
// psi N)": {P, G, O, N} of rank 0's log.
std::vector<double> heldBytes(const std::string& log) {
  std::smatch m;
  const std::regex re(
      "rank 0 at the optimizer step holds parameters ([0-9]+) B, gradients ([0-9]+) B, optimizer "
      "states ([0-9]+) B \\(zero [0-9]+, dp [0-9]+, psi ([0-9]+)\\)");
  if (!std::regex_search(log, m, re)) return {};
  return {std::stod(m[1]), std::stod(m[2]), std::stod(m[3]), std::stod(m[4])};
}

std::vector<double> listValues(const std::string& text) {
  std::vector<double> out;
  std::stringstream list(text.substr(text.find('[') + 1, text.find(']') - text.find('[') - 1));
  for (std::string v; std::getline(list, v, ',');) out.push_back(std::stod(v));
  return out;
}

}  // namespace

TEST_CASE("bf16-mixed: every layout within the bf16 tolerance of fp32 and of each other",
          "[trainer][bf16][precision]") {
  const std::string dir = scratchDir("precision_layouts");
  auto fp32 = launchRanks(
      kGpttrain, tinyModelArgs() + std::vector<std::string>{"--log-json", dir + "/fp32.json"}, 0,
      dir + "/fp32");
  INFO(fp32.summary());
  REQUIRE(fp32.ok());
  const auto want = jsonValues(dir + "/fp32.json", "loss");
  REQUIRE(want.size() == 5);
  std::vector<double> single;
  for (const Layout& layout : layouts()) {
    const std::string json = dir + "/" + layout.name + ".json";
    auto run =
        launchRanks(kGpttrain,
                    tinyModelArgs() + layout.flags +
                        std::vector<std::string>{"--precision", "bf16-mixed", "--log-json", json},
                    layout.ranks, dir + "/" + layout.name);
    INFO(layout.name << "\n" << run.summary());
    REQUIRE(run.ok());
    const auto got = jsonValues(json, "loss");
    REQUIRE(got.size() == want.size());
    if (single.empty()) single = got;
    double from_fp32 = 0, from_single = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      INFO(layout.name << " step " << i + 1 << ": fp32 " << want[i] << ", bf16-mixed " << got[i]
                       << ", bf16-mixed single process " << single[i]);
      CHECK(std::abs(got[i] - want[i]) <= kTolerance);
      CHECK(std::abs(got[i] - single[i]) <= kTolerance);
      from_fp32 = std::max(from_fp32, std::abs(got[i] - want[i]));
      from_single = std::max(from_single, std::abs(got[i] - single[i]));
    }
    std::printf(
        "bf16-mixed %-10s losses %.6f .. %.6f; largest difference from fp32 %.2e, from "
        "the single process %.2e\n",
        layout.name, got.front(), got.back(), from_fp32, from_single);
    // bf16 really ran: the rounding moves the losses off the fp32 ones.
    CHECK(from_fp32 > 1e-5);
    // What rank 0 holds at the optimizer step: bf16 parameters and gradients (2 bytes each, or
    // 2/N under ZeRO's sharding), fp32 master weights and two moments (12 bytes, or 12/N).
    const auto held = heldBytes(run.logs.at(0));
    REQUIRE(held.size() == 4);
    const double psi = held[3];
    const bool zero = layout.flags.size() == 2 && layout.flags[0] == "--zero";
    const int stage = zero ? std::stoi(layout.flags[1]) : 0, n = layout.ranks;
    INFO("parameters " << held[0] << " B, gradients " << held[1] << " B, optimizer states "
                       << held[2] << " B, psi " << psi);
    CHECK(held[0] == Approx(2 * psi / (stage >= 3 ? n : 1)).epsilon(0.02));
    CHECK(held[1] == Approx(2 * psi / (stage >= 2 ? n : 1)).epsilon(0.02));
    CHECK(held[2] == Approx(12 * psi / (stage >= 1 ? n : 1)).epsilon(0.02));
  }
}

TEST_CASE("bf16-mixed: the independent reference GPT trained in bf16 mixed precision agrees",
          "[trainer][bf16][precision][oracle]") {
  const std::string python = "/usr/bin/python3";
  if (std::system((python + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0) {
    WARN("skipped: " << python << " cannot import torch (install Debian's python3-torch)");
    return;
  }
  const std::string dir = scratchDir("precision_oracle");
  auto run =
      launchRanks(kGpttrain,
                  tinyModelArgs() + std::vector<std::string>{"--precision", "bf16-mixed",
                                                             "--dump-init", dir + "/dump",
                                                             "--log-json", dir + "/gpttrain.json"},
                  0, dir + "/run");
  INFO(run.summary());
  REQUIRE(run.ok());
  const std::string cmd = python + " " + REFERENCE_GPT_MIXED_PY + " " + dir + "/dump " + dir +
                          "/ref > " + dir + "/ref.log 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(cmd << "\n" << readFile(dir + "/ref.log"));
  REQUIRE(rc == 0);
  const auto ref = listValues(readFile(dir + "/ref/losses.json"));
  const auto got = jsonValues(dir + "/gpttrain.json", "loss");
  REQUIRE(ref.size() == 5);
  REQUIRE(got.size() == 5);
  double largest = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("step " << i + 1 << ": gpttrain bf16-mixed " << got[i] << ", reference " << ref[i]);
    CHECK(std::abs(got[i] - ref[i]) <= kTolerance);
    largest = std::max(largest, std::abs(got[i] - ref[i]));
  }
  std::printf(
      "bf16-mixed oracle: losses %.6f .. %.6f, reference %.6f .. %.6f, largest "
      "difference %.2e\n",
      got.front(), got.back(), ref.front(), ref.back(), largest);
}
