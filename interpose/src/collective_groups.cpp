// The table of collective_groups.h: kCollectiveGroupSlots slots written round-robin, each a
// seqlock (its ticket is 0 while written or once taken); taking one is a compare-and-swap of its
// ticket, so two workers never take the same call. A writer more than kCollectiveGroupSlots
// publications behind another could tear a slot: that would need as many calls made while one
// caller is between two stores.
#include "collective_groups.h"

#include <array>
#include <atomic>
#include <cstring>

namespace tracerun::interpose {
namespace {

struct Slot {
  std::atomic<uint64_t> ticket{0};  // publication number (1, 2, ...); 0: empty, written or taken
  std::array<std::atomic<uint64_t>, kCollectiveGroupKeys> keys{};
  std::atomic<uint32_t> op{0};
  std::atomic<int64_t> size{0}, rank{0}, id{-1};
};

struct Table {
  std::atomic<uint64_t> published{0};
  std::array<Slot, kCollectiveGroupSlots> slots;
};

Table& table() noexcept {
  static Table t;  // process-wide by design: callers publish, the backend's workers take
  return t;
}

// Names, one slot per address: a new address claims a slot by its index, its id is written, then
// its address (release); a later name of the address replaces the slot's id.
struct NamedGroup {
  std::atomic<uint64_t> address{0};  // 0: claimed, not yet written
  std::atomic<int64_t> id{-1};
};

struct Names {
  std::atomic<uint32_t> claimed{0};
  std::array<NamedGroup, kNamedGroupSlots> slots;
};

Names& names() noexcept {
  static Names n;  // process-wide by design: the Python thread names, any caller looks up
  return n;
}

// The letters of the name after its last ':', lowercase, into out (at most 63); their count.
size_t opLetters(const char* name, char* out) noexcept {
  const char* base = name;
  for (const char* p = name; *p != '\0'; ++p) {
    if (*p == ':') base = p + 1;
  }
  size_t n = 0;
  for (const char* p = base; *p != '\0' && n < 63; ++p) {
    const char c = *p;
    if (c >= 'a' && c <= 'z') out[n++] = c;
    if (c >= 'A' && c <= 'Z') out[n++] = static_cast<char>(c - 'A' + 'a');
  }
  out[n] = '\0';
  return n;
}

}  // namespace

uint32_t collectiveOpCode(const char* name) noexcept {
  char letters[64];
  size_t n = opLetters(name, letters);
  if (n > 4 && std::memcmp(letters + n - 4, "base", 4) == 0) n -= 4;
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(letters[i])) * 16777619u;
  return h;
}

bool isBarrierName(const char* name) noexcept {
  char letters[64];
  opLetters(name, letters);
  return std::strcmp(letters, "barrier") == 0;
}

void publishCollectiveGroup(const uint64_t* keys, int nkeys, uint32_t op,
                            CollectiveGroup group) noexcept {
  if (nkeys <= 0) return;
  if (keys[0] == kNoTensorKey) {
    CollectiveGroup stale;
    while (takeCollectiveGroup(kNoTensorKey, op, &stale)) {
    }
  }
  Table& t = table();
  const uint64_t ticket = t.published.fetch_add(1, std::memory_order_relaxed) + 1;
  Slot& s = t.slots[ticket % kCollectiveGroupSlots];
  s.ticket.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);  // readers see 0 before the new fields
  for (int i = 0; i < kCollectiveGroupKeys; ++i) {
    s.keys[i].store(i < nkeys ? keys[i] : 0, std::memory_order_relaxed);
  }
  s.op.store(op, std::memory_order_relaxed);
  s.size.store(group.size, std::memory_order_relaxed);
  s.rank.store(group.rank, std::memory_order_relaxed);
  s.id.store(group.id, std::memory_order_relaxed);
  s.ticket.store(ticket, std::memory_order_release);
}

bool takeCollectiveGroup(uint64_t key, uint32_t op, CollectiveGroup* group) noexcept {
  if (key == 0) return false;
  Table& t = table();
  for (int attempt = 0; attempt < 4; ++attempt) {  // another taker won the oldest: look again
    Slot* best = nullptr;
    uint64_t bestTicket = 0;
    CollectiveGroup bestGroup;
    for (Slot& s : t.slots) {
      const uint64_t ticket = s.ticket.load(std::memory_order_acquire);
      if (ticket == 0) continue;
      bool match = s.op.load(std::memory_order_relaxed) == op;
      bool keyed = false;
      for (const auto& k : s.keys) keyed = keyed || k.load(std::memory_order_relaxed) == key;
      match = match && keyed;
      const CollectiveGroup g{s.size.load(std::memory_order_relaxed),
                              s.rank.load(std::memory_order_relaxed),
                              s.id.load(std::memory_order_relaxed)};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (s.ticket.load(std::memory_order_relaxed) != ticket || !match) continue;  // rewritten
      if (best == nullptr || ticket < bestTicket) {
        best = &s;
        bestTicket = ticket;
        bestGroup = g;
      }
    }
    if (best == nullptr) return false;
    if (best->ticket.compare_exchange_strong(bestTicket, 0, std::memory_order_acq_rel)) {
      *group = bestGroup;
      return true;
    }
  }
  return false;
}

void clearCollectiveGroups() noexcept {
  for (Slot& s : table().slots) s.ticket.store(0, std::memory_order_relaxed);
}

void nameProcessGroup(uint64_t address, int64_t id) noexcept {
  if (address == 0) return;
  Names& n = names();
  const uint32_t count = n.claimed.load(std::memory_order_relaxed);
  for (uint32_t i = count < kNamedGroupSlots ? count : kNamedGroupSlots; i-- > 0;) {
    if (n.slots[i].address.load(std::memory_order_acquire) == address) {
      n.slots[i].id.store(id < 0 ? -1 : id, std::memory_order_relaxed);
      return;
    }
  }
  if (id < 0) return;
  const uint32_t i = n.claimed.fetch_add(1, std::memory_order_relaxed);
  if (i >= kNamedGroupSlots) return;
  n.slots[i].id.store(id, std::memory_order_relaxed);
  n.slots[i].address.store(address, std::memory_order_release);
}

int64_t processGroupId(uint64_t address) noexcept {
  if (address == 0) return -1;
  Names& n = names();
  const uint32_t count = n.claimed.load(std::memory_order_relaxed);
  for (uint32_t i = count < kNamedGroupSlots ? count : kNamedGroupSlots; i-- > 0;) {
    if (n.slots[i].address.load(std::memory_order_acquire) == address) {
      return n.slots[i].id.load(std::memory_order_relaxed);
    }
  }
  return -1;
}

void clearProcessGroupNames() noexcept {
  Names& n = names();
  for (NamedGroup& g : n.slots) {
    g.address.store(0, std::memory_order_relaxed);
    g.id.store(-1, std::memory_order_relaxed);
  }
  n.claimed.store(0, std::memory_order_relaxed);
}

}  // namespace tracerun::interpose
