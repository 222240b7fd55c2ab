// The data-parallel strategy interface on one process (a DP group of one): each ZeRO stage's
// strategy reports its stage, its memory model and whether the model must gather parameter units;
// it lays out buckets as promised (the tied embedding alone, ZeRO-3's layers whole); one step of
// it and of the optimizer makeOptimizer picks for it gives the analytic gradients and SGD update
// and holds the bytes ZeRO's closed forms give for N = 1. Multi-rank behaviour is the equivalence
// tests' (test_equivalence.cpp).
#include "data_parallel/dp_strategy.h"
#include "optim/optimizer.h"

#include <catch2/catch.hpp>

#include <set>

using namespace gpttrain;

namespace {

// Two transformer layers and a root, registered as the model registers them (embedding first).
ParamSet smallParams() {
  ParamSet params(7, 0, 1, torch::Device(torch::kCPU));
  params.add(kTiedEmbeddingName, {10, 4}, -1, Init::kNormal, 0.5);
  params.add("position.weight", {3, 4}, -1, Init::kNormal, 0.5);
  for (int l = 0; l < 2; ++l) {
    const std::string prefix = "layers." + std::to_string(l) + ".";
    params.add(prefix + "fc.weight", {4, 5}, -1, Init::kNormal, 0.5);
    params.add(prefix + "fc.bias", {5}, -1, Init::kNormal, 0.5);
    params.add(prefix + "norm.weight", {4}, -1, Init::kOnes);
  }
  params.add("final_norm.weight", {4}, -1, Init::kOnes);
  return params;
}

// d(loss)/d(param i) for loss = sum_i sum(p_i * coefficient_i): the coefficients themselves.
at::Tensor coefficient(const ParamEntry& e, size_t i) {
  return at::arange(e.tensor.numel(), at::kFloat).view(e.tensor.sizes()).mul(0.01) + double(i);
}

int unitOf(const std::string& name) {
  return name.rfind("layers.", 0) == 0 ? std::stoi(name.substr(7)) : -1;
}

}  // namespace

TEST_CASE("each ZeRO stage's strategy reports its stage, memory model and parameter units",
          "[trainer][units][dp]") {
  const ZeroMemoryModel want[] = {
      {false, false, false}, {false, false, true}, {false, true, true}, {true, true, true}};
  for (int stage = 0; stage <= 3; ++stage) {
    INFO("zero " << stage);
    ParamSet params = smallParams();
    const int64_t psi = params.numel();  // ZeRO-3 frees the full parameters
    auto strategy =
        makeDataParallelStrategy(params, makeSoloGroup("dp", 0), DataParallelOptions{stage, 64});
    CHECK(strategy->zeroStage() == stage);
    const ZeroMemoryModel model = strategy->memoryModel();
    CHECK(model.parameters_sharded == want[stage].parameters_sharded);
    CHECK(model.gradients_sharded == want[stage].gradients_sharded);
    CHECK(model.optimizer_states_sharded == want[stage].optimizer_states_sharded);
    CHECK((strategy->paramUnits() != nullptr) == (stage == 3));
    CHECK(strategy->numel() == psi);
    // Layout: 64-byte buckets (16 floats), so several; the tied embedding alone in its bucket;
    // with ZeRO-3 no bucket mixes two layers.
    CHECK(strategy->numBuckets() > 3);
    for (const GradBucket& b : strategy->buckets().all()) {
      std::set<int> units;
      bool tied = false;
      for (const BucketMember& m : b.members) {
        units.insert(unitOf(params.entries()[m.param].name));
        tied = tied || params.entries()[m.param].name == kTiedEmbeddingName;
      }
      if (tied) CHECK(b.members.size() == 1);
      if (stage == 3) CHECK(units.size() == 1);
    }
  }
}

