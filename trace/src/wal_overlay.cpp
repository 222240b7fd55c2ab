// The WAL reader and the read-only overlay VFS of wal_overlay.h. The -wal format is SQLite's
// (https://sqlite.org/fileformat2.html#walformat); this file reads it, never writes it.
//
// Sections: reading the -wal · the overlay file · the VFS
#include "wal_overlay.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "tracerun/trace/error.h"

namespace tracerun::trace::wal {

namespace {

constexpr size_t kWalHeader = 32;
constexpr size_t kFrameHeader = 24;
constexpr uint32_t kWalVersion = 3007000;
constexpr char kVfsName[] = "tracerun-wal-overlay";

uint32_t be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint32_t le32(const unsigned char* p) {
  return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const noexcept { return fd_; }

 private:
  int fd_ = -1;
};

// Reads exactly n bytes at off; false on a short read or an error (errno is 0 for a short read).
bool readAt(int fd, void* buf, size_t n, uint64_t off) {
  auto* p = static_cast<unsigned char*>(buf);
  errno = 0;
  while (n > 0) {
    const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR) continue;
    if (got == 0) errno = 0;
    if (got <= 0) return false;
    p += got;
    off += static_cast<uint64_t>(got);
    n -= static_cast<size_t>(got);
  }
  return true;
}

// SQLite's WAL checksum (wal.c walChecksumBytes): 32-bit words, big-endian when the magic's low
// bit is set, summed in pairs into a running (s0, s1).
void checksum(bool bigEndian, const unsigned char* data, size_t n, uint32_t* s0, uint32_t* s1) {
  for (size_t i = 0; i + 8 <= n; i += 8) {
    const uint32_t x0 = bigEndian ? be32(data + i) : le32(data + i);
    const uint32_t x1 = bigEndian ? be32(data + i + 4) : le32(data + i + 4);
    *s0 += x0 + *s1;
    *s1 += x1 + *s0;
  }
}

bool validPageSize(uint32_t ps) {
  return ps >= 512 && ps <= 65536 && (ps & (ps - 1)) == 0;
}

WalIndex readWalFd(int fd, const std::string& path, uint32_t pageSize) {
  WalIndex index;
  unsigned char header[kWalHeader];
  auto unreadable = [&] { return TraceError(path + ": cannot read: " + std::strerror(errno)); };
  if (!readAt(fd, header, kWalHeader, 0)) {
    if (errno != 0) throw unreadable();
    return index;
  }
  const uint32_t magic = be32(header);
  if ((magic & 0xfffffffeu) != 0x377f0682u || be32(header + 4) != kWalVersion) return index;
  const bool bigEndian = (magic & 1) != 0;
  const uint32_t ps = be32(header + 8);
  if (!validPageSize(ps) || (pageSize != 0 && ps != pageSize)) return index;
  uint32_t s0 = 0, s1 = 0;
  checksum(bigEndian, header, 24, &s0, &s1);
  if (s0 != be32(header + 24) || s1 != be32(header + 28)) return index;
  index.page_size = ps;

  std::vector<unsigned char> frame(kFrameHeader + ps);
  std::vector<std::pair<uint32_t, uint64_t>> pending;  // frames since the last commit
  uint64_t at = kWalHeader;
  for (uint64_t n = 1;; ++n, at += frame.size()) {
    if (!readAt(fd, frame.data(), frame.size(), at)) {
      if (errno != 0) throw unreadable();
      break;  // the end, or a torn last frame
    }
    const unsigned char* h = frame.data();
    const uint32_t pgno = be32(h);
    if (pgno == 0 || std::memcmp(h + 8, header + 16, 8) != 0) break;  // another generation
    checksum(bigEndian, h, 8, &s0, &s1);
    checksum(bigEndian, h + kFrameHeader, ps, &s0, &s1);
    if (s0 != be32(h + 16) || s1 != be32(h + 20)) break;
    pending.emplace_back(pgno, at + kFrameHeader);
    if (const uint32_t commit = be32(h + 4); commit != 0) {
      for (const auto& [page, offset] : pending) index.frames[page] = offset;
      pending.clear();
      index.db_pages = commit;
      index.committed_frames = n;
    }
  }
  return index;
}

}  // namespace

