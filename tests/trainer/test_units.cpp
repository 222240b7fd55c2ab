// Unit tests without processes: the rank grid, the learning-rate schedule, the data's sample
// assignment (same global batch on every layout) and TP sharding of initial weights.
#include "data/data.h"
#include "model/params.h"
#include "optim/optimizer.h"
#include "parallel/rank_grid.h"
#include "tracerun/torch_compat.h"

#include <torch/optim/adamw.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

using namespace gpttrain;

TEST_CASE("rank grid: tp varies fastest, then dp, then pp", "[trainer][units]") {
  RankGrid grid(8, 2, 2);  // tp 2, pp 2, dp 2
  CHECK(grid.dpSize() == 2);
  CHECK(grid.coords(5).tp == 1);
  CHECK(grid.coords(5).dp == 0);
  CHECK(grid.coords(5).pp == 1);
  for (int r = 0; r < 8; ++r) CHECK(grid.rankOf(grid.coords(r)) == r);
  CHECK(grid.tpGroup(5) == std::vector<int>{4, 5});
  CHECK(grid.dpGroup(5) == std::vector<int>{5, 7});
  CHECK(grid.ppGroup(5) == std::vector<int>{1, 5});
}

TEST_CASE("learning rate: linear warm-up, cosine to min_lr, flat after", "[trainer][units]") {
  ScheduleConfig s{1.0, 0.1, 4, 14};
  CHECK(learningRate(s, 1) == Approx(0.25));
  CHECK(learningRate(s, 4) == Approx(1.0));
  CHECK(learningRate(s, 9) == Approx(0.1 + 0.45 * (1 + std::cos(M_PI * 0.5))));
  CHECK(learningRate(s, 14) == Approx(0.1));
  CHECK(learningRate(s, 20) == Approx(0.1));
}

TEST_CASE("adamwUpdate (fused and ATen paths) follows libtorch's own AdamW over 5 steps",
          "[trainer][units]") {
  // Reference: torch::optim::AdamW with the same hyperparameters. 1027 elements: the fused pass's
  // 4-wide body and its scalar tail; a transposed (non-contiguous) tensor takes the ATen path.
  const double lr = 0.01, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, wd = 0.1;
  for (bool contiguous : {true, false}) {
    at::manual_seed(7);
    at::Tensor start = contiguous ? at::randn({1027}) : at::randn({13, 79}).t();
    at::Tensor reference = start.clone().set_requires_grad(true);
    torch::optim::AdamW adamw(
        {reference},
        torch::optim::AdamWOptions(lr).betas({beta1, beta2}).eps(eps).weight_decay(wd));
    at::Tensor p = start.clone();
    at::Tensor m = at::zeros_like(p), v = at::zeros_like(p);
    REQUIRE(p.is_contiguous() == contiguous);
    for (int t = 1; t <= 5; ++t) {
      const at::Tensor g = at::randn(p.sizes()).mul_(t % 2 ? 1.0 : 1e-3);
      reference.mutable_grad() = g.clone();
      adamw.step();
      AdamwStep step;
      step.lr = lr;
      step.decay = 1.0 - lr * wd;
      step.beta1 = beta1;
      step.beta2 = beta2;
      step.eps = eps;
      step.bias1 = 1.0 - std::pow(beta1, t);
      step.bias2 = 1.0 - std::pow(beta2, t);
      adamwUpdate(p, g, m, v, step);
      const double diff = (p - reference.detach()).abs().max().item<double>();
      INFO("contiguous " << contiguous << ", step " << t << ": max |difference| " << diff);
      CHECK(diff <= 1e-6 * reference.detach().abs().max().item<double>());
    }
  }
}

