// RawShardWriter: the traced process's writer thread when the capture writes a raw shard
// (raw_shard.h): it copies whole runs of each thread's ring into the file with one writev each,
// each after the strings and tracks new since the last ones written (a record's names are always
// in the file before it). No SQL, no formatting, no per-record work; the SQLite shard is built
// afterwards from the file (trace/raw_convert.h).
//
// Contract:
// - The constructor creates the file (replacing one that exists; 0600, never through a symlink)
//   and writes its header, or throws std::runtime_error. start() launches the drain thread;
//   flush() drains from any thread; close() stops the thread, drains the rest, writes the
//   session's stats, setStat()/setMeta() rows and the end block. close() is idempotent; the
//   destructor calls it.
// - A write that fails (full disk, quota, file-size limit) is said once on stderr; the file is cut
//   back to its last whole block, no more records are written, and every record drained after
//   that is counted as dropped (failed() turns true, the caller marks the shard as failed). At
//   close, once the reserve below is released, the small closing blocks (strings and tracks not
//   yet written, drop count, stats, meta) are still tried; the end block is not written, so the
//   shard is marked incomplete. Where the file cannot be cut back (ftruncate fails), nothing more
//   is written at all: the file ends in the torn block, which the reader drops and reports (a
//   block after it would be read as its rest).
// - Room to convert (with reserve_path set): before a block is appended, the reserve file is grown
//   (posix_fallocate) to room_base + room_ratio x the raw file's size, the disk space the
//   conversion into SQLite needs besides what the shard already takes (shard_base_bytes); close()
//   removes it, so the conversion that follows finds that room however full the disk became. A
//   block whose room cannot be claimed (no space, a quota, or a shard that would outgrow
//   RLIMIT_FSIZE) is not written: it is said once on stderr and counts as a failed write.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "tracerun/core/raw_shard.h"
#include "tracerun/core/session.h"

namespace tracerun::core {

// The most records one block holds: its payload size is a u32 (raw_shard.h). A longer ring run is
// written as several blocks.
constexpr size_t kMaxBlockRecords = size_t{1} << 20;  // 64 MiB
static_assert(kMaxBlockRecords * kRecordSize <= UINT32_MAX);

struct RawShardOptions {
  std::string path;
  int rank = 0;
  int world_size = 1;
  int64_t pid = 0;  // 0: getpid()
  int64_t clock_offset_ns = 0;
  int64_t origin_ns = 0;  // 0: now
  std::string host;       // empty: gethostname()
  std::string command;
  int drain_interval_ms = 10;
  // Room to convert (see the contract above); an empty reserve_path claims none.
  std::string reserve_path;
  uint64_t shard_base_bytes = 0;  // the SQLite shard's size before any row (its placeholder's)
  uint64_t room_base = uint64_t{32} << 10;
  double room_ratio = 0.75;  // SQLite bytes per raw byte: measured 0.48-0.52 (trace-format.md)
  size_t max_block_records = kMaxBlockRecords;  // at most that (tests lower it)
};

class RawShardWriter {
 public:
  RawShardWriter(Session& session, RawShardOptions options);
  ~RawShardWriter();
  RawShardWriter(const RawShardWriter&) = delete;
  RawShardWriter& operator=(const RawShardWriter&) = delete;

  void start();
  void flush();
  void close();
  void setStat(const std::string& name, int64_t value, StatSeverity severity);
  void setMeta(const std::string& key, const std::string& value);

  bool failed() const noexcept { return failed_.load(std::memory_order_relaxed); }
  // Why records stopped being written (the line said on stderr, without "tracerun: "), empty
  // when none failed. Read it after close().
  const std::string& failure() const noexcept { return failure_; }
  const std::string& path() const noexcept { return opt_.path; }
  uint64_t bytesWritten() const noexcept { return offset_; }
  uint64_t recordsWritten() const noexcept { return records_; }

 private:
  void threadMain();
  size_t pass();  // mu_ held
  void writeRecords(const ThreadBuffer& b, const Record* r, size_t n);
  void writeNewNames();  // the strings and tracks registered since the last ones written
  void writeStrings();
  void writeTracks();
  // `closing`: a block of close() (strings, tracks, drop count, stats, meta), written even after
  // records stopped (see above). True when the block is in the file.
  bool writeBlock(RawBlockHeader h, const void* payload, size_t bytes, bool closing = false);
  bool claimRoom(uint64_t blockBytes);  // grows the reserve for a block; false: stop (said)
  void stop(const std::string& line);
  void releaseReserve();
  void writeMeta(const std::string& key, const std::string& value, bool closing = false);

  Session& session_;
  RawShardOptions opt_;
  int fd_ = -1;
  std::mutex mu_;
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  bool closed_ = false;
  std::atomic<bool> failed_{false};  // records are no longer written
  bool dead_ = false;  // a closing block failed too, or a torn block stayed: nothing more written
  std::string failure_;
  int reserveFd_ = -1;
  uint64_t reserved_ = 0;   // bytes the reserve file holds
  uint64_t sizeLimit_ = 0;  // RLIMIT_FSIZE, 0: none
  uint64_t offset_ = 0;     // bytes of whole blocks in the file
  uint64_t records_ = 0;
  uint64_t lost_ = 0;  // records drained after a write failed
  uint64_t droppedWritten_ = 0;
  size_t stringsWritten_ = 0;
  size_t tracksWritten_ = 0;
  std::string scratch_;  // payload of string and track blocks
  std::map<std::string, std::pair<int64_t, StatSeverity>> stats_;
  std::map<std::string, std::string> meta_;
};

}  // namespace tracerun::core
