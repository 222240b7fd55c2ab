// The runtime's main test: every parallel layout reproduces the single-process run (fp32,
// dropout 0) -- first-step gradients to 1e-5 relative, losses over 5 steps to 1e-4 absolute --
// as real multi-process jobs on loopback. The reference is always the single-process run.
#include "trainer_test_util.h"

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

using namespace gpttrain::testing;

namespace {

struct Grads {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
};

Grads loadGrads(const std::string& path) {
  torch::serialize::InputArchive in;
  in.load_from(path);
  Grads g;
  for (const auto& key : in.keys()) {
    at::Tensor t;
    in.read(key, t);
    g.names.push_back(key);
    g.tensors.push_back(t);
  }
  return g;
}

// Relative error ||a - b|| / ||a|| over all parameters, and a report of the worst parameters
// with their first mismatching values.
double compareGrads(const Grads& ref, const Grads& got, std::string& report) {
  std::ostringstream out;
  double diff2 = 0.0, ref2 = 0.0;
  std::vector<std::pair<double, size_t>> worst;
  for (size_t i = 0; i < ref.names.size(); ++i) {
    size_t j = 0;
    while (j < got.names.size() && got.names[j] != ref.names[i]) ++j;
    if (j == got.names.size()) {
      out << "missing gradient " << ref.names[i] << "\n";
      diff2 += ref.tensors[i].pow(2).sum().item<double>();
      continue;
    }
    const at::Tensor& a = ref.tensors[i];
    const at::Tensor& b = got.tensors[j];
    if (!a.sizes().equals(b.sizes())) {
      out << ref.names[i] << ": shape " << a.sizes() << " vs " << b.sizes() << "\n";
      diff2 += a.pow(2).sum().item<double>();
      continue;
    }
    const double d = (a - b).to(at::kDouble).pow(2).sum().item<double>();
    const double r = a.to(at::kDouble).pow(2).sum().item<double>();
    diff2 += d;
    ref2 += r;
    worst.emplace_back(std::sqrt(d / std::max(r, 1e-30)), i);
  }
  std::sort(worst.rbegin(), worst.rend());
  for (size_t k = 0; k < std::min<size_t>(3, worst.size()); ++k) {
    const size_t i = worst[k].second;
    size_t j = 0;
    while (got.names[j] != ref.names[i]) ++j;
    at::Tensor a = ref.tensors[i].flatten(), b = got.tensors[j].flatten();
    out << ref.names[i] << ": relative error " << worst[k].first << "; first mismatches:";
    int shown = 0;
    for (int64_t e = 0; e < a.numel() && shown < 5; ++e) {
      const double x = a[e].item<double>(), y = b[e].item<double>();
      if (std::abs(x - y) > 1e-5 * std::abs(x) + 1e-9) {
        out << " [" << e << "] " << x << " vs " << y;
        ++shown;
      }
    }
    out << "\n";
  }
  report = out.str();
  return std::sqrt(diff2 / std::max(ref2, 1e-30));
}

void checkLosses(const std::vector<double>& ref, const std::vector<double>& got) {
  REQUIRE(ref.size() == 5);
  REQUIRE(got.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("step " << i + 1 << ": single-process loss " << ref[i] << ", parallel " << got[i]);
    CHECK(std::abs(ref[i] - got[i]) <= 1e-4);
  }
}

struct Outputs {
  std::string json, grads, log;
  std::vector<std::string> logs;  // every rank's
};

Outputs runLayout(const std::string& dir, const std::string& name, int ranks,
                  const std::vector<std::string>& layout,
                  const std::vector<std::string>& extra = {}) {
  Outputs o{dir + "/" + name + ".json", dir + "/" + name + ".pt", "", {}};
  auto run =
      launchRanks(kGpttrain,
                  tinyModelArgs() + layout + extra +
                      std::vector<std::string>{"--log-json", o.json, "--dump-grads", o.grads},
                  ranks, dir + "/" + name);
  INFO(name << ":\n" << run.summary());
  REQUIRE(run.ok());
  o.log = run.logs[0];
  o.logs = run.logs;
  return o;
}

// What the parallel run must report having done (rank 0's end-of-run summary).
int flagValue(const std::vector<std::string>& layout, const std::string& flag, int fallback) {
  auto it = std::find(layout.begin(), layout.end(), flag);
  return it == layout.end() || it + 1 == layout.end() ? fallback : std::stoi(*(it + 1));
}

// The trainer's own accounting of what each rank holds at the optimizer step against ZeRO's closed
// forms for fp32 AdamW (psi parameters per model-parallel rank, N data-parallel ranks): stage 0
// 16psi, 1 8psi+8psi/N, 2 4psi+12psi/N, 3 16psi/N -- each category within 1% (bucket padding).
void checkMemory(const Outputs& par, int zero, int dp) {
  const std::string key = "at the optimizer step holds parameters ";
  for (size_t r = 0; r < par.logs.size(); ++r) {
    const std::string& log = par.logs[r];
    const size_t at = log.find(key);
    INFO("rank " << r << " log:\n" << log);
    REQUIRE(at != std::string::npos);
    long long params = 0, grads = 0, states = 0, psi = 0;
    int z = -1, n = 0;
    REQUIRE(
        std::sscanf(log.c_str() + at + key.size(),
                    "%lld B, gradients %lld B, optimizer states %lld B (zero %d, dp %d, psi %lld)",
                    &params, &grads, &states, &z, &n, &psi) == 6);
    CHECK(z == zero);
    CHECK(n == dp);
    const double p = 4.0 * psi;  // bytes of one fp32 copy
    const double want_params = zero >= 3 ? p / dp : p;
    const double want_grads = zero >= 2 ? p / dp : p;
    const double want_states = zero >= 1 ? 2 * p / dp : 2 * p;
    INFO("rank " << r << ": parameters " << params << " B (want " << want_params << "), gradients "
                 << grads << " B (want " << want_grads << "), optimizer states " << states
                 << " B (want " << want_states << "), psi " << psi);
    CHECK(std::abs(params - want_params) <= 0.01 * want_params);
    CHECK(std::abs(grads - want_grads) <= 0.01 * want_grads);
    CHECK(std::abs(states - want_states) <= 0.01 * want_states);
    const double forms[] = {16.0 * psi, 8.0 * psi + 8.0 * psi / dp, 4.0 * psi + 12.0 * psi / dp,
                            16.0 * psi / dp};
    CHECK(std::abs(double(params + grads + states) - forms[zero]) <= 0.01 * forms[zero]);
  }
}

void checkMechanisms(const Outputs& par, int ranks, const std::vector<std::string>& layout) {
  const int tp = flagValue(layout, "--tp", 1), pp = flagValue(layout, "--pp", 1);
  const bool sp = std::find(layout.begin(), layout.end(), "--sp") != layout.end();
  const int dp = ranks / (tp * pp);
  INFO("rank 0 log:\n" << par.log);
  const auto recompute = std::find(layout.begin(), layout.end(), "--recompute");
  if (recompute != layout.end()) {  // forwards were re-run: layers x microbatches x steps
    const std::string key = "forwards re-run in backward on rank 0: ";
    const size_t at = par.log.find(key);
    REQUIRE(at != std::string::npos);
    CHECK(std::stol(par.log.substr(at + key.size())) > 0);
  }
  if (flagValue(layout, "--zero", 0) >= 1 && dp > 1) {  // Gloo: parameters gathered by list + cat
    CHECK(par.log.find("collectives (dp group):") != std::string::npos);
    CHECK(par.log.find("all_gather_list+cat=") != std::string::npos);
  }
  if (flagValue(layout, "--zero", 0) >= 2 && dp > 1) {  // Gloo: reduce-scatter by all-reduce
    CHECK(par.log.find("all_reduce+narrow=") != std::string::npos);
  }
  if (pp > 1) {  // rank 0 ran its schedule and held as many microbatches as it promises
    const std::string key = "most in flight on rank 0: ";
    const size_t at = par.log.find(key);
    REQUIRE(at != std::string::npos);
    const size_t mb_at = par.log.find("microbatches ");
    REQUIRE(mb_at != std::string::npos);
    const int m = std::stoi(par.log.substr(mb_at + 13));
    const int v = flagValue(layout, "--vp", 1);
    const auto it = std::find(layout.begin(), layout.end(), "--schedule");
    const std::string schedule = it == layout.end() ? "1f1b" : *(it + 1);
    const int want = schedule == "gpipe"                         ? m
                     : schedule == "1f1b" || schedule == "zb-h1" ? std::min(pp, m)
                     : schedule == "chimera" ? pp / 2 + 1  // the paper's (D/2 + 1) on the ends
                                             : std::min((pp - 1) * 2 + (v - 1) * pp + 1, m * v);
    CHECK(std::stoi(par.log.substr(at + key.size())) == want);
  }
  if (sp) {  // Gloo: the sequence-parallel collectives must have taken the fallbacks
    CHECK(par.log.find("all_gather_list+cat=") != std::string::npos);
    CHECK(par.log.find("all_reduce+narrow=") != std::string::npos);
  }
  // Every bucket's reduction launched from a hook, overlapping backward (stage 3 reduces each
  // layer's gradients right after that layer's backward instead).
  if (dp > 1 && flagValue(layout, "--zero", 0) < 3) {
    const std::string key = "launched during backward: ";
    const size_t at = par.log.find(key);
    REQUIRE(at != std::string::npos);
    CHECK(std::stol(par.log.substr(at + key.size())) >= 5 * 2);  // 5 steps x several buckets
    CHECK(par.log.find("after: 0") != std::string::npos);
  }
}

void checkEquivalent(const std::string& test, int ranks, const std::vector<std::string>& layout,
                     const std::vector<std::string>& extra = {}) {
  const std::string dir = scratchDir(test);
  Outputs ref = runLayout(dir, "single", 0, {}, extra);
  Outputs par = runLayout(dir, "parallel", ranks, layout, extra);
  checkMechanisms(par, ranks, layout);
  if (std::find(extra.begin(), extra.end(), "sgd") == extra.end()) {  // the forms are AdamW's
    checkMemory(par, flagValue(layout, "--zero", 0),
                ranks / (flagValue(layout, "--tp", 1) * flagValue(layout, "--pp", 1)));
  }
  Grads ref_grads = loadGrads(ref.grads), par_grads = loadGrads(par.grads);
  REQUIRE(ref_grads.names.size() > 10);
  REQUIRE(par_grads.names.size() == ref_grads.names.size());
  std::string report;
  const double error = compareGrads(ref_grads, par_grads, report);
  INFO("first-step gradients: relative error " << error << "\n" << report);
  CHECK(error <= 1e-5);
  checkLosses(jsonValues(ref.json, "loss"), jsonValues(par.json, "loss"));
  // The global gradient norm counts TP shards once each and replicated parameters once.
  const auto ref_norms = jsonValues(ref.json, "grad_norm");
  const auto par_norms = jsonValues(par.json, "grad_norm");
  REQUIRE(par_norms.size() == ref_norms.size());
  for (size_t i = 0; i < ref_norms.size(); ++i) {
    INFO("step " << i + 1 << ": single-process grad_norm " << ref_norms[i] << ", parallel "
                 << par_norms[i]);
    CHECK(std::abs(ref_norms[i] - par_norms[i]) <= 1e-4 * ref_norms[i]);
  }
}

}  // namespace