TEST_CASE("ZeRO's closed forms: 16 psi, 8 psi + 8 psi/N, 4 psi + 12 psi/N, 16 psi/N",
          "[trainer][units][dp]") {
  const double psi = 1000, n = 4;
  const double forms[] = {16 * psi, 8 * psi + 8 * psi / n, 4 * psi + 12 * psi / n, 16 * psi / n};
  for (int stage = 0; stage <= 3; ++stage) {
    ParamSet params = smallParams();
    const ZeroMemoryModel m =
        makeDataParallelStrategy(params, makeSoloGroup("dp", 0), DataParallelOptions{stage, 64})
            ->memoryModel();
    INFO("zero " << stage);
    CHECK(m.parameterBytes(psi, 4) + m.gradientBytes(psi, 4) + m.optimizerStateBytes(psi, 4) ==
          Approx(forms[stage]));
  }
}

TEST_CASE(
    "one step of each stage's strategy and optimizer: analytic gradients, SGD update, "
    "ZeRO's bytes for N = 1",
    "[trainer][units][dp]") {
  for (int stage = 0; stage <= 3; ++stage) {
    for (bool adamw : {false, true}) {
      INFO("zero " << stage << (adamw ? " adamw" : " sgd"));
      ParamSet params = smallParams();
      std::vector<at::Tensor> before, coefficients;
      for (size_t i = 0; i < params.entries().size(); ++i) {
        before.push_back(params.entries()[i].tensor.detach().clone());
        coefficients.push_back(coefficient(params.entries()[i], i));
      }
      const double psi = double(params.numel());  // ZeRO-3 frees the full parameters
      auto strategy =
          makeDataParallelStrategy(params, makeSoloGroup("dp", 0), DataParallelOptions{stage, 64});
      OptimizerConfig config;
      config.adamw = adamw;
      GroupPtr dp = makeSoloGroup("dp", 0);
      auto optimizer = makeOptimizer(params, *strategy, dp, config);
      ParamUnits* units = strategy->paramUnits();

      strategy->beginStep();
      strategy->gatherRoot();
      strategy->setLastMicrobatch(true);
      if (units != nullptr) {  // what the model does around a layer's recomputed backward
        for (int l = 0; l < 2; ++l) units->gather(l, true);
      }
      at::Tensor loss = at::zeros({});
      for (size_t i = 0; i < params.entries().size(); ++i) {
        const ParamEntry& e = params.entries()[i];
        loss = loss + (e.tensor * coefficients[i]).sum();
      }
      loss.backward();
      if (units != nullptr) {
        for (int l = 1; l >= 0; --l) {
          units->reduceGrads(l);
          units->release(l);
        }
      }
      strategy->finish();
      strategy->releaseRoot();
      for (size_t i = 0; i < params.entries().size(); ++i) {
        INFO(params.entries()[i].name);
        CHECK(at::allclose(strategy->fullGrad(i), coefficients[i]));
      }
      const ZeroMemoryModel model = strategy->memoryModel();
      CHECK(strategy->gradientBytes() == int64_t(model.gradientBytes(psi, 1)));
      CHECK(strategy->parameterBytes() == int64_t(model.parameterBytes(psi, 1)));
      CHECK(optimizer->stateBytes() == (adamw ? int64_t(model.optimizerStateBytes(psi, 1)) : 0));

      optimizer->step(0.5);
      CHECK(optimizer->stepCount() == 1);
      strategy->gatherRoot();
      if (units != nullptr) {
        for (int l = 0; l < 2; ++l) units->gather(l, false);
      }
      for (size_t i = 0; i < params.entries().size() && !adamw; ++i) {
        const ParamEntry& e = params.entries()[i];
        INFO(e.name);
        CHECK(at::allclose(e.tensor.detach(), before[i] - 0.5 * coefficients[i]));
      }
    }
  }
}

TEST_CASE("a ZeRO stage the factory does not know is one line naming it", "[trainer][units][dp]") {
  ParamSet params = smallParams();
  CHECK_THROWS_WITH(
      makeDataParallelStrategy(params, makeSoloGroup("dp", 0), DataParallelOptions{4, 64}),
      Catch::Contains("--zero 4") && Catch::Contains("0, 1, 2 or 3"));
  auto plain = makeDataParallelStrategy(params, makeSoloGroup("dp", 0), DataParallelOptions{0, 64});
  CHECK_THROWS_WITH(plain->gradShard(0), Catch::Contains("keeps no shards"));
}
