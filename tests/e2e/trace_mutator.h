// SQL-level mutations of a trace for the fuzz test: each mutation sets one column of one row of one
// table to an extreme or odd value (INT64_MIN/MAX, 0, -1, NULL, a huge or control-byte string, a
// string id that does not exist, a negative duration, an unknown category...), as an UPDATE that
// the sqlite3 shell can replay. Deterministic for a seed and a base file; it never judges results.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace tracerun::e2e {

struct Mutation {
  std::string table, column;
  std::string sql;               // the UPDATE (after any schema edit), replayable in sqlite3
  bool drops_not_null = false;   // the table's NOT NULL constraints were removed first
  std::string describe() const;  // one line for test messages
};

class TraceMutator {
 public:
  // Reads the base trace's tables, columns and row keys once.
  TraceMutator(const std::string& base, uint64_t seed);

  // Copies the base file to `path` and applies the next mutation that changes a row there (one
  // that fails, such as a duplicate key, is replaced by another draw). Returns what it did.
  Mutation next(const std::string& path);

  // Applies one mutation to the file at `path` (already a copy); false when SQLite refused it or
  // it changed nothing.
  static bool apply(const std::string& path, const Mutation& m);

 private:
  struct Column {
    std::string name;
    bool not_null = false;
  };
  struct Table {
    std::string name;
    std::vector<Column> columns;
    std::vector<std::string> row_keys;  // per row: a WHERE condition naming exactly that row
  };
  Mutation draw();
  std::vector<std::string> valuesFor(const Table& t, const Column& c);

  std::string base_;
  std::mt19937_64 rng_;
  std::vector<Table> tables_;
  int64_t max_string_id_ = 0;
};

}  // namespace tracerun::e2e
