// zb-h1's split backward (trainer/pipeline/split_backward.h) on small graphs, against libtorch's
// own full backward of the same graph: B then W give the same input and weight gradients, W
// computes no gradient on the input's path again, every weight's hook fires once, and a graph W
// cannot split (a weight used twice) says so.
#include "model/model.h"
#include "model/params.h"
#include "parallel/collectives.h"
#include "pipeline/split_backward.h"

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <utility>

using gpttrain::SplitBackward;

namespace {

// A stage-like graph: linear, layer norm, GELU, a second linear with bias, squared-sum loss.
struct Net {
  torch::nn::Linear in{torch::nn::LinearOptions(8, 16)};
  torch::nn::LayerNorm norm{torch::nn::LayerNormOptions({16})};
  torch::nn::Linear out{torch::nn::LinearOptions(16, 8)};
  int middle_gradients = 0;  // calls of a hook on the input's path, between the two linears

  Net() {
    torch::manual_seed(7);  // the modules were built with the RNG as it was: set every value
    torch::NoGradGuard no_grad;
    for (auto& [name, p] : params()) p.normal_(name == "norm.weight" ? 1.0 : 0.0, 0.5);
  }
  std::map<std::string, torch::Tensor> params() {
    return {{"in.weight", in->weight}, {"in.bias", in->bias},       {"norm.weight", norm->weight},
            {"norm.bias", norm->bias}, {"out.weight", out->weight}, {"out.bias", out->bias}};
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = torch::gelu(norm(in(x)));
    h.register_hook([this](const torch::Tensor&) { ++middle_gradients; });
    return out(h).pow(2).sum();
  }
};

torch::Tensor stageInput() {
  torch::manual_seed(11);
  return torch::randn({4, 3, 8}).requires_grad_(true);  // [S, B, H], a received activation
}

}  // namespace

TEST_CASE("split backward: B then W give libtorch's full-backward gradients, input path once",
          "[trainer][zbh1][split]") {
  Net reference;
  const torch::Tensor x_ref = stageInput();
  reference.forward(x_ref).backward();
  CHECK(reference.middle_gradients == 1);

  Net net;
  const torch::Tensor x = stageInput();
  const torch::Tensor loss = net.forward(x);
  std::map<std::string, int> hooks_fired;
  for (auto& [name, p] : net.params()) {
    p.register_hook([&hooks_fired, n = name](const torch::Tensor&) { ++hooks_fired[n]; });
  }
  SplitBackward split(loss, x);
  CHECK(split.partingNodes() >= 3);  // at least: the two linears and the layer norm
  const torch::Tensor grad_x = split.backwardInput(loss, torch::ones_like(loss), x);
  CHECK(net.middle_gradients == 1);
  CHECK(hooks_fired.empty());  // B touches no weight
  for (auto& [name, p] : net.params()) CHECK_FALSE(p.grad().defined());

  REQUIRE(split.backwardWeight());
  CHECK(net.middle_gradients == 1);  // W did not compute the input path's gradients again
  CHECK(torch::allclose(grad_x, x_ref.grad(), 1e-6, 1e-7));
  auto expected = reference.params();
  for (auto& [name, p] : net.params()) {
    INFO(name);
    CHECK(hooks_fired[name] == 1);
    REQUIRE(p.grad().defined());
    CHECK(torch::allclose(p.grad(), expected[name].grad(), 1e-6, 1e-7));
  }
}

TEST_CASE("split backward: a weight reached from two parting nodes falls back to a full backward",
          "[trainer][zbh1][split]") {
  torch::manual_seed(3);
  const torch::Tensor w = torch::randn({5, 5}).requires_grad_(true);
  const torch::Tensor x = torch::randn({2, 5}).requires_grad_(true);
  const torch::Tensor loss = x.mm(w).tanh().mm(w).sum();  // w used twice
  SplitBackward split(loss, x);
  CHECK(split.partingNodes() == 0);
  split.backwardInput(loss, torch::ones_like(loss), x);
  CHECK_FALSE(split.backwardWeight());
  CHECK_FALSE(w.grad().defined());  // the caller's full backward, not a partial W, does it
}

