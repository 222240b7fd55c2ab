// File and meta checks shared by merge (and any other opener in trace/). Reads the 100-byte SQLite
// header (and a -wal beside the file) itself so truncation and non-SQLite files get a precise
// message; never writes.
#include "file_check.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>

#include "tracerun/trace/schema.h"
#include "wal_overlay.h"

namespace tracerun::trace::filecheck {

namespace {

constexpr char kSqliteMagic[] = "SQLite format 3";  // 16 bytes with its NUL
constexpr size_t kHeaderSize = 100;

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

[[noreturn]] void fail(const std::string& path, const std::string& problem) {
  throw TraceError(path + ": " + problem);
}

int64_t parseInt(const std::string& s, bool* ok) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  *ok = !s.empty() && errno == 0 && end && *end == '\0';
  return v;
}

}  // namespace

std::string describeSqliteError(int code) {
  switch (code & 0xff) {
    case SQLITE_NOTADB:
      return "not an SQLite database";
    case SQLITE_CORRUPT:
      return "corrupted";
    case SQLITE_IOERR:
      return "I/O error (truncated or unreadable)";
    case SQLITE_CANTOPEN:
      return "cannot open";
    case SQLITE_NOMEM:
      return "out of memory";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "locked by another process";
    case SQLITE_PERM:
    case SQLITE_AUTH:
    case SQLITE_READONLY:
      return "permission denied";
    default:
      return sqlite3_errstr(code);
  }
}

void checkFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    fail(path, std::string("cannot open: ") + strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) fail(path, "is a directory, not a trace file");
  if (!S_ISREG(st.st_mode)) fail(path, "not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0) fail(path, "not an SQLite file (empty)");

  unsigned char header[kHeaderSize] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, std::string("cannot read: ") + strerror(errno));
  in.read(reinterpret_cast<char*>(header), kHeaderSize);
  const auto got = static_cast<size_t>(in.gcount());
  const size_t magicLen = sizeof(kSqliteMagic);  // includes the NUL, as in the file
  if (std::memcmp(header, kSqliteMagic, got < magicLen ? got : magicLen) != 0) {
    fail(path, "not an SQLite file (and so not a tracerun trace)");
  }
  if (got < kHeaderSize) {
    fail(path, "truncated (" + std::to_string(got) + " bytes, shorter than an SQLite header)");
  }

  uint32_t pageSize = (uint32_t{header[16]} << 8) | header[17];
  if (pageSize == 1) pageSize = 65536;
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) != 0) {
    fail(path, "corrupted SQLite header (page size " + std::to_string(pageSize) + ")");
  }
  // A file in WAL mode (a shard whose writer did not finish, or whose last checkpoint was cut
  // short) is whole when every page of the WAL's last commit is in the main file or in the WAL:
  // that is what SQLite reads, and what the reader's overlay shows.
  const wal::WalIndex log = wal::readWal(path + "-wal", pageSize);
  if (log.db_pages != 0) {
    const uint64_t wholePages = size / pageSize;
    uint64_t missing = 0, first = 0;
    for (uint64_t page = wholePages + 1; page <= log.db_pages; ++page) {
      if (log.frames.count(static_cast<uint32_t>(page)) == 0) {
        if (missing++ == 0) first = page;
      }
    }
    if (missing != 0) {
      fail(path, "truncated (" + std::to_string(size) + " bytes; its -wal's last commit has " +
                     std::to_string(log.db_pages) + " pages of " + std::to_string(pageSize) +
                     " bytes and " + std::to_string(missing) + " of them, from page " +
                     std::to_string(first) + ", are in neither file)");
    }
    return;
  }
  // The in-header page count is valid only when its change counter matches (SQLite's rule).
  const uint32_t pages = be32(header + 28);
  if (pages != 0 && be32(header + 24) == be32(header + 92)) {
    const uint64_t expected = uint64_t{pages} * pageSize;
    if (size < expected) {
      fail(path, "truncated (" + std::to_string(size) + " bytes, the header says " +
                     std::to_string(expected) + ")");
    }
  }
  if (size % pageSize != 0) {
    fail(path, "truncated (" + std::to_string(size) + " bytes, not a whole number of " +
                   std::to_string(pageSize) + "-byte pages)");
  }
}

std::map<std::string, std::string> readTraceMeta(const sql::Db& db) {
  const std::string& path = db.path();
  sqlite3_stmt* raw = nullptr;
  const int rc = sqlite3_prepare_v2(db.get(), "SELECT key, value FROM meta", -1, &raw, nullptr);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, sqlite3_finalize);
  if (rc != SQLITE_OK) {
    const std::string msg = sqlite3_errmsg(db.get());
    if ((rc & 0xff) == SQLITE_ERROR && msg.find("no such table") != std::string::npos) {
      fail(path, "not a tracerun trace (no meta table)");
    }
    if ((rc & 0xff) == SQLITE_ERROR) fail(path, "corrupted or not a tracerun trace (" + msg + ")");
    fail(path, describeSqliteError(rc) + " (" + msg + ")");
  }
  std::map<std::string, std::string> meta;
  for (;;) {
    const int step = sqlite3_step(stmt.get());
    if (step == SQLITE_DONE) break;
    if (step != SQLITE_ROW) {
      fail(path, describeSqliteError(step) + " (" + sqlite3_errmsg(db.get()) + ")");
    }
    const auto* k = sqlite3_column_text(stmt.get(), 0);
    const auto* v = sqlite3_column_text(stmt.get(), 1);
    meta[k ? reinterpret_cast<const char*>(k) : ""] = v ? reinterpret_cast<const char*>(v) : "";
  }
  const auto magic = meta.find("magic");
  if (magic == meta.end()) fail(path, "not a tracerun trace (no magic in meta)");
  if (magic->second != schema::kMagic) {
    fail(path, "not a tracerun trace (meta magic is '" + magic->second.substr(0, 40) + "')");
  }
  bool ok = false;
  const auto version = meta.count("schema_version") ? parseInt(meta["schema_version"], &ok) : 0;
  if (!ok || version < 1) fail(path, "not a tracerun trace (no valid schema_version in meta)");

  sqlite3_stmt* uvRaw = nullptr;
  int64_t userVersion = 0;
  if (sqlite3_prepare_v2(db.get(), "PRAGMA user_version", -1, &uvRaw, nullptr) == SQLITE_OK) {
    std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> uv(uvRaw, sqlite3_finalize);
    if (sqlite3_step(uv.get()) == SQLITE_ROW) userVersion = sqlite3_column_int64(uv.get(), 0);
  }
  const int64_t newest = version > userVersion ? version : userVersion;
  if (newest > schema::kSchemaVersion) {
    fail(path, "written by a newer tracerun (schema " + std::to_string(newest) +
                   ", this build reads " + std::to_string(schema::kSchemaVersion) + ")");
  }
  if (newest < schema::kSchemaVersion) {
    // The reader reads one layout: schema 1 stored spans' name, depth and category as three
    // columns, and converting is what recording again does.
    fail(path, "written by an older tracerun (schema " + std::to_string(newest) +
                   ", this build reads " + std::to_string(schema::kSchemaVersion) +
                   "); record it again");
  }
  if (userVersion != version) {
    fail(path, "inconsistent schema version (meta says " + std::to_string(version) +
                   ", PRAGMA user_version says " + std::to_string(userVersion) + ")");
  }
  return meta;
}

}  // namespace tracerun::trace::filecheck
