// Diff tests of `tracerun report`, in the manner of Perfetto's diff tests: small traces with exact
// times (tests/trace/analysis_builder.h writes them through the real writer and merge), the built
// binary run on them, and its stdout, stderr and exit code compared with files kept under
// tests/e2e/report_expected/ — error text included. Also checks that the text and the JSON report
// carry the same numbers. Not a test of the analyses' arithmetic (tests/trace/analysis_*_test.cpp
// hold those to closed forms): this one pins what a user reads.
//
// After an intended change of the report, regenerate the expected files with
//   TRACERUN_UPDATE_EXPECTED=1 build/tests/e2e/e2e_report_diff_tests
// and read the diff before committing it.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "analysis_builder.h"
#include "e2e_common.h"
#include "two_stage_1f1b.h"

using namespace tracerun;
using namespace tracerun::e2e;
using namespace tracerun::testing;
using nlohmann::json;

namespace {

// ---- fixtures -----------------------------------------------------------------------------------

using core::Category;
using core::MemoryCategory;

// One rank's step: a forward phase with two ops (one nested), a backward phase with an autograd
// node, an optimizer phase; memory of every category; an all-reduce of the gradients.
void stepOnRank(TraceBuilder& tb, int rank, int step, int64_t t0, int64_t skew) {
  const int64_t s = t0 + skew;
  tb.span(rank, BSpan{"main", "step", Category::kPhase, s, s + 100000, 0, {{"step", step}}});
  tb.span(rank, BSpan{"main",
                      "forward",
                      Category::kPhase,
                      s + 1000,
                      s + 31000,
                      1,
                      {{"stage", 0}, {"chunk", 0}, {"microbatch", 0}}});
  tb.span(rank,
          BSpan{"main", "aten::linear", Category::kOp, s + 2000, s + 22000, 2, {}, "f32[8,16]"});
  tb.span(rank,
          BSpan{"main", "aten::addmm", Category::kOp, s + 3000, s + 21000, 3, {}, "f32[8,16]"});
  tb.span(rank,
          BSpan{"main", "aten::gelu", Category::kOp, s + 23000, s + 30000, 2, {}, "f32[8,16]"});
  tb.span(rank, BSpan{"main",
                      "backward",
                      Category::kPhase,
                      s + 32000,
                      s + 82000,
                      1,
                      {{"stage", 0}, {"chunk", 0}, {"microbatch", 0}}});
  tb.span(rank, BSpan{"main", "AddmmBackward0", Category::kBackward, s + 33000, s + 70000, 2});
  tb.span(rank, BSpan{"main", "aten::mm", Category::kOp, s + 34000, s + 69000, 3, {}, "f32[8,16]"});
  tb.span(rank, BSpan{"main", "optimizer", Category::kPhase, s + 85000, s + 99000, 1});
  tb.span(rank, BSpan{"main", "aten::add_", Category::kOp, s + 86000, s + 98000, 2, {}, "f32[16]"});
  tb.span(rank, BSpan{"async",
                      "gloo:all_reduce",
                      Category::kComm,
                      s + 71000 - skew,
                      s + 81000,
                      0,
                      {},
                      "f32[4096]"});
  // Parameters before the first step; activations freed in backward; a temporary in the optimizer.
  const uint64_t base = 0x10000u * static_cast<uint64_t>(step);
  if (step == 1) {
    tb.memory(rank, {s + 10, 0x1000, 65536, MemoryCategory::kParameter, "aten::empty", "init"});
    tb.memory(rank, {s + 20, 0x2000, 65536, MemoryCategory::kGradient, "aten::zeros", "init"});
    tb.memory(rank, {s + 30, 0x3000, 131072, MemoryCategory::kOptimizerState, "aten::zeros_like",
                     "optimizer"});
  }
  tb.memory(rank, {s + 3500, base + 0x100, 4096 * (rank + 1), MemoryCategory::kActivation,
                   "aten::addmm", "forward"});
  tb.memory(rank,
            {s + 24000, base + 0x200, 2048, MemoryCategory::kActivation, "aten::gelu", "forward"});
  tb.memory(rank, {s + 60000, base + 0x100, -4096 * (rank + 1), MemoryCategory::kActivation,
                   "aten::addmm", "backward"});
  tb.memory(rank, {s + 61000, base + 0x200, -2048, MemoryCategory::kActivation, "aten::gelu",
                   "backward"});
  tb.memory(rank,
            {s + 87000, base + 0x300, 512, MemoryCategory::kTemporary, "aten::add_", "optimizer"});
  tb.memory(rank,
            {s + 97000, base + 0x300, -512, MemoryCategory::kTemporary, "aten::add_", "optimizer"});
}

// Two data-parallel ranks, two steps, rank 1 arriving 3 us late at each all-reduce.
std::string dataParallelTrace(const std::string& dir) {
  TraceBuilder tb(2);
  for (int step = 1; step <= 2; ++step) {
    const int64_t t0 = 1000 + (step - 1) * 200000;
    stepOnRank(tb, 0, step, t0, 0);
    stepOnRank(tb, 1, step, t0, 3000);
  }
  return tb.write(dir);
}

// A two-stage 1F1B pipeline, m = 2, one step: the schedule spelled out by hand
// (two_stage_1f1b.h, shared with report_test.cpp's every-section trace).
std::string pipelineTrace(const std::string& dir) {
  TraceBuilder tb(2);
  const TwoStage1F1B shape;
  addTwoStage1F1B(tb, shape);
  for (int r = 0; r < 2; ++r) {
    tb.span(
        r,
        BSpan{
            "main", "step", Category::kPhase, shape.t - 500, shape.end() + 500, 0, {{"step", 1}}});
  }
  return tb.write(dir);
}

// One rank whose capture dropped events: the report must say it is incomplete (exit 3).
std::string lostDataTrace(const std::string& dir) {
  TraceBuilder tb(1);
  stepOnRank(tb, 0, 1, 1000, 0);
  tb.stat(0, {"dropped_events", 17, trace::Severity::kError});
  return tb.write(dir);
}

// ---- running and comparing ----------------------------------------------------------------------

std::string expectedDir() {
  return std::string(TRACERUN_SOURCE_DIR) + "/tests/e2e/report_expected";
}

bool updating() {
  const char* v = std::getenv("TRACERUN_UPDATE_EXPECTED");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// What a user sees, with the scratch directory (which differs per run) replaced by "<dir>".
std::string normalized(std::string text, const std::string& dir) {
  for (size_t at; (at = text.find(dir)) != std::string::npos;)
    text.replace(at, dir.size(), "<dir>");
  return text;
}

std::string transcript(const ProcessResult& r, const std::string& dir) {
  std::string t = "exit " + std::to_string(r.exited ? r.exit_code : 128 + r.signal) + "\n";
  t += "--- stdout\n" + normalized(r.out, dir);
  t += "--- stderr\n" + normalized(r.err, dir);
  return t;
}

// Prints the first differing line of two texts, in the manner of llm.c's first mismatches.
std::string firstDifference(const std::string& want, const std::string& got) {
  size_t line = 1, a = 0, b = 0;
  while (a < want.size() || b < got.size()) {
    const size_t ea = std::min(want.find('\n', a), want.size());
    const size_t eb = std::min(got.find('\n', b), got.size());
    const std::string la = want.substr(a, ea - a), lb = got.substr(b, eb - b);
    if (la != lb) {
      return "line " + std::to_string(line) + ":\n  expected: " + la + "\n  got:      " + lb;
    }
    a = ea + 1;
    b = eb + 1;
    ++line;
  }
  return "texts are equal";
}

// Runs `tracerun ARGS`, compares its transcript with report_expected/NAME (or writes it).
void diffTest(const std::string& name, const std::vector<std::string>& args,
              const std::string& dir) {
  const ProcessResult r = runTracerun(args);
  INFO(r.describe());
  REQUIRE((r.exited || r.signal == 0));
  const std::string got = transcript(r, dir);
  const std::string path = expectedDir() + "/" + name;
  if (updating()) {
    writeFile(path, got);
    WARN("wrote " << path);
    return;
  }
  std::string want;
  try {
    want = readFile(path);
  } catch (const std::exception&) {
    FAIL(path << " is missing: run with TRACERUN_UPDATE_EXPECTED=1 to create it");
  }
  INFO(name << ": " << firstDifference(want, got));
  CHECK(got == want);
}

struct Fixture {
  std::string name;
  std::function<std::string(const std::string&)> write;
};

const std::vector<Fixture>& fixtures() {
  static const std::vector<Fixture> all = {{"data_parallel", dataParallelTrace},
                                           {"pipeline_1f1b", pipelineTrace},
                                           {"lost_data", lostDataTrace}};
  return all;
}

// The fixture's trace, written once per test process into its own directory.
std::string traceOf(const Fixture& f) {
  const std::string dir = scratchDir("report_diff_" + f.name);
  return f.write(dir);
}

std::string dirOf(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

}  // namespace

TEST_CASE("report diff: text and JSON of each fixture equal the expected files") {
  for (const Fixture& f : fixtures()) {
    SECTION(f.name) {
      const std::string db = traceOf(f);
      diffTest(f.name + ".txt", {"report", db}, dirOf(db));
      diffTest(f.name + ".json.txt", {"report", "--json", db}, dirOf(db));
      diffTest(f.name + ".top1.txt", {"report", "--top", "1", db}, dirOf(db));
    }
  }
}

TEST_CASE("report diff: bad input and usage errors give the expected one line") {
  const std::string dir = scratchDir("report_diff_bad");
  const std::string text = dir + "/notes.db";
  writeFile(text, "these are my notes, not a trace\n");
  const std::string empty = dir + "/empty.db";
  writeFile(empty, "");
  const std::string good = dataParallelTrace(scratchDir("report_diff_good"));
  // A trace whose header is cut in the middle of its first page.
  const std::string cut = dir + "/cut.db";
  writeFile(cut, readFile(good).substr(0, 3000));

  diffTest("error_not_a_trace.txt", {"report", text}, dir);
  diffTest("error_empty_file.txt", {"report", empty}, dir);
  diffTest("error_truncated.txt", {"report", cut}, dir);
  diffTest("error_missing_file.txt", {"report", dir + "/nope.db"}, dir);
  diffTest("error_unknown_flag.txt", {"report", good, "--bogus"}, dirOf(good));
  diffTest("error_no_file.txt", {"report"}, dir);
}

// The same numbers in both forms: every count, byte figure and fraction the JSON holds for the
// headline, the memory table and the collectives must appear in the text as the text formats it.
TEST_CASE("report diff: the text and the JSON report carry the same numbers") {
  auto bytes = [](double b) {
    static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (b >= 1024 && unit < 4) {
      b /= 1024;
      ++unit;
    }
    char out[48];
    std::snprintf(out, sizeof out, unit ? "%.1f %s" : "%.0f %s", b, kUnits[unit]);
    return std::string(out);
  };
  auto percent = [](double f) {
    char out[32];
    std::snprintf(out, sizeof out, "%.1f%%", f * 100);
    return std::string(out);
  };
  for (const Fixture& f : fixtures()) {
    SECTION(f.name) {
      const std::string db = traceOf(f);
      const ProcessResult t = runTracerun({"report", db});
      const ProcessResult j = runTracerun({"report", "--json", db});
      REQUIRE(t.exited);
      REQUIRE(j.exited);
      CHECK(t.exit_code == j.exit_code);
      const json r = json::parse(j.out);
      const std::string& text = t.out;
      INFO(text);
      auto has = [&](const std::string& s) {
        INFO("looking for: " << s);
        CHECK(text.find(s) != std::string::npos);
      };
      has(std::to_string(r["ranks"].get<int>()) + " rank");
      has("(world size " + std::to_string(r["world_size"].get<int>()) + ")");
      has(std::to_string(r["events"]["spans"].get<int64_t>()) + " spans");
      has(std::to_string(r["events"]["memory"].get<int64_t>()) + " memory events");
      for (const auto& d : r["memory"]["per_rank"]) {
        for (const char* c : {"parameter", "gradient", "optimizer_state", "activation", "temporary",
                              "input", "other"}) {
          const auto& v = d["by_category"][c];
          INFO("category " << c);
          REQUIRE(v.is_number());
          has(bytes(v.get<double>()));
        }
        has(bytes(d["peak_bytes"].get<double>()));
      }
      for (const auto& c : r["comm"]["collectives"]) {
        has(c["op"].get<std::string>());
        char calls[32];
        std::snprintf(calls, sizeof calls, "calls %6lld",
                      static_cast<long long>(c["calls"].get<int64_t>()));
        has(calls);
      }
      if (!r["pipeline"].is_null()) {
        const auto& p = r["pipeline"];
        has("p=" + std::to_string(p["stages"].get<int>()) + " stages");
        has("m=" + std::to_string(p["microbatches"].get<int>()) + " microbatches");
        has("measured " + percent(p["bubble_measured"].get<double>()));
        has("closed form " + percent(p["bubble_theory"].get<double>()));
        has("modeled " + percent(p["bubble_modeled"].get<double>()));
      }
      has("dropped events " + std::to_string(r["stats"]["dropped_events"].get<int64_t>()));
    }
  }
}
