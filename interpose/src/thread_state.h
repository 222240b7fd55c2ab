// Per-thread capture state: the open-span stack, the name and shape caches, and the forward-op map
// that links backward nodes to their forward ops. Hot-path pieces are allocation- and lock-free.
// No libtorch here (op_capture.cpp adapts RecordFunction onto this), no I/O.
//
// Sections: hashing · NameCache · ShapeCache · SeqMap (+ registry) · Frame · ThreadState
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

#include "tracerun/core/records.h"
#include "tracerun/core/session.h"

namespace tracerun::interpose {

// ---- hashing ------------------------------------------------------------------------------------

inline uint64_t mix64(uint64_t h, uint64_t v) noexcept {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 31);
}

// One step of a running hash: xor then multiply by an odd constant (a bijection for a given h), a
// 4-cycle dependency per word against mix64's ~8; finish with mix64 before using the low bits.
inline uint64_t step64(uint64_t h, uint64_t v) noexcept {
  return (h ^ v) * 0x9E3779B97F4A7C15ull;
}

// A 64-bit hash of len bytes, eight at a time (names are short: ~10-60 bytes).
uint64_t hashBytes(const char* s, size_t len) noexcept;

// ---- NameCache ----------------------------------------------------------------------------------

// Text -> StringId, so interning (a mutex) happens once per name per thread. Two levels:
// - by address: a name read again at the address it was last seen at, with the same text, is a
//   hit after one compare of the text's words (no length, no hash). An op's name is its schema's
//   (a stable address), so ops nearly always hit here. RecordFunction copies other names into
//   std::strings whose addresses are reused for other names, which the text compare catches.
// - by content: a two-way set-associative table on a hash of the text. Names up to kInline bytes
//   are compared in full; longer ones by their first kInline bytes plus the 64-bit hash.
class NameCache {
 public:
  static constexpr size_t kSlots = 1024;  // content table: 512 sets of 2
  static constexpr size_t kInline = 48;
  static constexpr size_t kAddressSlots = 256;  // address table, direct-mapped
  static constexpr size_t kAddressWords = 5;    // names of up to 39 bytes go in it (NUL included)

  [[gnu::always_inline]] core::StringId lookup(const char* s, core::StringTable& strings) noexcept {
    if (s == nullptr) return 0;
    AddressEntry& a = byAddress_[(reinterpret_cast<uintptr_t>(s) * 0x9E3779B97F4A7C15ull) >> 56];
    if (a.ptr == s && sameText(a, s)) [[likely]] {
      return a.id;
    }
    return lookupSlow(a, s, strings);
  }
  uint64_t misses() const noexcept { return misses_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    uint32_t len = 0;
    core::StringId id = 0;
    char text[kInline] = {};
  };
  static_assert(sizeof(Entry) == 64);
  struct AddressEntry {
    const char* ptr = nullptr;
    uint32_t words = 0;  // 8-byte words holding the text and its NUL
    core::StringId id = 0;
    uint64_t lastMask = 0;  // the bytes of the last word that belong to the text and its NUL
    uint64_t text[kAddressWords] = {};  // zero-padded
  };
  static_assert(sizeof(AddressEntry) == 64);
  static_assert(kAddressSlots == 256, "the address hash keeps the top 8 bits");

