// Db and Stmt: open modes (a new file is created exclusively, never through a symlink), error text,
// statement life cycle.
#include "sqlite_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "wal_overlay.h"

namespace tracerun::trace::sql {

namespace {

// `path` with its directory resolved (realpath): SQLITE_OPEN_NOFOLLOW refuses a symlink anywhere
// in the path, and only the file's own name is meant.
std::string resolvedDir(const std::string& path) {
  const auto slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  char buf[PATH_MAX];
  if (::realpath(dir.c_str(), buf) == nullptr) return path;
  const std::string resolved = buf;
  return (resolved == "/" ? "" : resolved) + "/" +
         (slash == std::string::npos ? path : path.substr(slash + 1));
}

}  // namespace

Db::Db(const std::string& path, Mode mode) : path_(path) {
  std::string opened = path;
  int flags = SQLITE_OPEN_READONLY;
  // A file in WAL mode is read through the overlay: as of its WAL's last commit, creating no
  // -wal or -shm beside it (wal_overlay.h).
  const char* vfs =
      mode == Mode::kReadOnly && wal::needsOverlay(path) ? wal::overlayVfs() : nullptr;
  if (mode != Mode::kReadOnly) {
    opened = resolvedDir(path);
    const int fd = ::open(opened.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          mode == Mode::kCreatePrivate ? 0600 : 0666);
    if (fd < 0) {
      const int e = errno;
      throw TraceError(
          path + ": cannot create: " + std::strerror(e) +
          (e == EEXIST ? " (a file of that name is in the way and could not be replaced)" : ""));
    }
    ::close(fd);
    flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW;
  }
  if (sqlite3_open_v2(opened.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, vfs) != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    db_ = nullptr;
    throw TraceError(path + ": cannot open: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
}

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

Db::Db(Db&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), path_(std::move(other.path_)) {}

Db& Db::operator=(Db&& other) noexcept {
  if (this != &other) {
    if (db_) sqlite3_close_v2(db_);
    db_ = std::exchange(other.db_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void Db::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    throw SqliteError(path_ + ": " + msg + " (in: " + sql.substr(0, 60) + ")", path_,
                      sqlite3_extended_errcode(db_), sqlite3_system_errno(db_));
  }
}

void Db::fail(const std::string& what) const {
  throw SqliteError(path_ + ": " + what + ": " + sqlite3_errmsg(db_), path_,
                    sqlite3_extended_errcode(db_), sqlite3_system_errno(db_));
}

bool SqliteError::outOfSpace() const noexcept {
  return (code_ & 0xff) == SQLITE_FULL || sys_errno_ == ENOSPC || sys_errno_ == EDQUOT ||
         sys_errno_ == EFBIG;
}

Stmt::Stmt(const Db& db, const std::string& sql) : db_(&db) {
  if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK) {
    db.fail("cannot prepare '" + sql.substr(0, 60) + "'");
  }
}

Stmt::~Stmt() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Stmt::Stmt(Stmt&& other) noexcept
    : db_(std::exchange(other.db_, nullptr)), stmt_(std::exchange(other.stmt_, nullptr)) {}

Stmt& Stmt::operator=(Stmt&& other) noexcept {
  if (this != &other) {
    if (stmt_) sqlite3_finalize(stmt_);
    db_ = std::exchange(other.db_, nullptr);
    stmt_ = std::exchange(other.stmt_, nullptr);
  }
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_->fail("query failed");
}

void Stmt::run() {
  const int rc = sqlite3_step(stmt_);
  sqlite3_reset(stmt_);
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) db_->fail("statement failed");
}

}  // namespace tracerun::trace::sql
