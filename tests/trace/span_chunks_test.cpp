// The span chunk contract (trace/src/span_chunks.h) checked on files, with plain SQL: every
// span_chunks row of a shard, of a merged run and of a merge that rebuilt an incomplete shard's
// chunks is a run of consecutive ids of one track, in (start, depth, id) order, with its extent.
// Does not test range queries (writer_reader_test.cpp, merge_test.cpp do).
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "../support/temp_dir.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

using namespace tracerun;
using namespace tracerun::trace;
using tracerun::testing::TempDir;

namespace {

struct Db {
  sqlite3* db = nullptr;
  explicit Db(const std::string& path) { REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK); }
  ~Db() { sqlite3_close(db); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    INFO(sql << ": " << (err ? err : ""));
    sqlite3_free(err);
    REQUIRE(rc == SQLITE_OK);
  }
  std::vector<std::vector<int64_t>> rows(const std::string& sql) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::vector<std::vector<int64_t>> out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      std::vector<int64_t> row;
      for (int i = 0; i < sqlite3_column_count(st); ++i) row.push_back(sqlite3_column_int64(st, i));
      out.push_back(std::move(row));
    }
    sqlite3_finalize(st);
    return out;
  }
};

// Checks the contract on every chunk; returns the number of chunks.
size_t checkContract(const std::string& path, int64_t maxRows) {
  Db db(path);
  const auto chunks =
      db.rows("SELECT track, min_start_ns, max_end_ns, first_id, last_id FROM span_chunks");
  int64_t covered = 0;
  for (const auto& c : chunks) {
    const auto spans = db.rows("SELECT id, track, start_ns, start_ns + dur_ns, depth FROM spans "
                               "WHERE id BETWEEN " +
                               std::to_string(c[3]) + " AND " + std::to_string(c[4]) +
                               " ORDER BY id");
    INFO("chunk of track " << c[0] << " ids " << c[3] << ".." << c[4]);
    REQUIRE(!spans.empty());
    CHECK(static_cast<int64_t>(spans.size()) == c[4] - c[3] + 1);  // dense ids
    CHECK(static_cast<int64_t>(spans.size()) <= maxRows);
    CHECK(spans.front()[2] == c[1]);  // min_start is the first span's start
    int64_t maxEnd = INT64_MIN;
    for (size_t i = 0; i < spans.size(); ++i) {
      CHECK(spans[i][1] == c[0]);  // one track
      maxEnd = std::max(maxEnd, spans[i][3]);
      if (i > 0) {
        const auto& a = spans[i - 1];
        const auto& b = spans[i];
        CHECK(std::tie(a[2], a[4], a[0]) < std::tie(b[2], b[4], b[0]));  // span order
      }
    }
    CHECK(maxEnd == c[2]);
    covered += static_cast<int64_t>(spans.size());
  }
  CHECK(covered == db.rows("SELECT count(*) FROM spans")[0][0]);
  return chunks.size();
}

// A shard with nested spans pushed as capture pushes them (children end, and arrive, first), in
// small chunks so that parents land in later chunks than their children.
void writeNested(const std::string& path, int rank, size_t chunkRows) {
  core::Session session;
  ShardOptions o;
  o.path = path;
  o.rank = rank;
  o.world_size = 2;
  o.chunk_rows = chunkRows;
  ShardWriter writer(session, o);
  auto& buf = session.threadBuffer("main");
  const auto name = session.strings().intern("op");
  int64_t t = 1'000'000;
  auto push = [&](int64_t start, int64_t end, uint16_t depth) {
    core::SpanRecord r;
    r.name = name;
    r.start_ns = start;
    r.end_ns = end;
    r.depth = depth;
    r.id = buf.nextId();
    REQUIRE(buf.ring.tryPush(core::Record::from(r)));
  };
  for (int root = 0; root < 40; ++root) {
    const int64_t rootStart = t;
    for (int child = 0; child < 7; ++child) {
      const int64_t c0 = t + 10;
      push(c0 + 5, c0 + 20, 2);  // grandchild ends first
      push(c0, c0 + 30, 1);
      t = c0 + 40;
    }
    push(rootStart, t + 10, 0);
    t += 100;
  }
  writer.close();
}

}  // namespace

TEST_CASE("span chunks: writer, merge and a merge that rebuilds chunks keep the chunk contract") {
  TempDir dir;
  writeNested(dir.file("rank0.db"), 0, 8);
  writeNested(dir.file("rank1.db"), 1, 8);
  CHECK(checkContract(dir.file("rank0.db"), 8) > 10);

  const std::vector<MergeInput> inputs = {{dir.file("rank0.db")}, {dir.file("rank1.db")}};
  mergeShards(inputs, MergeOptions{dir.file("run.db"), {}});
  CHECK(checkContract(dir.file("run.db"), 8) > 20);

  // Rank 1 as a killed writer leaves it: no chunk index, not complete. Merge rebuilds the index;
  // the writer's chunks of 8 follow each other in id order, but a parent written in a later chunk
  // sorts before the spans of the chunk just before it, so a run of ids is cut there.
  {
    Db db(dir.file("rank1.db"));
    db.exec("DELETE FROM span_chunks; UPDATE meta SET value = '0' WHERE key = 'complete'");
  }
  mergeShards(inputs, MergeOptions{dir.file("rebuilt.db"), {}}, /*allow_incomplete=*/true);
  checkContract(dir.file("rebuilt.db"), 256);

  // What the reader returns is the same either way.
  auto a = TraceReader::open(dir.file("run.db"));
  auto b = TraceReader::open(dir.file("rebuilt.db"));
  for (const auto& t : a.tracks()) {
    std::vector<std::tuple<int64_t, int64_t, int>> fromA, fromB;
    for (const auto& s : a.spans(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
      fromA.emplace_back(s.start_ns, s.dur_ns, s.depth);
    }
    for (const auto& s : b.spans(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
      fromB.emplace_back(s.start_ns, s.dur_ns, s.depth);
    }
    CHECK(fromA == fromB);
  }
}