TEST_CASE("tp=2 reproduces the single-process run", "[trainer][equivalence]") {
  checkEquivalent("equiv_tp2", 2, {"--tp", "2"});
}

TEST_CASE("tp=2 with sequence parallelism reproduces the single-process run",
          "[trainer][equivalence]") {
  checkEquivalent("equiv_tp2_sp", 2, {"--tp", "2", "--sp"});
}

TEST_CASE("dp=2 reproduces the single-process run", "[trainer][equivalence]") {
  checkEquivalent("equiv_dp2", 2, {});
}

TEST_CASE("dp=2 x tp=2 reproduces the single-process run", "[trainer][equivalence]") {
  checkEquivalent("equiv_dp2_tp2", 4, {"--tp", "2"});
}

TEST_CASE("dp=2 x tp=2 with sp, micro-batch 1, reproduces the single-process run",
          "[trainer][equivalence]") {
  checkEquivalent("equiv_dp2_tp2_sp", 4, {"--tp", "2", "--sp"}, {"--micro-batch-size", "1"});
}

TEST_CASE("sgd weights after one step: tp=2 with sp gives the single-process gradients",
          "[trainer][equivalence]") {
  // Plain SGD, no clipping: the second step's loss depends linearly on the first update.
  checkEquivalent("equiv_sgd_tp2_sp", 2, {"--tp", "2", "--sp"},
                  {"--optimizer", "sgd", "--clip-grad", "0", "--lr", "0.5"});
}

