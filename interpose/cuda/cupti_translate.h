// CUPTI activity records -> tracerun core records: a pure translation (no CUPTI calls, no globals),
// so tests feed it synthetic records: kernel names demangled as nsys and Kineto show them, tracks
// per device and stream as CUDA numbers them, op -> kernel flows. It does not enable CUPTI or own
// buffers (cupti_capture.cpp); the list of launch APIs the capture enables lives here as data.
#pragma once

#include <cupti_activity.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
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

// A kernel's names, made once per distinct kernel (demangling is not free; the translation runs
// on CUPTI's buffer-completion thread, not the training thread).
struct KernelNames {
  std::string mangled;
  core::StringId name = 0;        // the demangled name (core::demangleKernelName): the span's name
  core::StringId mangled_id = 0;  // arg vocab::arg::kMangledName
  core::StringId short_id = 0;    // arg vocab::arg::kShortName
  bool nccl = false;
};

// What the translation needs from its caller; every callback must be set.
struct TranslateContext {
  int64_t clock_offset_ns = 0;  // host clock = CUPTI timestamp + offset
  int64_t op_base_ns = 0;       // the base of opExternalId used by the op capture
  // The track with this name, added if new (TrackKind::kStream); tid as core::TrackInfo's: the
  // stream id, or 0 for the per-device and per-context sync tracks. Called once per track.
  std::function<core::TrackId(const std::string& name, int64_t tid)> track;
  std::function<core::StringId(const std::string&)> intern;
  std::function<core::EventId()> next_id;
  // CUPTI correlationId -> external id, from ExternalCorrelation records. Kept after use (a graph
  // launch runs many kernels under one correlation id); at most kMaxExternal, the oldest
  // correlation ids evicted (API calls that launch nothing may leave entries).
  std::map<uint32_t, uint64_t> external;
  // Device spans whose correlation record has not arrived yet, at most kMaxPending (oldest
  // evicted and counted in without_op; finish() counts the rest).
  std::multimap<uint32_t, PendingDeviceSpan> pending;
  static constexpr size_t kMaxExternal = size_t{1} << 18;
  static constexpr size_t kMaxPending = size_t{1} << 16;

  // Devices as CUDA numbers them: contextId -> deviceId, learnt from kernel, memcpy and memset
  // records (they carry both) and from CONTEXT records. A synchronization record carries only
  // its context: it waits in pending_syncs (at most kMaxPendingSyncs, the oldest then placed as
  // at finish) until its context's device is known; finish() places the rest on the only device
  // seen if exactly one was, else on a track "cuda context N" that claims no device.
  std::unordered_map<uint32_t, uint32_t> context_device;
  std::set<uint32_t> devices;  // every deviceId seen
  std::deque<CUpti_ActivitySynchronization2> pending_syncs;
  static constexpr size_t kMaxPendingSyncs = 4096;
  bool finished = false;  // after finish(): syncs of unknown contexts are placed at once

  // Caches: kernel names by CUPTI's name pointer (shared by all records of one kernel; checked
  // against the text, so a reused pointer is harmless) and by text; tracks by what they show.
  std::unordered_map<const char*, const KernelNames*> kernel_by_pointer;
  std::unordered_map<std::string, KernelNames> kernel_by_name;
  std::map<std::tuple<int, uint32_t, uint32_t>, core::TrackId> tracks;
  std::unordered_map<std::string, core::StringId> keys;    // interned argument keys
  std::unordered_map<uint32_t, core::TrackId> api_tracks;  // CUPTI thread id -> its API track
  // (driver << 32 | cbid) -> the API's interned name, 0 when it is not a launch-type API.
  std::unordered_map<uint64_t, core::StringId> launch_names;

  // Counts for the stats table.
  uint64_t kernels = 0, copies = 0, syncs = 0, nccl_kernels = 0, api_records = 0;
  uint64_t flows = 0, without_op = 0, unknown = 0, contexts = 0, syncs_without_device = 0;
  uint64_t launches = 0, api_records_dropped = 0;  // API records kept as launch spans / dropped
};

inline constexpr uint32_t kNoStream = 0xffffffffu;  // CUPTI's "invalid" stream id

