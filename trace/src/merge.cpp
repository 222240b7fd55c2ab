// Merges per-rank shards into one trace on rank 0's clock (merge.h): strings, track ids and span
// ids remapped, times shifted, rows copied through prepared statements in one transaction per
// shard. Never writes to a shard; computes no analyses beyond what an incomplete shard lacks.
//
// Sections: statements · shards (open, check) · remapping · table copies · incomplete shards ·
//           mergeShards · a full disk
#include "tracerun/trace/merge.h"

#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <utility>

#include "file_check.h"
#include "span_chunks.h"
#include "sqlite_util.h"
#include "summaries.h"
#include "tracerun/core/rank_set.h"
#include "tracerun/core/tracks.h"
#include "tracerun/trace/analysis/memory_summary.h"
#include "tracerun/trace/error.h"
#include "tracerun/trace/raw_convert.h"
#include "tracerun/trace/schema.h"

namespace tracerun::trace {

namespace {

using sql::Db;
using sql::Stmt;

// ---- statements ---------------------------------------------------------------------------------

// A prepared statement for the generic copy: it binds sqlite3_value*s straight from a SELECT,
// which sql::Stmt does not expose.
class RawStmt {
 public:
  RawStmt(const Db& db, const std::string& text) : db_(&db) {
    if (sqlite3_prepare_v2(db.get(), text.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
      db.fail("cannot prepare '" + text.substr(0, 60) + "'");
    }
  }
  ~RawStmt() { sqlite3_finalize(stmt_); }
  RawStmt(const RawStmt&) = delete;
  RawStmt& operator=(const RawStmt&) = delete;

  sqlite3_stmt* get() const noexcept { return stmt_; }
  bool step(const char* what) {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    db_->fail(what);
  }
  void run(const char* what) {
    const int rc = sqlite3_step(stmt_);
    sqlite3_reset(stmt_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) db_->fail(what);
  }

 private:
  const Db* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// Removes the temporary output unless the merge got as far as renaming it.
class TempFile {
 public:
  explicit TempFile(std::string path) : path_(std::move(path)) { removeAll(); }
  ~TempFile() {
    if (!kept_) removeAll();
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const noexcept { return path_; }
  void keep() noexcept { kept_ = true; }
  void removeAll() noexcept {
    std::remove(path_.c_str());
    std::remove((path_ + "-journal").c_str());
    std::remove((path_ + "-wal").c_str());
    std::remove((path_ + "-shm").c_str());
  }

 private:
  std::string path_;
  bool kept_ = false;
};

// ---- shards (open, check) -----------------------------------------------------------------------

struct Shard {
  size_t index = 0;  // position in the caller's list
  std::string path;
  Db db;
  std::map<std::string, std::string> meta;
  int rank = 0;          // in the merged file (attempt_rank + the attempt's rank offset)
  int attempt = 0;       // MergeInput::attempt
  int attempt_rank = 0;  // the rank the shard recorded
  bool has_rank_row = false;
  int64_t origin_ns = 0;
  int64_t clock_offset_ns = 0;
  bool complete = false;
};

bool parseInt64(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || !end || *end != '\0') return false;
  *out = v;
  return true;
}

// index: the shard's place among its attempt's inputs (its rank when it never wrote one).
Shard openShard(const MergeInput& in, size_t index, size_t indexInAttempt) {
  filecheck::checkFile(in.path);
  Shard s;
  s.index = index;
  s.path = in.path;
  s.db = Db(in.path, Db::Mode::kReadOnly);
  s.meta = filecheck::readTraceMeta(s.db);
  if (s.meta["kind"] == "merged") {
    throw TraceError(in.path + ": already a merged trace (merge takes per-rank shards)");
  }
  s.complete = s.meta["complete"] == "1";
  if (!parseInt64(s.meta["origin_ns"], &s.origin_ns)) {
    throw TraceError(in.path + ": no valid origin_ns in meta (cannot place its times)");
  }
  Stmt ranks(s.db, "SELECT rank, clock_offset_ns FROM ranks");
  int rows = 0;
  while (ranks.step()) {
    s.rank = static_cast<int>(ranks.i64(0));
    s.clock_offset_ns = ranks.i64(1);
    ++rows;
  }
  if (rows > 1) {
    throw TraceError(in.path + ": holds " + std::to_string(rows) + " ranks (a shard holds one)");
  }
  s.has_rank_row = rows == 1;
  if (!s.has_rank_row) {
    if (s.complete) throw TraceError(in.path + ": no row in the ranks table");
    s.rank = static_cast<int>(indexInAttempt);  // the launcher lists shards in rank order
  }
  if (in.has_offset) s.clock_offset_ns = in.clock_offset_ns;
  s.attempt = in.attempt;
  s.attempt_rank = s.rank;
  return s;
}

// ---- remapping ----------------------------------------------------------------------------------

// The merged string table: every distinct text once, ids dense from 0 ("").
class StringMerger {
 public:
  explicit StringMerger(const Db& out)
      : insert_(out, "INSERT INTO strings (id, value) VALUES (?, ?)") {
    add("");
  }
  int64_t add(const std::string& s) {
    const auto [it, inserted] = ids_.try_emplace(s, next_);
    if (inserted) {
      insert_.bind(1, next_).bind(2, std::string_view(s)).run();
      ++next_;
    }
    return it->second;
  }

 private:
  Stmt insert_;
  std::unordered_map<std::string, int64_t> ids_;
  int64_t next_ = 0;
};

enum class Xf : uint8_t {
  kCopy,         // the value as it is
  kTime,         // + time shift
  kSpan,         // + span id offset
  kTrack,        // + track id offset
  kString,       // through the string map
  kPackedName,   // spans.packed: its name bits through the string map
  kClockOffset,  // replaced by the offset actually applied
  kRank,         // + the attempt's rank offset
};

// How one shard's ids and times become the merged file's.
struct Remap {
  int64_t time_shift = 0;
  int64_t span_offset = 0;
  int64_t track_offset = 0;
  int64_t clock_offset = 0;
  int64_t rank_offset = 0;
  std::vector<int64_t> strings;  // shard string id -> merged id; -1 when the shard lacks it
  std::unordered_map<int64_t, int64_t> missing;  // ids the shard used but never stored
  StringMerger* merger = nullptr;

  int64_t str(int64_t id) {
    if (id >= 0 && id < static_cast<int64_t>(strings.size()) && strings[id] >= 0) {
      return strings[id];
    }
    const auto it = missing.find(id);
    if (it != missing.end()) return it->second;
    const int64_t merged = merger->add("<missing string " + std::to_string(id) + ">");
    missing.emplace(id, merged);
    return merged;
  }
  int64_t apply(Xf xf, int64_t v) {
    switch (xf) {
      case Xf::kTime:
        return v + time_shift;
      case Xf::kSpan:
        return v + span_offset;
      case Xf::kTrack:
        return v + track_offset;
      case Xf::kString:
        return str(v);
      case Xf::kPackedName:
        return schema::packSpan(static_cast<uint32_t>(str(schema::packedName(v))),
                                schema::packedDepth(v), schema::packedCategory(v));
      case Xf::kClockOffset:
        return clock_offset;
      case Xf::kRank:
        return v + rank_offset;
      case Xf::kCopy:
        break;
    }
    return v;
  }
};

void loadStrings(Shard& shard, Remap& remap) {
  Stmt range(shard.db, "SELECT MAX(id), COUNT(*) FROM strings");
  range.step();
  const int64_t maxId = range.isNull(0) ? -1 : range.i64(0);
  const int64_t count = range.i64(1);
  if (maxId > 4 * count + 4096) {
    throw TraceError(shard.path + ": string ids out of range (largest " + std::to_string(maxId) +
                     " for " + std::to_string(count) + " strings); the file looks corrupted");
  }
  remap.strings.assign(static_cast<size_t>(maxId + 1), -1);
  Stmt all(shard.db, "SELECT id, value FROM strings");
  while (all.step()) {
    const int64_t id = all.i64(0);
    if (id >= 0) remap.strings[static_cast<size_t>(id)] = remap.merger->add(all.text(1));
  }
}

// ---- table copies -------------------------------------------------------------------------------

struct CopyRule {
  const char* table;
  std::vector<std::pair<const char*, Xf>> columns;  // columns not listed are copied as they are
  const char* on_conflict;                          // appended to the INSERT, or ""
};

// Every table of the schema is either copied by a rule or written by merge itself; checkRules()
// fails loudly when the schema grows a table this list does not know.
const std::vector<CopyRule>& copyRules() {
  static const std::vector<CopyRule> kRules = {
      {"ranks",
       {{"rank", Xf::kRank},
        {"clock_offset_ns", Xf::kClockOffset},
        {"start_ns", Xf::kTime},
        {"end_ns", Xf::kTime}},
       ""},
      {"tracks", {{"id", Xf::kTrack}, {"rank", Xf::kRank}}, ""},
      {"spans",
       {{"id", Xf::kSpan},
        {"track", Xf::kTrack},
        {"start_ns", Xf::kTime},
        {"packed", Xf::kPackedName},
        {"detail", Xf::kString}},
       ""},
      {"span_chunks",
       {{"track", Xf::kTrack},
        {"min_start_ns", Xf::kTime},
        {"max_end_ns", Xf::kTime},
        {"first_id", Xf::kSpan},
        {"last_id", Xf::kSpan}},
       ""},
      {"args", {{"span", Xf::kSpan}, {"key", Xf::kString}}, ""},
      {"instants",
       {{"track", Xf::kTrack},
        {"ts_ns", Xf::kTime},
        {"name", Xf::kString},
        {"detail", Xf::kString}},
       ""},
      {"counters", {{"track", Xf::kTrack}, {"ts_ns", Xf::kTime}}, ""},
      {"memory",
       {{"rank", Xf::kRank}, {"ts_ns", Xf::kTime}, {"op", Xf::kString}, {"scope", Xf::kString}},
       ""},
      {"flows",
       {{"src_track", Xf::kTrack},
        {"src_ts_ns", Xf::kTime},
        {"dst_track", Xf::kTrack},
        {"dst_ts_ns", Xf::kTime}},
       ""},
      {"aggregates",
       {{"rank", Xf::kRank}, {"name", Xf::kString}},
       "ON CONFLICT (rank, name, category) DO UPDATE SET count = count + excluded.count, "
       "total_ns = total_ns + excluded.total_ns, self_ns = self_ns + excluded.self_ns"},
      {"stats",
       {{"rank", Xf::kRank}},
       "ON CONFLICT (rank, name) DO UPDATE SET value = excluded.value, "
       "severity = MAX(severity, excluded.severity)"},
  };
  return kRules;
}

bool writtenByMerge(const std::string& table) {
  static const char* const kOwn[] = {"meta", "strings", "attempts", "categories", "track_kinds",
                                     "memory_categories", "flow_kinds",
                                     // written after the merge (analysis/memory_summary.h)
                                     "memory_category_blocks", "memory_category_allocations"};
  const auto& summaries = schema::summaryTables();  // rebuilt over the merged spans
  return std::any_of(std::begin(kOwn), std::end(kOwn), [&](const char* t) { return table == t; }) ||
         std::find(summaries.begin(), summaries.end(), table) != summaries.end();
}

// Takes the rule's C string as it is: built into a temporary std::string, GCC 13 warned
// (-Wdangling-reference) at each caller that binds the returned reference.
const schema::Table& schemaTable(const char* name) {
  for (const auto& t : schema::tables()) {
    if (std::strcmp(name, t.name) == 0) return t;
  }
  throw TraceError(std::string("merge: internal error: the schema has no table '") + name + "'");
}

void checkRules() {
  for (const auto& t : schema::tables()) {
    const bool ruled = std::any_of(copyRules().begin(), copyRules().end(), [&](const CopyRule& r) {
      return std::string(r.table) == t.name;
    });
    if (!ruled && !writtenByMerge(t.name)) {
      throw TraceError(std::string("merge: internal error: no merge rule for table '") + t.name +
                       "'");
    }
  }
  for (const auto& r : copyRules()) {
    const auto& t = schemaTable(r.table);
    for (const auto& [column, xf] : r.columns) {
      // Generated columns are never copied (the merged file computes them), so a rule on one
      // would silently do nothing.
      const bool known = std::any_of(t.columns.begin(), t.columns.end(), [&](const auto& c) {
        return std::string(c.name) == column && !schema::isGenerated(c);
      });
      if (!known) {
        throw TraceError(std::string("merge: internal error: no column ") + r.table + "." + column);
      }
    }
  }
}

// ORDER BY that reads a table in its storage order, so inserts into the merged file append.
std::string storageOrder(const schema::Table& t) {
  if (!t.without_rowid) return "rowid";
  const std::string c = t.constraint;
  const auto open = c.find('(');
  const auto close = c.rfind(')');
  if (c.rfind("PRIMARY KEY", 0) != 0 || open == std::string::npos || close == std::string::npos) {
    throw TraceError(std::string("merge: internal error: no primary key for ") + t.name);
  }
  return c.substr(open + 1, close - open - 1);
}

// One value read from a shard, held until its row is written in a batch.
struct Cell {
  int type = SQLITE_NULL;
  int64_t i = 0;
  sqlite3_value* other = nullptr;  // a copy of a REAL or TEXT value
};

std::string insertSql(const schema::Table& table, const std::string& cols, size_t ncols,
                      size_t rows, const char* onConflict) {
  std::string one = "(";
  for (size_t i = 0; i < ncols; ++i) one += i ? ", ?" : "?";
  one += ")";
  std::string sql = std::string("INSERT INTO ") + table.name + " (" + cols + ") VALUES ";
  for (size_t r = 0; r < rows; ++r) sql += (r ? ", " : "") + one;
  return sql + " " + onConflict;
}

int64_t copyTable(Shard& shard, const Db& out, const CopyRule& rule, Remap& remap) {
  // Rows go out kBatchRows to a statement: a multi-row INSERT halves the per-row cost of
  // stepping and resetting.
  constexpr size_t kBatchRows = 32;
  const auto& table = schemaTable(rule.table);
  std::string cols;
  std::vector<Xf> xfs;
  for (const auto& c : table.columns) {
    if (schema::isGenerated(c)) continue;
    if (!xfs.empty()) cols += ", ";
    cols += c.name;
    Xf xf = Xf::kCopy;
    for (const auto& [name, x] : rule.columns) {
      if (std::string(name) == c.name) xf = x;
    }
    xfs.push_back(xf);
  }
  const size_t n = xfs.size();
  RawStmt select(shard.db,
                 "SELECT " + cols + " FROM " + table.name + " ORDER BY " + storageOrder(table));
  RawStmt batch(out, insertSql(table, cols, n, kBatchRows, rule.on_conflict));
  sqlite3_stmt* sel = select.get();

  std::vector<Cell> cells(n * kBatchRows);
  size_t pending = 0;  // rows held in cells
  auto release = [&] {
    for (auto& c : cells) {
      sqlite3_value_free(c.other);
      c.other = nullptr;
    }
  };
  auto write = [&](RawStmt& stmt, size_t rows) {
    sqlite3_stmt* ins = stmt.get();
    for (size_t k = 0; k < rows * n; ++k) {
      const Cell& c = cells[k];
      const int at = static_cast<int>(k) + 1;
      if (c.type == SQLITE_INTEGER) {
        sqlite3_bind_int64(ins, at, c.i);
      } else if (c.other) {
        sqlite3_bind_value(ins, at, c.other);
      } else {
        sqlite3_bind_null(ins, at);
      }
    }
    stmt.run("writing the merged file failed");
    release();
  };
  int64_t rows = 0;
  try {
    while (select.step("reading the shard failed")) {
      Cell* row = &cells[pending * n];
      for (size_t i = 0; i < n; ++i) {
        const int col = static_cast<int>(i);
        Cell& c = row[i];
        c.type = sqlite3_column_type(sel, col);
        if (xfs[i] == Xf::kClockOffset) {
          c.type = SQLITE_INTEGER;
          c.i = remap.clock_offset;
        } else if (c.type == SQLITE_INTEGER) {
          c.i = remap.apply(xfs[i], sqlite3_column_int64(sel, col));
        } else if (c.type != SQLITE_NULL) {
          if (xfs[i] == Xf::kCopy) {
            c.other = sqlite3_value_dup(sqlite3_column_value(sel, col));
            if (!c.other) throw TraceError(shard.path + ": out of memory");
          } else {  // a number stored as REAL or TEXT where an integer belongs
            c.type = SQLITE_INTEGER;
            c.i = remap.apply(xfs[i], sqlite3_column_int64(sel, col));
          }
        }
      }
      ++rows;
      if (++pending == kBatchRows) {
        write(batch, pending);
        pending = 0;
      }
    }
    if (pending > 0) {
      RawStmt tail(out, insertSql(table, cols, n, pending, rule.on_conflict));
      write(tail, pending);
    }
  } catch (...) {
    release();
    throw;
  }
  return rows;
}

// ---- incomplete shards --------------------------------------------------------------------------

// Track ids referenced anywhere in a shard (an incomplete shard may lack rows in tracks).
std::pair<int64_t, int64_t> referencedTrackRange(Shard& shard) {
  const char* q =
      shard.complete ? "SELECT MIN(id), MAX(id) FROM tracks"
                     : "SELECT MIN(t), MAX(t) FROM (SELECT id AS t FROM tracks UNION ALL "
                       "SELECT track FROM spans UNION ALL SELECT track FROM instants UNION ALL "
                       "SELECT track FROM counters UNION ALL SELECT src_track FROM flows UNION ALL "
                       "SELECT dst_track FROM flows)";
  Stmt range(shard.db, q);
  range.step();
  if (range.isNull(0)) return {1, 0};
  return {range.i64(0), range.i64(1)};
}

// Rows for tracks an incomplete shard used but never described.
int64_t addPlaceholderTracks(Shard& shard, const Db& out, Remap& remap) {
  Stmt lost(shard.db,
            "SELECT track, MAX(is_counter) FROM (SELECT track, 0 AS is_counter FROM spans UNION "
            "ALL SELECT track, 0 FROM instants UNION ALL SELECT track, 1 FROM counters UNION ALL "
            "SELECT src_track, 0 FROM flows UNION ALL SELECT dst_track, 0 FROM flows) "
            "WHERE track NOT IN (SELECT id FROM tracks) GROUP BY track");
  Stmt insert(out, "INSERT INTO tracks (id, rank, kind, tid, name) VALUES (?, ?, ?, 0, ?)");
  int64_t added = 0;
  while (lost.step()) {
    const int64_t id = lost.i64(0);
    const auto kind = lost.i64(1) ? core::TrackKind::kCounter : core::TrackKind::kThread;
    insert.bind(1, id + remap.track_offset)
        .bind(2, int64_t{shard.rank})
        .bind(3, static_cast<int64_t>(kind))
        .bind(4, std::string_view("track " + std::to_string(id) + " (not described)"))
        .run();
    ++added;
  }
  return added;
}

struct TrackTotals {
  int64_t events = 0, longest_span = 0, longest_chunk = 0;
};

// span_chunks for the merged spans [lo, hi] of an incomplete shard, under the chunk contract
// (span_chunks.h): runs of consecutive ids of one track in span order, at most kChunkRows long. The
// writer's own chunks are such runs, so this mostly finds them again; a run is cut wherever the
// order breaks, so no chunk needs sorting by its reader.
void rebuildChunks(const Db& out, int64_t lo, int64_t hi,
                   std::unordered_map<int64_t, TrackTotals>& totals) {
  Stmt select(out,
              "SELECT id, track, start_ns, dur_ns, packed FROM spans WHERE id BETWEEN ? AND ? "
              "ORDER BY id");
  Stmt insert(out,
              "INSERT INTO span_chunks (track, min_start_ns, max_end_ns, first_id, last_id) "
              "VALUES (?, ?, ?, ?, ?)");
  chunks::ChunkExtent chunk;
  auto flush = [&] {
    if (chunk.empty()) return;
    insert.bind(1, chunk.track)
        .bind(2, chunk.min_start)
        .bind(3, chunk.max_end)
        .bind(4, chunk.first_id)
        .bind(5, chunk.last_id)
        .run();
    auto& t = totals[chunk.track];
    t.longest_chunk = std::max(t.longest_chunk, chunk.width());
    chunk = chunks::ChunkExtent();
  };
  select.bind(1, lo).bind(2, hi);
  while (select.step()) {
    const int64_t id = select.i64(0), track = select.i64(1);
    const int64_t start = select.i64(2), dur = select.i64(3);
    const chunks::SpanOrder order{start, schema::packedDepth(select.i64(4)), id};
    if (!chunk.accepts(track, id, order, chunks::kChunkRows)) flush();
    chunk.add(track, id, order, start + dur);
    auto& t = totals[track];
    ++t.events;
    t.longest_span = std::max(t.longest_span, dur);
  }
  flush();
}

// What the writer computes at close and an incomplete shard may lack: chunk index, per-track
// counts and extents, the rank's time range.
void repairIncomplete(Shard& shard, const Db& out, Remap& remap, int64_t spanLo, int64_t spanHi) {
  std::unordered_map<int64_t, TrackTotals> totals;
  if (spanLo <= spanHi) rebuildChunks(out, spanLo, spanHi, totals);
  for (const char* table : {"instants", "counters"}) {
    Stmt count(shard.db, std::string("SELECT track, COUNT(*) FROM ") + table + " GROUP BY track");
    while (count.step()) totals[count.i64(0) + remap.track_offset].events += count.i64(1);
  }
  Stmt update(out,
              "UPDATE tracks SET event_count = MAX(event_count, ?), longest_span_ns = "
              "MAX(longest_span_ns, ?), longest_chunk_ns = MAX(longest_chunk_ns, ?) WHERE id = ?");
  for (const auto& [track, t] : totals) {
    update.bind(1, t.events).bind(2, t.longest_span).bind(3, t.longest_chunk).bind(4, track).run();
  }

  Stmt range(shard.db,
             "SELECT MIN(t0), MAX(t1) FROM (SELECT MIN(start_ns) AS t0, MAX(start_ns + dur_ns) AS "
             "t1 FROM spans UNION ALL SELECT MIN(ts_ns), MAX(ts_ns) FROM instants UNION ALL "
             "SELECT MIN(ts_ns), MAX(ts_ns) FROM counters UNION ALL SELECT MIN(ts_ns), MAX(ts_ns) "
             "FROM memory)");
  range.step();
  const bool empty = range.isNull(0);
  const int64_t t0 = empty ? 0 : range.i64(0) + remap.time_shift;
  const int64_t t1 = empty ? 0 : range.i64(1) + remap.time_shift;
  if (shard.has_rank_row) {
    Stmt set(out,
             "UPDATE ranks SET start_ns = COALESCE(start_ns, ?), end_ns = COALESCE(end_ns, ?) "
             "WHERE rank = ?");
    set.bind(1, t0).bind(2, t1).bind(3, int64_t{shard.rank}).run();
  } else {
    Stmt add(out,
             "INSERT INTO ranks (rank, host, pid, clock_offset_ns, start_ns, end_ns) VALUES "
             "(?, ?, 0, ?, ?, ?)");
    add.bind(1, int64_t{shard.rank}).bind(2, std::string_view(shard.meta["host"]));
    add.bind(3, remap.clock_offset);
    if (empty) {
      add.bindNull(4).bindNull(5);
    } else {
      add.bind(4, t0).bind(5, t1);
    }
    add.run();
  }
}

// ---- mergeShards --------------------------------------------------------------------------------

struct MergedIds {
  int64_t max_span = 0;
  int64_t max_track = 0;
};

void setStat(const Db& out, int rank, const std::string& name, int64_t value, Severity severity) {
  Stmt s(out,
         "INSERT INTO stats (rank, name, value, severity) VALUES (?, ?, ?, ?) ON CONFLICT (rank, "
         "name) DO UPDATE SET value = value + excluded.value, severity = MAX(severity, "
         "excluded.severity)");
  s.bind(1, int64_t{rank}).bind(2, std::string_view(name)).bind(3, value);
  s.bind(4, static_cast<int64_t>(severity)).run();
}

// Returns the number of tables that could not be read (allow_incomplete only).
int64_t mergeOne(Shard& shard, const Db& out, StringMerger& strings, int64_t mergedOrigin,
                 MergedIds& ids, bool allowIncomplete) {
  Remap remap;
  remap.merger = &strings;
  remap.clock_offset = shard.clock_offset_ns;
  remap.rank_offset = shard.rank - shard.attempt_rank;
  // A rank's clock reads clock_offset_ns more than rank 0's (schema: ranks.clock_offset_ns), so
  // its local time t is t - offset on rank 0's clock.
  remap.time_shift = shard.origin_ns - shard.clock_offset_ns - mergedOrigin;
  loadStrings(shard, remap);

  Stmt spanRange(shard.db, "SELECT MIN(id), MAX(id) FROM spans");
  spanRange.step();
  const bool hasSpans = !spanRange.isNull(0);
  const int64_t spanMin = hasSpans ? spanRange.i64(0) : 0;
  const int64_t spanMax = hasSpans ? spanRange.i64(1) : -1;
  remap.span_offset = hasSpans ? ids.max_span + 1 - spanMin : 0;
  const auto [trackMin, trackMax] = referencedTrackRange(shard);
  remap.track_offset = trackMin <= trackMax ? ids.max_track + 1 - trackMin : 0;

  int64_t readErrors = 0;
  for (const auto& rule : copyRules()) {
    const std::string table = rule.table;
    if (table == "span_chunks" && !shard.complete) continue;  // rebuilt below
    try {
      copyTable(shard, out, rule, remap);
    } catch (const sql::SqliteError& e) {
      // Only what could not be read from the shard is skipped; a failed write to the merged file
      // (a full disk) fails the merge, or the output would silently lack the rest of this table.
      if (!allowIncomplete || e.path() != shard.path) throw;
      ++readErrors;
    } catch (const TraceError&) {
      if (!allowIncomplete) throw;
      ++readErrors;
    }
    if (table == "tracks" && !shard.complete) {
      const int64_t placeholders = addPlaceholderTracks(shard, out, remap);
      if (placeholders) {
        setStat(out, shard.rank, "merge_undescribed_tracks", placeholders, Severity::kWarning);
      }
    }
  }
  if (hasSpans) ids.max_span = spanMax + remap.span_offset;
  if (trackMin <= trackMax) ids.max_track = trackMax + remap.track_offset;

  if (!shard.complete) {
    repairIncomplete(shard, out, remap, spanMin + remap.span_offset, spanMax + remap.span_offset);
    setStat(out, shard.rank, "merge_incomplete_shard", 1, Severity::kError);
  }
  if (readErrors) setStat(out, shard.rank, "merge_unreadable_tables", readErrors, Severity::kError);
  if (!remap.missing.empty()) {
    setStat(out, shard.rank, "merge_missing_strings", static_cast<int64_t>(remap.missing.size()),
            Severity::kWarning);
  }
  return readErrors;
}

// ---- attempts -----------------------------------------------------------------------------------

// Each attempt's world size: the largest WORLD_SIZE its shards recorded, at least its highest
// rank + 1 and its number of shards.
std::map<int, int64_t> attemptWorlds(const std::vector<Shard>& shards) {
  std::map<int, int64_t> worlds;
  for (const auto& s : shards) {
    int64_t& world = worlds[s.attempt];
    int64_t w = 0;
    if (parseInt64(s.meta.count("world_size") ? s.meta.at("world_size") : "", &w)) {
      world = std::max(world, w);
    }
    world = std::max<int64_t>(world, s.attempt_rank + 1);
  }
  for (auto& [attempt, world] : worlds) {
    world = std::max<int64_t>(
        world, std::count_if(shards.begin(), shards.end(),
                             [a = attempt](const Shard& s) { return s.attempt == a; }));
  }
  return worlds;
}

// The merged rank of every shard: the last attempt's ranks as recorded, then each earlier
// attempt's (in attempt order) after them, so readers that know nothing of attempts see the last
// run's ranks where they were.
std::map<int, int64_t> assignMergedRanks(std::vector<Shard>& shards,
                                         const std::map<int, int64_t>& worlds) {
  std::map<int, int64_t> offsets{{worlds.rbegin()->first, 0}};
  int64_t next = worlds.rbegin()->second;
  for (const auto& [attempt, world] : worlds) {
    if (attempt == worlds.rbegin()->first) continue;
    offsets[attempt] = next;
    next += world;
  }
  for (auto& s : shards) s.rank = s.attempt_rank + static_cast<int>(offsets.at(s.attempt));
  return offsets;
}

// One attempts row per attempt merged, its times from its ranks' rows.
void writeAttempts(const Db& out, const std::map<int, int64_t>& worlds,
                   const std::map<int, int64_t>& offsets) {
  Stmt insert(out,
              "INSERT INTO attempts (attempt, world_size, rank_offset, start_ns, end_ns) SELECT "
              "?1, ?2, ?3, MIN(start_ns), MAX(end_ns) FROM ranks WHERE rank BETWEEN ?3 AND ?3 + "
              "?2 - 1");
  for (const auto& [attempt, world] : worlds) {
    insert.bind(1, int64_t{attempt}).bind(2, world).bind(3, offsets.at(attempt)).run();
  }
}

void writeMeta(const Db& out, const std::vector<Shard>& shards, int64_t mergedOrigin,
               int64_t worldSize) {
  // Each key from the first shard that has it: a shard killed before its close has no meta rows
  // (capture, capture_target, command... are written at close), and that may be the first one.
  std::map<std::string, std::string> meta;
  for (const auto& key : schema::metaKeys()) {
    for (const auto& s : shards) {
      const auto it = s.meta.find(key.key);
      if (it == s.meta.end()) continue;
      meta[key.key] = it->second;
      break;
    }
  }
  meta["magic"] = schema::kMagic;
  meta["schema_version"] = std::to_string(schema::kSchemaVersion);
  meta["kind"] = "merged";
  meta["complete"] = "1";
  meta["origin_ns"] = std::to_string(mergedOrigin);
  meta["world_size"] = std::to_string(worldSize);
  meta["created_unix_s"] = std::to_string(static_cast<int64_t>(std::time(nullptr)));
  // traced_ranks (`tracerun --ranks`): every shard's list, joined. A shard killed before its close
  // has no meta at all; one closed without the key was traced without --ranks (a merge by hand of
  // two runs): the file then claims no list. Lists that differ are said.
  meta.erase("traced_ranks");
  std::optional<core::RankSet> traced;
  int differs = -1;  // the first shard's rank whose list differs from the ones before it
  bool closedWithout = false;
  for (const auto& s : shards) {
    const auto it = s.meta.find("traced_ranks");
    if (it == s.meta.end()) {
      closedWithout = closedWithout || s.meta.count("capture") != 0;
      continue;
    }
    const core::RankSet list = core::RankSet::parse(it->second, nullptr);
    if (traced && *traced != list && differs < 0) differs = s.rank;
    traced = traced ? traced->join(list) : list;
  }
  if (traced && closedWithout && differs < 0) differs = shards.front().rank;
  if (traced && !closedWithout && !traced->empty()) meta["traced_ranks"] = traced->text();
  Stmt insert(out, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)");
  for (const auto& [k, v] : meta) {
    insert.bind(1, std::string_view(k)).bind(2, std::string_view(v)).run();
  }
  if (differs >= 0) setStat(out, differs, "merge_traced_ranks_differ", 1, Severity::kWarning);
}

// ---- a full disk --------------------------------------------------------------------------------

uint64_t fileSize(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

std::string mebibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

// "<output>: not enough space for the merged trace: it needs about X (the shards' size), the file
// system of DIR has Y free (<sqlite's words>)". Measured after the temporary file is gone.
std::string noSpaceMessage(const std::string& output, const std::vector<MergeInput>& shards,
                           const sql::SqliteError& e) {
  uint64_t needed = 0;
  for (const auto& s : shards) needed += fileSize(s.path) + fileSize(s.path + "-wal");
  const auto slash = output.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : output.substr(0, slash ? slash : 1);
  struct statvfs vfs;
  std::string free = "an unknown amount";
  if (::statvfs(dir.c_str(), &vfs) == 0) {
    free = mebibytes(static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize);
  }
  std::string limit;
  struct rlimit fsize {};
  if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY) {
    limit = ", and files may not outgrow " + mebibytes(fsize.rlim_cur) + " (ulimit -f)";
  }
  const std::string what = e.code() != 0 ? sqlite3_errstr(e.code()) : "no space";
  return output + ": " +
         (e.outOfSpace() ? "not enough space for the merged trace"
                         : "cannot write the merged trace") +
         ": it needs about " + mebibytes(needed) + " (the shards' size), the file system of " +
         dir + " has " + free + " free" + limit + " (" + what + ")";
}

}  // namespace

bool MergeResult::whole() const {
  return std::all_of(shards.begin(), shards.end(), [](const ShardOutcome& s) {
    return s.readable && s.complete && s.unreadable_tables == 0 && s.raw_problem.empty();
  });
}

MergeResult mergeShards(const std::vector<MergeInput>& shards, const MergeOptions& options,
                        bool allow_incomplete) {
  if (options.output.empty()) throw TraceError("merge: no output path given");
  if (shards.empty()) throw TraceError(options.output + ": nothing to merge (no shards given)");
  checkRules();
  struct stat outStat;
  if (::stat(options.output.c_str(), &outStat) == 0) {
    for (const auto& s : shards) {
      struct stat in;
      if (::stat(s.path.c_str(), &in) == 0 && in.st_dev == outStat.st_dev &&
          in.st_ino == outStat.st_ino) {
        throw TraceError(options.output + ": is also a shard to merge; choose another output");
      }
    }
  }

  struct Unreadable {
    size_t index;
    std::string problem;
  };
  MergeResult result;
  result.shards.resize(shards.size());
  std::vector<Shard> open;
  std::vector<Unreadable> unreadable;
  // A shard whose process wrote raw records and never converted them (killed: SHARD.raw beside
  // it, raw_convert.h) is read from a conversion into a temporary file; the shards are unchanged.
  // Beside a closed shard the raw file is a leftover, and the shard is read (rawIsLeftover).
  std::vector<std::unique_ptr<TempFile>> converted;
  std::map<int, size_t> perAttempt;  // inputs seen so far of each attempt
  for (size_t i = 0; i < shards.size(); ++i) {
    const size_t indexInAttempt = perAttempt[shards[i].attempt]++;
    result.shards[i].path = shards[i].path;
    MergeInput input = shards[i];
    if (struct stat st;
        ::stat(rawShardPath(input.path).c_str(), &st) == 0 && !rawIsLeftover(input.path)) {
      converted.push_back(
          std::make_unique<TempFile>(options.output + ".raw" + std::to_string(i) + ".tmp"));
      try {
        convertRawShard(rawShardPath(input.path), converted.back()->path());
        input.path = converted.back()->path();
      } catch (const TraceError& e) {
        // Not convertible: its records are not in the output. That is the error; with
        // allow_incomplete the shard itself is merged (the writer's placeholder, or what it
        // holds) and the caller is told why (raw_problem), so that nothing deletes the raw file.
        if (!allow_incomplete) throw;
        result.shards[i].raw_problem = e.what();
      }
    }
    try {
      Shard s = openShard(input, i, indexInAttempt);
      if (!s.complete && !allow_incomplete) {
        // Named as the caller named it, not by the temporary file a raw shard became.
        throw TraceError(shards[i].path +
                         ": incomplete shard (its writer never closed it); merge it "
                         "with allow_incomplete to keep what it holds");
      }
      open.push_back(std::move(s));
    } catch (const TraceError& e) {
      if (!allow_incomplete) throw;
      unreadable.push_back({i, e.what()});
      result.shards[i].problem = e.what();
    }
  }
  if (open.empty()) {
    throw TraceError(options.output +
                     ": no readable shard (first problem: " + unreadable.front().problem + ")");
  }
  std::stable_sort(open.begin(), open.end(), [](const Shard& a, const Shard& b) {
    return a.attempt != b.attempt ? a.attempt < b.attempt : a.attempt_rank < b.attempt_rank;
  });
  for (size_t i = 1; i < open.size(); ++i) {
    if (open[i].attempt == open[i - 1].attempt && open[i].rank == open[i - 1].rank) {
      throw TraceError(open[i].path + ": rank " + std::to_string(open[i].rank) + " is also in " +
                       open[i - 1].path);
    }
  }
  const std::map<int, int64_t> worlds = attemptWorlds(open);
  const std::map<int, int64_t> rankOffsets = assignMergedRanks(open, worlds);
  // Rank 0's clock (or the lowest rank's, when rank 0 is missing) of the first attempt is the
  // merged time axis.
  const int64_t mergedOrigin = open.front().origin_ns - open.front().clock_offset_ns;

  TempFile temp(options.output + ".tmp");
  try {
    Db out(temp.path(), Db::Mode::kCreate);
    out.exec("PRAGMA journal_mode = OFF");  // a failed merge leaves only the temp file
    out.exec("PRAGMA synchronous = OFF");
    out.exec("PRAGMA locking_mode = EXCLUSIVE");
    out.exec("PRAGMA cache_size = -65536");
    out.exec("BEGIN");
    for (const auto& statement : schema::createStatements()) out.exec(statement);
    out.exec("PRAGMA user_version = " + std::to_string(schema::kSchemaVersion));
    StringMerger strings(out);
    MergedIds ids;
    if (options.progress) options.progress(0, open.size());
    for (size_t i = 0; i < open.size(); ++i) {
      ShardOutcome& outcome = result.shards[open[i].index];
      outcome.rank = open[i].rank;
      outcome.complete = open[i].complete;
      outcome.unreadable_tables =
          mergeOne(open[i], out, strings, mergedOrigin, ids, allow_incomplete);
      for (const auto& stat : shards[open[i].index].stats) {
        setStat(out, open[i].rank, stat.name, stat.value, stat.severity);
      }
      outcome.readable = true;
      out.exec("COMMIT");
      out.exec("BEGIN");
      if (options.progress) options.progress(i + 1, open.size());
    }
    for (const auto& u : unreadable) {
      setStat(out, static_cast<int>(u.index), "merge_unreadable_shard", 1, Severity::kError);
    }
    writeAttempts(out, worlds, rankOffsets);
    writeMeta(out, open, mergedOrigin, worlds.rbegin()->second);
    // The level-of-detail summaries over the merged spans (the shards' own are not copied).
    lod::build(out, {});
    out.exec(std::string("INSERT OR REPLACE INTO meta (key, value) VALUES ('summaries', '") +
             lod::kSummariesVersion + "')");
    for (const auto& statement : schema::indexStatements()) out.exec(statement);
    out.exec("COMMIT");
  } catch (const sql::SqliteError& e) {
    // A full disk (or a write refused): the partial output goes (no half trace is left), then
    // the line says how much room the merge needs.
    // SQLite reports some failed writes (EFBIG past a file-size limit) as a plain I/O error.
    const bool writeFailed = e.outOfSpace() || e.code() == SQLITE_IOERR_WRITE;
    if (!writeFailed || e.path() != temp.path()) throw;
    temp.removeAll();
    throw TraceError(noSpaceMessage(options.output, shards, e));
  }
  // The per-category memory summary (analysis/memory_summary.h), read by traceview's memory view:
  // optional, so a failure (a full disk) leaves the trace without it (the view then replays).
  try {
    analysis::writeMemorySummary(temp.path());
  } catch (const std::exception& e) {
    result.memory_summary_error = e.what();
  }
  if (std::rename(temp.path().c_str(), options.output.c_str()) != 0) {
    throw TraceError(options.output + ": cannot write: " + std::strerror(errno));
  }
  temp.keep();
  return result;
}

int attemptOfShard(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return -1;
  const auto start = path.rfind('/', slash - 1);
  const std::string parent = path.substr(start == std::string::npos ? 0 : start + 1,
                                         slash - (start == std::string::npos ? 0 : start + 1));
  const std::string digits = parent.rfind("attempt", 0) == 0 ? parent.substr(7) : "";
  bool number = !digits.empty() && digits.size() < 7;
  for (char c : digits) number = number && c >= '0' && c <= '9';
  return number ? std::atoi(digits.c_str()) : -1;
}

}  // namespace tracerun::trace
