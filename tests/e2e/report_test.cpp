// `tracerun report` end to end on real traced gpttrain runs (one process, and a two-stage pipeline
// through the launcher), checked against what gpttrain printed (its parameter count: 4 bytes per
// parameter, gradient buffer and two AdamW states), the closed-form bubble, the schedule's message
// counts and the capture's own peak counter; plus the lost-data exit and the fixture trace.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <regex>

#include "e2e_common.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;
using namespace tracerun::e2e;
using nlohmann::json;

namespace {

int64_t parametersPrinted(const std::string& out) {
  std::smatch m;
  const std::regex re("([0-9]+) parameters on rank 0");
  if (!std::regex_search(out, m, re)) return -1;
  return std::stoll(m[1].str());
}

json reportJson(const std::string& path, ProcessResult* result = nullptr) {
  const auto r = runTracerun({"report", "--json", path});
  INFO(r.describe());
  REQUIRE(r.exited);
  if (result) *result = r;
  return json::parse(r.out);
}

int64_t statValue(const json& report, const std::string& name, int rank) {
  for (const auto& row : report["stats"]["rows"]) {
    if (row["name"] == name && row["rank"] == rank) return row["value"].get<int64_t>();
  }
  return -1;
}

// gpttrain under the launcher, one thread per rank (runGpttrain).
ProcessResult runGpt(const std::vector<std::string>& launcher,
                     const std::vector<std::string>& gpt) {
  return runGpttrain(launcher, GPTTRAIN_BIN, gpt);
}

}  // namespace

#ifdef GPTTRAIN_BIN

