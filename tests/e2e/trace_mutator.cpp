// The fuzz test's mutation generator (trace_mutator.h): reads the base file's schema and row keys
// with the sqlite3 C API, draws (table, column, row, value) from one seeded generator, and writes
// each mutation as plain SQL so a failure can be replayed with the sqlite3 shell.
#include "trace_mutator.h"

#include <sqlite3.h>

#include <filesystem>
#include <memory>
#include <stdexcept>

namespace tracerun::e2e {

namespace {

using DbPtr = std::unique_ptr<sqlite3, int (*)(sqlite3*)>;

DbPtr openDb(const std::string& path, int flags) {
  sqlite3* raw = nullptr;
  const int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  DbPtr db(raw, sqlite3_close);
  if (rc != SQLITE_OK) throw std::runtime_error("mutator: cannot open " + path);
  return db;
}

// Rows of a query as text (NULL as "NULL").
std::vector<std::vector<std::string>> query(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr) != SQLITE_OK) {
    throw std::runtime_error("mutator: " + sql + ": " + sqlite3_errmsg(db));
  }
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  std::vector<std::vector<std::string>> out;
  while (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(stmt.get()); ++i) {
      const auto* t = sqlite3_column_text(stmt.get(), i);
      row.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    out.push_back(std::move(row));
  }
  return out;
}

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Values every column gets: integer extremes, NULL, and values of the wrong type or shape.
const std::vector<std::string> kAnyValue = {
    "-9223372036854775808",
    "9223372036854775807",
    "-9223372036854775807",
    "9223372036854775806",
    "0",
    "-1",
    "1",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967296",
    "NULL",
    "''",
    "printf('%.*c', 100000, 'x')",                     // a huge string
    "char(27, 91, 51, 49, 109, 7, 10, 13, 1) || 'n'",  // terminal escapes and control bytes
    "CAST(x'fffe41c3' AS TEXT)",                       // invalid UTF-8
    "1e300",
    "-0.5",
    "'12abc'",
    "x'00ff'",
};

}  // namespace

std::string Mutation::describe() const {
  return (drops_not_null ? "(NOT NULL removed from " + table + "'s schema) " : std::string()) + sql;
}

TraceMutator::TraceMutator(const std::string& base, uint64_t seed) : base_(base), rng_(seed) {
  DbPtr db = openDb(base, SQLITE_OPEN_READONLY);
  const auto names =
      query(db.get(),
            "SELECT name, sql LIKE '%WITHOUT ROWID%' FROM sqlite_schema WHERE type = "
            "'table' AND name NOT LIKE 'sqlite_%' ORDER BY name");
  for (const auto& n : names) {
    Table t;
    t.name = n[0];
    const bool withoutRowid = n[1] == "1";
    std::vector<std::string> pk;
    // table_info lists stored columns only (not spans' generated depth, category and name).
    for (const auto& c : query(db.get(), "PRAGMA table_info(" + t.name + ")")) {
      t.columns.push_back({c[1], c[3] == "1"});
      if (c[5] != "0") pk.push_back(c[1]);
    }
    std::string keys = "rowid";
    if (withoutRowid) {
      keys.clear();
      for (const auto& k : pk) keys += (keys.empty() ? "" : ", ") + ("quote(" + k + ")");
    }
    const std::string order = withoutRowid ? "" : " ORDER BY rowid";
    for (const auto& row : query(db.get(), "SELECT " + keys + " FROM " + t.name + order)) {
      std::string where;
      if (withoutRowid) {
        for (size_t i = 0; i < pk.size(); ++i) {
          where += (i ? " AND " : "") + pk[i] + " = " + row[i];
        }
      } else {
        where = "rowid = " + row[0];
      }
      t.row_keys.push_back(where);
    }
    if (!t.row_keys.empty() && !t.columns.empty()) tables_.push_back(std::move(t));
  }
  const auto maxId = query(db.get(), "SELECT coalesce(max(id), 0) FROM strings");
  max_string_id_ = std::stoll(maxId.at(0).at(0));
}

