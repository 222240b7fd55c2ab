// The event model: fixed-size, trivially copyable records that capture code appends to a per-thread
// buffer. One struct per kind, all exactly one 64-byte slot. No strings here: names are StringIds
// from the StringTable, interned before the hot path.
//
// Sections: ids and enums · SpanRecord · ArgsRecord · InstantRecord · CounterRecord ·
//           MemoryRecord · FlowRecord · Record (the slot)
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace tracerun::core {

using StringId = uint32_t;  // 0 is the empty string
using TrackId = uint32_t;   // 0 means "the producing thread's own track"
using EventId = uint64_t;   // unique within a process; 0 means none

enum class RecordKind : uint8_t {
  kInvalid = 0,
  kSpan = 1,     // a completed span (emitted at its end)
  kArgs = 2,     // integer arguments of the span emitted just before
  kInstant = 3,  // a point event
  kCounter = 4,  // a sample of a named counter
  kMemory = 5,   // an allocation (+bytes) or a free (-bytes)
  kFlow = 6,     // a directed link between two events
};

// What produced a span. Stored as an integer; names in categoryName().
enum class Category : uint8_t {
  kOp = 0,        // an ATen operator (RecordFunction FUNCTION scope)
  kBackward = 1,  // an autograd node (BACKWARD_FUNCTION scope)
  kUser = 2,      // a user scope: annotations, RecordFunction USER_SCOPE
  kModule = 3,    // an nn.Module / trainer module scope
  kComm = 4,      // a collective or point-to-point communication
  kPhase = 5,     // a training phase: step, forward, backward, optimizer
  kKernel = 6,    // a device kernel (CUPTI)
  kMemcpy = 7,    // a device copy or memset (CUPTI)
  kOther = 8,
  kCount = 9,
};
const char* categoryName(Category c) noexcept;

enum class MemoryCategory : uint8_t {
  kUnknown = 0,
  kParameter = 1,
  kGradient = 2,
  kOptimizerState = 3,
  kActivation = 4,
  kTemporary = 5,
  kOther = 6,
  kInput = 7,  // the batches fed to the model (PyTorch's INPUT); after kOther: numbers are stable
  kCount = 8,
};
const char* memoryCategoryName(MemoryCategory c) noexcept;

enum class FlowKind : uint8_t {
  kForwardBackward = 0,  // forward op -> its autograd node
  kSendRecv = 1,         // point-to-point send -> matching receive
  kOpKernel = 2,         // host op -> device kernel it launched
  kOther = 3,
  kCount = 4,
};
const char* flowKindName(FlowKind k) noexcept;

struct SpanRecord {
  RecordKind kind = RecordKind::kSpan;
  Category category = Category::kOp;
  uint16_t depth = 0;  // nesting depth on its track (0 = root)
  StringId name = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  EventId id = 0;
  EventId parent = 0;  // enclosing span on the same track, 0 for a root
  int64_t seq = -1;    // autograd sequence number, -1 when none
  StringId detail = 0; // free text such as input shapes, 0 when none
  TrackId track = 0;   // 0 = the producing thread's track
  uint64_t reserved = 0;
};

// Up to three named integer arguments of the span that precedes it in the same buffer.
struct ArgsRecord {
  struct Arg {
    StringId key = 0;
    uint32_t pad = 0;
    int64_t value = 0;
  };
  RecordKind kind = RecordKind::kArgs;
  uint8_t count = 0;
  uint16_t pad = 0;
  uint32_t pad2 = 0;
  EventId owner = 0;  // the span's id
  Arg args[3];
};

struct InstantRecord {
  RecordKind kind = RecordKind::kInstant;
  Category category = Category::kUser;
  uint16_t pad = 0;
  StringId name = 0;
  int64_t ts_ns = 0;
  EventId id = 0;
  StringId detail = 0;
  TrackId track = 0;
  int64_t value = 0;
  uint64_t reserved[3] = {};
};

// A sample of the counter `name`; each name gets its own counter track per process.
struct CounterRecord {
  RecordKind kind = RecordKind::kCounter;
  uint8_t pad = 0;
  uint16_t pad1 = 0;
  StringId name = 0;
  int64_t ts_ns = 0;
  double value = 0;
  uint64_t reserved[5] = {};
};

struct MemoryRecord {
  RecordKind kind = RecordKind::kMemory;
  MemoryCategory category = MemoryCategory::kUnknown;
  int8_t device_type = 0;   // 0 = CPU, 1 = CUDA (c10::DeviceType values)
  int8_t device_index = -1;
  StringId op = 0;          // innermost op when it happened, 0 when none
  int64_t ts_ns = 0;
  uint64_t ptr = 0;
  int64_t bytes = 0;        // > 0 allocation, < 0 free
  int64_t total = 0;        // live bytes on this device after the event
  EventId span = 0;         // innermost span when it happened
  StringId scope = 0;       // innermost user scope when it happened
  uint32_t pad = 0;
  uint64_t reserved = 0;
};

// A link between two events, each named by its track and start time (what a reader needs to find it
// without an index on ids).
struct FlowRecord {
  RecordKind kind = RecordKind::kFlow;
  FlowKind flow = FlowKind::kOther;
  uint16_t pad = 0;
  uint32_t pad1 = 0;
  TrackId src_track = 0;
  TrackId dst_track = 0;
  int64_t src_ts_ns = 0;
  int64_t dst_ts_ns = 0;
  uint64_t reserved[4] = {};
};

inline constexpr size_t kRecordSize = 64;
static_assert(sizeof(SpanRecord) == kRecordSize);
static_assert(sizeof(ArgsRecord) == kRecordSize);
static_assert(sizeof(InstantRecord) == kRecordSize);
static_assert(sizeof(CounterRecord) == kRecordSize);
static_assert(sizeof(MemoryRecord) == kRecordSize);
static_assert(sizeof(FlowRecord) == kRecordSize);

// One buffer slot. Producers copy a typed record in; the consumer reads kind() and then as<T>().
struct alignas(kRecordSize) Record {
  unsigned char bytes[kRecordSize];

  template <typename T>
  static Record from(const T& r) noexcept {
    static_assert(sizeof(T) == kRecordSize && std::is_trivially_copyable_v<T>);
    Record slot;
    std::memcpy(slot.bytes, &r, kRecordSize);
    return slot;
  }
  RecordKind kind() const noexcept { return static_cast<RecordKind>(bytes[0]); }
  template <typename T>
  T as() const noexcept {
    static_assert(sizeof(T) == kRecordSize && std::is_trivially_copyable_v<T>);
    T r;
    std::memcpy(&r, bytes, kRecordSize);
    return r;
  }
};
static_assert(sizeof(Record) == kRecordSize);

}  // namespace tracerun::core