  // Compares the text at s with a's, a word at a time. The last word may read bytes past the NUL,
  // never past the page s's text ends in (an address too close to its page's end takes the
  // content path instead), as the C library's own string functions do; the loads are opaque to the
  // compiler (it must not reason about the object's bounds).
  static uint64_t loadWord(const char* p) noexcept {
    uint64_t x;
#if defined(__x86_64__)
    asm("movq (%1), %0" : "=r"(x) : "r"(p) : "memory");
#else
    x = 0;  // elsewhere: byte by byte, stopping at the NUL
    for (int i = 0; i < 8; ++i) {
      x |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
      if (p[i] == '\0') break;
    }
#endif
    return x;
  }
  static bool sameText(const AddressEntry& a, const char* s) noexcept {
    if ((reinterpret_cast<uintptr_t>(s) & 4095) > 4096 - 8 * a.words) return false;
    for (uint32_t w = 0; w + 1 < a.words; ++w) {
      if (loadWord(s + 8 * w) != a.text[w]) return false;
    }
    return (loadWord(s + 8 * (a.words - 1)) & a.lastMask) == a.text[a.words - 1];
  }
  // The content table, then the address entry remembers s.
  core::StringId lookupSlow(AddressEntry& a, const char* s, core::StringTable& strings) noexcept;

  // Interns s and puts it in way 0 of `set`, moving way 0 to way 1.
  core::StringId miss(Entry* set, const char* s, size_t len, uint64_t h,
                      core::StringTable& strings) noexcept;

  AddressEntry byAddress_[kAddressSlots];
  Entry slots_[kSlots];
  uint64_t misses_ = 0;
};

// ---- ShapeCache ---------------------------------------------------------------------------------

// Hash of an op's input shapes and dtypes -> StringId of their text ("f32[8,8], f32[8], int").
// The capture code hashes the dims (cheap) and formats + interns only on a miss, which happens
// once per distinct signature per thread (two-way set-associative, so signatures that share a set
// do not evict each other); a 64-bit hash collision would give the wrong text.
class ShapeCache {
 public:
  static constexpr size_t kSlots = 2048;  // 1024 sets of 2

  bool find(uint64_t h, core::StringId* id) const noexcept {
    const Entry* set = &slots_[(h & (kSlots / 2 - 1)) * 2];
    for (int way = 0; way < 2; ++way) {
      if (set[way].hash == h && set[way].id != 0) {
        *id = set[way].id;
        return true;
      }
    }
    return false;
  }
  void insert(uint64_t h, core::StringId id) noexcept {
    Entry* set = &slots_[(h & (kSlots / 2 - 1)) * 2];
    set[1] = set[0];
    set[0] = Entry{h, id};
    ++misses_;
  }
  uint64_t misses() const noexcept { return misses_; }

 private:
  struct Entry {
    uint64_t hash = 0;
    core::StringId id = 0;
  };
  Entry slots_[kSlots];
  uint64_t misses_ = 0;
};

// ---- SeqMap -------------------------------------------------------------------------------------

// Autograd sequence number -> start time of the forward op that carried it, for one forward
// thread (sequence numbers count per thread). A fixed power-of-two array indexed by seq: written
// by its thread, read by the thread running backward; each slot is a tiny seqlock so a reader
// never mixes two writes. Old entries are overwritten kSlots sequence numbers later.
class SeqMap {
 public:
  static constexpr size_t kSlots = size_t{1} << 13;

  void put(int64_t seq, int64_t startNs) noexcept {
    Slot& s = slots_[static_cast<uint64_t>(seq) & (kSlots - 1)];
    s.seq.store(-1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    s.start.store(startNs, std::memory_order_relaxed);
    s.seq.store(seq, std::memory_order_release);
  }
  bool get(int64_t seq, int64_t* startNs) const noexcept {
    const Slot& s = slots_[static_cast<uint64_t>(seq) & (kSlots - 1)];
    if (s.seq.load(std::memory_order_acquire) != seq) return false;
    const int64_t start = s.start.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != seq) return false;
    *startNs = start;
    return true;
  }

  std::atomic<core::TrackId> track{0};  // the forward thread's track in the current session

 private:
  struct Slot {
    std::atomic<int64_t> seq{-1};
    std::atomic<int64_t> start{0};
  };
  Slot slots_[kSlots];
};

