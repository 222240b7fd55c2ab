// Session: thread registration (the only locked, allocating step a producer ever takes) and the
// consumer's walk over buffers.
#include "tracerun/core/session.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

namespace tracerun::core {

namespace {

std::atomic<uint64_t> gNextGeneration{1};

int64_t osThreadId() {
  return static_cast<int64_t>(syscall(SYS_gettid));
}

// The buffers this thread registered, by session generation. Marks them retired at thread exit.
struct ThreadBuffers {
  struct Entry {
    uint64_t generation;
    std::shared_ptr<ThreadBuffer> buffer;
  };
  std::vector<Entry> entries;
  ~ThreadBuffers() {
    for (auto& e : entries) e.buffer->retired.store(true, std::memory_order_release);
  }
  ThreadBuffer* find(uint64_t generation) {
    for (auto& e : entries) {
      if (e.generation == generation) return e.buffer.get();
    }
    return nullptr;
  }
};
thread_local ThreadBuffers tlsBuffers;

}  // namespace

Session::Session(size_t ringCapacity)
    : ringCapacity_(ringCapacity), generation_(gNextGeneration.fetch_add(1)) {}

Session::~Session() = default;

ThreadBuffer& Session::threadBuffer(const char* threadName) {
  if (ThreadBuffer* b = tlsBuffers.find(generation_)) return *b;
  auto buffer = registerThread(threadName);
  // Entries of sessions that no longer exist are only dropped when this thread exits; sessions
  // are few (one per process, a handful in tests).
  tlsBuffers.entries.push_back({generation_, buffer});
  return *buffer;
}

std::shared_ptr<ThreadBuffer> Session::registerThread(const char* threadName) {
  const int64_t tid = osThreadId();
  std::string name = threadName ? threadName : "thread " + std::to_string(tid);
  const TrackId track = tracks_.add(TrackKind::kThread, tid, std::move(name));
  std::lock_guard<std::mutex> lock(mu_);
  const auto index = static_cast<uint32_t>(track);
  auto buffer = std::make_shared<ThreadBuffer>(ringCapacity_, track, tid, index);
  buffers_.push_back(buffer);
  return buffer;
}

ThreadBuffer& Session::replayBuffer(TrackId track, int64_t tid, uint32_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  // Pages on first use: a converter replays every thread a file names, most with a few records
  // (zeroed, 1,000 threads' rings were 4 GiB resident in the launcher).
  auto buffer = std::make_shared<ThreadBuffer>(ringCapacity_, track, tid, index,
                                               RecordRing::Pages::kOnFirstUse);
  buffers_.push_back(buffer);
  return *buffer;
}

void Session::forEachBuffer(const std::function<void(ThreadBuffer&)>& fn) {
  std::vector<std::shared_ptr<ThreadBuffer>> snapshot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    snapshot = buffers_;
  }
  for (auto& b : snapshot) fn(*b);
  std::lock_guard<std::mutex> lock(mu_);
  auto gone = [&](const std::shared_ptr<ThreadBuffer>& b) {
    if (!b->retired.load(std::memory_order_acquire) || !b->ring.empty()) return false;
    droppedByForgotten_ += b->ring.dropped();
    return true;
  };
  buffers_.erase(std::remove_if(buffers_.begin(), buffers_.end(), gone), buffers_.end());
}

uint64_t Session::dropped() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t total = droppedByForgotten_;
  for (const auto& b : buffers_) total += b->ring.dropped();
  return total;
}

void Session::setStat(const std::string& name, int64_t value, StatSeverity severity) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_[name] = SessionStat{name, value, severity};
}

std::vector<SessionStat> Session::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SessionStat> out;
  out.reserve(stats_.size());
  for (const auto& [name, stat] : stats_) out.push_back(stat);
  return out;
}

}  // namespace tracerun::core
