// --attention flash against the standard path (issue 32 point 1): model/flash_attention.h's output
// and gradients against softmax attention differentiated by autograd (causal, with a prefix, tile
// sizes that divide the sequence and that do not), gpttrain's losses with flash against
// standard's for one process and for TP 2 + SP (fp32, dropout 0, 1e-5 relative), and the refusal
// of flash with dropout.
#include "model/flash_attention.h"
#include "trainer_test_util.h"

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

using namespace gpttrain;
using namespace gpttrain::testing;

namespace {

// softmax(q k^T / sqrt(D) + mask) v with query i seeing key j when j <= i + P: the plain
// composition of ATen ops autograd differentiates (the reference).
at::Tensor referenceAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t s = q.size(1), keys = k.size(1);
  const at::Tensor hidden = at::ones({s, keys}, at::kBool).triu(keys - s + 1);
  at::Tensor scores = at::bmm(q, k.transpose(1, 2)) / std::sqrt(double(q.size(2)));
  scores = scores.masked_fill(hidden, -std::numeric_limits<float>::infinity());
  return at::bmm(at::softmax(scores, -1), v);
}

// max |a - b| / max |b|.
double relativeError(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>() / b.abs().max().item<double>();
}

// q [BH, S, D], k and v [BH, P + S, D] as strided views of one qkv-like buffer, as the model
// passes them; the output and the gradients of sum(out * w) for a random w.
struct Result {
  at::Tensor out, dq, dk, dv;
};

Result run(bool flash, int64_t s, int64_t prefix, FlashBlocks blocks) {
  const int64_t bh = 3, d = 8, keys = prefix + s;
  at::manual_seed(11);
  const at::Tensor buffer = at::randn({keys, bh, 3, d});
  const at::Tensor w = at::randn({bh, s, d});
  at::Tensor qkv = buffer.clone().requires_grad_(true);
  const at::Tensor q = qkv.narrow(0, prefix, s).select(2, 0).transpose(0, 1);
  const at::Tensor k = qkv.select(2, 1).transpose(0, 1);
  const at::Tensor v = qkv.select(2, 2).transpose(0, 1);
  const at::Tensor out = flash ? flashAttention(q, k, v, blocks) : referenceAttention(q, k, v);
  (out * w).sum().backward();
  const at::Tensor g = qkv.grad();
  return {out.detach(), g.narrow(0, prefix, s).select(2, 0), g.select(2, 1), g.select(2, 2)};
}

}  // namespace

TEST_CASE("flash attention's output and gradients equal softmax attention's under autograd",
          "[trainer][flash]") {
  const FlashBlocks tilings[] = {{64, 64}, {8, 8}, {5, 3}, {1, 1}, {16, 7}};
  for (int64_t prefix : {0, 4}) {
    for (const FlashBlocks& blocks : tilings) {
      const int64_t s = 37;
      INFO("prefix " << prefix << ", blocks " << blocks.q << " x " << blocks.k);
      const Result ref = run(false, s, prefix, {});
      const Result got = run(true, s, prefix, blocks);
      CHECK(relativeError(got.out, ref.out) < 1e-5);
      CHECK(relativeError(got.dq, ref.dq) < 1e-5);
      CHECK(relativeError(got.dk, ref.dk) < 1e-5);
      CHECK(relativeError(got.dv, ref.dv) < 1e-5);
      // The [S, B, heads * D] view the next linear saves is the tensor flash keeps.
      CHECK(got.out.transpose(0, 1).is_contiguous());
    }
  }
}

namespace {

std::vector<double> losses(const std::string& dir, const std::string& name, int ranks,
                           const std::vector<std::string>& extra) {
  const std::string json = dir + "/" + name + ".json";
  auto run =
      launchRanks(kGpttrain, tinyModelArgs() + extra + std::vector<std::string>{"--log-json", json},
                  ranks, dir + "/" + name);
  INFO(name << ":\n" << run.summary());
  REQUIRE(run.ok());
  return jsonValues(json, "loss");
}

void checkSameLosses(const std::vector<double>& flash, const std::vector<double>& standard) {
  REQUIRE(standard.size() == 5);
  REQUIRE(flash.size() == standard.size());
  for (size_t i = 0; i < standard.size(); ++i) {
    INFO("step " << i + 1 << ": flash " << flash[i] << ", standard " << standard[i]);
    CHECK(std::abs(flash[i] - standard[i]) <= 1e-5 * std::abs(standard[i]));
  }
}

}  // namespace

TEST_CASE("gpttrain --attention flash gives standard's losses: one process, tiles 5 x 3 of seq 16",
          "[trainer][flash]") {
  const std::string dir = scratchDir("flash_one");
  const auto standard = losses(dir, "standard", 0, {});
  const auto flash = losses(
      dir, "flash", 0, {"--attention", "flash", "--flash-block-q", "5", "--flash-block-k", "3"});
  checkSameLosses(flash, standard);
}

TEST_CASE("gpttrain --attention flash gives standard's losses: tp 2 with sp (heads split)",
          "[trainer][flash]") {
  const std::string dir = scratchDir("flash_tp_sp");
  const auto standard = losses(dir, "standard", 0, {});
  const auto flash = losses(dir, "flash", 2,
                            {"--tp", "2", "--sp", "--attention", "flash", "--flash-block-q", "4",
                             "--flash-block-k", "8"});
  checkSameLosses(flash, standard);
}

TEST_CASE("gpttrain --attention flash with dropout is refused in one line, exit 2",
          "[trainer][flash]") {
  const std::string dir = scratchDir("flash_dropout");
  auto run = launchRanks(
      kGpttrain,
      tinyModelArgs() + std::vector<std::string>{"--attention", "flash", "--dropout", "0.1"}, 0,
      dir);
  REQUIRE(run.exit_codes.size() == 1);
  CHECK(run.exit_codes[0] == 2);
  CHECK(run.logs[0].find("--attention flash needs --dropout 0") != std::string::npos);
}
