// The schema declared once: its SQL runs and creates exactly the declared columns, and the
// reference section of docs/trace-format.md is exactly schema::markdown(). Does not test the
// writer (writer_reader_test.cpp does).
#include <sqlite3.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tracerun/trace/schema.h"

using namespace tracerun::trace;

namespace {

constexpr const char* kBegin = "<!-- schema:begin -->\n";
constexpr const char* kEnd = "<!-- schema:end -->";

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

struct MemoryDb {
  sqlite3* db = nullptr;
  MemoryDb() { REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK); }
  ~MemoryDb() { sqlite3_close(db); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
    INFO(sql << ": " << (err ? err : ""));
    sqlite3_free(err);
    REQUIRE(rc == SQLITE_OK);
  }
  std::vector<std::string> column(const std::string& sql, int col) {
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
    std::vector<std::string> out;
    while (sqlite3_step(st) == SQLITE_ROW) {
      out.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, col)));
    }
    sqlite3_finalize(st);
    return out;
  }
};

}  // namespace

TEST_CASE("docs/trace-format.md holds exactly the generated schema reference") {
  const std::string path = std::string(TRACERUN_SOURCE_DIR) + "/docs/trace-format.md";
  const std::string doc = readFile(path);
  REQUIRE(!doc.empty());
  const auto begin = doc.find(kBegin);
  const auto end = doc.find(kEnd);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  REQUIRE(begin < end);
  const std::string section =
      doc.substr(begin + std::string(kBegin).size(), end - begin - std::string(kBegin).size());
  INFO(
      "regenerate with: cmake --build build --target trace_schema_doc && "
      "build/bench/trace_schema_doc docs/trace-format.md");
  CHECK(section == schema::markdown());
}

TEST_CASE("the schema SQL creates exactly the declared tables and columns and indexes and views") {
  MemoryDb db;
  for (const auto& sql : schema::createStatements()) db.exec(sql);
  for (const auto& sql : schema::indexStatements()) db.exec(sql);
  for (const auto& t : schema::tables()) {
    std::vector<std::string> want;
    for (const auto& c : t.columns) want.emplace_back(c.name);
    // table_xinfo: table_info leaves generated columns out.
    CHECK(db.column(std::string("PRAGMA table_xinfo(") + t.name + ")", 1) == want);
  }
  std::vector<std::string> wantIndexes;
  for (const auto& i : schema::indexes()) wantIndexes.emplace_back(i.name);
  std::sort(wantIndexes.begin(), wantIndexes.end());
  CHECK(db.column("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
                  "ORDER BY name",
                  0) == wantIndexes);
  for (const auto& v : schema::views()) {
    db.exec(std::string("SELECT * FROM ") + v.name + " LIMIT 1");
  }
  CHECK(db.column("SELECT name FROM categories WHERE id = 0", 0) == std::vector<std::string>{"op"});
  // The meta keys the reader relies on are declared.
  std::vector<std::string> keys;
  for (const auto& k : schema::metaKeys()) keys.emplace_back(k.key);
  for (const char* k : {"magic", "schema_version", "kind", "complete", "origin_ns"}) {
    CHECK(std::find(keys.begin(), keys.end(), k) != keys.end());
  }
}

TEST_CASE("spans' generated columns unpack exactly what schema::packSpan packs, at the limits") {
  MemoryDb db;
  for (const auto& sql : schema::createStatements()) db.exec(sql);
  struct Fields {
    uint32_t name;
    uint16_t depth;
    uint8_t category;
  };
  const std::vector<Fields> cases = {{0, 0, 0},           {1, 1, 1},     {62, 2, 0},
                                     {2047, 3, 8},        {2048, 0, 15}, {123456, 300, 5},
                                     {0xffffffffu, 0, 0}, {0, 65535, 0}, {0xffffffffu, 65535, 15}};
  for (size_t i = 0; i < cases.size(); ++i) {
    const Fields& f = cases[i];
    db.exec("INSERT INTO spans (id, track, start_ns, dur_ns, packed) VALUES (" +
            std::to_string(i + 1) + ", 1, 0, 0, " +
            std::to_string(schema::packSpan(f.name, f.depth, f.category)) + ")");
  }
  const auto names = db.column("SELECT name FROM spans ORDER BY id", 0);
  const auto depths = db.column("SELECT depth FROM spans ORDER BY id", 0);
  const auto categories = db.column("SELECT category FROM spans ORDER BY id", 0);
  REQUIRE(names.size() == cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    CHECK(names[i] == std::to_string(cases[i].name));
    CHECK(depths[i] == std::to_string(cases[i].depth));
    CHECK(categories[i] == std::to_string(cases[i].category));
    const int64_t packed = schema::packSpan(cases[i].name, cases[i].depth, cases[i].category);
    CHECK(packed >= 0);
    CHECK(schema::packedName(packed) == cases[i].name);
    CHECK(schema::packedDepth(packed) == cases[i].depth);
    CHECK(schema::packedCategory(packed) == cases[i].category);
  }
  // A typical op (name id below 2048, shallow) still fits SQLite's 4-byte integer.
  CHECK(schema::packSpan(2047, 3, 8) < (int64_t{1} << 31));
}
