// FlatMap: a small open-addressing hash map from non-zero uint64 keys to a trivially copyable
// value, for the shard writer's per-span bookkeeping (aggregates, child time). Not general purpose:
// key 0 is reserved as "empty", there are no iterators that survive an insert, and it never
// shrinks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tracerun::trace {

template <typename V>
class FlatMap {
 public:
  explicit FlatMap(size_t initialCapacity = 64) {
    size_t cap = 16;
    while (cap < initialCapacity * 2) cap <<= 1;
    slots_.assign(cap, Slot{});
  }

  size_t size() const noexcept { return size_; }

  // The value of key (non-zero), default-constructed and inserted when absent.
  V& operator[](uint64_t key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = find(key);
    if (slots_[i].key == 0) {
      slots_[i].key = key;
      slots_[i].value = V{};
      ++size_;
    }
    return slots_[i].value;
  }

  // Removes key and returns its value, or V{} when absent.
  V take(uint64_t key) {
    size_t i = find(key);
    if (slots_[i].key == 0) return V{};
    V out = slots_[i].value;
    erase(i);
    return out;
  }

  // Calls fn(key, value) for every entry, in no particular order.
  template <typename Fn>
  void forEach(Fn&& fn) const {
    for (const Slot& s : slots_) {
      if (s.key != 0) fn(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    V value{};
  };

  static uint64_t mix(uint64_t k) noexcept {  // splitmix64 finaliser
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ULL;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebULL;
    k ^= k >> 31;
    return k;
  }

  // The slot holding key, or the empty slot where it would go.
  size_t find(uint64_t key) const noexcept {
    const size_t mask = slots_.size() - 1;
    size_t i = static_cast<size_t>(mix(key)) & mask;
    while (slots_[i].key != 0 && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }

  // Backward-shift deletion: keeps every probe chain unbroken without tombstones.
  void erase(size_t i) {
    const size_t mask = slots_.size() - 1;
    size_t hole = i;
    size_t j = i;
    for (;;) {
      j = (j + 1) & mask;
      if (slots_[j].key == 0) break;
      const size_t home = static_cast<size_t>(mix(slots_[j].key)) & mask;
      // Move j into the hole unless its home lies cyclically in (hole, j].
      const bool homeBetween = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (!homeBetween) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2, Slot{});
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) (*this)[s.key] = s.value;
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace tracerun::trace
