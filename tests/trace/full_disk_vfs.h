// A test double for a full disk: an SQLite VFS, the default while a FullDisk lives, that passes
// everything to the unix VFS but lets only `budget` bytes be written through it; the write that
// crosses the budget writes what fits and fails with SQLITE_FULL, as write(2) does on ENOSPC.
// Test-only; it fakes nothing on the read side.
#pragma once

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <stdexcept>

namespace tracerun::testing {

class FullDisk {
 public:
  explicit FullDisk(int64_t budget) {
    shared_.real = sqlite3_vfs_find("unix");
    if (shared_.real == nullptr) throw std::runtime_error("no unix VFS");
    shared_.budget = budget;
    vfs_ = *shared_.real;
    vfs_.pNext = nullptr;
    vfs_.zName = "tracerun-test-full-disk";
    vfs_.pAppData = &shared_;
    vfs_.szOsFile = static_cast<int>(kRealOffset) + shared_.real->szOsFile;
    vfs_.xOpen = open;
    if (sqlite3_vfs_register(&vfs_, /*makeDflt=*/1) != SQLITE_OK) {
      throw std::runtime_error("cannot register the full-disk VFS");
    }
  }
  ~FullDisk() {
    sqlite3_vfs_unregister(&vfs_);
    sqlite3_vfs_register(shared_.real, /*makeDflt=*/1);
  }
  FullDisk(const FullDisk&) = delete;
  FullDisk& operator=(const FullDisk&) = delete;

  int64_t written() const { return shared_.used.load(); }
  bool full() const { return shared_.used.load() >= shared_.budget; }

 private:
  struct Shared {
    sqlite3_vfs* real = nullptr;
    int64_t budget = 0;
    std::atomic<int64_t> used{0};
  };
  struct File {
    sqlite3_file base;
    sqlite3_file* real;  // the unix VFS's file, right after this struct in SQLite's block
    Shared* shared;
  };
  static constexpr size_t kRealOffset = (sizeof(File) + 15) & ~size_t{15};

  static sqlite3_file* real(sqlite3_file* f) { return reinterpret_cast<File*>(f)->real; }

  static int open(sqlite3_vfs* vfs, const char* name, sqlite3_file* f, int flags, int* out) {
    auto* shared = static_cast<Shared*>(vfs->pAppData);
    auto* file = reinterpret_cast<File*>(f);
    file->base.pMethods = nullptr;
    file->real = reinterpret_cast<sqlite3_file*>(reinterpret_cast<unsigned char*>(f) + kRealOffset);
    file->shared = shared;
    const int rc = shared->real->xOpen(shared->real, name, file->real, flags, out);
    if (rc == SQLITE_OK) file->base.pMethods = &kMethods;
    return rc;
  }

  static int write(sqlite3_file* f, const void* data, int amt, sqlite3_int64 off) {
    Shared* s = reinterpret_cast<File*>(f)->shared;
    const int64_t before = s->used.fetch_add(amt);
    const int64_t left = std::max<int64_t>(0, s->budget - before);
    if (left >= amt) return real(f)->pMethods->xWrite(real(f), data, amt, off);
    if (left > 0) real(f)->pMethods->xWrite(real(f), data, static_cast<int>(left), off);
    return SQLITE_FULL;
  }
  static int close(sqlite3_file* f) { return real(f)->pMethods->xClose(real(f)); }
  static int read(sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
    return real(f)->pMethods->xRead(real(f), b, n, o);
  }
  static int truncate(sqlite3_file* f, sqlite3_int64 n) {
    return real(f)->pMethods->xTruncate(real(f), n);
  }
  static int sync(sqlite3_file* f, int flags) { return real(f)->pMethods->xSync(real(f), flags); }
  static int fileSize(sqlite3_file* f, sqlite3_int64* n) {
    return real(f)->pMethods->xFileSize(real(f), n);
  }
  static int lock(sqlite3_file* f, int l) { return real(f)->pMethods->xLock(real(f), l); }
  static int unlock(sqlite3_file* f, int l) { return real(f)->pMethods->xUnlock(real(f), l); }
  static int checkReserved(sqlite3_file* f, int* r) {
    return real(f)->pMethods->xCheckReservedLock(real(f), r);
  }
  static int fileControl(sqlite3_file* f, int op, void* arg) {
    return real(f)->pMethods->xFileControl(real(f), op, arg);
  }
  static int sectorSize(sqlite3_file* f) { return real(f)->pMethods->xSectorSize(real(f)); }
  static int device(sqlite3_file* f) { return real(f)->pMethods->xDeviceCharacteristics(real(f)); }
  static int shmMap(sqlite3_file* f, int pg, int sz, int extend, void volatile** p) {
    return real(f)->pMethods->xShmMap(real(f), pg, sz, extend, p);
  }
  static int shmLock(sqlite3_file* f, int off, int n, int flags) {
    return real(f)->pMethods->xShmLock(real(f), off, n, flags);
  }
  static void shmBarrier(sqlite3_file* f) { real(f)->pMethods->xShmBarrier(real(f)); }
  static int shmUnmap(sqlite3_file* f, int del) {
    return real(f)->pMethods->xShmUnmap(real(f), del);
  }
  static int fetch(sqlite3_file*, sqlite3_int64, int, void** p) {
    *p = nullptr;  // no memory mapping: every write goes through write()
    return SQLITE_OK;
  }
  static int unfetch(sqlite3_file*, sqlite3_int64, void*) { return SQLITE_OK; }

  static constexpr sqlite3_io_methods kMethods = {
      3,       close,      read,          write,       truncate,   sync,   fileSize,
      lock,    unlock,     checkReserved, fileControl, sectorSize, device, shmMap,
      shmLock, shmBarrier, shmUnmap,      fetch,       unfetch};

  Shared shared_;
  sqlite3_vfs vfs_{};
};

}  // namespace tracerun::testing
