// CUPTI activity records -> tracerun core records: a pure translation (no CUPTI calls, no globals),
// so tests feed it synthetic records. It does not enable CUPTI or own buffers (cupti_capture.cpp).
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/core/session.h"

namespace tracerun::interpose::cuda {

// A host op that launched device work: where its span is (FlowRecords name endpoints by track and
// start). Carried through CUPTI as the external correlation id the op capture pushed with
// cuptiActivityPushExternalCorrelationId (kind kOpCorrelationKind) around the op.
struct LaunchingOp {
  core::TrackId track = 0;
  int64_t start_ns = 0;  // host clock (core::nowNs)
};

inline constexpr CUpti_ExternalCorrelationKind kOpCorrelationKind =
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;

// The external id of an op span: its track in the top 16 bits, start_ns - base_ns in the low 48
// (~78 hours after base). 0 ("no op") when the span does not fit: track >= 2^16, or a start not
// after base_ns or 2^48 ns or more after it.
uint64_t opExternalId(core::TrackId track, int64_t start_ns, int64_t base_ns) noexcept;
// The inverse; false for 0.
bool launchingOp(uint64_t externalId, int64_t base_ns, LaunchingOp* op) noexcept;

// A device span waiting for the external correlation record of the API call that launched it
// (CUPTI puts API records and device records in different buffers, completed in any order).
struct PendingDeviceSpan {
  core::TrackId track = 0;
  int64_t start_ns = 0;
};

// What the translation needs from its caller; every callback must be set.
struct TranslateContext {
  int64_t clock_offset_ns = 0;  // host clock = CUPTI timestamp + offset
  int64_t op_base_ns = 0;       // the base of opExternalId used by the op capture
  std::function<core::TrackId(uint32_t device, uint32_t stream)> stream_track;
  std::function<core::StringId(const std::string&)> intern;
  std::function<core::EventId()> next_id;
  // CUPTI correlationId -> external id, from ExternalCorrelation records. Kept after use (a graph
  // launch runs many kernels under one correlation id); at most kMaxExternal, the oldest
  // correlation ids evicted (API calls that launch nothing, e.g. cudaGetDevice, leave entries).
  std::map<uint32_t, uint64_t> external;
  // Device spans whose correlation record has not arrived yet, at most kMaxPending (oldest
  // evicted and counted in without_op; finish() counts the rest).
  std::multimap<uint32_t, PendingDeviceSpan> pending;
  static constexpr size_t kMaxExternal = size_t{1} << 18;
  static constexpr size_t kMaxPending = size_t{1} << 16;
  // Counts for the stats table.
  uint64_t kernels = 0, copies = 0, syncs = 0, nccl_kernels = 0, api_records = 0;
  uint64_t flows = 0, without_op = 0, unknown = 0;
};

inline constexpr uint32_t kNoStream = 0xffffffffu;  // CUPTI's "invalid" stream id

// Appends the records for one activity record to out: a span (+ its args as ArgsRecords, pushed
// right after it) on the stream's track and, once both the device record and the external
// correlation record of its launch are seen (either order), a FlowRecord kOpKernel from the
// launching op to the span. ExternalCorrelation records of kOpCorrelationKind only update ctx
// (or complete a pending flow); runtime/driver API records are counted; unknown kinds are counted
// and skipped.
void translate(const CUpti_Activity& record, TranslateContext& ctx, std::vector<core::Record>& out);
// At the end of the capture: device spans still waiting for their launch count as without_op.
void finish(TranslateContext& ctx);

// CUPTI's clock against the host's: one sample is a CUPTI timestamp read between two host reads.
struct ClockSample {
  int64_t host_before = 0;
  uint64_t cupti = 0;
  int64_t host_after = 0;
};
// host - CUPTI from the tightest sample (midpoint of its host reads); 0 without samples.
int64_t clockOffset(const std::vector<ClockSample>& samples) noexcept;

// The stats-table rows of a finished translation, with CUPTI's dropped-record count, the buffers
// completed and the records read from them: cupti_dropped_records is an error when > 0 (lost
// data, like the writer's dropped_events); the rest are info.
std::vector<core::SessionStat> cuptiStats(const TranslateContext& ctx, uint64_t dropped,
                                          uint64_t buffers, uint64_t records);

// Names used for spans (also used by tests).
std::string memcpyKindName(uint8_t copyKind);
std::string syncTypeName(uint32_t type);
bool isNcclKernel(const char* name) noexcept;

}  // namespace tracerun::interpose::cuda