TEST_CASE("pp=2 gpipe reproduces the single-process run", "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_pp2_gpipe", 2, {"--pp", "2", "--schedule", "gpipe"});
}

TEST_CASE("pp=2 1f1b reproduces the single-process run", "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_pp2_1f1b", 2, {"--pp", "2", "--schedule", "1f1b"});
}

TEST_CASE("pp=2 interleaved v=2 (4 layers) reproduces the single-process run",
          "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_pp2_interleaved", 2,
                  {"--pp", "2", "--schedule", "interleaved", "--vp", "2"}, {"--layers", "4"});
}

TEST_CASE("pp=4 gpipe (4 layers) reproduces the single-process run", "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_pp4_gpipe", 4, {"--pp", "4", "--schedule", "gpipe"}, {"--layers", "4"});
}

TEST_CASE("pp=4 1f1b (4 layers) reproduces the single-process run", "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_pp4_1f1b", 4, {"--pp", "4", "--schedule", "1f1b"}, {"--layers", "4"});
}

TEST_CASE("pp=4 interleaved v=2 (8 layers) reproduces the single-process run",
          "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_pp4_interleaved", 4,
                  {"--pp", "4", "--schedule", "interleaved", "--vp", "2"}, {"--layers", "8"});
}

// ZB-H1: B (input gradient) and W (weight gradients) as two passes; synchronous, so the same
// gradients and losses. m = 4 microbatches (8 / 2), so rank 0 holds min(p, m) in flight until W.
TEST_CASE("pp=2 zb-h1 reproduces the single-process run", "[trainer][equivalence][pp][zbh1]") {
  checkEquivalent("equiv_pp2_zbh1", 2, {"--pp", "2", "--schedule", "zb-h1"});
}

