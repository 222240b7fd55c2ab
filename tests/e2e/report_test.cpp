// `tracerun report` end to end on real traced gpttrain runs (one process, and a two-stage pipeline
// through the launcher), checked against what gpttrain printed (its parameter count: 4 bytes per
// parameter, gradient buffer and two AdamW states), the closed-form bubble, the schedule's message
// counts and the capture's own peak counter; plus the lost-data exit, the fixture trace, and text
// against JSON on a hand-built trace where every section has rows (every number the text shows).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <regex>

#include "analysis_builder.h"
#include "e2e_common.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/format.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"
#include "two_stage_1f1b.h"

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

// Runs of white space collapsed to one space, none at either end.
std::string squeezed(const std::string& s) {
  std::string out;
  for (char c : s) {
    const bool space = c == ' ' || c == '\t';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string joined(const std::vector<std::string>& cells) {
  std::string out;
  for (const std::string& c : cells) out += (out.empty() ? "" : " ") + c;
  return out;
}

std::string percent(double f) {
  char out[32];
  std::snprintf(out, sizeof out, "%.1f%%", f * 100);
  return out;
}

// A trace where every section of the report has rows: the two-stage 1F1B pipeline of
// report_diff_test.cpp (two_stage_1f1b.h: m = 2, one step) whose phases run ops and autograd
// nodes, memory of every shown category on both ranks, the stages' sends and receives, and a
// gradient all-reduce on each rank after the pipeline.
std::string everySectionTrace(const std::string& dir) {
  using core::Category;
  using core::MemoryCategory;
  using testing::BSpan;
  testing::TraceBuilder tb(2);
  const testing::TwoStage1F1B shape;
  const int64_t t = shape.t;
  uint64_t ptr = 0x1000;
  for (int r = 0; r < 2; ++r) {
    tb.memory(r, {t - 300, ptr++, 65536, MemoryCategory::kParameter, "aten::empty", "init"});
    tb.memory(r, {t - 200, ptr++, 65536, MemoryCategory::kGradient, "aten::zeros", "init"});
    tb.memory(r, {t - 100, ptr++, 131072, MemoryCategory::kOptimizerState, "aten::zeros_like",
                  "optimizer"});
  }
  auto work = [&](int rank, bool forward, int64_t start, int64_t len, int mb) {
    if (forward) {
      tb.span(rank, BSpan{"main",
                          "aten::addmm",
                          Category::kOp,
                          start + 1000,
                          start + len - 1000,
                          2,
                          {},
                          "f32[8,16]"});
      tb.memory(rank, {start + 1500, ptr++, 4096 * (mb + 1), MemoryCategory::kActivation,
                       "aten::addmm", "forward"});
      return;
    }
    tb.span(rank, BSpan{"main", "AddmmBackward0", Category::kBackward, start + 1000,
                        start + len - 1000, 2});
    tb.span(rank, BSpan{"main",
                        "aten::mm",
                        Category::kOp,
                        start + 2000,
                        start + len - 2000,
                        3,
                        {},
                        "f32[8,16]"});
    tb.memory(rank, {start + 2500, ptr++, 512, MemoryCategory::kTemporary, "aten::mm", "backward"});
  };
  testing::addTwoStage1F1B(tb, shape, work);
  const int64_t end = shape.end();
  for (int r = 0; r < 2; ++r) {
    tb.span(r, BSpan{"async",
                     "gloo:all_reduce",
                     Category::kComm,
                     end + 1000 + 500 * r,
                     end + 6000,
                     0,
                     {},
                     "f32[4096]"});
    tb.span(r, BSpan{"main", "step", Category::kPhase, t - 500, end + 8000, 0, {{"step", 1}}});
  }
  return tb.write(dir);
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

TEST_CASE("tracerun report on the fixture trace: counts, --top and a usage error") {
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

// Text and JSON must show the same values: every number the text prints (bubble fractions, each
// stage's times, memory peaks by category, the largest allocations, top ops' counts and times,
// collectives, point-to-point and per-rank comm figures, dropped events) is rebuilt from the parsed
// JSON with the text's formatting and looked for as a whole row of the text (runs of spaces
// collapsed, so column widths are not what is compared), on a trace where no section is empty.
TEST_CASE("tracerun report: text and JSON agree on every number the text shows") {
  const std::string db = everySectionTrace(testing::scratchDir("report_agree"));
  const auto t = runTracerun({"report", db});
  ProcessResult jr;
  const json j = reportJson(db, &jr);
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  REQUIRE(jr.exit_code == 0);
  // No section is empty, so every kind of row below is checked.
  REQUIRE(j["pipeline"].is_object());
  REQUIRE(j["pipeline"]["per_stage"].size() == 2);
  REQUIRE(j["memory"]["per_rank"].size() == 2);
  REQUIRE(!j["memory"]["per_rank"][0]["largest_at_peak"].empty());
  REQUIRE(!j["ops"]["top"].empty());
  REQUIRE(!j["comm"]["collectives"].empty());
  REQUIRE(!j["comm"]["p2p"].empty());
  REQUIRE(j["comm"]["per_rank"].size() == 2);

  std::vector<std::string> rows;
  for (size_t at = 0; at < t.out.size();) {
    const size_t end = std::min(t.out.find('\n', at), t.out.size());
    rows.push_back(squeezed(t.out.substr(at, end - at)));
    at = end + 1;
  }
  INFO(t.out);
  auto showsRow = [&](const std::vector<std::string>& cells) {
    const std::string want = squeezed(joined(cells));
    INFO("row: " << want);
    CHECK(std::count(rows.begin(), rows.end(), want) == 1);
  };
  auto showsIn = [&](const std::string& head, const std::string& part) {
    const std::string want = squeezed(part);
    INFO("in the row starting '" << head << "': " << want);
    CHECK(std::any_of(rows.begin(), rows.end(), [&](const std::string& r) {
      return r.rfind(head, 0) == 0 && r.find(want) != std::string::npos;
    }));
  };
  auto d = [](const json& v) { return trace::formatDuration(v.get<double>()); };
  auto b = [](const json& v) { return trace::formatBytes(v.get<double>()); };
  auto n = [](const json& v) { return std::to_string(v.get<int64_t>()); };

  // Headline.
  showsIn(db + ":", n(j["ranks"]) + " ranks (world size " + n(j["world_size"]) + "), " +
                        n(j["steps"]) + " step (mean " + d(j["step_mean_ns"]) + "), " +
                        n(j["events"]["spans"]) + " spans, " + n(j["events"]["memory"]) +
                        " memory events");

  // Pipeline: the bubble fractions and each stage's row.
  const json& p = j["pipeline"];
  showsIn("pipeline:", "p=" + n(p["stages"]) + " stages, m=" + n(p["microbatches"]) +
                           " microbatches, v=" + n(p["virtual"]));
  showsRow({"bubble: measured " + percent(p["bubble_measured"].get<double>()) + ", closed form " +
            percent(p["bubble_theory"].get<double>()) + ", modeled " +
            percent(p["bubble_modeled"].get<double>()) + " (median over steps)"});
  for (const json& s : p["per_stage"]) {
    std::string ranks;
    for (const json& r : s["ranks"]) ranks += (ranks.empty() ? "" : ",") + n(r);
    showsRow({n(s["stage"]), ranks, d(s["window_ns"]), d(s["forward_ns"]), d(s["backward_ns"]),
              d(s["send_ns"]), d(s["recv_wait_ns"]), d(s["idle_ns"]),
              percent(s["bubble"].get<double>()), percent(s["bubble_modeled"].get<double>())});
  }

  // The critical path of the pipeline's step: its length against the step's window.
  const json& cp = p["critical_path"];
  REQUIRE(cp.is_object());
  showsIn("critical path:",
          d(cp["length_ns"]) + " of step " + n(cp["step"]) + "'s " + d(cp["step_ns"]) + " (" +
              percent(cp["share"].get<double>()) + "), " + std::to_string(cp["chain"].size()) +
              " actions: " + cp["chain"][0]["action"].get<std::string>() + " -> ");

  // Memory: each rank's peak and live bytes by category at it, and rank 0's largest allocations.
  for (const json& m : j["memory"]["per_rank"]) {
    std::vector<std::string> cells = {n(m["rank"]), m["device"].get<std::string>(),
                                      b(m["peak_bytes"])};
    for (const char* c : {"parameter", "gradient", "optimizer_state", "activation", "temporary",
                          "input", "other"}) {
      cells.push_back(b(m["by_category"][c]));
    }
    showsRow(cells);
  }
  const json& rank0 = j["memory"]["per_rank"][0];
  showsRow({"largest live at rank 0's peak (" + rank0["device"].get<std::string>() + ", at " +
            d(rank0["peak_ts_ns"]) + "):"});
  for (const json& a : rank0["largest_at_peak"]) {
    showsRow({b(a["bytes"]), a["category"].get<std::string>(), a["op"].get<std::string>(),
              a["scope"].get<std::string>()});
  }

  // Ops: the totals and each top op's count and times.
  showsIn("ops:", n(j["ops"]["count"]) + " spans of " + n(j["ops"]["distinct"]) +
                      " ops and autograd nodes; top " + std::to_string(j["ops"]["top"].size()));
  for (const json& o : j["ops"]["top"]) {
    showsRow({o["name"].get<std::string>(), o["category"].get<std::string>(), n(o["count"]),
              d(o["total_ns"]), d(o["self_ns"])});
  }

  // Communication: collectives, point-to-point and each rank's overlap.
  for (const json& c : j["comm"]["collectives"]) {
    std::string busbw = "-";
    if (!c["busbw_gbps"].is_null()) {
      char x[32];
      std::snprintf(x, sizeof x, "%.3f GB/s", c["busbw_gbps"].get<double>());
      busbw = x;
    }
    char algbw[32];
    std::snprintf(algbw, sizeof algbw, "%.3f", c["algbw_gbps"].get<double>());
    showsIn(c["op"].get<std::string>(), "calls " + n(c["calls"]) + " " + b(c["bytes"]) + " " +
                                            d(c["time_ns"]) + " algbw " + algbw + " GB/s busbw " +
                                            busbw);
  }
  for (const json& s : j["comm"]["p2p"]) {
    showsRow({s["src"].is_null() ? "?" : n(s["src"]), s["dst"].is_null() ? "?" : n(s["dst"]),
              s["kind"].get<std::string>(), n(s["messages"]), b(s["bytes"]), d(s["recv_ns"]),
              d(s["wait_ns"]), d(s["transfer_ns"])});
  }
  for (const json& s : j["comm"]["per_rank"]) {
    const double comm = s["comm_ns"].get<double>();
    showsRow({n(s["rank"]), d(s["comm_ns"]), d(s["compute_ns"]), d(s["overlap_ns"]),
              comm > 0 ? percent(s["overlap_ns"].get<double>() / comm) : "-",
              s["measured_on"] == "gpu kernels" ? "GPU" : "CPU"});
  }

  // Stats.
  showsRow({"stats: dropped events " + n(j["stats"]["dropped_events"])});
}
