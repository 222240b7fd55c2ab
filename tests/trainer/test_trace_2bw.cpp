// A traced 2bw run (2 ranks, pp 2): every forward and backward phase carries the weight version
// it used (batch b's microbatches on V_b), `tracerun report` names 2bw's closed form, and the
// memory timeline holds two versions of the parameters on every stage: the parameter bytes live are
// 2 x 4 bytes x the stage's parameter count (as gpttrain reports it) when the last update starts.
// Reads the trace with plain SQL.
#include "trainer_test_util.h"

#include <sqlite3.h>
#include <catch2/catch.hpp>

#include <map>
#include <regex>

using namespace gpttrain::testing;

namespace {

// One integer per row of `sql` (first column, keyed by the second as an int).
std::map<long long, long long> query(const std::string& db, const std::string& sql) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  std::map<long long, long long> out;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    out[sqlite3_column_int64(stmt, 1)] = sqlite3_column_int64(stmt, 0);
  }
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return out;
}

}  // namespace

TEST_CASE("a traced 2bw run shows each microbatch's weight version and two parameter copies",
          "[trainer][trace][2bw]") {
  const std::string dir = scratchDir("trace_2bw");
  const std::string db = dir + "/run.db";
  auto run = launchRanks(
      TRACERUN_EXE,
      std::vector<std::string>{"--nproc-per-node", "2", "-o", db, "-q", "--", kGpttrain} +
          tinyModelArgs() +
          std::vector<std::string>{"--pp", "2", "--schedule", "2bw", "--clip-grad", "0", "--steps",
                                   "3"},
      0, dir);
  INFO(run.summary() << run.logs[0]);
  REQUIRE(run.ok());
  const int m = 4;  // global batch 8 / micro-batch 2

  // Every forward/backward's weight_version is its batch, microbatch / m.
  const auto wrong = query(
      db,
      "SELECT count(*), 0 FROM spans s JOIN strings n ON n.id = s.name "
      "JOIN args mb ON mb.span = s.id JOIN strings mk ON mk.id = mb.key AND mk.value = "
      "'microbatch' LEFT JOIN (SELECT a.span, a.value FROM args a JOIN strings k ON k.id = a.key "
      "WHERE k.value = 'weight_version') v ON v.span = s.id "
      "WHERE n.value IN ('forward', 'backward') AND (v.value IS NULL OR v.value != mb.value / " +
          std::to_string(m) + ")");
  const auto phases = query(db,
                            "SELECT count(*), 0 FROM spans s JOIN strings n ON n.id = s.name "
                            "WHERE n.value IN ('forward', 'backward')");
  CHECK(phases.at(0) == 2 * 2 * m * 3);  // 2 ranks, F and B, m microbatches, 3 steps
  CHECK(wrong.at(0) == 0);

  // tracerun report infers 2bw from the versions and names the closed form it used: the fill once
  // per drained run of N = 3 steps x m microbatches.
  auto report = launchRanks(TRACERUN_EXE, {"report", db}, 0, dir + "/report");
  INFO(report.logs[0]);
  REQUIRE(report.ok());
  CHECK(report.logs[0].find("pipeline: 2bw, p=2 stages, m=4 microbatches") != std::string::npos);
  CHECK(report.logs[0].find("closed form: 2bw fill once per drained run: (p-1)/(N+p-1), N = 12") !=
        std::string::npos);

  // Parameter memory live when the rank's last update starts (every allocation and free tagged
  // parameter up to then), against gpttrain's own parameter count (psi).
  const auto live = query(
      db,
      "SELECT sum(m.bytes), m.rank FROM memory m JOIN memory_categories mc ON mc.id = m.category "
      "WHERE mc.name = 'parameter' AND m.ts_ns <= (SELECT max(s.start_ns) FROM spans s JOIN tracks "
      "t ON t.id = s.track JOIN strings n ON n.id = s.name WHERE n.value = 'optimizer' AND t.rank "
      "= m.rank) GROUP BY m.rank");
  for (int rank = 0; rank < 2; ++rank) {
    std::smatch found;
    const std::regex line("rank " + std::to_string(rank) +
                          " at the optimizer step holds parameters ([0-9]+) B.*psi ([0-9]+)");
    INFO("rank " << rank << " log: " << run.logs[0]);
    const std::string all = run.logs[0];
    REQUIRE(std::regex_search(all, found, line));
    const long long psi = std::stoll(found[2]);
    CHECK(std::stoll(found[1]) == 2 * 4 * psi);
    CHECK(live.at(rank) == 2 * 4 * psi);
  }
}
