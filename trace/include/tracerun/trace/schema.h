// The trace schema, declared once. The same declaration creates the tables (writer, merge),
// builds the indexes at close, and generates the reference section of docs/trace-format.md
// (a test fails when the two differ). Bump kSchemaVersion on any incompatible change.
#pragma once

#include <string>
#include <vector>

namespace tracerun::trace::schema {

inline constexpr int kSchemaVersion = 1;
inline constexpr const char* kMagic = "tracerun";  // meta('magic')

struct Column {
  const char* name;
  const char* type;  // SQLite type and constraints
  const char* doc;
};

struct Table {
  const char* name;
  const char* doc;
  std::vector<Column> columns;
  const char* constraint;  // e.g. "PRIMARY KEY (track, min_start_ns, first_id)", or ""
  bool without_rowid;
};

struct Index {
  const char* name;
  const char* table;
  const char* columns;
  const char* doc;
};

struct View {
  const char* name;
  const char* doc;
  const char* select;
};

struct MetaKey {
  const char* key;
  const char* doc;
};

const std::vector<Table>& tables();
const std::vector<Index>& indexes();  // built at close, never during recording
const std::vector<View>& views();
const std::vector<MetaKey>& metaKeys();

// CREATE TABLE / CREATE VIEW statements, and the enum lookup tables' INSERTs.
std::vector<std::string> createStatements();
std::vector<std::string> indexStatements();
// The reference section of docs/trace-format.md.
std::string markdown();

}  // namespace tracerun::trace::schema