TEST_CASE("adamwUpdateMany (CUDA's multi-tensor AdamW) = adamwUpdate's ATen path, bit for bit",
          "[trainer][units]") {
  // The same operations as _foreach ops (on the CPU, libtorch runs them tensor by tensor: the
  // same arithmetic the CUDA multi-tensor kernels do, checked here against the per-tensor ATen
  // path); each parameter with its own decay (1 for a no-decay parameter), over 3 steps.
  at::manual_seed(11);
  const std::vector<std::vector<int64_t>> shapes{{17, 5}, {2, 3}, {8, 8}};
  const std::vector<double> decay{1.0 - 0.01 * 0.1, 1.0, 1.0 - 0.01 * 0.1};
  std::vector<at::Tensor> p, m, v, p1, m1, v1;
  for (const auto& shape : shapes) {
    p.push_back(at::randn(shape));
    m.push_back(at::zeros(shape));
    v.push_back(at::zeros(shape));
    p1.push_back(p.back().clone());
    m1.push_back(m.back().clone());
    v1.push_back(v.back().clone());
  }
  for (int t = 1; t <= 3; ++t) {
    std::vector<at::Tensor> g;
    for (const auto& shape : shapes) g.push_back(at::randn(shape));
    AdamwStep step;
    step.lr = 0.01;
    step.bias1 = 1.0 - std::pow(step.beta1, t);
    step.bias2 = 1.0 - std::pow(step.beta2, t);
    adamwUpdateMany(p, g, m, v, decay, step);
    for (size_t i = 0; i < shapes.size(); ++i) {
      AdamwStep one = step;
      one.decay = decay[i];
      // A transposed view takes adamwUpdate's ATen path (the fused CPU pass is for contiguous).
      at::Tensor pt = p1[i].t(), gt = g[i].t(), mt = m1[i].t(), vt = v1[i].t();
      REQUIRE_FALSE(pt.is_contiguous());
      adamwUpdate(pt, gt, mt, vt, one);
      INFO("step " << t << ", parameter " << i);
      CHECK(at::equal(p[i], p1[i]));
      CHECK(at::equal(m[i], m1[i]));
      CHECK(at::equal(v[i], v1[i]));
    }
  }
}

TEST_CASE("adamwUpdateAsCuda rounds as the CUDA kernels do: each kernel's result rounded once",
          "[trainer][units]") {
  // What the CUDA kernels of adamwUpdate's ATen ops compute, element by element: every kernel's
  // result is its exact value rounded once to float (a multiply-add that nvcc contracts included;
  // the division by sqrt(bias2) is a multiply by its float reciprocal). Computed here in long
  // double (64-bit significand): a product of two floats is exact there, and the sums below are
  // exact too, the inputs' magnitudes kept within 2^4 of each other (|x| in [0.5, 2]).
  at::manual_seed(5);
  const int64_t n = 1031;
  const auto draw = [&] {
    at::Tensor u = at::rand({n}) * 1.5 + 0.5;
    return u * (at::rand({n}) < 0.5).to(at::kFloat).mul(2).sub(1);
  };
  at::Tensor p = draw(), m = draw() * 0.1, v = draw().abs() * 0.01;
  at::Tensor pHost = p.clone(), mHost = m.clone(), vHost = v.clone();
  using LD = long double;
  int64_t differFromHost = 0;
  for (int t = 1; t <= 3; ++t) {
    const at::Tensor g = draw();
    AdamwStep s;
    s.lr = 0.01;
    s.decay = t == 2 ? 1.0 : 1.0 - 0.01 * 0.1;  // step 2: a parameter without weight decay
    s.bias1 = 1.0 - std::pow(s.beta1, t);
    s.bias2 = 1.0 - std::pow(s.beta2, t);
    std::vector<float> wantP(n), wantM(n), wantV(n);
    const float decay = float(s.decay), beta1 = float(s.beta1), beta2 = float(s.beta2);
    const float omb1 = float(1.0 - s.beta1), omb2 = float(1.0 - s.beta2), eps = float(s.eps);
    const float inv = float(1.0 / double(float(std::sqrt(s.bias2))));
    const float step = float(-s.lr / s.bias1);
    for (int64_t i = 0; i < n; ++i) {
      const float pi = p[i].item<float>(), mi = m[i].item<float>(), vi = v[i].item<float>();
      const float gi = g[i].item<float>();
      const float p1 = s.decay != 1.0 ? float(LD(pi) * decay) : pi;
      const float m1 = float(LD(omb1) * gi + float(LD(mi) * beta1));
      const float v1 = float(LD(omb2) * float(LD(gi) * gi) + float(LD(vi) * beta2));
      const float d = float(LD(float(std::sqrt(double(v1)))) * inv);
      const float d2 = float(LD(d) + eps);
      wantP[i] = float(LD(step) * float(LD(m1) / d2) + p1);
      wantM[i] = m1;
      wantV[i] = v1;
    }
    adamwUpdateAsCuda(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(),
                      v.data_ptr<float>(), n, s);
    INFO("step " << t);
    CHECK(at::equal(p, at::tensor(wantP)));
    CHECK(at::equal(m, at::tensor(wantM)));
    CHECK(at::equal(v, at::tensor(wantV)));
    // The host's own pass from the same states rounds every product and sum: other floats.
    adamwUpdate(pHost, g, mHost, vHost, s);
    differFromHost += (pHost != p).sum().item<int64_t>() + (mHost != m).sum().item<int64_t>();
    pHost.copy_(p), mHost.copy_(m), vHost.copy_(v);
  }
  INFO("elements where the host pass rounds otherwise: " << differFromHost);
  CHECK(differFromHost > 0);
  // SGD's p.add_(g, -lr): one multiply-add.
  const at::Tensor g = draw();
  std::vector<float> want(n);
  for (int64_t i = 0; i < n; ++i)
    want[i] = float(LD(float(-0.01)) * g[i].item<float>() + p[i].item<float>());
  sgdUpdateAsCuda(p.data_ptr<float>(), g.data_ptr<float>(), n, 0.01);
  CHECK(at::equal(p, at::tensor(want)));
}