WalIndex readWal(const std::string& wal_path, uint32_t page_size) {
  Fd fd(::open(wal_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return {};
    throw TraceError(wal_path + ": cannot read: " + std::strerror(errno));
  }
  return readWalFd(fd.get(), wal_path, page_size);
}

bool needsOverlay(const std::string& path) {
  struct stat st;
  if (::stat((path + "-wal").c_str(), &st) == 0) return true;
  // A -journal beside a shard: its writer was cut short (a full disk) while switching the file from
  // WAL to rollback mode at close, after the TRUNCATE checkpoint had put every commit in the main
  // file. That switch rewrites only page 1's two version bytes, so the main file reads the same
  // with or without the journal's old copy of it; plain SQLite would need write access to roll it
  // back ("attempt to write a readonly database"). Read it through the overlay, which hides it.
  if (::stat((path + "-journal").c_str(), &st) == 0) return true;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  unsigned char header[20];
  // Bytes 18 and 19 (write and read versions) are 2 in WAL mode.
  return fd.get() >= 0 && readAt(fd.get(), header, sizeof header, 0) &&
         (header[18] == 2 || header[19] == 2);
}

// ---- the overlay file ---------------------------------------------------------------------------

namespace {

// What an open main file needs. Constructed in place inside the sqlite3_file block SQLite
// allocates (szOsFile) and destroyed by xClose: SQLite owns the memory, this code the lifetime.
struct State {
  sqlite3_file* real = nullptr;  // the unix VFS's file, in the same block
  Fd wal{-1};
  WalIndex index;
  int64_t main_size = 0;
  int64_t logical_size = 0;  // the last commit's size, or the main file's without one
  uint32_t page_size = 0;
};

struct OverlayFile {
  sqlite3_file base;  // first: SQLite sees an OverlayFile as a sqlite3_file
  State* state;       // into the same block, not owned separately
};

constexpr size_t align16(size_t n) {
  return (n + 15) & ~size_t{15};
}
constexpr size_t kStateOffset = align16(sizeof(OverlayFile));
constexpr size_t kRealOffset = kStateOffset + align16(sizeof(State));

State& stateOf(sqlite3_file* f) {
  return *reinterpret_cast<OverlayFile*>(f)->state;
}

int xClose(sqlite3_file* f) {
  State& s = stateOf(f);
  const int rc = s.real->pMethods ? s.real->pMethods->xClose(s.real) : SQLITE_OK;
  s.~State();
  return rc;
}

int xRead(sqlite3_file* f, void* buf, int amt, sqlite3_int64 off) {
  State& s = stateOf(f);
  auto* out = static_cast<unsigned char*>(buf);
  const auto ps = static_cast<int64_t>(s.page_size);
  bool shortRead = false;
  int done = 0;
  while (done < amt) {
    const int64_t pos = off + done;
    const int n = static_cast<int>(std::min<int64_t>(amt - done, ps - pos % ps));
    const auto frame = s.index.frames.find(static_cast<uint32_t>(pos / ps + 1));
    if (frame != s.index.frames.end()) {
      if (!readAt(s.wal.get(), out + done, static_cast<size_t>(n),
                  frame->second + static_cast<uint64_t>(pos % ps))) {
        return SQLITE_IOERR_READ;
      }
    } else if (pos < s.logical_size && pos < s.main_size) {
      const int avail = static_cast<int>(std::min<int64_t>(n, s.main_size - pos));
      const int rc = s.real->pMethods->xRead(s.real, out + done, avail, pos);
      if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) return rc;
      std::memset(out + done + avail, 0, static_cast<size_t>(n - avail));
    } else {
      std::memset(out + done, 0, static_cast<size_t>(n));
      shortRead = shortRead || pos + n > s.logical_size;
    }
    done += n;
  }
  // The header's file format versions (bytes 18, 19) say rollback, so SQLite never looks for a
  // WAL of its own: this file already is the committed state.
  for (int64_t b = 18; b <= 19; ++b) {
    if (off <= b && b < off + amt && out[b - off] == 2) out[b - off] = 1;
  }
  return shortRead ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

int xWrite(sqlite3_file*, const void*, int, sqlite3_int64) {
  return SQLITE_READONLY;
}
int xTruncate(sqlite3_file*, sqlite3_int64) {
  return SQLITE_READONLY;
}
int xSync(sqlite3_file*, int) {
  return SQLITE_OK;
}
int xFileSize(sqlite3_file* f, sqlite3_int64* size) {
  *size = stateOf(f).logical_size;
  return SQLITE_OK;
}
int xLock(sqlite3_file* f, int level) {
  State& s = stateOf(f);
  return s.real->pMethods->xLock(s.real, level);
}
int xUnlock(sqlite3_file* f, int level) {
  State& s = stateOf(f);
  return s.real->pMethods->xUnlock(s.real, level);
}
int xCheckReservedLock(sqlite3_file* f, int* out) {
  State& s = stateOf(f);
  return s.real->pMethods->xCheckReservedLock(s.real, out);
}
int xFileControl(sqlite3_file*, int, void*) {
  return SQLITE_NOTFOUND;
}
int xSectorSize(sqlite3_file* f) {
  State& s = stateOf(f);
  return s.real->pMethods->xSectorSize(s.real);
}
int xDeviceCharacteristics(sqlite3_file*) {
  return 0;
}

// Version 1: no shared memory and no mmap, so SQLite can only read through xRead.
const sqlite3_io_methods kMethods = {1,
                                     xClose,
                                     xRead,
                                     xWrite,
                                     xTruncate,
                                     xSync,
                                     xFileSize,
                                     xLock,
                                     xUnlock,
                                     xCheckReservedLock,
                                     xFileControl,
                                     xSectorSize,
                                     xDeviceCharacteristics,
                                     nullptr,
                                     nullptr,
                                     nullptr,
                                     nullptr,
                                     nullptr,
                                     nullptr};

// ---- the VFS ------------------------------------------------------------------------------------

sqlite3_vfs* realVfs(sqlite3_vfs* vfs) {
  return static_cast<sqlite3_vfs*>(vfs->pAppData);
}

bool endsWith(const char* s, const char* suffix) {
  const size_t n = std::strlen(s), m = std::strlen(suffix);
  return n >= m && std::memcmp(s + n - m, suffix, m) == 0;
}

int vfsOpen(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* outFlags) {
  sqlite3_vfs* real = realVfs(vfs);
  // Temporary files (sorts) are the real VFS's own; only the main database is overlaid.
  if (!(flags & SQLITE_OPEN_MAIN_DB) || name == nullptr) {
    return real->xOpen(real, name, f, flags, outFlags);
  }
  f->pMethods = nullptr;
  auto* base = reinterpret_cast<unsigned char*>(f);
  auto* realFile = reinterpret_cast<sqlite3_file*>(base + kRealOffset);
  const int ro = (flags & ~(SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)) | SQLITE_OPEN_READONLY;
  int rc = real->xOpen(real, name, realFile, ro, outFlags);
  if (rc != SQLITE_OK) return rc;
  try {
    sqlite3_int64 size = 0;
    rc = realFile->pMethods->xFileSize(realFile, &size);
    unsigned char header[100] = {};
    if (rc == SQLITE_OK && size >= 100) rc = realFile->pMethods->xRead(realFile, header, 100, 0);
    if (rc != SQLITE_OK) {
      realFile->pMethods->xClose(realFile);
      return rc;
    }
    uint32_t ps = (uint32_t{header[16]} << 8) | header[17];
    if (ps == 1) ps = 65536;
    const std::string walPath = std::string(name) + "-wal";
    WalIndex index = validPageSize(ps) ? readWal(walPath, ps) : WalIndex{};
    auto* state = new (base + kStateOffset) State();
    state->real = realFile;
    state->main_size = size;
    state->page_size = validPageSize(ps) ? ps : 4096;
    if (index.db_pages != 0) {
      state->wal = Fd(::open(walPath.c_str(), O_RDONLY | O_CLOEXEC));
      if (state->wal.get() < 0) index = WalIndex{};  // gone since: the main file is what is left
    }
    state->logical_size = index.db_pages != 0 ? int64_t{index.db_pages} * state->page_size : size;
    state->index = std::move(index);
    reinterpret_cast<OverlayFile*>(f)->state = state;
    f->pMethods = &kMethods;
    if (outFlags) *outFlags = ro;
    return SQLITE_OK;
  } catch (...) {
    realFile->pMethods->xClose(realFile);
    return SQLITE_IOERR;
  }
}

// Never deletes: this VFS changes no file.
int vfsDelete(sqlite3_vfs*, const char*, int) {
  return SQLITE_OK;
}

int vfsAccess(sqlite3_vfs* vfs, const char* name, int flags, int* out) {
  // The -wal is read by this VFS itself; SQLite must not open it (that would create a -shm). A
  // -journal is not rolled back (read-only; see needsOverlay).
  if (endsWith(name, "-wal") || endsWith(name, "-shm") || endsWith(name, "-journal")) {
    *out = 0;
    return SQLITE_OK;
  }
  return realVfs(vfs)->xAccess(realVfs(vfs), name, flags, out);
}
int vfsFullPathname(sqlite3_vfs* vfs, const char* name, int n, char* out) {
  return realVfs(vfs)->xFullPathname(realVfs(vfs), name, n, out);
}
void* vfsDlOpen(sqlite3_vfs* vfs, const char* name) {
  return realVfs(vfs)->xDlOpen(realVfs(vfs), name);
}
void vfsDlError(sqlite3_vfs* vfs, int n, char* msg) {
  realVfs(vfs)->xDlError(realVfs(vfs), n, msg);
}
void (*vfsDlSym(sqlite3_vfs* vfs, void* h, const char* sym))(void) {
  return realVfs(vfs)->xDlSym(realVfs(vfs), h, sym);
}
void vfsDlClose(sqlite3_vfs* vfs, void* h) {
  realVfs(vfs)->xDlClose(realVfs(vfs), h);
}
int vfsRandomness(sqlite3_vfs* vfs, int n, char* out) {
  return realVfs(vfs)->xRandomness(realVfs(vfs), n, out);
}
int vfsSleep(sqlite3_vfs* vfs, int us) {
  return realVfs(vfs)->xSleep(realVfs(vfs), us);
}
int vfsCurrentTime(sqlite3_vfs* vfs, double* t) {
  return realVfs(vfs)->xCurrentTime(realVfs(vfs), t);
}
int vfsGetLastError(sqlite3_vfs* vfs, int n, char* msg) {
  return realVfs(vfs)->xGetLastError ? realVfs(vfs)->xGetLastError(realVfs(vfs), n, msg) : 0;
}
int vfsCurrentTimeInt64(sqlite3_vfs* vfs, sqlite3_int64* t) {
  sqlite3_vfs* real = realVfs(vfs);
  if (real->iVersion >= 2 && real->xCurrentTimeInt64) return real->xCurrentTimeInt64(real, t);
  double d = 0;
  const int rc = real->xCurrentTime(real, &d);
  *t = static_cast<sqlite3_int64>(d * 86400000.0);
  return rc;
}

sqlite3_vfs makeVfs() {
  sqlite3_vfs* real = sqlite3_vfs_find("unix");
  if (real == nullptr) real = sqlite3_vfs_find(nullptr);
  if (real == nullptr) throw TraceError("sqlite: no default VFS to read files through");
  sqlite3_vfs v{};
  v.iVersion = 2;
  v.szOsFile = static_cast<int>(kRealOffset) + real->szOsFile;
  v.mxPathname = real->mxPathname;
  v.zName = kVfsName;
  v.pAppData = real;
  v.xOpen = vfsOpen;
  v.xDelete = vfsDelete;
  v.xAccess = vfsAccess;
  v.xFullPathname = vfsFullPathname;
  v.xDlOpen = vfsDlOpen;
  v.xDlError = vfsDlError;
  v.xDlSym = vfsDlSym;
  v.xDlClose = vfsDlClose;
  v.xRandomness = vfsRandomness;
  v.xSleep = vfsSleep;
  v.xCurrentTime = vfsCurrentTime;
  v.xGetLastError = vfsGetLastError;
  v.xCurrentTimeInt64 = vfsCurrentTimeInt64;
  return v;
}

}  // namespace

const char* overlayVfs() {
  // SQLite's VFS registry keeps a pointer to this object for the process's life (and links it
  // into its list); it is set up once and never changed by this code.
  static sqlite3_vfs vfs = makeVfs();
  static const int registered = sqlite3_vfs_register(&vfs, /*makeDflt=*/0);
  if (registered != SQLITE_OK) throw TraceError("sqlite: cannot register the WAL overlay VFS");
  return kVfsName;
}

}  // namespace tracerun::trace::wal
