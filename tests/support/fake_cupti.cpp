// A stand-in libcupti (no GPU needed): the activity API calls libtracerun's CUDA capture makes
// (interpose/cuda/cupti_capture.cpp), built as a shared library whose SONAME is libcupti.so.13, so
// a test that dlopens it by path first makes the capture's dlopen("libcupti.so.13") find it.
// Activity records are staged by the test (fakeCuptiStage) and handed to the registered
// buffer-completed callback either when the test says so (fakeCuptiDeliver, on the calling
// thread, as CUPTI's own thread would) or by cuptiActivityFlushAll, on the thread that flushes
// (as CUPTI's forced flush at the end of a capture does). It also keeps which activity kinds and
// which runtime/driver APIs (cuptiActivityEnableRuntimeApi / DriverApi, which a test can make it
// refuse) are enabled, and dumps the contexts a test declared when CONTEXT records are enabled
// with cuptiActivityEnableAndDump. Test-only.
//
// Buffer layout (private to this file: only its cuptiActivityGetNextRecord reads it): per record
// an 8-byte length, then the record, padded to 8 bytes.
//
// No state with a destructor: a process that exits with the capture running stops it from
// libtracerun's static destructor, after this library's were run (it was loaded later).
#include <cupti.h>

#include <cstdint>
#include <cstring>
#include <mutex>