// SeqMaps by RecordFunction's logical thread id (RecordFunction::currentThreadId(), small and
// dense). Maps are created on first use and live as long as the process (a backward pass may run
// after its forward thread exited).
inline constexpr uint64_t kMaxSeqThreads = 1024;
SeqMap* seqMapForThread(uint64_t rfThreadId) noexcept;  // null when none or too large
SeqMap* createSeqMapForThread(uint64_t rfThreadId);     // null when too large

// ---- Frame --------------------------------------------------------------------------------------

inline constexpr int kMaxFrameArgs = 4;
// Tensor identities kept per op when the `tensors` category is on (inputs at the start; outputs
// are read at the end): the first ones only, the rest are counted in capture_tensor_ids_dropped.
inline constexpr int kMaxTensorInputs = 8;
inline constexpr int kMaxTensorOutputs = 4;

// One open span on a thread's stack. Its first 64 bytes are the core::SpanRecord it becomes, laid
// out field for field (end_ns, track and reserved stay 0): closing it is a 64-byte copy into the
// ring plus the end time, not a dozen field stores (emitSpan).
struct alignas(64) Frame {
  // ---- as core::SpanRecord
  core::RecordKind kind = core::RecordKind::kSpan;
  core::Category category = core::Category::kOp;
  uint16_t depth = 0;  // its index on the stack
  core::StringId name = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  core::EventId id = 0;
  core::EventId parent = 0;  // the enclosing frame's id, 0 at depth 0
  int64_t seq = -1;
  core::StringId detail = 0;
  core::TrackId track = 0;
  uint64_t reserved = 0;
  // ---- the frame's own
  const void* key = nullptr;  // identity of the open scope (the RecordFunction's address)
  int16_t prevUser = -1;      // index of the enclosing user/phase/module frame, -1 for none
  uint8_t nargs = 0;
  uint8_t ninputs = 0;  // tensor identities in `inputs` (only with the tensors category)
  // Backward frames: the torch::autograd::Node being evaluated, when known (autograd_engine.h).
  const void* node = nullptr;
  core::ArgsRecord::Arg args[kMaxFrameArgs];
  int64_t inputs[kMaxTensorInputs];
};
#define TRACERUN_SAME_OFFSET(field) \
  static_assert(offsetof(Frame, field) == offsetof(core::SpanRecord, field))
TRACERUN_SAME_OFFSET(kind);
TRACERUN_SAME_OFFSET(category);
TRACERUN_SAME_OFFSET(depth);
TRACERUN_SAME_OFFSET(name);
TRACERUN_SAME_OFFSET(start_ns);
TRACERUN_SAME_OFFSET(end_ns);
TRACERUN_SAME_OFFSET(id);
TRACERUN_SAME_OFFSET(parent);
TRACERUN_SAME_OFFSET(seq);
TRACERUN_SAME_OFFSET(detail);
TRACERUN_SAME_OFFSET(track);
TRACERUN_SAME_OFFSET(reserved);
#undef TRACERUN_SAME_OFFSET
static_assert(sizeof(core::SpanRecord) == 64 && offsetof(Frame, key) == 64);
static_assert(std::is_standard_layout_v<Frame> && std::is_standard_layout_v<core::SpanRecord>);

// ---- ThreadState --------------------------------------------------------------------------------

inline constexpr uint32_t kMaxDepth = 128;

// Everything one thread needs to record. Created by capture.cpp on the thread's first event;
// touched only by its thread, except seqMap (see SeqMap).
struct ThreadState {
  uint64_t generation = 0;  // the capture generation it is bound to
  core::Session* session = nullptr;
  core::ThreadBuffer* buffer = nullptr;
  uint32_t depth = 0;  // frames open; may exceed kMaxDepth (those frames are not recorded)
  int16_t userTop = -1;
  SeqMap* seqMap = nullptr;  // when this thread has run a forward op carrying a sequence number
  // Steps of a C++ optimizer (optimizer_steps.h), in the padding before `frames`: the number of the
  // step that the thread's next op or scope opens (0: none pending), the open step frame's index
  // (-1: none), the optimizer steps this thread has ended, whether the program marks its own
  // "step" phases (then none are added), and whether the open step ends with the scope enclosing
  // the optimizer's step() (a scope the program opened inside the step, still open then).
  uint32_t pendingStep = 0;
  int32_t stepFrame = -1;
  uint32_t optimizerSteps = 0;
  bool programMarksSteps = false;
  bool stepEndDeferred = false;
  Frame frames[kMaxDepth];
  NameCache names;
  ShapeCache shapes;