TEST_CASE("pp=4 zb-h1 (4 layers) reproduces the single-process run",
          "[trainer][equivalence][pp][zbh1]") {
  checkEquivalent("equiv_pp4_zbh1", 4, {"--pp", "4", "--schedule", "zb-h1"}, {"--layers", "4"});
}

TEST_CASE("pp=2 x dp=2 zb-h1 (buckets reduced from W) reproduces the single-process run",
          "[trainer][equivalence][pp][zbh1]") {
  checkEquivalent("equiv_pp2_dp2_zbh1", 4, {"--pp", "2", "--schedule", "zb-h1"});
}

TEST_CASE(
    "pp=2 x dp=2 zb-h1 with ZeRO-1 and ZeRO-2 (hooks in the split W) reproduces the "
    "single-process run",
    "[trainer][equivalence][pp][zbh1]") {
  // ZeRO-2 places each gradient in its bucket from AccumulateGrad's pre-hook and frees buckets from
  // an engine callback: both now run inside W's per-node engine calls (split_backward.cpp).
  checkEquivalent("equiv_pp2_dp2_zbh1_zero1", 4,
                  {"--pp", "2", "--schedule", "zb-h1", "--zero", "1"});
  checkEquivalent("equiv_pp2_dp2_zbh1_zero2", 4,
                  {"--pp", "2", "--schedule", "zb-h1", "--zero", "2"});
}

TEST_CASE("tp=2 x pp=2 zb-h1 with sp reproduces the single-process run",
          "[trainer][equivalence][pp][zbh1]") {
  checkEquivalent("equiv_tp2_pp2_zbh1", 4,
                  {"--tp", "2", "--pp", "2", "--sp", "--schedule", "zb-h1"});
}

TEST_CASE("tp=2 x pp=2 x dp=2 with sp, micro-batch 1, reproduces the single-process run",
          "[trainer][equivalence][pp]") {
  checkEquivalent("equiv_tp2_pp2_dp2_sp", 8, {"--tp", "2", "--pp", "2", "--sp"},
                  {"--micro-batch-size", "1"});
}