TEST_CASE("foreachNormsFloat: fp32 norms of a list, in one call where libtorch can",
          "[trainer][units]") {
  at::manual_seed(3);
  const std::vector<at::Tensor> f{at::randn({5, 7}), at::randn({40})};
  const auto norms = tracerun::compat::foreachNormsFloat(f);
  REQUIRE(norms.has_value());
  REQUIRE(norms->size() == 2);
  for (size_t i = 0; i < f.size(); ++i) {
    CHECK((*norms)[i].scalar_type() == at::kFloat);
    CHECK((*norms)[i].item<double>() == Approx(f[i].norm().item<double>()).epsilon(1e-6));
  }
  // bf16: fp32 norms of the bf16 values from libtorch 2.4 on; before, none (per-tensor path).
  const std::vector<at::Tensor> b{f[0].to(at::kBFloat16), f[1].to(at::kBFloat16)};
  const auto bnorms = tracerun::compat::foreachNormsFloat(b);
  if (!TRACERUN_TORCH_VERSION_AT_LEAST(2, 4)) {
    CHECK_FALSE(bnorms.has_value());
  } else {
    REQUIRE(bnorms.has_value());
    for (size_t i = 0; i < b.size(); ++i) {
      CHECK((*bnorms)[i].scalar_type() == at::kFloat);
      CHECK((*bnorms)[i].item<double>() ==
            Approx(b[i].to(at::kFloat).norm().item<double>()).epsilon(1e-6));
    }
  }
}

TEST_CASE("every layout sees the same samples in each step", "[trainer][units]") {
  const int global = 24;
  for (int dp : {1, 2, 3, 4}) {
    for (int b : {1, 2, 3}) {
      if (global % (dp * b) != 0) continue;
      const int m = global / (dp * b);
      std::set<uint64_t> seen;
      for (int r = 0; r < dp; ++r)
        for (int mb = 0; mb < m; ++mb)
          for (int i = 0; i < b; ++i) seen.insert(sampleIndex(5, global, r, m, b, mb, i));
      INFO("dp " << dp << " micro-batch " << b);
      REQUIRE(seen.size() == size_t(global));
      CHECK(*seen.begin() == 5u * global);
      CHECK(*seen.rbegin() == 6u * global - 1);
    }
  }
  TokenSource src = TokenSource::synthetic(64, 3);
  std::vector<int64_t> a(17), b(17);
  src.sample(Split::kTrain, 11, 16, a.data());
  src.sample(Split::kTrain, 11, 16, b.data());
  CHECK(a == b);
  CHECK(std::all_of(a.begin(), a.end(), [](int64_t t) { return t >= 0 && t < 64; }));
}

TEST_CASE("TP shards of a parameter concatenate to the single-process tensor", "[trainer][units]") {
  ParamSet whole(9, 0, 1, torch::kCPU);
  at::Tensor full = whole.add("w", {6, 4}, 1, Init::kNormal, 0.02);
  std::vector<at::Tensor> shards;
  for (int r = 0; r < 2; ++r) {
    ParamSet part(9, r, 2, torch::kCPU);
    shards.push_back(part.add("w", {6, 4}, 1, Init::kNormal, 0.02).detach());
  }
  CHECK(at::equal(at::cat(shards, 1), full.detach()));
  ParamSet other(9, 0, 1, torch::kCPU);
  CHECK_FALSE(at::equal(other.add("v", {6, 4}, 1, Init::kNormal, 0.02).detach(), full.detach()));
}