TEST_CASE("tracerun report on a traced single-process gpttrain run") {
  const std::string db = scratch().file("gpt1.db");
  const int layers = 2, seq = 32;
  const auto run =
      runGpt({"-o", db, "--status", "off"},
             {"--steps", "3", "--layers", std::to_string(layers), "--hidden", "64", "--heads", "4",
              "--seq-len", std::to_string(seq), "--global-batch", "4", "--optimizer", "adamw"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  const int64_t psi = parametersPrinted(run.out);
  REQUIRE(psi > 0);

  ProcessResult r;
  const json j = reportJson(db, &r);
  CHECK(r.exit_code == 0);
  CHECK(j["ranks"] == 1);
  CHECK(j["steps"] == 3);
  CHECK(j["pipeline"].is_null());
  REQUIRE(j["memory"]["per_rank"].size() == 1);
  const json& m = j["memory"]["per_rank"][0];
  CHECK(m["rank"] == 0);
  CHECK(m["device"] == "cpu");
  const json& at = m["by_category"];
  // Parameters: 4 bytes each, plus the layers' additive causal-mask buffers (fp32, seq x seq)
  // that are allocated under the same tag; the flat gradient buffer and AdamW's two states
  // exactly.
  CHECK(at["parameter"].get<int64_t>() >= 4 * psi);
  CHECK(at["parameter"].get<int64_t>() <= 4 * psi + layers * seq * seq * 4);
  CHECK(at["gradient"].get<int64_t>() == 4 * psi);
  CHECK(at["optimizer_state"].get<int64_t>() == 8 * psi);
  CHECK(at["activation"].get<int64_t>() > 0);
  int64_t sum = 0;
  for (const auto& [k, v] : at.items()) sum += v.get<int64_t>();
  CHECK(sum == m["peak_bytes"].get<int64_t>());
  // The peak replayed from the events equals the capture's own running counter.
  if (m["unmatched_frees"] == 0) {
    CHECK(m["peak_bytes"].get<int64_t>() == statValue(j, "memory_peak_bytes", 0));
  }
  CHECK(j["ops"]["count"].get<int64_t>() > 1000);
  CHECK(j["ops"]["top"].size() == 15);
  CHECK(j["stats"]["dropped_events"] == 0);
  CHECK(j["stats"]["lost_data"] == false);

  const auto text = runTracerun({"report", db});
  INFO(text.describe());
  CHECK(text.exit_code == 0);
  CHECK(text.err.empty());
  CHECK(text.out.find("pipeline: none") != std::string::npos);
  CHECK(text.out.find("memory: live bytes by category") != std::string::npos);
}

TEST_CASE("tracerun report on a traced two-stage 1f1b pipeline (two ranks)") {
  const std::string db = scratch().file("pp2.db");
  const int m = 4, steps = 2;
  const auto run =
      runGpt({"--nproc-per-node", "2", "--status", "off", "-o", db},
             {"--pp", "2", "--schedule", "1f1b", "--global-batch", std::to_string(m), "--layers",
              "2", "--hidden", "32", "--steps", std::to_string(steps), "--quiet"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  ProcessResult r;
  const json j = reportJson(db, &r);
  CHECK(r.exit_code == 0);
  CHECK(j["ranks"] == 2);
  CHECK(j["steps"] == steps);
  const json& p = j["pipeline"];
  REQUIRE(p.is_object());
  CHECK(p["schedule"] == "1f1b");
  CHECK(p["stages"] == 2);
  CHECK(p["microbatches"] == m);
  CHECK(p["virtual"] == 1);
  CHECK(p["steps"] == steps);
  CHECK(p["bubble_theory"].get<double>() == Approx(1.0 / (m + 1)));
  for (const char* k : {"bubble_measured", "bubble_modeled"}) {
    CHECK(p[k].get<double>() > 0);
    CHECK(p[k].get<double>() < 1);
  }
  REQUIRE(p["per_stage"].size() == 2);
  CHECK(p["per_stage"][0]["ranks"] == json::array({0}));
  CHECK(p["per_stage"][1]["ranks"] == json::array({1}));
  CHECK(p["unmatched_recvs"] == 0);
  // Every microbatch's activation goes 0 -> 1 and its gradient 1 -> 0, once per step; each
  // receive is paired with its send.
  int found = 0;
  for (const auto& s : j["comm"]["p2p"]) {
    const bool fwd = s["src"] == 0 && s["dst"] == 1 && s["kind"] == "forward";
    const bool bwd = s["src"] == 1 && s["dst"] == 0 && s["kind"] == "backward";
    if (!fwd && !bwd) continue;
    ++found;
    CHECK(s["messages"] == m * steps);
    CHECK(s["matched"] == m * steps);
    CHECK(s["wait_ns"].get<int64_t>() + s["transfer_ns"].get<int64_t>() ==
          s["recv_ns"].get<int64_t>());
  }
  CHECK(found == 2);
  REQUIRE(j["memory"]["per_rank"].size() == 2);
}

#endif  // GPTTRAIN_BIN

TEST_CASE("tracerun report exits 3 with one line when the capture lost data") {
  const std::string db = scratch().file("lost.db");
  {
    core::Session session;
    trace::ShardOptions o;
    o.path = db;
    trace::ShardWriter w(session, o);
    w.setStat("dropped_events", 7, trace::Severity::kError);
    w.close();
  }
  ProcessResult r;
  const json j = reportJson(db, &r);
  CHECK(r.exit_code == 3);
  REQUIRE(r.errLines().size() == 1);
  CHECK_THAT(r.errLines()[0], Catch::StartsWith("tracerun: " + db + ": the capture lost data"));
  CHECK_THAT(r.errLines()[0], Catch::Contains("dropped_events = 7"));
  CHECK(j["stats"]["lost_data"] == true);
  CHECK(j["stats"]["dropped_events"] == 7);
}

TEST_CASE("tracerun report on the fixture trace: text and JSON agree on what they count") {
  const auto& g = fixtureTrace();
  ProcessResult r;
  const json j = reportJson(g.merged, &r);
  CHECK(r.exit_code == 0);
  CHECK(j["ranks"] == 3);
  CHECK(j["world_size"] == 3);
  CHECK(j["events"]["spans"] == static_cast<int64_t>(g.spans.size()));
  CHECK(j["memory"]["per_rank"].size() == 3);
  const auto text = runTracerun({"report", "--top", "3", g.merged});
  CHECK(text.exit_code == 0);
  CHECK(text.out.find("top 3 by self time") != std::string::npos);
  const auto usage = runTracerun({"report", g.merged, "--bogus"});
  CHECK(usage.exit_code == 2);
  CHECK(usage.errLines().size() == 1);
}
