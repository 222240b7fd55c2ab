// A capture session: the strings, tracks and per-thread record buffers of one process.
//
// Threading contract:
// - Producers call threadBuffer() (the first call on a thread registers it: one lock, one
//   allocation), then push records with no lock and no allocation. A thread only ever pushes to
//   its own buffer.
// - One consumer (the writer thread) calls forEachBuffer() to drain; it takes the registry lock
//   only to copy the list of buffers.
// - A thread that exits leaves its buffer behind until the consumer has drained it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tracerun/core/record_ring.h"
#include "tracerun/core/string_table.h"
#include "tracerun/core/tracks.h"

namespace tracerun::core {

class ThreadBuffer {
 public:
  ThreadBuffer(size_t capacity, TrackId track, int64_t tid, uint32_t index,
               RecordRing::Pages pages = RecordRing::Pages::kResident)
      : ring(capacity, pages), track(track), tid(tid), index(index) {}

  // Ids unique within the process: the thread's index in the high bits.
  EventId nextId() noexcept { return (uint64_t{index} << 40) | ++counter_; }

  RecordRing ring;
  const TrackId track;
  const int64_t tid;
  const uint32_t index;
  std::atomic<bool> retired{false};  // the owning thread has exited

 private:
  uint64_t counter_ = 0;
};

// How bad a stat is; the same values as trace::Severity (core does not depend on trace/).
enum class StatSeverity : int { kInfo = 0, kWarning = 1, kError = 2 };

// A row for the shard's stats table, reported by a capture source (e.g. CUPTI's dropped records).
struct SessionStat {
  std::string name;
  int64_t value = 0;
  StatSeverity severity = StatSeverity::kInfo;
};

class Session {
 public:
  static constexpr size_t kDefaultRingCapacity = size_t{1} << 16;  // 4 MiB of records per thread

  explicit Session(size_t ringCapacity = kDefaultRingCapacity);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  StringTable& strings() noexcept { return strings_; }
  TrackRegistry& tracks() noexcept { return tracks_; }

  // The calling thread's buffer in this session, registering the thread on first use under the
  // name given (or "thread <tid>").
  ThreadBuffer& threadBuffer(const char* threadName = nullptr);

  // A buffer for a track that is already registered, not bound to the calling thread: what a
  // raw shard's converter (trace/raw_convert.h) fills with one recorded thread's records, so the
  // writer sees them as that thread's. `index` is the recorded ThreadBuffer::index. Its ring's
  // pages are mapped as records land (RecordRing::Pages::kOnFirstUse).
  ThreadBuffer& replayBuffer(TrackId track, int64_t tid, uint32_t index);

  // Consumer side: calls fn(ThreadBuffer&) for every live buffer; buffers whose thread exited
  // and that are empty after fn are forgotten.
  void forEachBuffer(const std::function<void(ThreadBuffer&)>& fn);

  // Records dropped because a buffer was full, summed over all buffers (including forgotten ones).
  uint64_t dropped() const;
  uint64_t generation() const noexcept { return generation_; }

  // Named stats from capture sources, written to the stats table when the shard closes (a stat
  // set before ShardWriter::close() is written; name is unique, the last value wins). Locks.
  void setStat(const std::string& name, int64_t value, StatSeverity severity);
  std::vector<SessionStat> stats() const;  // sorted by name

 private:
  std::shared_ptr<ThreadBuffer> registerThread(const char* threadName);

  const size_t ringCapacity_;
  const uint64_t generation_;
  StringTable strings_;
  TrackRegistry tracks_;
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers_;
  uint64_t droppedByForgotten_ = 0;
  std::map<std::string, SessionStat> stats_;  // guarded by mu_
};

}  // namespace tracerun::core
