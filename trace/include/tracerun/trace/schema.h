// The trace schema, declared once. The same declaration creates the tables (writer, merge),
// builds the indexes at close, and generates the reference section of docs/trace-format.md
// (a test fails when the two differ). Bump kSchemaVersion on any incompatible change.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tracerun::trace::schema {

// 2: spans store name, depth and category in one integer column (`packed`), read back through
// generated columns. Files of schema 1 are refused as older.
inline constexpr int kSchemaVersion = 2;
inline constexpr const char* kMagic = "tracerun";  // meta('magic')

// spans.packed = category | depth << 4 | name << 20. The range query's cost is SQLite decoding
// columns (each one is a VDBE op and a value fetch per row), so the three fields a timeline needs
// besides the times are decoded as one; the small fields sit in the low bits so a typical value
// still fits SQLite's 4-byte integer. The generated columns spans.category/depth/name unpack it
// with the same shifts (schema.cpp), so SQL users never see the packing.
inline constexpr int kPackedCategoryBits = 4;
inline constexpr int kPackedDepthBits = 16;
inline constexpr int kPackedNameShift = kPackedCategoryBits + kPackedDepthBits;

constexpr int64_t packSpan(uint32_t name, uint16_t depth, uint8_t category) {
  return int64_t{category} | int64_t{depth} << kPackedCategoryBits |
         int64_t{name} << kPackedNameShift;
}
constexpr uint8_t packedCategory(int64_t packed) {
  return static_cast<uint8_t>(packed & ((1 << kPackedCategoryBits) - 1));
}
constexpr uint16_t packedDepth(int64_t packed) {
  return static_cast<uint16_t>((packed >> kPackedCategoryBits) & ((1 << kPackedDepthBits) - 1));
}
constexpr uint32_t packedName(int64_t packed) {
  return static_cast<uint32_t>(static_cast<uint64_t>(packed) >> kPackedNameShift);
}

struct Column {
  const char* name;
  const char* type;  // SQLite type and constraints
  const char* doc;
};

// A generated (computed) column: never written, read like any other.
inline bool isGenerated(const Column& c) {
  return std::string_view(c.type).find("GENERATED") != std::string_view::npos;
}

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
// The level-of-detail summary tables (built from the spans, never copied by merge), and their
// CREATE TABLE statements; temporary: as TEMP tables (a Timeline on an older, read-only file).
const std::vector<std::string>& summaryTables();
std::vector<std::string> summaryTableStatements(bool temporary);
// The reference section of docs/trace-format.md.
std::string markdown();

}  // namespace tracerun::trace::schema
