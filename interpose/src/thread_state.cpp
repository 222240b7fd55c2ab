// The out-of-line parts of the per-thread state: hashing, cache misses (the only place a name is
// interned), the SeqMap registry and span emission. No libtorch, no I/O.
#include "thread_state.h"

#include "capture.h"

#include <mutex>
#include <new>
#include <string>

namespace tracerun::interpose {

uint64_t hashBytes(const char* s, size_t len) noexcept {
  uint64_t h = 0x84222325CBF29CE4ull ^ len;
  size_t i = 0;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    h = step64(h, w);
  }
  if (i < len) {
    uint64_t w = 0;
    std::memcpy(&w, s + i, len - i);
    h = step64(h, w);
  }
  return mix64(h, len);
}

core::StringId NameCache::lookupSlow(AddressEntry& a, const char* s,
                                     core::StringTable& strings) noexcept {
  if (*s == '\0') return 0;
  const size_t len = std::strlen(s);
  const uint64_t h = hashBytes(s, len);
  core::StringId id = 0;
  Entry* set = &slots_[(h & (kSlots / 2 - 1)) * 2];
  if (set[0].hash == h && set[0].len == len &&
      std::memcmp(set[0].text, s, len < kInline ? len : kInline) == 0) {
    id = set[0].id;
  } else if (set[1].hash == h && set[1].len == len &&
             std::memcmp(set[1].text, s, len < kInline ? len : kInline) == 0) {
    id = set[1].id;
  } else {
    id = miss(set, s, len, h, strings);
  }
  const size_t bytes = len + 1;  // with the NUL
  // Too long for the address table, or not interned (out of memory: try again next time).
  if (bytes > 8 * kAddressWords || id == 0) return id;
  a.ptr = s;
  a.id = id;
  a.words = static_cast<uint32_t>((bytes + 7) / 8);
  const size_t lastBytes = bytes - 8 * (a.words - 1);
  a.lastMask = lastBytes == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * lastBytes)) - 1;
  std::memset(a.text, 0, sizeof a.text);
  std::memcpy(a.text, s, bytes);
  return id;
}

core::StringId NameCache::miss(Entry* set, const char* s, size_t len, uint64_t h,
                               core::StringTable& strings) noexcept {
  ++misses_;
  countStat(Stat::kNameCacheMisses);
  core::StringId id = 0;
  try {
    id = strings.intern(std::string_view(s, len));
  } catch (...) {
    return 0;  // out of memory: the event keeps an empty name rather than unwinding into libtorch
  }
  set[1] = set[0];
  Entry& e = set[0];
  e.hash = h;
  e.len = static_cast<uint32_t>(len);
  e.id = id;
  std::memcpy(e.text, s, len < kInline ? len : kInline);
  return id;
}

namespace {
std::atomic<SeqMap*> gSeqMaps[kMaxSeqThreads];
std::mutex gSeqMapsMu;
}  // namespace

SeqMap* seqMapForThread(uint64_t rfThreadId) noexcept {
  if (rfThreadId >= kMaxSeqThreads) return nullptr;
  return gSeqMaps[rfThreadId].load(std::memory_order_acquire);
}

SeqMap* createSeqMapForThread(uint64_t rfThreadId) {
  if (rfThreadId >= kMaxSeqThreads) return nullptr;
  std::lock_guard<std::mutex> lock(gSeqMapsMu);
  SeqMap* m = gSeqMaps[rfThreadId].load(std::memory_order_relaxed);
  if (m == nullptr) {
    m = new SeqMap();  // process lifetime, deliberately never freed (read by other threads)
    gSeqMaps[rfThreadId].store(m, std::memory_order_release);
  }
  return m;
}

core::StringId ThreadState::tensorKey(int slot) noexcept {
  core::StringId& id = tensorKeys_[slot];
  if (id == 0) {
    const std::string key = slot < kMaxTensorInputs
                                ? "in" + std::to_string(slot)
                                : "out" + std::to_string(slot - kMaxTensorInputs);
    id = intern(key.c_str());
  }
  return id;
}

core::ArgsRecord argsRecord(core::EventId owner, const core::ArgsRecord::Arg* args, int n,
                            int first) noexcept {
  core::ArgsRecord a;
  a.owner = owner;
  a.count = static_cast<uint8_t>(n - first < 3 ? n - first : 3);
  for (int i = 0; i < a.count; ++i) a.args[i] = args[first + i];
  return a;
}

void pushArgsFrom(core::RecordRing& ring, core::EventId owner, const core::ArgsRecord::Arg* args,
                  int n, int first) noexcept {
  for (; first < n; first += 3) ring.tryPush(core::Record::from(argsRecord(owner, args, n, first)));
}

void pushSpanWithArgs(ThreadState& t, const core::SpanRecord& s, const core::ArgsRecord::Arg* args,
                      int n) noexcept {
  core::RecordRing& ring = t.buffer->ring;
  if (n == 0) {
    ring.tryPush(core::Record::from(s));
    return;
  }
  if (!ring.tryPushPair(core::Record::from(s), core::Record::from(argsRecord(s.id, args, n, 0)))) {
    return;
  }
  pushArgsFrom(ring, s.id, args, n, 3);
}

void emitSpanWithArgs(ThreadState& t, const Frame& f, int64_t endNs, const int64_t* outputs,
                      int noutputs) noexcept {
  core::RecordRing& ring = t.buffer->ring;
  if (!ring.reserve(2)) [[unlikely]] {
    return;
  }
  buildSpan(ring.pending(0), f, endNs);
  core::ArgsRecord::Arg all[kMaxFrameArgs + kMaxTensorInputs + kMaxTensorOutputs];
  int n = 0;
  for (int i = 0; i < f.nargs; ++i) all[n++] = f.args[i];
  for (int i = 0; i < f.ninputs; ++i) all[n++] = {t.inputKey(i), 0, f.inputs[i]};
  for (int i = 0; i < noutputs; ++i) all[n++] = {t.outputKey(i), 0, outputs[i]};
  const core::ArgsRecord head = argsRecord(f.id, all, n, 0);
  std::memcpy(ring.pending(1), &head, sizeof head);
  ring.commit(2);
  pushArgsFrom(ring, f.id, all, n, 3);
}

}  // namespace tracerun::interpose
