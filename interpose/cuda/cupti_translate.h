// CUPTI activity records -> tracerun core records: a pure translation (no CUPTI calls, no globals),
// so tests feed it synthetic records. It does not enable CUPTI or own buffers (cupti_capture.cpp).
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tracerun/core/records.h"

namespace tracerun::interpose::cuda {

// A host op that launched device work: the external correlation id the op capture pushed with
// cuptiActivityPushExternalCorrelationId, and where its span is.
struct LaunchingOp {
  core::TrackId track = 0;
  int64_t start_ns = 0;
};

// What the translation needs from its caller; every callback must be set.
struct TranslateContext {
  int64_t clock_offset_ns = 0;  // host CLOCK_MONOTONIC = CUPTI timestamp + offset
  std::function<core::TrackId(uint32_t device, uint32_t stream)> stream_track;
  std::function<core::StringId(const std::string&)> intern;
  std::function<core::EventId()> next_id;
  // externalId -> op; filled by the op capture (CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0).
  std::unordered_map<uint64_t, LaunchingOp> ops;
  // CUPTI correlationId -> externalId, learned from ExternalCorrelation records.
  std::unordered_map<uint32_t, uint64_t> external;
  // Counts for the stats table.
  uint64_t kernels = 0, copies = 0, syncs = 0, nccl_kernels = 0, without_op = 0, unknown = 0;
};

inline constexpr uint32_t kNoStream = 0xffffffffu;  // CUPTI's "invalid" stream id

// Appends the records for one activity record to out: a span (+ its args as ArgsRecords, pushed
// right after it) on the stream's track and, when the launching op is known, a FlowRecord
// kOpKernel from the op to the span. ExternalCorrelation records only update ctx. Unknown kinds
// are counted and skipped.
void translate(const CUpti_Activity& record, TranslateContext& ctx,
               std::vector<core::Record>& out);

// Names used for spans (also used by tests).
std::string memcpyKindName(uint8_t copyKind);
std::string syncTypeName(uint32_t type);
bool isNcclKernel(const char* name) noexcept;

}  // namespace tracerun::interpose::cuda
