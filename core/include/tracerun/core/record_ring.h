// A bounded single-producer / single-consumer ring of Records. The producer never blocks and never
// allocates: when the ring is full the record is dropped and counted. Not for several producers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tracerun/core/records.h"

namespace tracerun::core {

class RecordRing {
 public:
  // What a new ring's memory is: kResident zeroes every slot at creation (a capture's rings: the
  // producer's hot path never takes a page fault), kOnFirstUse leaves the pages to be mapped as
  // records land (a replay's rings, one per thread a file names: most hold a few records).
  enum class Pages { kResident, kOnFirstUse };
  // capacity is rounded up to a power of two (at least 2).
  explicit RecordRing(size_t capacity, Pages pages = Pages::kResident);
  RecordRing(const RecordRing&) = delete;
  RecordRing& operator=(const RecordRing&) = delete;

  // Producer side. Returns false (and counts a drop) when full.
  bool tryPush(const Record& r) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head - cachedTail_ >= capacity_) {
      cachedTail_ = tail_.load(std::memory_order_acquire);
      if (head - cachedTail_ >= capacity_) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
    }
    slots_[head & mask_] = r;
    prefetchAhead(head + 1);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  // Pushes two records or neither (a span and its arguments must not be split by a drop).
  bool tryPushPair(const Record& a, const Record& b) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head + 1 - cachedTail_ >= capacity_) {
      cachedTail_ = tail_.load(std::memory_order_acquire);
      if (head + 1 - cachedTail_ >= capacity_) {
        dropped_.fetch_add(2, std::memory_order_relaxed);
        return false;
      }
    }
    slots_[head & mask_] = a;
    slots_[(head + 1) & mask_] = b;
    prefetchAhead(head + 2);
    head_.store(head + 2, std::memory_order_release);
    return true;
  }

  // In-place producer side, for the hot path: reserve(n) claims the next n (1 or 2) slots, or
  // returns false and counts n drops when the ring is full; the caller builds its records in
  // pending(0..n-1) (placement new) and then commit(n) publishes them. Building a record on the
  // stack and copying it in stalled on store forwarding (narrow field stores read back as 16-byte
  // vectors): ~40% of the capture's span emission in a profile.
  bool reserve(uint64_t n) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed);
    if (head + n - 1 - cachedTail_ >= capacity_) [[unlikely]] {
      cachedTail_ = tail_.load(std::memory_order_acquire);
      if (head + n - 1 - cachedTail_ >= capacity_) {
        dropped_.fetch_add(n, std::memory_order_relaxed);
        return false;
      }
    }
    return true;
  }
  unsigned char* pending(uint64_t i) noexcept {
    return slots_[(head_.load(std::memory_order_relaxed) + i) & mask_].bytes;
  }
  void commit(uint64_t n) noexcept {
    const uint64_t head = head_.load(std::memory_order_relaxed) + n;
    prefetchAhead(head);
    head_.store(head, std::memory_order_release);
  }

  // Consumer side: calls fn(const Record*, size_t n) on up to two contiguous runs of what is
  // available, then frees those slots. Returns the number of records consumed.
  template <typename Fn>
  size_t drain(Fn&& fn) {
    return drainTo(published(), fn);
  }
  // The producer's count of records pushed, read so that what it wrote before them (the records,
  // and anything it registered before pushing them) is visible to this thread.
  uint64_t published() const noexcept { return head_.load(std::memory_order_acquire); }
  // drain() of the records before `head` only (a published() value read earlier): a consumer that
  // must write something first (the names those records use) reads published(), writes it, then
  // drains to it, and the records pushed meanwhile wait for the next pass.
  template <typename Fn>
  size_t drainTo(uint64_t head, Fn&& fn) {
    const uint64_t tail = tail_.load(std::memory_order_relaxed);
    if (head <= tail) return 0;  // nothing, or a `head` older than what was drained since
    const size_t n = static_cast<size_t>(head - tail);
    const size_t first = static_cast<size_t>(tail & mask_);
    const size_t run = n < capacity_ - first ? n : capacity_ - first;
    fn(&slots_[first], run);
    if (run < n) fn(&slots_[0], n - run);
    tail_.store(head, std::memory_order_release);
    return n;
  }

  size_t capacity() const noexcept { return capacity_; }
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  uint64_t pushed() const noexcept { return head_.load(std::memory_order_relaxed); }
  bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }

 private:
  // A ring larger than the cache makes every push miss on a slot last written a lap ago (~85 ns
  // per record measured on the capture path); fetching the slot a few records ahead for writing
  // hides most of it. (Non-temporal stores were slower: they need an sfence per push.)
  static constexpr uint64_t kPrefetchAhead = 8;
  void prefetchAhead(uint64_t next) const noexcept {
    __builtin_prefetch(&slots_[(next + kPrefetchAhead) & mask_], 1, 3);
  }

  size_t capacity_;
  size_t mask_;
  std::unique_ptr<Record[]> slots_;
  alignas(64) std::atomic<uint64_t> head_{0};  // written by the producer
  uint64_t cachedTail_ = 0;                    // producer's view of tail_
  alignas(64) std::atomic<uint64_t> tail_{0};  // written by the consumer
  alignas(64) std::atomic<uint64_t> dropped_{0};
};

}  // namespace tracerun::core
