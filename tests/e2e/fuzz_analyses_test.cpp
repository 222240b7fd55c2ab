// Fuzz test of every analysis (issue 12 point 7): a small real-looking trace (a two-rank pipeline
// with ops, autograd nodes, memory, collectives, flows, instants, counters and stats) gets 1,000
// seeded SQL-level mutations (trace_mutator.h); every analysis runs on each mutant in this process
// and the CLI on a sample of them. A mutant may be refused with a TraceError (one line) or
// analysed; any other exception, a crash or a signal fails. Not a check of the numbers an analysis
// gives.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis_builder.h"
#include "e2e_common.h"
#include "trace_mutator.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/model.h"
#include "tracerun/trace/analysis/pipeline.h"
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/analysis/report_json.h"
#include "tracerun/trace/analysis/report_text.h"
#include "tracerun/trace/chrome_export.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/schema.h"

using namespace tracerun;
using namespace tracerun::e2e;
using core::Category;
using core::MemoryCategory;
using testing::BCounter;
using testing::BFlow;
using testing::BInstant;
using testing::BMemory;
using testing::BSpan;
using testing::BStat;

namespace {

constexpr uint64_t kSeed = 20261124;
constexpr int kMutants = 1000;
constexpr int kCliEvery = 25;  // the CLI runs on every 25th mutant (40 of them)

// ---------------------------------------------------------------------------------------------
// The base trace: 2 ranks, a 2-stage GPipe pipeline, 2 microbatches, 2 steps.

std::string buildBase(const std::string& dir) {
  testing::TraceBuilder tb(2);
  for (int rank = 0; rank < 2; ++rank) {
    int64_t t = 1000 + rank * 3500;  // stage 1 starts after stage 0's first forward arrived
    uint64_t ptr = 0x10000 + static_cast<uint64_t>(rank) * 0x100000;
    tb.memory(rank, {t, 0x9000, 1 << 20, MemoryCategory::kParameter, "", "init"});
    for (int step = 1; step <= 2; ++step) {
      const int64_t stepStart = t;
      tb.instant(rank, {t, "step marker", step});
      t += 100;
      std::vector<uint64_t> activations;
      for (int mb = 0; mb < 2; ++mb) {
        const std::vector<std::pair<std::string, int64_t>> args = {
            {"stage", rank}, {"chunk", 0}, {"microbatch", mb}};
        if (rank == 1) {
          tb.span(rank, {"main",
                         "recv_forward",
                         Category::kUser,
                         t,
                         t + 300,
                         1,
                         {{"peer", 0}, {"microbatch", mb}, {"bytes", 4096}}});
          t += 300;
        }
        tb.span(rank, {"main", "forward", Category::kPhase, t, t + 3000, 1, args});
        tb.span(rank, {"main",
                       "aten::linear",
                       Category::kOp,
                       t + 100,
                       t + 1500,
                       2,
                       {},
                       "f32[8, 16]",
                       10 * step + mb});
        tb.span(rank, {"main", "aten::mm", Category::kOp, t + 200, t + 1400, 3, {}, "f32[8, 16]"});
        tb.span(rank, {"main",
                       "layers.0",
                       Category::kModule,
                       t + 1600,
                       t + 2900,
                       2,
                       {{"params", 40}, {"shard", -1}, {"logical", 40}},
                       "Linear in=f32[8,16]"});
        tb.memory(rank, {t + 300, ptr, 4096, MemoryCategory::kUnknown, "aten::mm", "forward"});
        tb.memory(rank, {t + 400, ptr + 64, 512, MemoryCategory::kUnknown, "aten::mm", ""});
        tb.memory(rank, {t + 900, ptr + 64, -512, MemoryCategory::kUnknown, "aten::mm", ""});
        activations.push_back(ptr);
        ptr += 4096;
        tb.flow(rank, {core::FlowKind::kForwardBackward, "main", "main", t + 100,
                       t + 100 + 20000 - mb * 3000});
        t += 3000;
        if (rank == 0) {
          tb.span(rank, {"main",
                         "send_forward",
                         Category::kUser,
                         t,
                         t + 200,
                         1,
                         {{"peer", 1}, {"microbatch", mb}, {"bytes", 4096}}});
          t += 200;
        }
      }
      t = stepStart + 20000;
      for (int mb = 1; mb >= 0; --mb) {
        const std::vector<std::pair<std::string, int64_t>> args = {
            {"stage", rank}, {"chunk", 0}, {"microbatch", mb}};
        if (rank == 0) {
          tb.span(rank, {"main",
                         "recv_backward",
                         Category::kUser,
                         t,
                         t + 400,
                         1,
                         {{"peer", 1}, {"microbatch", mb}, {"bytes", 4096}}});
          t += 400;
        }
        tb.span(rank, {"main", "backward", Category::kPhase, t, t + 6000, 1, args});
        tb.span(rank, {"main",
                       "LinearBackward0",
                       Category::kBackward,
                       t + 100,
                       t + 3000,
                       2,
                       {},
                       "",
                       10 * step + mb});
        tb.memory(rank, {t + 200, ptr, 2048, MemoryCategory::kGradient, "LinearBackward0", ""});
        ptr += 2048;
        tb.memory(rank, {t + 2500, activations[static_cast<size_t>(mb)], -4096,
                         MemoryCategory::kUnknown, "", ""});
        t += 6000;
        if (rank == 1) {
          tb.span(rank, {"main",
                         "send_backward",
                         Category::kUser,
                         t,
                         t + 200,
                         1,
                         {{"peer", 0}, {"microbatch", mb}, {"bytes", 4096}}});
          t += 200;
        }
      }
      tb.span(rank, {"main", "optimizer.step", Category::kPhase, t, t + 1000, 1});
      tb.span(rank, {"main", "aten::add_", Category::kOp, t + 100, t + 400, 2});
      tb.span(rank, {"async:c10d dp [0,1]",
                     "c10d:allreduce",
                     Category::kComm,
                     t + 100,
                     t + 900,
                     0,
                     {{"bytes", 8192}, {"group_size", 2}},
                     "f32[2048]"});
      tb.span(rank,
              {"async", "gloo:all_reduce", Category::kComm, t + 150, t + 850, 0, {}, "f32[2048]"});
      t += 1000;
      tb.span(rank, {"main", "step", Category::kPhase, stepStart, t, 0, {{"step", step}}});
      tb.counter(rank, {t, "loss", 2.5 / step});
      t += 500;
    }
    tb.stat(rank, {"clipped_spans", 1, trace::Severity::kWarning});
  }
  return tb.write(dir);
}

// ---------------------------------------------------------------------------------------------
// Everything that reads a trace. Graph builders (dot/) join with one line each, e.g.
//   {"tracedot callgraph", [](const auto& r, const auto& dir) { dot::callGraph(r, {}); }},
// (and their library in the test's LIBS).

using Run = std::function<void(const trace::TraceReader&, const std::string& dir)>;
struct Analysis {
  std::string name;
  Run run;
};

// What `tracerun info` and the viewer ask the reader for.
void readEverything(const trace::TraceReader& r, const std::string&) {
  for (const auto& key : trace::schema::metaKeys()) r.meta(key.key);
  r.ranks();
  r.counts();
  r.timeRange();
  r.stats();
  r.flows();
  r.aggregates();
  for (const auto& t : r.tracks()) {
    r.spans(t.id, INT64_MIN, INT64_MAX);
    r.spans(t.id, 0, 5000);
    r.argsOfTrack(t.id);
    r.instants(t.id, INT64_MIN, INT64_MAX);
    r.counters(t.id, INT64_MIN, INT64_MAX);
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) { r.str(s.name); });
  }
  for (const auto& rank : r.ranks()) r.memory(rank.rank, INT64_MIN, INT64_MAX);
  r.args(1);
  r.quickCheck();
}

