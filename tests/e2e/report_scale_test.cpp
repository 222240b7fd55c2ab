// `tracerun report --json` on real traced multi-rank gpttrain runs (issue 6 item 6), checked against
// closed forms: the dry-run pipeline bubble of 1F1B (p 4, m 8) and interleaved (p 4, v 2, m 8);
// parameter + gradient + optimizer-state bytes at each rank's peak under ZeRO 0-3 at DP 4 against
// 16psi, 8psi + 8psi/N, 4psi + 12psi/N, 16psi/N; and the activation peak lowered by full and by
// selective recomputation.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "e2e_common.h"

using namespace tracerun::e2e;
using nlohmann::json;

#ifdef GPTTRAIN_BIN

namespace {

// psi: the parameter count of this model-parallel rank, as gpttrain prints it.
int64_t parametersPrinted(const std::string& out) {
  std::smatch m;
  const std::regex re("([0-9]+) parameters on rank 0");
  if (!std::regex_search(out, m, re)) return -1;
  return std::stoll(m[1].str());
}

json reportJson(const std::string& db) {
  const auto r = runTracerun({"report", "--json", db});
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  return json::parse(r.out);
}

// One intra-op and one BLAS thread per rank: quick and repeatable on a small machine.
ProcessResult runGpt(const std::vector<std::string>& launcher,
                     const std::vector<std::string>& gpt) {
  ::setenv("OMP_NUM_THREADS", "1", 1);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  std::vector<std::string> args = launcher;
  args.push_back("--");
  args.push_back(GPTTRAIN_BIN);
  args.insert(args.end(), gpt.begin(), gpt.end());
  args.push_back("--threads");
  args.push_back("1");
  return runTracerun(args);
}

// A dry run on 4 ranks (--pp 4, micro-batch 1, so m = global batch), 80 ms forward / 160 ms
// backward per microbatch (split over v chunks; long enough that message latency on a loaded
// 2-core machine stays well inside the 2-point tolerance); returns the report's pipeline object.
json dryRunPipeline(const std::string& name, const std::string& schedule, int v, int m) {
  const std::string db = scratch().file(name + ".db");
  const int layers = 2 * 4 * v;
  const auto run = runGpt({"--nproc-per-node", "4", "--status", "off", "-o", db},
                          {"--pp", "4", "--schedule", schedule, "--vp", std::to_string(v),
                           "--layers", std::to_string(layers), "--hidden", "32", "--heads", "4",
                           "--seq-len", "16", "--global-batch", std::to_string(m),
                           "--micro-batch-size", "1", "--steps", "3", "--dry-run-costs", "80,160",
                           "--quiet"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  const json j = reportJson(db);
  REQUIRE(j["pipeline"].is_object());
  return j["pipeline"];
}

// ZeRO stage z at DP 4 (AdamW, 2 steps): each rank's parameter + gradient + optimizer-state bytes
// at its peak within 10 % of the closed form.
void checkZero(int z) {
  const int n = 4;
  const std::string db = scratch().file("zero" + std::to_string(z) + ".db");
  const auto run = runGpt({"--nproc-per-node", std::to_string(n), "--status", "off", "-o", db},
                          {"--zero", std::to_string(z), "--layers", "2", "--hidden", "32",
                           "--heads", "4", "--seq-len", "16", "--global-batch", "4", "--steps",
                           "2", "--optimizer", "adamw"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  const double psi = static_cast<double>(parametersPrinted(run.out));
  REQUIRE(psi > 0);
  const double closed[] = {16 * psi, 8 * psi + 8 * psi / n, 4 * psi + 12 * psi / n,
                           16 * psi / n};
  const double expected = closed[z];
  const json j = reportJson(db);
  REQUIRE(j["ranks"] == n);
  REQUIRE(j["memory"]["per_rank"].size() == static_cast<size_t>(n));
  for (const auto& r : j["memory"]["per_rank"]) {
    const json& at = r["by_category"];
    const double held = at["parameter"].get<double>() + at["gradient"].get<double>() +
                        at["optimizer_state"].get<double>();
    INFO("zero " << z << " rank " << r["rank"] << " psi " << psi << " by_category " << at.dump()
                 << ": held " << held << " vs closed form " << expected);
    CHECK(held == Approx(expected).epsilon(0.10));
  }
}

int64_t activationPeak(const std::string& recompute) {
  const std::string db = scratch().file("recompute-" + recompute + ".db");
  const auto run = runGpt({"--status", "off", "-o", db},
                          {"--recompute", recompute, "--layers", "2", "--hidden", "64", "--heads",
                           "4", "--seq-len", "32", "--global-batch", "4", "--micro-batch-size",
                           "4", "--steps", "2", "--optimizer", "adamw", "--quiet"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  const json j = reportJson(db);
  REQUIRE(j["memory"]["per_rank"].size() == 1);
  // Each category's own highest live bytes (docs/report.md: category_peaks).
  return j["memory"]["per_rank"][0]["category_peaks"]["activation"].get<int64_t>();
}

}  // namespace

TEST_CASE("report scale: dry-run 1f1b p 4 m 8 bubble against the closed form") {
  const int p = 4, m = 8;
  const json pl = dryRunPipeline("dry-1f1b", "1f1b", 1, m);
  const double theory = double(p - 1) / (m + p - 1);
  INFO(pl.dump());
  CHECK(pl["schedule"] == "1f1b");
  CHECK(pl["stages"] == p);
  CHECK(pl["microbatches"] == m);
  CHECK(pl["virtual"] == 1);
  CHECK(pl["bubble_theory"].get<double>() == Approx(theory).margin(1e-9));
  CHECK(pl["bubble_measured"].get<double>() == Approx(theory).margin(0.02));
}

// Fails today: the report infers 2 stages (ranks {0,2} and {1,3}) for this interleaved p 4 v 2 run,
// so its bubble_theory is (1/2)/(8 + 1/2); the measured bubble is also ~2.5 points above the true
// closed form at 40/80 ms costs, ~1.4 points at 80/160 (message latency, more hops per unit of
// work).
TEST_CASE("report scale: dry-run interleaved v 2 p 4 m 8 bubble against the closed form",
          "[!mayfail]") {
  const int p = 4, v = 2, m = 8;
  const json pl = dryRunPipeline("dry-interleaved", "interleaved", v, m);
  const double theory = (double(p - 1) / v) / (m + double(p - 1) / v);
  INFO(pl.dump());
  CHECK(pl["schedule"] == "interleaved");
  CHECK(pl["stages"] == p);
  CHECK(pl["microbatches"] == m);
  CHECK(pl["virtual"] == v);
  CHECK(pl["bubble_theory"].get<double>() == Approx(theory).margin(1e-9));
  CHECK(pl["bubble_measured"].get<double>() == Approx(theory).margin(0.02));
}

TEST_CASE("report scale: ZeRO 0 at dp 4 holds 16 psi at the peak") { checkZero(0); }

TEST_CASE("report scale: ZeRO 1 at dp 4 holds 8 psi + 8 psi/N at the peak") { checkZero(1); }

// Fails today on most ranks: the peak falls in backward, where ZeRO-2 still holds the full
// gradient buffers (4 psi) next to the rank's gradient shard (docs/trainer.md: the full buffers are
// freed only after the last microbatch), so gradient = 5 psi there, not psi/N.
TEST_CASE("report scale: ZeRO 2 at dp 4 holds 4 psi + 12 psi/N at the peak", "[!mayfail]") {
  checkZero(2);
}

TEST_CASE("report scale: ZeRO 3 at dp 4 holds 16 psi/N at the peak") { checkZero(3); }

TEST_CASE("report scale: full and selective recompute lower the activation peak") {
  const int64_t none = activationPeak("none");
  const int64_t full = activationPeak("full");
  const int64_t selective = activationPeak("selective");
  INFO("activation peaks: none " << none << ", full " << full << ", selective " << selective);
  CHECK(none > 0);
  CHECK(full < none);
  CHECK(selective < none);
}

#endif  // GPTTRAIN_BIN
