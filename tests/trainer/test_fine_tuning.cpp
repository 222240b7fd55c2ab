// LoRA and prompt tuning (issue 32 points 2, 3) end to end: step 1 of LoRA is the base model's;
// what trains, is reduced and is optimised is only the adapters / the prompt (the trainer's own
// accounting against 16 r h L and P h); TP 2 (and TP 2 + SP, DP 2 with ZeRO-2/3, PP 2 for LoRA)
// against one process; the independent torch.nn reference (reference_gpt.py) extended with LoRA and
// prompts;
// --load of a base checkpoint, --save-merged against W + (alpha/r) B A; refused combinations; and
// (with the tracerun launcher) the trace's memory categories against the closed forms.
#include "trainer_test_util.h"

#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <sstream>

using namespace gpttrain::testing;

namespace {

const std::string kPython = "/usr/bin/python3";
constexpr int kRank = 4, kHidden = 32, kLayers = 2, kPrompt = 3;

struct Run {
  std::vector<double> losses;
  std::string grads;                                         // --dump-grads file
  std::string log;                                           // rank 0's output
  long long psi = 0, states = 0, gradients = 0, params = 0;  // rank 0 at the optimizer step
};

Run train(const std::string& dir, const std::string& name, int ranks,
          const std::vector<std::string>& extra) {
  Run r;
  const std::string json = dir + "/" + name + ".json";
  r.grads = dir + "/" + name + ".pt";
  auto run = launchRanks(kGpttrain,
                         tinyModelArgs() + extra +
                             std::vector<std::string>{"--log-json", json, "--dump-grads", r.grads},
                         ranks, dir + "/" + name);
  INFO(name << ":\n" << run.summary());
  REQUIRE(run.ok());
  r.log = run.logs[0];
  r.losses = jsonValues(json, "loss");
  const std::string key = "at the optimizer step holds parameters ";
  const size_t at = r.log.find(key);
  REQUIRE(at != std::string::npos);
  int zero = 0, dp = 0;
  REQUIRE(
      std::sscanf(r.log.c_str() + at + key.size(),
                  "%lld B, gradients %lld B, optimizer states %lld B (zero %d, dp %d, psi %lld)",
                  &r.params, &r.gradients, &r.states, &zero, &dp, &r.psi) == 6);
  return r;
}

std::map<std::string, at::Tensor> loadArchive(const std::string& path) {
  torch::serialize::InputArchive in;
  in.load_from(path);
  std::map<std::string, at::Tensor> out;
  for (const auto& key : in.keys()) {
    at::Tensor t;
    in.read(key, t);
    out[key] = t;
  }
  return out;
}

double relError(const at::Tensor& ref, const at::Tensor& got) {
  return (ref.to(at::kDouble) - got.to(at::kDouble)).norm().item<double>() /
         std::max(ref.to(at::kDouble).norm().item<double>(), 1e-30);
}

// Every gradient of `got` against `ref` (same names): the worst relative error.
double worstGradError(const std::string& ref_path, const std::string& got_path,
                      std::string& report) {
  const auto ref = loadArchive(ref_path), got = loadArchive(got_path);
  REQUIRE(!ref.empty());
  REQUIRE(ref.size() == got.size());
  double worst = 0.0;
  for (const auto& [name, a] : ref) {
    auto it = got.find(name);
    REQUIRE(it != got.end());
    REQUIRE(a.sizes().equals(it->second.sizes()));
    const double e = relError(a, it->second);
    if (e > worst) report = name + ": relative error " + std::to_string(e);
    worst = std::max(worst, e);
  }
  return worst;
}

void checkSameLosses(const Run& ref, const Run& got, double rel) {
  REQUIRE(ref.losses.size() == 5);
  REQUIRE(got.losses.size() == ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    INFO("step " << i + 1 << ": one process " << ref.losses[i] << ", parallel " << got.losses[i]);
    CHECK(std::abs(ref.losses[i] - got.losses[i]) <= rel * std::abs(ref.losses[i]));
  }
}

std::vector<std::string> loraArgs(const std::string& init_b = "zeros") {
  return {"--lora-rank", std::to_string(kRank), "--lora-alpha", "8", "--lora-init-b", init_b};
}

// The reference GPT on a --dump-init directory: its losses, and its step-1 gradients by name
// (from grads.bin in the manifest's order and shapes).
struct Reference {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> grads;
};

Reference runReference(const std::string& dump, const std::string& out) {
  const std::string cmd =
      kPython + " " + REFERENCE_GPT_PY + " " + dump + " " + out + " > " + out + ".log 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(cmd << "\n" << readFile(out + ".log"));
  REQUIRE(rc == 0);
  Reference ref;
  const std::string text = readFile(out + "/losses.json");
  std::stringstream list(text.substr(text.find('[') + 1, text.find(']') - text.find('[') - 1));
  for (std::string v; std::getline(list, v, ',');) ref.losses.push_back(std::stod(v));
  const std::string bytes = readFile(out + "/grads.bin");
  const std::string manifest = readFile(dump + "/manifest.json");
  const std::regex entry(R"re(\{"name":"([^"]+)","offset":(\d+),"shape":\[([0-9,]*)\]\})re");
  for (std::sregex_iterator it(manifest.begin(), manifest.end(), entry), end; it != end; ++it) {
    std::vector<int64_t> shape;
    std::stringstream dims((*it)[3]);
    for (std::string d; std::getline(dims, d, ',');) shape.push_back(std::stoll(d));
    at::Tensor t = at::empty(shape, at::kFloat);
    const size_t offset = std::stoull((*it)[2]) * sizeof(float);
    REQUIRE(offset + size_t(t.numel()) * sizeof(float) <= bytes.size());
    std::memcpy(t.data_ptr<float>(), bytes.data() + offset, size_t(t.numel()) * sizeof(float));
    ref.grads[(*it)[1]] = t;
  }
  return ref;
}

bool pythonHasTorch() {
  return std::system((kPython + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
}

// gpttrain's one-process run with --dump-init against the reference: losses 1e-5 relative, every
// trainable gradient (what --dump-grads holds) 1e-4 relative.
void checkAgainstReference(const std::string& dir, const std::vector<std::string>& mode) {
  if (!pythonHasTorch()) {
    WARN("skipped: " << kPython << " cannot import torch");
    return;
  }
  const Run one =
      train(dir, "oracle", 0, mode + std::vector<std::string>{"--dump-init", dir + "/dump"});
  const Reference ref = runReference(dir + "/dump", dir + "/ref");
  REQUIRE(ref.losses.size() == one.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    INFO("step " << i + 1 << ": reference " << ref.losses[i] << ", gpttrain " << one.losses[i]);
    CHECK(std::abs(ref.losses[i] - one.losses[i]) <= 1e-5 * std::abs(ref.losses[i]));
  }
  const auto got = loadArchive(one.grads);
  REQUIRE(!got.empty());
  for (const auto& [name, g] : got) {
    INFO(name);
    REQUIRE(ref.grads.count(name) == 1);
    CHECK(g.abs().max().item<double>() > 0.0);  // nothing trainable has a zero gradient
    CHECK(relError(ref.grads.at(name), g) <= 1e-4);
  }
}

}  // namespace

TEST_CASE("LoRA: step 1 is the base model's, only the adapters train", "[trainer][lora]") {
  const std::string dir = scratchDir("lora_one");
  const Run base = train(dir, "base", 0, {});
  const Run lora = train(dir, "lora", 0, loraArgs());
  // B = 0: the adapted model is the base model until the first update.
  CHECK(std::abs(lora.losses[0] - base.losses[0]) <= 1e-6 * std::abs(base.losses[0]));
  CHECK(std::abs(lora.losses[4] - base.losses[4]) > 1e-4);  // then it trains other weights
  // A [r, in], B [out, r] on qkv h->3h, proj h->h, fc1 h->4h, fc2 4h->h: 16 r h per layer.
  CHECK(lora.psi == 16LL * kRank * kHidden * kLayers);
  CHECK(lora.states == 8 * lora.psi);               // AdamW's two fp32 moments
  CHECK(lora.gradients == 4 * lora.psi);            // gradient buffers of the adapters only
  CHECK(lora.params == 4 * (base.psi + lora.psi));  // the frozen base and the adapters
  const auto grads = loadArchive(lora.grads);
  CHECK(grads.size() == size_t(8 * kLayers));  // lora_a and lora_b of 4 linears per layer
  for (const auto& [name, g] : grads) {
    INFO(name);
    CHECK(name.find(".lora_") != std::string::npos);
  }
  SECTION("--lora-targets qkv,fc2: (4h + 5h) r per layer") {
    const Run two = train(dir, "targets", 0,
                          loraArgs() + std::vector<std::string>{"--lora-targets", "qkv,fc2"});
    CHECK(two.psi == 9LL * kRank * kHidden * kLayers);
  }
}

TEST_CASE("LoRA under TP 2, TP 2 + SP, DP 2 ZeRO-2 and ZeRO-3, PP 2 equals one process",
          "[trainer][lora]") {
  // B drawn non-zero (--lora-init-b normal) so that A's step-1 gradient is not zero.
  const std::string dir = scratchDir("lora_tp");
  const Run one = train(dir, "one", 0, loraArgs("normal"));
  const std::vector<std::pair<std::string, std::vector<std::string>>> layouts{
      {"tp2", {"--tp", "2"}},
      {"tp2_sp", {"--tp", "2", "--sp"}},
      {"dp2_zero2", {"--zero", "2"}},
      {"dp2_zero3", {"--zero", "3"}},  // layers recomputed; their input needs no gradient
      {"pp2", {"--pp", "2"}}};
  for (const auto& [name, layout] : layouts) {
    INFO(name);
    const Run par = train(dir, name, 2, loraArgs("normal") + layout);
    checkSameLosses(one, par, 1e-5);
    std::string report;
    const double worst = worstGradError(one.grads, par.grads, report);
    INFO(report);
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("LoRA matches the torch.nn reference GPT with adapters", "[trainer][lora][oracle]") {
  checkAgainstReference(scratchDir("lora_oracle"), loraArgs("normal"));
}

TEST_CASE("Prompt tuning: the prompt alone trains, TP 2 equals one process, the reference agrees",
          "[trainer][prompt]") {
  const std::string dir = scratchDir("prompt");
  const std::vector<std::string> mode{"--prompt-tuning", std::to_string(kPrompt)};
  const Run one = train(dir, "one", 0, mode);
  CHECK(one.psi == kPrompt * kHidden);
  CHECK(one.states == 8LL * kPrompt * kHidden);
  const Run tp2 = train(dir, "tp2", 2, mode + std::vector<std::string>{"--tp", "2"});
  checkSameLosses(one, tp2, 1e-5);
  std::string report;
  const double worst = worstGradError(one.grads, tp2.grads, report);
  INFO(report);
  CHECK(worst <= 1e-5);
  checkAgainstReference(dir, mode);
}

TEST_CASE("LoRA fine-tunes a base checkpoint and saves merged weights", "[trainer][lora]") {
  const std::string dir = scratchDir("lora_ckpt");
  const std::string base_ckpt = dir + "/base", lora_ckpt = dir + "/lora", merged = dir + "/merged";
  train(dir, "base", 0, {"--steps", "2", "--save", base_ckpt});
  const Run fresh = train(dir, "fresh", 0, loraArgs("normal"));
  const Run tuned =
      train(dir, "tuned", 0,
            loraArgs("normal") + std::vector<std::string>{"--load", base_ckpt, "--save", lora_ckpt,
                                                          "--save-merged", merged});
  CHECK(tuned.log.find("fine-tuning the base model of") != std::string::npos);
  CHECK(tuned.losses.size() == 5);            // from step 1, not the base run's step 2
  CHECK(tuned.losses[0] != fresh.losses[0]);  // another base: the one trained 2 steps
  const auto base = loadArchive(base_ckpt + "/step_2/rank_0.pt");
  const auto after = loadArchive(lora_ckpt + "/step_5/rank_0.pt");
  const auto merge = loadArchive(merged + "/step_5/rank_0.pt");
  const std::string w = "param.layers.1.mlp.fc1.weight";
  // The frozen base is the loaded one, unchanged by 5 steps.
  CHECK(at::equal(base.at(w), after.at(w)));
  CHECK(after.count("exp_avg.layers.1.mlp.fc1.weight") == 0);
  CHECK(after.count("param.layers.1.mlp.fc1.lora_a") == 1);
  // Merged = W + (alpha / r) B A, computed here.
  const at::Tensor want =
      after.at(w) + (8.0 / kRank) * at::matmul(after.at("param.layers.1.mlp.fc1.lora_b"),
                                               after.at("param.layers.1.mlp.fc1.lora_a"));
  CHECK(relError(want, merge.at(w)) <= 1e-6);
  CHECK(merge.count("param.layers.1.mlp.fc1.lora_a") == 0);
  CHECK(at::equal(merge.at("param.layers.1.ln1.weight"), after.at("param.layers.1.ln1.weight")));
  // The merged checkpoint is a base to fine-tune again: B = 0 starts from the merged model.
  const Run again = train(dir, "again", 0, {"--lora-rank", "2", "--load", merged});
  CHECK(again.log.find("fine-tuning the base model of") != std::string::npos);
}

TEST_CASE("Fine-tuning refuses what it does not support, one line, exit 2", "[trainer][lora]") {
  const std::string dir = scratchDir("lora_refused");
  struct Case {
    std::vector<std::string> args;
    int ranks;
    std::string text;
  };
  const std::vector<Case> cases{
      {{"--lora-rank", "4", "--prompt-tuning", "2"}, 0, "give one of them"},
      {{"--lora-alpha", "8"}, 0, "--lora-alpha needs --lora-rank"},
      {{"--prompt-tuning", "2", "--pp", "2"}, 2, "--prompt-tuning needs --pp 1"},
      {{"--prompt-tuning", "2", "--tp", "2", "--sp"}, 2, "does not work with --sp"},
      {{"--lora-rank", "4", "--save-merged", "x", "--zero", "3"}, 0, "--save-merged needs --zero"},
      {{"--lora-rank", "4", "--lora-targets", "qkv,ln1"}, 0, "--lora-targets"}};
  int i = 0;
  for (const auto& [args, ranks, text] : cases) {
    auto run =
        launchRanks(kGpttrain, tinyModelArgs() + args, ranks, dir + "/" + std::to_string(i++));
    INFO(run.logs[0]);
    CHECK(run.exit_codes[0] == 2);
    CHECK(run.logs[0].find(text) != std::string::npos);
  }
}

#ifdef TRACERUN_EXE
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/reader.h"

#include "traced_peaks.h"

// The trace's memory categories (allocations tagged by the trainer, summed by trace/'s memory
// timeline) against the closed forms: AdamW's two fp32 moments, 8 B per trainable parameter, and
// one fp32 gradient per trainable parameter; the parameters are the base model's plus the adapters.
TEST_CASE("Fine-tuning in the trace: optimizer state 8 x 16 r h L (LoRA), 8 P h (prompt)",
          "[trainer][lora][prompt][trace]") {
  const std::string dir = scratchDir("fine_tuning_trace");
  const auto base = tracedPeaks(dir, "base", 1, {});
  const auto lora = tracedPeaks(dir, "lora", 1, loraArgs());
  const long long adapters = 16LL * kRank * kHidden * kLayers;
  CHECK(lora.at("optimizer_state") == 8 * adapters);
  CHECK(lora.at("gradient") == 4 * adapters);
  CHECK(lora.at("parameter") == base.at("parameter") + 4 * adapters);
  // The memory view's reference line (trace/'s memoryClosedForms): 4 phi of frozen base plus
  // ZeRO-0's 16 psi over the trainable count, equal to the three measured peaks' sum.
  const auto forms = tracerun::trace::analysis::memoryClosedForms(
      tracerun::trace::TraceReader::open(dir + "/lora.db"), 0);
  REQUIRE(forms.size() == 1);
  INFO(forms[0].label);
  CHECK(forms[0].formula == "4\u03a6 + 16\u03a8");
  CHECK(forms[0].bytes ==
        double(lora.at("parameter") + lora.at("gradient") + lora.at("optimizer_state")));
#ifdef TRACEDOT_EXE
  // tracedot model: each adapter a module with its count; the caption's share of the model (the
  // base model's parameters, 4 B each in the trace, plus the adapters).
  auto dot =
      launchRanks(TRACEDOT_EXE, {"model", dir + "/lora.db", "-o", dir + "/lora.txt", "-T", "txt"},
                  0, dir + "/dot");
  REQUIRE(dot.ok());
  const std::string picture = readFile(dir + "/lora.txt");
  INFO(picture);
  const long long total = base.at("parameter") / 4 + adapters;
  char caption[96];
  std::snprintf(caption, sizeof caption, "trainable 4,096 of %lld,%03lld", total / 1000,
                total % 1000);
  CHECK(adapters == 4096);
  CHECK(total >= 10000);  // two groups of digits, as the caption's above
  CHECK(total < 1000000);
  CHECK(picture.find(caption) != std::string::npos);
  CHECK(picture.find("layers.0.mlp.fc2.lora | LoRA | params 640 \u00b7 trainable 640") !=
        std::string::npos);  // R (4h + h); the layers fold x2
#endif
  const auto prompt = tracedPeaks(dir, "prompt", 1, {"--prompt-tuning", std::to_string(kPrompt)});
  CHECK(prompt.at("optimizer_state") == 8LL * kPrompt * kHidden);
  CHECK(prompt.at("gradient") == 4LL * kPrompt * kHidden);
  CHECK(prompt.at("parameter") == base.at("parameter") + 4LL * kPrompt * kHidden);
  std::printf(
      "fine-tuning trace: base parameters %lld B; LoRA r %d: optimizer %lld B, gradients "
      "%lld B; prompt %d: optimizer %lld B, gradients %lld B\n",
      base.at("parameter"), kRank, lora.at("optimizer_state"), lora.at("gradient"), kPrompt,
      prompt.at("optimizer_state"), prompt.at("gradient"));
}
#endif
