// --prefix-tuning P (issue 32 point 3): P trainable keys and values per layer, the model frozen.
// Losses under TP 2 (heads split, with and without SP) and with --attention flash against one
// process's standard run (1e-5 relative); the optimizer state in the trace's memory categories
// against AdamW's closed form 8 x 2 P h L bytes (/t per TP rank), with gradients 4 x 2 P h L and
// the parameters the base model's plus the prefix; the refused combinations.
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <map>

using namespace gpttrain::testing;

namespace {

constexpr int kPrefix = 3, kHidden = 32, kLayers = 2;  // tinyModelArgs(): hidden 32, 2 layers

std::vector<std::string> prefixArgs() {
  return {"--prefix-tuning", std::to_string(kPrefix)};
}

std::vector<double> losses(const std::string& dir, const std::string& name, int ranks,
                           const std::vector<std::string>& extra) {
  const std::string json = dir + "/" + name + ".json";
  auto run = launchRanks(
      kGpttrain,
      tinyModelArgs() + prefixArgs() + extra + std::vector<std::string>{"--log-json", json}, ranks,
      dir + "/" + name);
  INFO(name << ":\n" << run.summary());
  REQUIRE(run.ok());
  return jsonValues(json, "loss");
}

void checkSameLosses(const std::string& what, const std::vector<double>& got,
                     const std::vector<double>& want) {
  REQUIRE(want.size() == 5);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO(what << ", step " << i + 1 << ": " << got[i] << " against " << want[i]);
    CHECK(std::abs(got[i] - want[i]) <= 1e-5 * std::abs(want[i]));
  }
}

}  // namespace

TEST_CASE("gpttrain --prefix-tuning: tp 2, tp 2 + sp and flash give one process's losses",
          "[trainer][prefix]") {
  const std::string dir = scratchDir("prefix_losses");
  const auto one = losses(dir, "one", 0, {});
  checkSameLosses("tp 2", losses(dir, "tp2", 2, {"--tp", "2"}), one);
  checkSameLosses("tp 2 + sp, flash",
                  losses(dir, "tp2_sp_flash", 2,
                         {"--tp", "2", "--sp", "--attention", "flash", "--flash-block-q", "4",
                          "--flash-block-k", "5"}),
                  one);
  checkSameLosses("one process, flash", losses(dir, "flash", 0, {"--attention", "flash"}), one);
  // The prefix changes the function: the first loss differs from the base model's.
  const std::string json = dir + "/base.json";
  auto run = launchRanks(kGpttrain, tinyModelArgs() + std::vector<std::string>{"--log-json", json},
                         0, dir + "/base");
  REQUIRE(run.ok());
  const auto plain = jsonValues(json, "loss");
  REQUIRE(!plain.empty());
  CHECK(std::abs(plain[0] - one[0]) > 1e-6);
}

TEST_CASE("gpttrain --prefix-tuning refuses other fine-tuning at once, one line, exit 2",
          "[trainer][prefix]") {
  const std::string dir = scratchDir("prefix_refused");
  const std::vector<std::vector<std::string>> refused = {
      {"--lora-rank", "2"}, {"--prompt-tuning", "2"}, {"--delayed-update"}};
  for (const auto& extra : refused) {
    auto run = launchRanks(kGpttrain, tinyModelArgs() + prefixArgs() + extra, 0, dir);
    INFO(run.logs[0]);
    REQUIRE(run.exit_codes.size() == 1);
    CHECK(run.exit_codes[0] == 2);
    CHECK(run.logs[0].find("--prefix-tuning") != std::string::npos);
  }
}

#ifdef TRACERUN_EXE
#include "traced_peaks.h"

TEST_CASE("gpttrain --prefix-tuning in the trace: optimizer state 8 x 2 P h L bytes, /t under tp 2",
          "[trainer][prefix][trace]") {
  const std::string dir = scratchDir("prefix_trace");
  const long long prefix = 2LL * kPrefix * kHidden * kLayers;  // trainable parameters
  for (int t : {1, 2}) {
    const std::vector<std::string> tp = {"--tp", std::to_string(t)};
    const auto base = tracedPeaks(dir, "base_tp" + std::to_string(t), t, tp);
    const auto got = tracedPeaks(dir, "prefix_tp" + std::to_string(t), t, tp + prefixArgs());
    INFO("tp " << t << ": optimizer_state " << got.at("optimizer_state") << ", gradient "
               << got.at("gradient") << ", parameter " << got.at("parameter") << " (base "
               << base.at("parameter") << ")");
    CHECK(got.at("optimizer_state") == 8 * prefix / t);
    CHECK(got.at("gradient") == 4 * prefix / t);
    // One process only: under TP the parameter peak falls inside initialisation, where each
    // parameter's full tensor lives for a moment before its shard is cut (params.cpp), so it is
    // not the sum of the shards.
    if (t == 1) CHECK(got.at("parameter") == base.at("parameter") + 4 * prefix);
#ifdef TRACEDOT_EXE
    // tracedot model: each layer's prefix a module of its own, trainable 2 P h (the whole prefix,
    // also under TP, where each rank holds its heads' share), and the caption's total 2 P h L.
    const std::string name = "prefix_tp" + std::to_string(t);
    auto dot = launchRanks(
        TRACEDOT_EXE,
        {"model", dir + "/" + name + ".db", "-o", dir + "/" + name + ".txt", "-T", "txt"}, 0,
        dir + "/dot_" + name);
    REQUIRE(dot.ok());
    const std::string picture = readFile(dir + "/" + name + ".txt");
    INFO(picture);
    // 192 per layer, no digit groups; under TP "192 logical, 96 on rank 0" (its heads' share).
    const std::string per_layer = std::to_string(2 * kPrefix * kHidden);
    const std::string held = t == 1 ? per_layer
                                    : per_layer + " logical, " +
                                          std::to_string(2 * kPrefix * kHidden / t) + " on rank 0";
    CHECK(picture.find("layers.0.attn.prefix | PrefixTuning | params " + held +
                       " \u00b7 trainable " + per_layer) != std::string::npos);
    CHECK(picture.find("trainable " + std::to_string(prefix) + " of ") != std::string::npos);
#endif
  }
}
#endif