  Frame* top() noexcept { return depth > 0 && depth <= kMaxDepth ? &frames[depth - 1] : nullptr; }
  // Always inlined: onStart (the hot path) must not pay a call through the PLT for it (GCC's
  // heuristics stopped inlining it after unrelated changes there: docs/performance.md).
  [[gnu::always_inline]] core::StringId intern(const char* s) noexcept {
    return names.lookup(s, session->strings());
  }
  // Argument keys "in0".."in7" and "out0".."out3" of tensor identities, interned on first use.
  core::StringId inputKey(int i) noexcept { return tensorKey(i); }
  core::StringId outputKey(int i) noexcept { return tensorKey(kMaxTensorInputs + i); }

 private:
  core::StringId tensorKey(int slot) noexcept;
  core::StringId tensorKeys_[kMaxTensorInputs + kMaxTensorOutputs] = {};
};

// Writes frame f's span, ending at endNs, into a ring slot: the frame's record image, then the end
// time (stored after the copy, so that the copy does not wait on it).
inline void buildSpan(unsigned char* slot, const Frame& f, int64_t endNs) noexcept {
  std::memcpy(slot, &f, sizeof(core::SpanRecord));
  std::memcpy(slot + offsetof(core::SpanRecord, end_ns), &endNs, sizeof endNs);
}

// A span's arguments go in the ArgsRecords that follow it in its buffer (the writer appends them to
// it), three per record. argsRecord: arguments first..first+2 of the n in args, as one record.
// pushArgsFrom: the records for arguments first..n-1 (each pushed alone; a span pushes its first
// record together with itself, so that a drop never splits them).
core::ArgsRecord argsRecord(core::EventId owner, const core::ArgsRecord::Arg* args, int n,
                            int first) noexcept;
void pushArgsFrom(core::RecordRing& ring, core::EventId owner, const core::ArgsRecord::Arg* args,
                  int n, int first) noexcept;
// A span that is no frame (an async scope's, a collective's) followed by its n arguments, the
// first record pushed together with it.
void pushSpanWithArgs(ThreadState& t, const core::SpanRecord& s, const core::ArgsRecord::Arg* args,
                      int n) noexcept;

// The span of a frame with arguments: the frame's own, then its tensor identities (inputs, then
// the `noutputs` in `outputs`), in ArgsRecords after the span.
void emitSpanWithArgs(ThreadState& t, const Frame& f, int64_t endNs, const int64_t* outputs,
                      int noutputs) noexcept;

// Emits the span of frame f ending at endNs, with its arguments. Spans without arguments (nearly
// every op) take this inline path: one ring slot. Always inlined: GCC's heuristics made it a call
// through the PLT in onEnd after unrelated changes there (docs/performance.md, "c10d groups").
[[gnu::always_inline]] inline void emitSpan(ThreadState& t, const Frame& f, int64_t endNs,
                                            const int64_t* outputs = nullptr,
                                            int noutputs = 0) noexcept {
  if (f.nargs + f.ninputs + noutputs != 0) [[unlikely]] {
    emitSpanWithArgs(t, f, endNs, outputs, noutputs);
    return;
  }
  core::RecordRing& ring = t.buffer->ring;
  if (!ring.reserve(1)) [[unlikely]] {
    return;
  }
  buildSpan(ring.pending(0), f, endNs);
  ring.commit(1);
}

}  // namespace tracerun::interpose
