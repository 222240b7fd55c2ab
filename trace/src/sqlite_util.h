// Thin RAII wrappers over the SQLite C API for trace/'s own use (not installed, not for other
// layers). Every failure throws TraceError prefixed with the database's path.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "tracerun/trace/error.h"

namespace tracerun::trace::sql {

// A failed SQLite call on a Db: the message as TraceError's, plus which database and the codes,
// so a caller can tell a full disk (outOfSpace) from a damaged input.
class SqliteError : public TraceError {
 public:
  SqliteError(const std::string& message, std::string path, int code, int sys_errno)
      : TraceError(message), path_(std::move(path)), code_(code), sys_errno_(sys_errno) {}
  const std::string& path() const noexcept { return path_; }
  int code() const noexcept { return code_; }  // extended result code
  // SQLITE_FULL, or a write that failed with ENOSPC, EDQUOT or EFBIG.
  bool outOfSpace() const noexcept;

 private:
  std::string path_;
  int code_ = 0;
  int sys_errno_ = 0;
};

class Db {
 public:
  // kCreate and kCreatePrivate make a new file: it must not exist (the callers remove an old one
  // first) and is never reached through a symlink (O_CREAT|O_EXCL|O_NOFOLLOW, then SQLite with
  // SQLITE_OPEN_NOFOLLOW on the path with its directories resolved); kCreate with the umask's
  // permissions (a merged trace), kCreatePrivate 0600 (a rank's shard).
  enum class Mode { kReadOnly, kCreate, kCreatePrivate };
  Db() = default;
  Db(const std::string& path, Mode mode);
  ~Db();
  Db(Db&& other) noexcept;
  Db& operator=(Db&& other) noexcept;
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  sqlite3* get() const noexcept { return db_; }
  const std::string& path() const noexcept { return path_; }
  void exec(const std::string& sql);
  // Throws TraceError("<path>: <what>: <sqlite message>").
  [[noreturn]] void fail(const std::string& what) const;
  int64_t lastInsertRowid() const { return sqlite3_last_insert_rowid(db_); }

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

class Stmt {
 public:
  Stmt() = default;
  Stmt(const Db& db, const std::string& sql);
  ~Stmt();
  Stmt(Stmt&& other) noexcept;
  Stmt& operator=(Stmt&& other) noexcept;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  // Binding (1-based, as SQLite).
  Stmt& bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& bindNull(int i) {
    sqlite3_bind_null(stmt_, i);
    return *this;
  }
  // Returns true while a row is available; throws on error.
  bool step();
  // Runs a statement that returns no rows, then resets it for the next use.
  void run();
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  // Columns (0-based, as SQLite).
  int64_t i64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double f64(int col) const { return sqlite3_column_double(stmt_, col); }
  bool isNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string text(int col) const {
    const auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string();
  }

 private:
  const Db* db_ = nullptr;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace tracerun::trace::sql