const std::vector<Analysis>& analyses() {
  namespace a = trace::analysis;
  static const std::vector<Analysis> kAll = {
      {"reader (info, viewer queries)", readEverything},
      {"report text", [](const auto& r, const auto&) { a::reportText(a::buildReport(r)); }},
      {"report json", [](const auto& r, const auto&) { a::reportJson(a::buildReport(r)); }},
      {"chrome export",
       [](const auto& r, const auto& dir) { trace::exportChrome(r, dir + "/export.json"); }},
      {"memory",
       [](const auto& r, const auto&) {
         a::analyzeMemory(r);
         a::analyzeMemory(r, a::MemoryOptions{1, 7, 3});
       }},
      {"pipeline (bubbles)", [](const auto& r, const auto&) { a::analyzePipeline(r); }},
      {"comm", [](const auto& r, const auto&) { a::analyzeComm(r); }},
      {"model tree",
       [](const auto& r, const auto&) {
         for (int rank : {-1, 0}) {
           const auto t = a::buildModelTree(r, a::ModelOptions{rank});
           for (int p = -1; p < static_cast<int>(t.modules.size()); ++p) a::identicalRuns(t, p);
         }
       }},
      {"callgraph",
       [](const auto& r, const auto&) {
         for (int rank : {-1, 0}) {
           const auto g = a::buildCallGraph(r, a::CallGraphOptions{rank, true});
           for (size_t n = 0; n < g.nodes.size(); ++n) g.path(static_cast<int>(n), r);
           g.subtreeBytes(0);
         }
       }},
  };
  return kAll;
}