// Track names (TrackKind::kStream): "cuda:0 stream 7" (tid 7); "cuda:0 sync" for a device-wide
// synchronization (tid 0); "cuda context 3 stream 7" / "cuda context 3" for synchronizations of
// a context whose device never became known (several devices seen).
std::string streamTrackName(uint32_t device, uint32_t stream);
std::string deviceSyncTrackName(uint32_t device);
std::string contextTrackName(uint32_t context, uint32_t stream);
// "cuda api thread 4242" (TrackKind::kStream, tid = CUPTI's thread id of the calling thread): the
// launch API calls one CPU thread made (Nsight Systems' "CUDA API" row under each thread).
// trace/src/analysis/gpu_activity.cpp reads these names.
std::string apiTrackName(uint32_t thread);

// Appends the records for one activity record to out: a span (+ its args as ArgsRecords, pushed
// right after it) on the stream's track and, once both the device record and the external
// correlation record of its launch are seen (either order), a FlowRecord kOpKernel from the
// launching op to the span. Kernel spans are named by their demangled name, with args
// mangled_name and short_name (string ids). ExternalCorrelation records of kOpCorrelationKind
// only update ctx (or complete a pending flow); CONTEXT records only teach ctx a device (and
// release waiting syncs); runtime/driver API records of launch-type APIs (launchApiName) become
// spans of category other on their thread's API track (apiTrackName), named after the API, with
// args correlation and cbid (the others are counted and dropped); unknown kinds are counted and
// skipped.
void translate(const CUpti_Activity& record, TranslateContext& ctx, std::vector<core::Record>& out);
// At the end of the capture: waiting syncs are placed (see TranslateContext), device spans still
// waiting for their launch count as without_op.
void finish(TranslateContext& ctx, std::vector<core::Record>& out);

// The API calls whose activity records the capture enables one by one (CUDA 13's
// cuptiActivityEnableRuntimeApi / cuptiActivityEnableDriverApi) instead of the whole RUNTIME
// and DRIVER kinds: every call that launches device work. The capture needs API records for two
// things: CUPTI emits an op's external correlation record with them (the op -> kernel/copy flow),
// and the launch call's own times (HTA's launch delay, host wait, queue length: kept as launch
// spans, see translate). Only for device work do they matter; recording every API call
// (cudaGetDevice, cudaGetLastError, cudaEventRecord...) cost about half of all records on nanoGPT.
// Kineto drops the same calls by a blocklist and keeps driver records only for launches. Driver
// launches are kept because NCCL and Triton launch through the driver; both sync and async copies
// and sets because each makes a memcpy/memset record whose op is wanted.
std::vector<uint32_t> launchRuntimeApis();  // CUPTI_RUNTIME_TRACE_CBID_*
std::vector<uint32_t> launchDriverApis();   // CUPTI_DRIVER_TRACE_CBID_*
// The name of a launch-type API as Kineto and HTA show it (the callback id's name less a runtime
// version suffix: cudaLaunchKernel, cudaMemcpyAsync_ptsz, cuLaunchKernelEx); "" for any other
// API. Its records are the ones translate keeps. No static state: safe during exit.
std::string launchApiName(bool driver, uint32_t cbid);

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

// Parts of the CUDA capture a cost measurement may turn off, one at a time (bench/gpu_overhead.py
// --attribute): TRACERUN_CUPTI_OFF, a comma list of `sync` (no synchronization records), `clock`
// (CUPTI's own clock instead of the trace's timestamp callback; the offset is still measured) and
// `correlation` (no external correlation id pushed per op: no op -> kernel flows). A diagnostic,
// not a capture word: the trace says what was off (stat cupti_parts_off, bits 1 sync, 2 clock,
// 4 correlation).
struct CuptiPartsOff {
  bool sync = false;
  bool clock = false;
  bool correlation = false;
  int bits() const noexcept { return (sync ? 1 : 0) | (clock ? 2 : 0) | (correlation ? 4 : 0); }
};
// Parses TRACERUN_CUPTI_OFF's value (null or empty: nothing off); unknown words go to *unknown,
// comma-separated.
CuptiPartsOff parseCuptiPartsOff(const char* text, std::string* unknown);

// Names used for spans (also used by tests).
std::string memcpyKindName(uint8_t copyKind);
std::string syncTypeName(uint32_t type);
bool isNcclKernel(const char* name) noexcept;

}  // namespace tracerun::interpose::cuda
