// Bad trace files against the real binary: missing, not SQLite, SQLite but not a trace, a newer
// schema, truncated copies and byte-flipped copies of a real trace. Every subcommand that reads a
// trace must end normally (no signal) with one line "tracerun: PATH: problem" and a non-zero exit;
// flips inside plain data may go unnoticed, and then exit 0 is also fine.
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "e2e_common.h"

using namespace tracerun::e2e;
namespace fs = std::filesystem;

namespace {

// The ways a trace is read: each gets every bad file.
std::vector<std::vector<std::string>> readers(const std::string& path) {
  return {{"info", path},
          {"info", "--json", path},
          {"export", path, "--chrome", scratch().file("bad-export.json")},
          {"merge", "-o", scratch().file("bad-merge.db"), path},
          {"report", path},
          {"report", "--json", path}};
}

std::string commandLine(const std::vector<std::string>& args) {
  std::string s = "tracerun";
  for (const auto& a : args) s += " " + a;
  return s;
}

// Must fail: no signal, non-zero exit, exactly one stderr line naming the file, nothing written.
void requireRefused(const std::string& path, const std::string& what,
                    const std::string& problem = "") {
  for (const auto& args : readers(path)) {
    const auto r = runTracerun(args);
    INFO(what << ": " << commandLine(args) << "\n" << r.describe());
    REQUIRE(r.exited);  // not killed by a signal (no crash, no abort)
    CHECK(r.exit_code != 0);
    REQUIRE(r.errLines().size() == 1);
    CHECK_THAT(r.errLines()[0], Catch::StartsWith("tracerun: " + path + ": "));
    if (!problem.empty()) CHECK_THAT(r.errLines()[0], Catch::Contains(problem));
    CHECK_FALSE(fs::exists(scratch().file("bad-export.json")));
    CHECK_FALSE(fs::exists(scratch().file("bad-merge.db")));
  }
}

// May go unnoticed: no signal, and either success or exactly one error line naming the file.
void requireNoCrash(const std::string& path, const std::string& what) {
  for (const auto& args : readers(path)) {
    const auto r = runTracerun(args);
    INFO(what << ": " << commandLine(args) << "\n" << r.describe());
    REQUIRE(r.exited);
    if (r.exit_code != 0) {
      REQUIRE(r.errLines().size() == 1);
      CHECK_THAT(r.errLines()[0], Catch::StartsWith("tracerun: " + path + ": "));
    }
    std::error_code ec;
    fs::remove(scratch().file("bad-export.json"), ec);
    fs::remove(scratch().file("bad-merge.db"), ec);
  }
}

std::string flipped(const std::string& bytes, size_t at) {
  std::string copy = bytes;
  copy[at] = static_cast<char>(~static_cast<unsigned char>(copy[at]));
  return copy;
}

uint32_t pageSizeOf(const std::string& bytes) {
  const uint32_t p = (uint32_t(uint8_t(bytes[16])) << 8) | uint8_t(bytes[17]);
  return p == 1 ? 65536 : p;
}

void sqlite(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  INFO(msg);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("bad input: files that are not traces") {
  ScratchDir dir("bad");
  requireRefused(dir.file("missing.db"), "missing file", "No such file");
  requireRefused(dir.path(), "a directory", "directory");

  writeFile(dir.file("empty.db"), "");
  requireRefused(dir.file("empty.db"), "empty file");

  writeFile(dir.file("notes.txt"), std::string(5000, 'x') + "\nnot a database\n");
  requireRefused(dir.file("notes.txt"), "text file", "not an SQLite");

  sqlite(dir.file("other.db"), "CREATE TABLE people (name TEXT); INSERT INTO people VALUES ('a')");
  requireRefused(dir.file("other.db"), "SQLite file that is not a trace", "not a tracerun trace");

  sqlite(dir.file("meta-only.db"),
         "CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta "
         "VALUES ('magic', 'something else')");
  requireRefused(dir.file("meta-only.db"), "SQLite file with another magic",
                 "not a tracerun trace");
}

TEST_CASE("bad input: a trace from a newer tracerun") {
  ScratchDir dir("bad");
  const std::string path = dir.file("newer.db");
  copyFile(fixtureTrace().merged, path);
  sqlite(path,
         "PRAGMA user_version = 99; UPDATE meta SET value = '99' WHERE key = "
         "'schema_version'");
  requireRefused(path, "newer schema", "newer");
}

TEST_CASE("bad input: truncated copies of a real trace") {
  ScratchDir dir("bad");
  const std::string bytes = readFile(fixtureTrace().merged);
  const size_t page = pageSizeOf(bytes);
  REQUIRE(bytes.size() > 20 * page);
  const std::vector<size_t> cuts = {1,
                                    15,
                                    99,
                                    100,
                                    page - 1,
                                    page,
                                    page + 100,
                                    3 * page,
                                    bytes.size() / 2,
                                    bytes.size() - page,
                                    bytes.size() - 100,
                                    bytes.size() - 1};
  for (size_t cut : cuts) {
    const std::string path = dir.file("cut-" + std::to_string(cut) + ".db");
    writeFile(path, bytes.substr(0, cut));
    requireRefused(path, "cut at " + std::to_string(cut));
  }
}

TEST_CASE("bad input: flipped bytes in the header, the schema and b-tree pages") {
  ScratchDir dir("bad");
  const std::string bytes = readFile(fixtureTrace().merged);
  const size_t page = pageSizeOf(bytes);
  int n = 0;
  auto refuse = [&](size_t at, const std::string& what) {
    const std::string path = dir.file("flip-" + std::to_string(n++) + ".db");
    writeFile(path, flipped(bytes, at));
    requireRefused(path, what + " (byte " + std::to_string(at) + ")");
  };
  // The header: magic, page size, payload fractions, page count, schema format.
  for (size_t at : {0, 5, 15, 16, 17, 21, 22, 28, 47}) refuse(at, "header");

  // Page 1 is the root of the schema table (sqlite_schema): its b-tree header; then the SQL text
  // of some tables (the schema outgrows page 1, so the text lives on the pages it points to).
  refuse(100, "page 1 b-tree type");
  for (const std::string text :
       {"CREATE TABLE spans", "CREATE TABLE meta", "CREATE TABLE strings"}) {
    const size_t at = bytes.find(text);
    REQUIRE(at != std::string::npos);
    refuse(at, "schema SQL '" + text + "'");
  }

  // Several b-tree pages: the page type byte. Every table and index page is walked by
  // quick_check, so `info` must notice; the other readers only see the pages they read.
  std::vector<size_t> btree;
  for (size_t p = 1; (p + 1) * page <= bytes.size(); ++p) {
    const auto type = static_cast<unsigned char>(bytes[p * page]);
    if (type == 2 || type == 5 || type == 10 || type == 13) btree.push_back(p);
  }
  REQUIRE(btree.size() > 10);
  for (size_t i = 0; i < btree.size(); i += btree.size() / 8) {
    const size_t at = btree[i] * page;
    const std::string path = dir.file("flip-" + std::to_string(n++) + ".db");
    writeFile(path, flipped(bytes, at));
    const std::string what = "b-tree page " + std::to_string(btree[i] + 1) + " type";
    const auto r = runTracerun({"info", path});
    INFO(what << "\n" << r.describe());
    REQUIRE(r.exited);
    CHECK(r.exit_code != 0);
    REQUIRE(r.errLines().size() == 1);
    CHECK_THAT(r.errLines()[0], Catch::StartsWith("tracerun: " + path + ": "));
    requireNoCrash(path, what);
  }
}

TEST_CASE("bad input: flipped bytes inside data never crash") {
  ScratchDir dir("bad");
  const std::string bytes = readFile(fixtureTrace().merged);
  const size_t page = pageSizeOf(bytes);
  std::mt19937_64 rng(2024);
  for (int i = 0; i < 40; ++i) {
    // Anywhere after page 1, the cell content included.
    const size_t at = page + static_cast<size_t>(rng() % (bytes.size() - page));
    const std::string path = dir.file("data-" + std::to_string(i) + ".db");
    writeFile(path, flipped(bytes, at));
    requireNoCrash(path, "data byte " + std::to_string(at));
  }
}
