// A shard whose last checkpoint was cut short: its main file is shorter than its header says and
// the missing pages are in its -wal. Merge must take every span (as many as plain SQLite reads
// from a copy), and reading a WAL-mode file must leave no -wal or -shm beside it.
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "../support/temp_dir.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"
#include "tracerun/trace/shard_writer.h"

namespace fs = std::filesystem;
using namespace tracerun;
using namespace tracerun::trace;

namespace {

struct TempDir : testing::TempDir {
  TempDir() : testing::TempDir("tracerun-wal") {}
};

constexpr int kSpans = 6000;

// A real ShardWriter in a child that dies after committing kSpans spans: the shard is left in
// WAL mode, its spans in the -wal (no checkpoint: far below SQLite's 1000-page autocheckpoint).
void writeUnclosedShard(const std::string& path) {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    int code = 0;
    try {
      core::Session session;
      ShardOptions o;
      o.path = path;
      ShardWriter writer(session, o);
      writer.start();
      auto& buf = session.threadBuffer("main");
      const auto name = session.strings().intern("aten::mm");
      for (int i = 0; i < kSpans; ++i) {
        core::SpanRecord r;
        r.name = name;
        r.start_ns = 1'000'000 + i * 1000;
        r.end_ns = r.start_ns + 500;
        r.id = buf.nextId();
        while (!buf.ring.tryPush(core::Record::from(r))) writer.flush();
      }
      writer.flush();
      _exit(code);  // no destructor: the shard stays open, as a killed rank leaves it
    } catch (...) {
      _exit(2);
    }
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

int64_t count(sqlite3* db, const char* sql) {
  sqlite3_stmt* st = nullptr;
  int64_t n = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK &&
      sqlite3_step(st) == SQLITE_ROW) {
    n = sqlite3_column_int64(st, 0);
  }
  sqlite3_finalize(st);
  return n;
}

// The spans plain SQLite reads from a copy of `path` and its -wal (it replays the WAL itself).
int64_t spansBySqlite(const std::string& path, const std::string& scratch) {
  fs::create_directories(scratch);
  fs::copy_file(path, scratch + "/c.db", fs::copy_options::overwrite_existing);
  fs::copy_file(path + "-wal", scratch + "/c.db-wal", fs::copy_options::overwrite_existing);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2((scratch + "/c.db").c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) ==
          SQLITE_OK);
  const int64_t n = count(db, "SELECT COUNT(*) FROM spans");
  sqlite3_close(db);
  return n;
}

// What a checkpoint cut short by a full disk leaves: SQLite copied the WAL's pages into the main
// file (page 1 first, with the new page count in its header) and then could not write the rest.
// Made here from the unclosed shard: checkpoint a copy with SQLite, keep its -wal, and cut the
// main file back to where it ended before (every page past that exists only in the WAL) plus
// half a page, as a partial write leaves it.
void cutCheckpoint(const std::string& shard, const std::string& out) {
  const auto before = fs::file_size(shard);
  fs::copy_file(shard, out, fs::copy_options::overwrite_existing);
  fs::copy_file(shard + "-wal", out + "-wal", fs::copy_options::overwrite_existing);
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(out.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr) == SQLITE_OK);
  REQUIRE(count(db, "SELECT COUNT(*) FROM sqlite_master") > 0);  // opens the WAL
  int logFrames = 0, done = 0;
  REQUIRE(sqlite3_wal_checkpoint_v2(db, nullptr, SQLITE_CHECKPOINT_PASSIVE, &logFrames, &done) ==
          SQLITE_OK);
  REQUIRE(logFrames > 0);
  REQUIRE(done == logFrames);
  sqlite3_close(db);
  fs::remove(out + "-shm");
  const auto full = fs::file_size(out);
  REQUIRE(full > before + 4096);
  fs::resize_file(out, before + 2048);
}

std::set<std::string> filesIn(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

uint32_t headerPages(const std::string& path) {
  unsigned char h[32] = {};
  std::FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  REQUIRE(std::fread(h, 1, sizeof h, f) == sizeof h);
  std::fclose(f);
  return (uint32_t{h[28]} << 24) | (uint32_t{h[29]} << 16) | (uint32_t{h[30]} << 8) | h[31];
}

}  // namespace

TEST_CASE("wal shard: a main file cut short with its pages in the -wal merges whole") {
  TempDir dir;
  const std::string unclosed = dir.file("unclosed.db");
  writeUnclosedShard(unclosed);
  fs::create_directories(dir.file("cut"));
  const std::string cut = dir.file("cut/rank0.db");
  cutCheckpoint(unclosed, cut);
  // The situation of the issue: the header's page count is more than the file holds.
  REQUIRE(uint64_t{headerPages(cut)} * 4096 > fs::file_size(cut));

  const int64_t expected = spansBySqlite(cut, dir.file("plain"));
  CHECK(expected == kSpans);
  const auto before = filesIn(dir.file("cut"));
  const auto size = fs::file_size(cut);

  const std::string out = dir.file("run.db");
  const MergeResult result = mergeShards({{cut}}, MergeOptions{out, {}}, true);
  REQUIRE(result.shards.size() == 1);
  CHECK(result.shards[0].readable);
  CHECK_FALSE(result.shards[0].complete);
  const auto r = TraceReader::open(out);
  CHECK(r.counts().spans == expected);
  // The shard was only read: nothing created, nothing changed.
  CHECK(filesIn(dir.file("cut")) == before);
  CHECK(fs::file_size(cut) == size);

  SECTION("a page in neither file is still truncation") {
    fs::resize_file(cut + "-wal", 32 + 2 * (24 + 4096));  // the WAL keeps two frames, no commit
    // A WAL without a commit adds nothing: the header's count against the file decides.
    try {
      mergeShards({{cut}}, MergeOptions{out, {}});
      FAIL("merged a truncated shard");
    } catch (const TraceError& e) {
      CHECK_THAT(e.what(), Catch::Contains(cut + ": truncated"));
    }
  }
}

TEST_CASE("wal shard: reading a WAL-mode file leaves no -wal or -shm beside it") {
  TempDir dir;
  const std::string shard = dir.file("rank0.db");
  writeUnclosedShard(shard);

  SECTION("a read-only copy of the main file alone") {
    fs::create_directories(dir.file("ro"));
    const std::string copy = dir.file("ro/rank0.db");
    fs::copy_file(shard, copy);
    ::chmod(copy.c_str(), 0444);
    const auto before = filesIn(dir.file("ro"));
    CHECK_THROWS_WITH(TraceReader::open(copy), Catch::Contains("incomplete"));
    const MergeResult result = mergeShards({{copy}}, MergeOptions{dir.file("a.db"), {}}, true);
    CHECK(result.shards[0].readable);
    CHECK(filesIn(dir.file("ro")) == before);
  }
  SECTION("a writable file with its -wal") {
    fs::remove(shard + "-shm");
    const auto before = filesIn(dir.path.string());
    CHECK_THROWS_WITH(TraceReader::open(shard), Catch::Contains("incomplete"));
    const std::string out = dir.file("sub.db");
    mergeShards({{shard}}, MergeOptions{out, {}}, true);
    CHECK(TraceReader::open(out).counts().spans == kSpans);
    auto after = filesIn(dir.path.string());
    after.erase("sub.db");
    CHECK(after == before);
  }
}