TEST_CASE("zero-1 with dp=2 reproduces the single-process run", "[trainer][equivalence][zero]") {
  checkEquivalent("equiv_zero1_dp2", 2, {"--zero", "1"});
}

TEST_CASE("zero-2 with dp=2 reproduces the single-process run", "[trainer][equivalence][zero]") {
  checkEquivalent("equiv_zero2_dp2", 2, {"--zero", "2"});
}

TEST_CASE("zero-1 with dp=4 reproduces the single-process run", "[trainer][equivalence][zero]") {
  checkEquivalent("equiv_zero1_dp4", 4, {"--zero", "1"});
}

TEST_CASE("zero-2 with dp=4 reproduces the single-process run", "[trainer][equivalence][zero]") {
  checkEquivalent("equiv_zero2_dp4", 4, {"--zero", "2"});
}

TEST_CASE("tp=2 x pp=2 x dp=2 with zero-1 reproduces the single-process run",
          "[trainer][equivalence][zero][pp]") {
  checkEquivalent("equiv_tp2_pp2_dp2_zero1", 8, {"--tp", "2", "--pp", "2", "--zero", "1"});
}

TEST_CASE("tp=2 x pp=2 x dp=2 with zero-2 and sp, interleaved, reproduces the single-process run",
          "[trainer][equivalence][zero][pp]") {
  checkEquivalent(
      "equiv_tp2_pp2_dp2_zero2_sp", 8,
      {"--tp", "2", "--pp", "2", "--zero", "2", "--sp", "--schedule", "interleaved", "--vp", "2"},
      {"--layers", "4", "--global-batch", "16"});
}

TEST_CASE("recompute full, tp=2 x pp=2 with sp, reproduces the single-process run",
          "[trainer][equivalence][recompute]") {
  checkEquivalent("equiv_recompute_full", 4,
                  {"--tp", "2", "--pp", "2", "--sp", "--recompute", "full"});
}

TEST_CASE("recompute selective, pp=2 x dp=2 zero-1, reproduces the single-process run",
          "[trainer][equivalence][recompute]") {
  checkEquivalent("equiv_recompute_selective", 4,
                  {"--pp", "2", "--zero", "1", "--recompute", "selective"});
}

TEST_CASE("zero-3 with dp=2 reproduces the single-process run", "[trainer][equivalence][zero]") {
  checkEquivalent("equiv_zero3_dp2", 2, {"--zero", "3"});
}

TEST_CASE("zero-3 with dp=4 reproduces the single-process run", "[trainer][equivalence][zero]") {
  checkEquivalent("equiv_zero3_dp4", 4, {"--zero", "3"});
}

TEST_CASE(
    "tp=2 x pp=2 x dp=2 with zero-3, sp and selective recompute reproduces the "
    "single-process run",
    "[trainer][equivalence][zero][pp][recompute]") {
  checkEquivalent("equiv_tp2_pp2_dp2_zero3_sp", 8,
                  {"--tp", "2", "--pp", "2", "--zero", "3", "--sp", "--recompute", "selective"});
}

// Chimera: rank r holds down stage r and up stage p-1-r; the two replicas of each stage sum their
// gradients at the end of the step (the mirror group).
TEST_CASE("pp=2 chimera reproduces the single-process run", "[trainer][equivalence][pp][chimera]") {
  checkEquivalent("equiv_pp2_chimera", 2, {"--pp", "2", "--schedule", "chimera"});
}

TEST_CASE("pp=4 chimera (4 layers) reproduces the single-process run",
          "[trainer][equivalence][pp][chimera]") {
  checkEquivalent("equiv_pp4_chimera", 4, {"--pp", "4", "--schedule", "chimera"},
                  {"--layers", "4"});
}

TEST_CASE("tp=2 x pp=2 chimera with sp reproduces the single-process run",
          "[trainer][equivalence][pp][chimera]") {
  checkEquivalent("equiv_tp2_pp2_chimera", 4,
                  {"--tp", "2", "--pp", "2", "--sp", "--schedule", "chimera"});
}

TEST_CASE("pp=2 x dp=2 chimera reproduces the single-process run",
          "[trainer][equivalence][pp][chimera]") {
  checkEquivalent("equiv_pp2_dp2_chimera", 4, {"--pp", "2", "--schedule", "chimera"});
}