std::vector<std::string> TraceMutator::valuesFor(const Table& t, const Column& c) {
  std::vector<std::string> v = kAnyValue;
  const std::string& n = c.name;
  const std::string missingId = std::to_string(max_string_id_ + 1000);
  if (endsWith(n, "_ns")) {  // times and durations
    v.push_back("-(" + n + ")");
    v.push_back(n + " + 1000000000000000");
    v.push_back(n + " - 1000000000000000");
  }
  if (n == "dur_ns") v.insert(v.end(), {"-1", "-dur_ns - 1"});  // negative: end before start
  if (t.name == "ranks" && n == "start_ns") v.push_back("end_ns + 1000");
  if (t.name == "ranks" && n == "end_ns") v.push_back("start_ns - 1000");
  if (t.name == "span_chunks") {
    if (n == "min_start_ns") v.push_back("max_end_ns + 1");
    if (n == "max_end_ns") v.push_back("min_start_ns - 1");
    if (n == "first_id") v.push_back("last_id + 1");
    if (n == "last_id") v.insert(v.end(), {"first_id - 1", "first_id + 1000000"});
  }
  if (n == "packed") {  // category (4 bits), depth (16 bits), name (the rest)
    v.insert(v.end(), {"(packed & ~15) | 9", "(packed & ~15) | 15", "(packed & ~15) | 5",
                       "(packed & ~1048560) | (65535 << 4)", "packed + 16", "packed & ~1048560",
                       "(packed & 1048575) | (" + missingId + " << 20)", "packed & 1048575",
                       "(packed & 1048575) | (4294967295 << 20)"});
  }
  if (n == "detail" || n == "key" || n == "op" || n == "scope" ||
      (n == "name" && t.name != "tracks" && t.name != "stats") ||
      (t.name == "strings" && n == "id")) {
    v.insert(v.end(), {missingId, std::to_string(max_string_id_ + 1)});  // no such string
  }
  if (n == "category" || n == "kind" || n == "severity" || n == "device_type" ||
      n == "device_index") {
    v.insert(v.end(), {"99", "15", "255", "1000000"});  // unknown enum values
  }
  if (n == "rank") v.insert(v.end(), {"99", "-5"});
  if (endsWith(n, "track")) v.insert(v.end(), {"9999", "1"});
  if (t.name == "args" && n == "value") v.insert(v.end(), {"16384", "100000", "-2"});
  if (t.name == "counters" && n == "value") v.insert(v.end(), {"9e999", "-9e999", "-1e308"});
  return v;
}

Mutation TraceMutator::draw() {
  // Half the draws pick a column uniformly (every column of the small tables gets its turn), half
  // a row of the whole file (as a damaged page would: mostly spans, args and memory).
  const Table* table = nullptr;
  if (rng_() % 2 == 0) {
    size_t columns = 0;
    for (const Table& t : tables_) columns += t.columns.size();
    size_t pick = std::uniform_int_distribution<size_t>(0, columns - 1)(rng_);
    for (const Table& t : tables_) {
      if (pick < t.columns.size()) {
        table = &t;
        break;
      }
      pick -= t.columns.size();
    }
  } else {
    size_t rows = 0;
    for (const Table& t : tables_) rows += t.row_keys.size();
    size_t pick = std::uniform_int_distribution<size_t>(0, rows - 1)(rng_);
    for (const Table& t : tables_) {
      if (pick < t.row_keys.size()) {
        table = &t;
        break;
      }
      pick -= t.row_keys.size();
    }
  }
  const Column* column =
      &table->columns[std::uniform_int_distribution<size_t>(0, table->columns.size() - 1)(rng_)];
  const std::string& key =
      table->row_keys[std::uniform_int_distribution<size_t>(0, table->row_keys.size() - 1)(rng_)];
  // Half the values are the plain extremes, half any value this column can be given.
  static const std::vector<std::string> kExtremes = {"-9223372036854775808", "9223372036854775807",
                                                     "0", "-1", "NULL"};
  const auto values = rng_() % 2 == 0 ? kExtremes : valuesFor(*table, *column);
  const std::string& value =
      values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng_)];
  Mutation m;
  m.table = table->name;
  m.column = column->name;
  m.drops_not_null = value == "NULL" && column->not_null;
  m.sql = "UPDATE " + table->name + " SET " + column->name + " = " + value + " WHERE " + key;
  return m;
}

bool TraceMutator::apply(const std::string& path, const Mutation& m) {
  if (m.drops_not_null) {
    DbPtr db = openDb(path, SQLITE_OPEN_READWRITE);
    const std::string edit =
        "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = replace(sql, 'NOT NULL', "
        "'') WHERE type = 'table' AND name = '" +
        m.table + "'; PRAGMA writable_schema = OFF;";
    if (sqlite3_exec(db.get(), edit.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) return false;
  }
  DbPtr db = openDb(path, SQLITE_OPEN_READWRITE);  // a fresh connection reads the edited schema
  if (sqlite3_exec(db.get(), m.sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) return false;
  return sqlite3_changes(db.get()) > 0;
}

Mutation TraceMutator::next(const std::string& path) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    Mutation m = draw();
    std::filesystem::copy_file(base_, path, std::filesystem::copy_options::overwrite_existing);
    if (apply(path, m)) return m;
  }
  throw std::runtime_error("mutator: no mutation applies to " + base_);
}

}  // namespace tracerun::e2e
