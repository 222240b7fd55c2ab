// A full disk under the shard writer and under merge, through an SQLite VFS that fails writes past
// a byte budget (full_disk_vfs.h): every committed span of a writer cut short is merged, a merge
// that cannot write fails with the room it needs and leaves no output. Counts are checked against
// plain SQLite reading a copy of the shard (which replays its WAL itself).
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "../support/temp_dir.h"
#include "full_disk_vfs.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

namespace fs = std::filesystem;
using namespace tracerun;
using namespace tracerun::trace;

namespace {

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("tracerun-disk") {}
};

// What plain SQLite finds in a shard: a copy of the file and its -wal, opened read-write in a
// directory of its own so SQLite recovers the WAL as it would after a crash.
struct Plain {
  int64_t spans = -1;
  std::string complete;
};
Plain readWithSqlite(const std::string& shard, const std::string& scratch) {
  fs::create_directories(scratch);
  const std::string copy = scratch + "/copy.db";
  fs::copy_file(shard, copy, fs::copy_options::overwrite_existing);
  if (fs::exists(shard + "-wal")) {
    fs::copy_file(shard + "-wal", copy + "-wal", fs::copy_options::overwrite_existing);
  }
  sqlite3* db = nullptr;
  Plain p;
  if (sqlite3_open_v2(copy.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT COUNT(*) FROM spans", -1, &st, nullptr) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      p.spans = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'complete'", -1, &st, nullptr) ==
            SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
      p.complete = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return p;
}

int64_t spansOfRank(const TraceReader& r, int rank) {
  int64_t n = 0;
  for (const auto& t : r.tracks()) {
    if (t.rank == rank) r.forEachSpan(t.id, [&](const SpanRow&) { ++n; });
  }
  return n;
}

// Pushes `batches` x 400 spans through the writer, flushing after each batch, until a flush
// fails. Returns false when the writer failed.
bool record(core::Session& session, ShardWriter& writer, int batches) {
  auto& buf = session.threadBuffer("main");
  const auto name = session.strings().intern("aten::mm");
  int64_t t = 1'000'000;
  for (int b = 0; b < batches; ++b) {
    for (int i = 0; i < 400; ++i) {
      core::SpanRecord r;
      r.name = name;
      r.start_ns = t;
      r.end_ns = t + 500;
      t += 1000;
      r.id = buf.nextId();
      REQUIRE(buf.ring.tryPush(core::Record::from(r)));
    }
    try {
      writer.flush();
    } catch (const TraceError&) {
      return false;
    }
  }
  return true;
}

}  // namespace

TEST_CASE("disk full: a writer cut short at any point keeps every committed span for merge") {
  // Budgets from "fails while recording" to "fails in the checkpoint at close" to "fits".
  int failedInClose = 0, failedWhileRecording = 0, recovered = 0;
  for (int64_t budget = 60'000; budget <= 1'400'000; budget += 45'000) {
    INFO("budget " << budget);
    TempDir dir;
    const std::string path = dir.file("rank0.db");
    bool closed = false;
    {
      core::Session session;
      testing::FullDisk disk(budget);
      std::optional<ShardWriter> writer;
      try {
        ShardOptions o;
        o.path = path;
        writer.emplace(session, o);
      } catch (const TraceError&) {
        continue;  // not even the schema fits
      }
      writer->start();
      const bool recorded = record(session, *writer, 12);
      try {
        writer->close();
        closed = true;
      } catch (const TraceError& e) {
        CHECK_THAT(e.what(), Catch::Contains("full"));
      }
      if (!recorded) ++failedWhileRecording;
      if (recorded && !closed) ++failedInClose;
    }
    const Plain plain = readWithSqlite(path, dir.file("plain"));
    REQUIRE(plain.spans >= 0);
    const auto sizeBefore = fs::file_size(path);
    const bool walBefore = fs::exists(path + "-wal");
    const bool shmBefore = fs::exists(path + "-shm");  // the writer's own, when it failed

    // Merged as far as it goes: exactly what SQLite itself reads from the shard.
    const std::string out = dir.file("run.db");
    const MergeResult result = mergeShards({{path}}, MergeOptions{out, {}}, true);
    REQUIRE(result.shards.size() == 1);
    CHECK(result.shards[0].readable);
    CHECK(result.shards[0].complete == (plain.complete == "1"));
    CHECK(result.whole() == (plain.complete == "1"));
    CHECK(spansOfRank(TraceReader::open(out), 0) == plain.spans);
    if (closed) CHECK(plain.spans == 12 * 400);
    if (!closed && plain.spans > 0) ++recovered;
    // A shard whose writer got as far as marking it complete merges without allow_incomplete.
    if (plain.complete == "1") CHECK_NOTHROW(mergeShards({{path}}, MergeOptions{out, {}}));
    // Reading it changed nothing beside it.
    CHECK(fs::file_size(path) == sizeBefore);
    CHECK(fs::exists(path + "-wal") == walBefore);
    CHECK(fs::exists(path + "-shm") == shmBefore);
  }
  CHECK(failedWhileRecording > 0);
  CHECK(failedInClose > 0);
  CHECK(recovered > 0);
}

TEST_CASE("disk full: a merge that cannot write fails with the room it needs, leaves no output") {
  TempDir dir;
  std::vector<MergeInput> inputs;
  for (int rank = 0; rank < 2; ++rank) {
    core::Session session;
    ShardOptions o;
    o.path = dir.file("rank" + std::to_string(rank) + ".db");
    o.rank = rank;
    o.world_size = 2;
    ShardWriter writer(session, o);
    writer.start();
    REQUIRE(record(session, writer, 10));
    writer.close();
    inputs.push_back({o.path});
  }
  const std::string out = dir.file("run.db");
  for (const bool allowIncomplete : {false, true}) {
    INFO("allow_incomplete " << allowIncomplete);
    std::string message;
    {
      testing::FullDisk disk(40'000);
      try {
        mergeShards(inputs, MergeOptions{out, {}}, allowIncomplete);
      } catch (const TraceError& e) {
        message = e.what();
      }
      CHECK(disk.full());
    }
    CHECK_THAT(message, Catch::StartsWith(out + ": not enough space for the merged trace") &&
                            Catch::Contains("it needs about") && Catch::Contains("MiB free") &&
                            Catch::Contains("(database or disk is full)"));
    CHECK(message.find('\n') == std::string::npos);
    CHECK_FALSE(fs::exists(out));
    CHECK_FALSE(fs::exists(out + ".tmp"));
  }
  // Once there is room, the same shards merge whole.
  const MergeResult result = mergeShards(inputs, MergeOptions{out, {}});
  CHECK(result.whole());
  const auto r = TraceReader::open(out);
  CHECK(spansOfRank(r, 0) == 10 * 400);
  CHECK(spansOfRank(r, 1) == 10 * 400);
}
