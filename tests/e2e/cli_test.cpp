// tracerun info / export / merge run as a user runs them, on the fixture trace: what they print,
// their exit codes, and usage errors (one line, exit 2). Bad trace files are in bad_input_test.cpp.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>

#include "e2e_common.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/schema.h"

using namespace tracerun;
using namespace tracerun::e2e;
using nlohmann::json;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("tracerun info: format, ranks, tracks, event counts, stats, integrity") {
  const auto& g = fixtureTrace();
  const auto r = runTracerun({"info", g.merged});
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  auto reader = trace::TraceReader::open(g.merged);
  const auto c = reader.counts();
  CHECK(contains(r.out, "tracerun trace, schema version " +
                            std::to_string(tracerun::trace::schema::kSchemaVersion) +
                            " (merged, complete)"));
  CHECK(contains(r.out, "integrity   ok (PRAGMA quick_check)"));
  CHECK(contains(r.out, std::to_string(c.spans) + " spans, " + std::to_string(c.args) + " args, " +
                            std::to_string(c.instants) + " instants, " +
                            std::to_string(c.counters) + " counter samples, " +
                            std::to_string(c.memory) + " memory events, " +
                            std::to_string(c.flows) + " flows"));
  CHECK(contains(r.out, "ranks (3, world size 3)"));
  CHECK(contains(r.out, "+2.000 ms"));  // rank 1's clock offset
  CHECK(contains(r.out, "-1.500 ms"));  // rank 2's
  CHECK(contains(r.out, "origin      " + reader.meta("origin_ns") + " ns"));
  // One line per track, with its kind and event count.
  const auto tracks = reader.tracks();
  CHECK(contains(r.out, "tracks (" + std::to_string(tracks.size()) + ")"));
  for (const auto& t : tracks) {
    bool found = false;
    for (const auto& l : lines(r.out)) {
      std::istringstream row(l);
      int rank = -1;
      int64_t id = -1, events = -1;
      std::string kind;
      if (row >> rank >> id >> kind >> events && rank == t.rank && id == t.id) {
        found =
            kind == core::trackKindName(t.kind) && events == t.event_count && contains(l, t.name);
      }
    }
    INFO("track " << t.id << " " << t.name);
    CHECK(found);
  }
  for (const auto& s : reader.stats()) {
    CHECK(contains(r.out, s.name));
  }
  CHECK(contains(r.out, "dropped_events"));
}

TEST_CASE("tracerun info --json agrees with the reader") {
  const auto& g = fixtureTrace();
  const auto r = runTracerun({"info", "--json", g.merged});
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  const json j = json::parse(r.out);
  auto reader = trace::TraceReader::open(g.merged);
  const auto c = reader.counts();
  CHECK(j["schema_version"] == tracerun::trace::schema::kSchemaVersion);
  CHECK(j["meta"]["kind"] == "merged");
  CHECK(j["integrity"] == "ok");
  CHECK(j["counts"]["spans"] == c.spans);
  CHECK(j["counts"]["flows"] == c.flows);
  CHECK(j["counts"]["memory"] == c.memory);
  CHECK(j["ranks"].size() == 3);
  CHECK(j["ranks"][1]["clock_offset_ns"] == g.offsets[1]);
  CHECK(j["ranks"][2]["host"] == "fixture-host");
  CHECK(j["tracks"].size() == reader.tracks().size());
  CHECK(j["stats"].size() == reader.stats().size());
  CHECK(j["time_range_ns"][0] == reader.timeRange().first);
}

TEST_CASE("tracerun info on a rank shard") {
  const auto& g = fixtureTrace();
  const auto r = runTracerun({"info", g.shards[1]});
  INFO(r.describe());
  REQUIRE(r.exited);
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "(shard, complete)"));
  CHECK(contains(r.out, "ranks (1, world size 3)"));
}

TEST_CASE("tracerun export --chrome writes loadable JSON and prints one summary line") {
  const auto& g = fixtureTrace();
  const std::string out = scratch().file("export.json");
  const auto r = runTracerun({"export", g.merged, "--chrome", out});
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  auto reader = trace::TraceReader::open(g.merged);
  const auto c = reader.counts();
  REQUIRE(lines(r.out).size() == 1);
  CHECK_THAT(r.out, Catch::StartsWith("wrote " + out + ": " + std::to_string(c.spans) + " spans, " +
                                      std::to_string(c.instants) + " instants, "));
  const json doc = json::parse(readFile(out));
  int64_t slices = 0;
  for (const auto& ev : doc["traceEvents"]) slices += ev["ph"] == "X";
  CHECK(slices == c.spans);

  const auto quiet = runTracerun({"export", g.merged, "--chrome", out, "--quiet"});
  CHECK(quiet.exit_code == 0);
  CHECK(quiet.out.empty());
}