namespace {

std::mutex gMu;  // guards everything below
CUpti_BuffersCallbackRequestFunc gRequested = nullptr;
CUpti_BuffersCallbackCompleteFunc gCompleted = nullptr;
CUpti_TimestampCallbackFunc gClock = nullptr;
bool gEnabled[CUPTI_ACTIVITY_KIND_COUNT] = {};
bool gRuntimeApi[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {};
bool gDriverApi[CUPTI_DRIVER_TRACE_CBID_SIZE] = {};
bool gRefusePerApi = false;
constexpr int kMaxContexts = 8;
CUpti_ActivityContext3 gContexts[kMaxContexts] = {};
int gContextCount = 0;
constexpr size_t kStagedMax = size_t{1} << 16;
alignas(8) uint8_t gStaged[kStagedMax];  // records in the buffer layout above
size_t gStagedBytes = 0;
size_t gDropped = 0;
uint64_t gFakeClock = 1'000'000;
int gFlushes = 0;

constexpr size_t kHeader = 8;

size_t padded(size_t n) {
  return (n + 7) & ~size_t{7};
}

// Queues one record; gMu held. False when the staging area is full.
bool stageLocked(const void* record, size_t bytes) {
  if (gStagedBytes + kHeader + padded(bytes) > kStagedMax) return false;
  const uint64_t length = bytes;
  uint8_t* at = gStaged + gStagedBytes;
  std::memset(at, 0, kHeader + padded(bytes));
  std::memcpy(at, &length, sizeof length);
  std::memcpy(at + kHeader, record, bytes);
  gStagedBytes += kHeader + padded(bytes);
  return true;
}

uint64_t now() {
  return gClock != nullptr ? gClock() : ++gFakeClock;
}

// Hands the staged records to the capture in one buffer it provides. Not under gMu while the
// callbacks run (they may call back in: cuptiActivityGetNextRecord, GetNumDroppedRecords).
void deliver() {
  CUpti_BuffersCallbackRequestFunc requested = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  {
    std::lock_guard<std::mutex> lock(gMu);
    requested = gRequested;
    completed = gCompleted;
  }
  if (requested == nullptr || completed == nullptr) return;
  uint8_t* buffer = nullptr;
  size_t size = 0, maxRecords = 0;
  {
    std::lock_guard<std::mutex> lock(gMu);
    if (gStagedBytes == 0) return;
  }
  requested(&buffer, &size, &maxRecords);
  if (buffer == nullptr) return;
  size_t valid = 0;
  {
    std::lock_guard<std::mutex> lock(gMu);
    if (gStagedBytes <= size) {  // else a real CUPTI would count them dropped
      std::memcpy(buffer, gStaged, gStagedBytes);
      valid = gStagedBytes;
    }
    gStagedBytes = 0;
  }
  completed(nullptr, 0, buffer, size, valid);  // the capture frees the buffer
}

}  // namespace

extern "C" {

// ---- the CUPTI API the capture uses
// --------------------------------------------------------------

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS (stand-in)" : "CUPTI error (stand-in)";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  std::lock_guard<std::mutex> lock(gMu);
  gClock = fn;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  std::lock_guard<std::mutex> lock(gMu);
  *timestamp = now();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(gMu);
  if (kind > 0 && kind < CUPTI_ACTIVITY_KIND_COUNT) gEnabled[kind] = true;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableAndDump(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(gMu);
  if (kind <= 0 || kind >= CUPTI_ACTIVITY_KIND_COUNT) return CUPTI_ERROR_INVALID_KIND;
  gEnabled[kind] = true;
  if (kind == CUPTI_ACTIVITY_KIND_CONTEXT) {
    for (int i = 0; i < gContextCount; ++i) stageLocked(&gContexts[i], sizeof gContexts[i]);
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableRuntimeApi(CUpti_CallbackId cbid, uint8_t enable) {
  std::lock_guard<std::mutex> lock(gMu);
  if (gRefusePerApi && enable != 0) return CUPTI_ERROR_NOT_SUPPORTED;
  if (cbid >= CUPTI_RUNTIME_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  gRuntimeApi[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnableDriverApi(CUpti_CallbackId cbid, uint8_t enable) {
  std::lock_guard<std::mutex> lock(gMu);
  if (gRefusePerApi && enable != 0) return CUPTI_ERROR_NOT_SUPPORTED;
  if (cbid >= CUPTI_DRIVER_TRACE_CBID_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
  gDriverApi[cbid] = enable != 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(gMu);
  if (kind > 0 && kind < CUPTI_ACTIVITY_KIND_COUNT) gEnabled[kind] = false;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                    CUpti_BuffersCallbackCompleteFunc completed) {
  std::lock_guard<std::mutex> lock(gMu);
  gRequested = requested;
  gCompleted = completed;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t validBufferSizeBytes,
                                                CUpti_Activity** record) {
  size_t at = 0;  // offset of the next record's header
  if (*record != nullptr) {
    const auto* current = reinterpret_cast<uint8_t*>(*record);
    uint64_t length = 0;
    std::memcpy(&length, current - kHeader, sizeof length);
    at = static_cast<size_t>(current - buffer) + padded(length);
  }
  if (at + kHeader > validBufferSizeBytes) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at + kHeader);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t) {
  {
    std::lock_guard<std::mutex> lock(gMu);
    ++gFlushes;
  }
  deliver();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) {
  std::lock_guard<std::mutex> lock(gMu);
  *dropped = gDropped;  // counted once, as CUPTI resets its count when read
  gDropped = 0;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                            uint64_t) {
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                           uint64_t* lastId) {
  if (lastId != nullptr) *lastId = 0;
  return CUPTI_SUCCESS;
}

// ---- for the test ------------------------------------------------------------------------------

// Queues one activity record (copied; pointers in it, e.g. a kernel's name, must stay valid).
// False when the staging area (64 KiB) is full.
bool fakeCuptiStage(const void* record, size_t bytes) {
  std::lock_guard<std::mutex> lock(gMu);
  return stageLocked(record, bytes);
}

// Completes one buffer with the staged records now, on the calling thread.
void fakeCuptiDeliver() {
  deliver();
}

// What the next cuptiActivityGetNumDroppedRecords reports.
void fakeCuptiSetDropped(size_t n) {
  std::lock_guard<std::mutex> lock(gMu);
  gDropped = n;
}

// A CUPTI timestamp: the registered timestamp callback's (the capture's clock) when there is one.
uint64_t fakeCuptiTimestamp() {
  std::lock_guard<std::mutex> lock(gMu);
  return now();
}

int fakeCuptiEnabledKinds() {
  std::lock_guard<std::mutex> lock(gMu);
  int n = 0;
  for (bool on : gEnabled) n += on ? 1 : 0;
  return n;
}

int fakeCuptiFlushes() {
  std::lock_guard<std::mutex> lock(gMu);
  return gFlushes;
}

bool fakeCuptiKindEnabled(int kind) {
  std::lock_guard<std::mutex> lock(gMu);
  return kind > 0 && kind < CUPTI_ACTIVITY_KIND_COUNT && gEnabled[kind];
}

// How many runtime (domain 0) or driver (1) APIs are enabled one by one; with cbid >= 0, 1 if
// that one is.
int fakeCuptiApisEnabled(int domain, int cbid) {
  std::lock_guard<std::mutex> lock(gMu);
  const bool* on = domain == 0 ? gRuntimeApi : gDriverApi;
  const int size = domain == 0 ? static_cast<int>(CUPTI_RUNTIME_TRACE_CBID_SIZE)
                               : static_cast<int>(CUPTI_DRIVER_TRACE_CBID_SIZE);
  if (cbid >= 0) return cbid < size && on[cbid] ? 1 : 0;
  int n = 0;
  for (int i = 0; i < size; ++i) n += on[i] ? 1 : 0;
  return n;
}

// Makes cuptiActivityEnableRuntimeApi / DriverApi refuse to enable (as a libcupti without
// per-API control would fail), so the capture falls back to the whole kinds.
void fakeCuptiRefusePerApi(bool refuse) {
  std::lock_guard<std::mutex> lock(gMu);
  gRefusePerApi = refuse;
}

// A context that exists before the capture starts: dumped as a CONTEXT record when the capture
// enables that kind with cuptiActivityEnableAndDump.
void fakeCuptiAddContext(uint32_t contextId, uint32_t deviceId) {
  std::lock_guard<std::mutex> lock(gMu);
  if (gContextCount == kMaxContexts) return;
  CUpti_ActivityContext3& c = gContexts[gContextCount++];
  c = CUpti_ActivityContext3{};
  c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  c.contextId = contextId;
  c.deviceId = deviceId;
}

}  // extern "C"
