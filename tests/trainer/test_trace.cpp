// gpttrain traced by tracerun (2 ranks, interleaved pipeline, selective recomputation): the trace
// alone shows the schedule -- each rank's forward/backward phases in the order of its action list
// (schedule.h), with their stage, chunk and microbatch --, every send/recv with its peer and bytes,
// and the recomputed forwards as such. Reads the trace with plain SQL (docs/trace-format.md).
#include "pipeline/schedule.h"
#include "trainer_test_util.h"

#include <sqlite3.h>
#include <catch2/catch.hpp>

#include <map>

using namespace gpttrain;
using namespace gpttrain::testing;

namespace {

struct TracedSpan {
  int rank;
  std::string name;
  std::map<std::string, long long> args;
};

// Spans with the given names, in start order per rank, with their arguments.
std::vector<TracedSpan> readSpans(const std::string& db, const std::string& names) {
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open_v2(db.c_str(), &handle, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  const std::string sql =
      "SELECT t.rank, n.value, s.id FROM spans s JOIN tracks t ON t.id = s.track "
      "JOIN strings n ON n.id = s.name WHERE n.value IN (" +
      names + ") ORDER BY t.rank, s.start_ns, s.depth";
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  sqlite3_stmt* args = nullptr;
  REQUIRE(sqlite3_prepare_v2(handle,
                             "SELECT k.value, a.value FROM args a JOIN strings k ON k.id = a.key "
                             "WHERE a.span = ?",
                             -1, &args, nullptr) == SQLITE_OK);
  std::vector<TracedSpan> spans;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    TracedSpan s{sqlite3_column_int(stmt, 0),
                 reinterpret_cast<const char*>(sqlite3_column_text(stmt, 1)),
                 {}};
    sqlite3_bind_int64(args, 1, sqlite3_column_int64(stmt, 2));
    while (sqlite3_step(args) == SQLITE_ROW) {
      s.args[reinterpret_cast<const char*>(sqlite3_column_text(args, 0))] =
          sqlite3_column_int64(args, 1);
    }
    sqlite3_reset(args);
    spans.push_back(std::move(s));
  }
  sqlite3_finalize(args);
  sqlite3_finalize(stmt);
  sqlite3_close(handle);
  return spans;
}

}  // namespace

TEST_CASE("a traced interleaved pipeline run shows its schedule, messages and recomputation",
          "[trainer][trace]") {
  const std::string dir = scratchDir("trace_pipeline");
  const std::string db = dir + "/run.db";
  const int steps = 2;
  auto run = launchRanks(
      TRACERUN_EXE,
      std::vector<std::string>{"--nproc-per-node", "2", "-o", db, "-q", "--", kGpttrain} +
          tinyModelArgs() +
          std::vector<std::string>{"--layers", "4", "--pp", "2", "--schedule", "interleaved",
                                   "--vp", "2", "--recompute", "selective", "--steps",
                                   std::to_string(steps)},
      0, dir);
  INFO(run.summary() << run.logs[0]);
  REQUIRE(run.ok());
  const PipelineShape shape{2, 2, 4};  // global batch 8 / micro-batch 2 = 4 microbatches

  // Phases in start order, per rank: the action list's compute order, once per step.
  const auto phases = readSpans(db, "'forward', 'backward'");
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> want, got;
    for (int step = 0; step < steps; ++step) {
      for (const Action& a : computeOrder(ScheduleKind::kInterleaved, shape, rank)) {
        want.push_back((a.kind == ActionKind::kForward ? "F" : "B") + std::to_string(a.microbatch) +
                       "c" + std::to_string(a.chunk));
      }
    }
    for (const TracedSpan& s : phases) {
      if (s.rank != rank) continue;
      CHECK(s.args.at("stage") == rank);
      got.push_back((s.name == "forward" ? "F" : "B") + std::to_string(s.args.at("microbatch")) +
                    "c" + std::to_string(s.args.at("chunk")));
    }
    INFO("rank " << rank);
    CHECK(got == want);
  }

  // Messages: the peer is the other rank, the bytes an activation [16, 2, 32] in fp32.
  const auto messages =
      readSpans(db, "'send_forward', 'recv_forward', 'send_backward', 'recv_backward'");
  std::map<std::string, int> counts;
  for (const TracedSpan& s : messages) {
    CHECK(s.args.at("peer") == 1 - s.rank);
    CHECK(s.args.at("bytes") == 16 * 2 * 32 * 4);
    ++counts[s.name];
  }
  // 3 of the 4 virtual stages send an activation (and receive a gradient) per microbatch.
  CHECK(counts["send_forward"] == 3 * 4 * steps);
  CHECK(counts["recv_forward"] == counts["send_forward"]);
  CHECK(counts["send_backward"] == counts["recv_backward"]);
  CHECK(counts["send_backward"] == 3 * 4 * steps);

  // Recomputed attention cores: 2 layers per rank, each microbatch, each step.
  const auto recomputed = readSpans(db, "'recompute_forward'");
  REQUIRE(recomputed.size() == 2u * 2 * 4 * steps);
  for (const TracedSpan& s : recomputed) CHECK(s.args.count("attention_core") == 1);
}