// Mutations seen to crash before they were fixed, run first whatever the seed draws.
const std::vector<std::string> kKnown = {
    // issue 12 point 7: memory's contextOf() called ops.back() on an empty vector.
    "UPDATE spans SET start_ns = -9223372036854775808 WHERE id = (SELECT min(id) FROM spans WHERE "
    "category = 0)",
};

bool printableLine(const std::string& s) {
  for (unsigned char c : s) {
    if ((c < 0x20 && c != '\n') || c == 0x7f) return false;
  }
  return true;
}

// The CLI on one mutant: exit 0 with nothing on stderr, or a clean non-zero exit with exactly one
// line "tracerun: PATH: ..." (report's exit 3 prints its tables first); never a signal.
void checkCli(const std::string& path, const std::string& dir) {
  const std::vector<std::vector<std::string>> commands = {
      {"info", path},
      {"info", "--json", path},
      {"report", path},
      {"report", "--json", path},
      {"export", path, "--chrome", dir + "/cli-export.json"}};
  for (const auto& args : commands) {
    const auto r = runTracerun(args);
    std::string line = "tracerun";
    for (const auto& a : args) line += " " + a;
    INFO(line << "\n" << r.describe());
    REQUIRE(r.exited);
    CHECK(printableLine(r.err));
    if (r.exit_code == 0) {
      CHECK(r.errLines().empty());
    } else {
      REQUIRE(r.errLines().size() == 1);
      CHECK_THAT(r.errLines()[0], Catch::StartsWith("tracerun: " + path + ": "));
    }
  }
}

struct Tally {
  int refused_at_open = 0, cli_runs = 0;
  std::map<std::string, int> refused;              // by analysis
  std::map<std::string, std::string> first_error;  // by analysis: the first refusal's message
};

void runAll(const std::string& path, const std::string& dir, Tally& tally) {
  std::unique_ptr<trace::TraceReader> reader;
  try {
    reader = std::make_unique<trace::TraceReader>(trace::TraceReader::open(path));
  } catch (const trace::TraceError&) {
    ++tally.refused_at_open;
    return;
  }
  for (const Analysis& a : analyses()) {
    INFO("analysis: " << a.name);
    try {
      a.run(*reader, dir);
    } catch (const trace::TraceError& e) {
      if (tally.refused[a.name]++ == 0) tally.first_error[a.name] = e.what();
      CHECK(printableLine(e.what()));
    } catch (const std::exception& e) {
      FAIL_CHECK("not a TraceError: " << e.what());
    }
  }
}

}  // namespace

TEST_CASE("fuzz: every analysis on 1,000 SQL-level mutations of a pipeline trace") {
  const ScratchDir dir("fuzz");
  const std::string base = buildBase(testing::scratchDir("fuzz_base"));
  const std::string mutant = dir.file("mutant.db");
  Tally tally;

  // The base itself is analysed cleanly (a fuzz base that is refused would test nothing).
  runAll(base, dir.path(), tally);
  REQUIRE(tally.refused_at_open == 0);
  REQUIRE(tally.refused.empty());
  {
    const auto reader = trace::TraceReader::open(base);
    const auto report = trace::analysis::buildReport(reader);
    REQUIRE(report.pipeline.present);
    REQUIRE(!report.memory.devices.empty());
    REQUIRE(!report.comm.collectives.empty());
  }

  for (size_t k = 0; k < kKnown.size(); ++k) {
    e2e::Mutation m;
    m.table = "spans";
    m.sql = kKnown[k];
    std::filesystem::copy_file(base, mutant, std::filesystem::copy_options::overwrite_existing);
    REQUIRE(TraceMutator::apply(mutant, m));
    INFO("known mutation " << k << ": " << m.describe());
    runAll(mutant, dir.path(), tally);
    checkCli(mutant, dir.path());
  }

  TraceMutator mutator(base, kSeed);
  for (int i = 0; i < kMutants; ++i) {
    const e2e::Mutation m = mutator.next(mutant);
    INFO("mutant " << i << " (seed " << kSeed << "): " << m.describe());
    runAll(mutant, dir.path(), tally);
    if (i % kCliEvery == 0) {
      checkCli(mutant, dir.path());
      ++tally.cli_runs;
    }
  }
  std::string refused;
  for (const auto& [name, n] : tally.refused) {
    refused +=
        "\n  " + name + ": " + std::to_string(n) + " (first: " + tally.first_error[name] + ")";
  }
  std::printf("fuzz: %d mutants, %d refused at open, CLI on %d; refused by an analysis:%s\n",
              kMutants, tally.refused_at_open, tally.cli_runs, refused.c_str());
}
