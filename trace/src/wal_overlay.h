// Reading a WAL-mode SQLite file (a shard whose writer never finished, or whose last checkpoint was
// cut short by a full disk) as of its WAL's last commit, without creating or changing any file.
// Private to trace/; read-only: it never checkpoints, never writes a -wal or -shm file.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

namespace tracerun::trace::wal {

// The committed part of a -wal file, as SQLite's own recovery reads it: frames whose salts match
// the header and whose checksums chain, up to the last commit frame.
struct WalIndex {
  uint32_t page_size = 0;
  uint32_t db_pages = 0;  // the database's size in pages after the last commit; 0: no commit
  uint64_t committed_frames = 0;
  std::unordered_map<uint32_t, uint64_t> frames;  // page number -> offset of its data in the -wal
};

// Reads `wal_path` (absent, empty, of another page size or invalid: an index with no commit, as
// SQLite would ignore it). Throws TraceError when the file exists but cannot be read.
WalIndex readWal(const std::string& wal_path, uint32_t page_size);

// True when reading `path` with plain SQLite would involve a WAL or a journal: its header says WAL
// mode, or a -wal or -journal file lies beside it. Such a file is opened through overlayVfs().
bool needsOverlay(const std::string& path);

// The name of a read-only SQLite VFS that shows a main database file with its -wal's committed
// frames laid over it (registered on first use). It never opens the -wal through SQLite, so no
// -shm or -wal is ever created, and a main file shorter than its last commit reads whole.
const char* overlayVfs();

}  // namespace tracerun::trace::wal