TEST_CASE("tracerun merge: shards into one trace that info accepts") {
  const auto& g = fixtureTrace();
  const std::string out = scratch().file("remerged.db");
  std::vector<std::string> args = {"merge", "-o", out};
  args.insert(args.end(), g.shards.rbegin(), g.shards.rend());  // any order
  const auto r = runTracerun(args);
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::StartsWith("wrote " + out + ": 3 ranks, "));
  const auto a = trace::TraceReader::open(out).counts();
  const auto b = trace::TraceReader::open(g.merged).counts();
  CHECK(a.spans == b.spans);
  CHECK(a.args == b.args);
  CHECK(a.flows == b.flows);
  const auto info = runTracerun({"info", out});
  CHECK(info.exit_code == 0);

  // A missing shard: one line naming it, and no output file.
  const std::string none = scratch().file("no-such-shard.db");
  const std::string out2 = scratch().file("never.db");
  const auto bad = runTracerun({"merge", "-o", out2, g.shards[0], none});
  INFO(bad.describe());
  REQUIRE(bad.exited);
  CHECK(bad.exit_code == 1);
  REQUIRE(bad.errLines().size() == 1);
  CHECK(bad.errLines()[0] == "tracerun: " + none + ": cannot open: No such file or directory");
}

TEST_CASE("tracerun usage errors: one line, exit code 2") {
  const auto& g = fixtureTrace();
  const std::vector<std::vector<std::string>> cases = {
      {"info", g.merged, "--jsn"},
      {"info"},
      {"info", g.merged, "extra"},
      {"export", g.merged},
      {"export", g.merged, "--chrome"},
      {"export", g.merged, "--chrom", "x.json"},
      {"merge", g.shards[0]},
      {"inof", g.merged},
      {"--no-such-flag"},
  };
  for (const auto& args : cases) {
    const auto r = runTracerun(args);
    std::string cmd;
    for (const auto& a : args) cmd += " " + a;
    INFO("tracerun" << cmd << "\n" << r.describe());
    REQUIRE(r.exited);
    CHECK(r.exit_code == 2);
    REQUIRE(r.errLines().size() == 1);
    CHECK_THAT(r.errLines()[0], Catch::StartsWith("tracerun: "));
    CHECK(r.out.empty());
  }
  CHECK_THAT(runTracerun({"inof", g.merged}).err, Catch::Contains("unknown command 'inof'"));
  CHECK_THAT(runTracerun({"info", g.merged, "--jsn"}).err, Catch::Contains("--jsn"));
}

TEST_CASE("tracerun --help on every subcommand, and --version") {
  for (const std::string sub : {"info", "export", "merge"}) {
    const auto r = runTracerun({sub, "--help"});
    INFO(r.describe());
    REQUIRE(r.exited);
    CHECK(r.exit_code == 0);
    CHECK(contains(r.out, "Usage: tracerun " + sub));
  }
  const auto top = runTracerun({"--help"});
  CHECK(top.exit_code == 0);
  for (const char* sub : {"info", "export", "merge"}) CHECK(contains(top.out, sub));
  const auto v = runTracerun({"--version"});
  CHECK(v.exit_code == 0);
  CHECK_THAT(v.out, Catch::StartsWith("tracerun " TRACERUN_VERSION_FOR_TESTS));
}

TEST_CASE("tracerun SUBCOMMAND --version prints the version and needs no trace") {
  // Before the plumbing gave every subcommand --version, `tracerun report --version` failed with
  // "trace is required" (exit 2).
  for (const std::string sub : {"info", "export", "merge", "report"}) {
    const auto r = runTracerun({sub, "--version"});
    INFO(r.describe());
    REQUIRE(r.exited);
    CHECK(r.exit_code == 0);
    CHECK(r.out == "tracerun " TRACERUN_VERSION_FOR_TESTS "\n");
    CHECK(r.err.empty());
  }
}

TEST_CASE("the fixture generator binary writes a trace that tracerun reads") {
  ScratchDir dir("fixture-bin");
  const auto made =
      runProcess(FIXTURE_BIN, {dir.file("t"), "--ranks", "2", "--roots", "5"}, dir.path());
  INFO(made.describe());
  REQUIRE(made.exited);
  REQUIRE(made.exit_code == 0);
  const auto outLines = lines(made.out);
  REQUIRE(outLines.size() == 3);  // merged file, then one shard per rank
  CHECK(outLines[0] == dir.file("t/run.db"));
  const auto r = runTracerun({"info", outLines[0]});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
  CHECK(contains(r.out, "ranks (2, world size 2)"));
}