TEST_CASE("split backward: nothing to split without an input (the first stage)",
          "[trainer][zbh1][split]") {
  const torch::Tensor w = torch::ones({3}).requires_grad_(true);
  const torch::Tensor loss = (w * 2).sum();
  SplitBackward split(loss, torch::Tensor());
  CHECK(split.partingNodes() == 0);
  CHECK_FALSE(split.backwardWeight());
}

TEST_CASE(
    "split backward on gpttrain's first, middle and last stages: every weight's gradient, W past "
    "no input path",
    "[trainer][zbh1][split]") {
  gpttrain::ModelConfig config;  // 2 layers of hidden 64
  enum class Place { kFirst, kMiddle, kLast };
  for (const Place place : {Place::kFirst, Place::kMiddle, Place::kLast}) {
    const bool first = place == Place::kFirst, last = place == Place::kLast;
    INFO((first ? "first stage" : last ? "last stage" : "middle stage"));
    // One stage's gradients from libtorch's full backward (split false) or from B then W; the
    // first stage's boundary is its embedded input (model_compute.cpp does the same).
    auto gradients = [&](bool split) {
      gpttrain::ParamSet params(config.seed, 0, 1, torch::kCPU);
      gpttrain::GptStage stage(params, config, gpttrain::makeSoloGroup("tp", 0), first ? 0 : 1, 1,
                               first, last);
      torch::manual_seed(5);
      const torch::Tensor input =
          first ? torch::randint(0, config.vocab, {config.seq_len, 2})
                : torch::randn({config.seq_len, 2, config.hidden}).requires_grad_(true);
      const torch::Tensor targets = torch::randint(0, config.vocab, {config.seq_len, 2});
      torch::Tensor embedded;
      const torch::Tensor out =
          stage.forward(input, last ? targets : torch::Tensor(), nullptr, &embedded);
      CHECK(embedded.defined() == first);
      const torch::Tensor boundary = first ? embedded : input;
      const torch::Tensor seed = last ? torch::ones_like(out) : torch::randn_like(out);
      std::map<std::string, torch::Tensor> grads;
      if (!split) {
        torch::autograd::backward({out}, {seed});
        if (!first) grads["input"] = input.grad();
      } else {
        SplitBackward splitter(out, boundary);
        const torch::Tensor boundary_grad = splitter.backwardInput(out, seed, boundary);
        if (!first) grads["input"] = boundary_grad;
        for (const auto& e : params.entries()) CHECK_FALSE(e.tensor.grad().defined());  // B: none
        CHECK(splitter.backwardWeight());                 // the real stage splits: no fallback
        if (!first) CHECK_FALSE(input.grad().defined());  // W never reached the input
      }
      for (const auto& e : params.entries()) grads[e.name] = e.tensor.grad();
      return grads;
    };
    const auto want = gradients(false);
    const auto got = gradients(true);
    REQUIRE(got.size() == want.size());
    for (const auto& [name, grad] : want) {
      INFO(name);
      REQUIRE(got.at(name).defined());
      CHECK(torch::allclose(got.at(name), grad, 1e-5, 1e-7));
    }
  }
}

TEST_CASE(
    "split backward: a stage that is first and last (the tied embedding used twice) is not "
    "split",
    "[trainer][zbh1][split]") {
  gpttrain::ModelConfig config;
  gpttrain::ParamSet params(config.seed, 0, 1, torch::kCPU);
  gpttrain::GptStage stage(params, config, gpttrain::makeSoloGroup("tp", 0), 0, 2, true, true);
  torch::manual_seed(5);
  const torch::Tensor tokens = torch::randint(0, config.vocab, {config.seq_len, 2});
  torch::Tensor embedded;
  const torch::Tensor loss = stage.forward(tokens, tokens, nullptr, &embedded);
  SplitBackward split(loss, embedded);
  CHECK(split.partingNodes() == 0);
}
