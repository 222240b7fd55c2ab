// CUPTI activity records -> core records (see cupti_translate.h). Only CUDA 13's record versions
// (Kernel10, Memcpy6, Memset4, Synchronization2, ExternalCorrelation; of Context3 only the two
// fields every version shares); no CUPTI calls. Also the launch-API list the capture enables.
#include "cupti_translate.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <cstring>
#include <type_traits>

#include "tracerun/core/kernel_name.h"
#include "tracerun/core/vocabulary.h"

namespace tracerun::interpose::cuda {
namespace {

struct ArgList {
  static constexpr int kMax = 9;  // three ArgsRecords
  core::ArgsRecord::Arg args[kMax];
  int n = 0;
  void add(core::StringId key, int64_t value) {
    if (n < kMax) args[n++] = core::ArgsRecord::Arg{key, 0, value};
  }
};

// An argument key, interned once per translation.
core::StringId key(TranslateContext& ctx, const char* name) {
  auto it = ctx.keys.find(name);
  if (it == ctx.keys.end()) it = ctx.keys.emplace(name, ctx.intern(name)).first;
  return it->second;
}

// Track ids by (what, a, b): 0 stream (device, stream), 1 device sync (device), 2 context
// (context, stream).
core::TrackId trackOf(TranslateContext& ctx, int what, uint32_t a, uint32_t b) {
  const auto k = std::make_tuple(what, a, b);
  auto it = ctx.tracks.find(k);
  if (it != ctx.tracks.end()) return it->second;
  core::TrackId id = 0;
  if (what == 0) id = ctx.track(streamTrackName(a, b), b);
  if (what == 1) id = ctx.track(deviceSyncTrackName(a), 0);
  if (what == 2) id = ctx.track(contextTrackName(a, b), b == kNoStream ? 0 : b);
  ctx.tracks.emplace(k, id);
  return id;
}

void emit(const core::SpanRecord& s, const ArgList& a, std::vector<core::Record>& out) {
  out.push_back(core::Record::from(s));
  for (int first = 0; first < a.n; first += 3) {
    core::ArgsRecord r;
    r.owner = s.id;
    r.count = static_cast<uint8_t>(a.n - first < 3 ? a.n - first : 3);
    for (int i = 0; i < r.count; ++i) r.args[i] = a.args[first + i];
    out.push_back(core::Record::from(r));
  }
}

void emitFlow(const LaunchingOp& op, core::TrackId dstTrack, int64_t dstStart,
              TranslateContext& ctx, std::vector<core::Record>& out) {
  core::FlowRecord f;
  f.flow = core::FlowKind::kOpKernel;
  f.src_track = op.track;
  f.src_ts_ns = op.start_ns;
  f.dst_track = dstTrack;
  f.dst_ts_ns = dstStart;
  out.push_back(core::Record::from(f));
  ++ctx.flows;
}

// A device span launched by the API call `correlationId`: a flow from its op when the external
// record was seen, else wait for it. The entry stays: one launch may run several device records
// (cudaGraphLaunch: every kernel of the graph carries the launch's correlation id).
void flowFromOp(uint32_t correlationId, const core::SpanRecord& s, TranslateContext& ctx,
                std::vector<core::Record>& out) {
  auto ext = ctx.external.find(correlationId);
  if (ext == ctx.external.end()) {
    ctx.pending.emplace(correlationId, PendingDeviceSpan{s.track, s.start_ns});
    if (ctx.pending.size() > TranslateContext::kMaxPending) {
      ctx.pending.erase(ctx.pending.begin());
      ++ctx.without_op;
    }
    return;
  }
  LaunchingOp op;
  if (launchingOp(ext->second, ctx.op_base_ns, &op)) {
    emitFlow(op, s.track, s.start_ns, ctx, out);
  } else {
    ++ctx.without_op;  // launched inside an op the capture could not name (id 0)
  }
}

void noteExternal(const CUpti_ActivityExternalCorrelation& e, TranslateContext& ctx,
                  std::vector<core::Record>& out) {
  if (e.externalKind != kOpCorrelationKind) return;  // another tool's ids
  ctx.external[e.correlationId] = e.externalId;
  if (ctx.external.size() > TranslateContext::kMaxExternal)
    ctx.external.erase(ctx.external.begin());
  // Device records that completed before this record: their flows now.
  const auto [first, last] = ctx.pending.equal_range(e.correlationId);
  LaunchingOp op;
  const bool known = launchingOp(e.externalId, ctx.op_base_ns, &op);
  for (auto it = first; it != last; ++it) {
    if (known) {
      emitFlow(op, it->second.track, it->second.start_ns, ctx, out);
    } else {
      ++ctx.without_op;
    }
  }
  ctx.pending.erase(first, last);
}

core::SpanRecord spanOn(TranslateContext& ctx, core::Category c, core::StringId name,
                        uint64_t start, uint64_t end, core::TrackId track) {
  core::SpanRecord s;
  s.category = c;
  s.name = name;
  s.start_ns = static_cast<int64_t>(start) + ctx.clock_offset_ns;
  s.end_ns = static_cast<int64_t>(end < start ? start : end) + ctx.clock_offset_ns;
  s.id = ctx.next_id();
  s.track = track;
  return s;
}

// A synchronization record on its place: the stream it waited on (or the device's sync track)
// when the context's device is known; else, when `forced`, the only device seen or the
// context's own track. False (nothing emitted) when it must wait.
bool placeSync(const CUpti_ActivitySynchronization2& y, TranslateContext& ctx, bool forced,
               std::vector<core::Record>& out) {
  const auto known = ctx.context_device.find(y.contextId);
  const bool stream = y.streamId != kNoStream;
  core::TrackId track = 0;
  int64_t device = -1;
  if (known != ctx.context_device.end() || (forced && ctx.devices.size() == 1)) {
    device = known != ctx.context_device.end() ? known->second : *ctx.devices.begin();
    const auto d = static_cast<uint32_t>(device);
    track = stream ? trackOf(ctx, 0, d, y.streamId) : trackOf(ctx, 1, d, 0);
  } else if (forced) {
    track = trackOf(ctx, 2, y.contextId, y.streamId);
    ++ctx.syncs_without_device;
  } else {
    return false;
  }
  auto s =
      spanOn(ctx, core::Category::kOther, ctx.intern(syncTypeName(y.type)), y.start, y.end, track);
  ArgList a;
  a.add(key(ctx, "correlation"), y.correlationId);
  a.add(key(ctx, "context"), y.contextId);
  if (device >= 0) a.add(key(ctx, "device"), device);
  if (stream) a.add(key(ctx, "stream"), y.streamId);
  emit(s, a, out);
  return true;
}

// A record that carries both a context and its device: remember the pair; the first time a
// context's device is learnt, the syncs waiting for it are placed (in arrival order).
void learnDevice(uint32_t context, uint32_t device, TranslateContext& ctx,
                 std::vector<core::Record>& out) {
  ctx.devices.insert(device);
  if (!ctx.context_device.emplace(context, device).second) return;
  if (ctx.pending_syncs.empty()) return;
  std::deque<CUpti_ActivitySynchronization2> still;
  for (const auto& y : ctx.pending_syncs) {
    if (y.contextId != context || !placeSync(y, ctx, false, out)) still.push_back(y);
  }
  ctx.pending_syncs.swap(still);
}

// The names of a kernel, made once per distinct kernel.
const KernelNames& kernelNames(const char* mangled, TranslateContext& ctx) {
  if (mangled == nullptr) mangled = "kernel";
  const auto byPointer = ctx.kernel_by_pointer.find(mangled);
  if (byPointer != ctx.kernel_by_pointer.end() && byPointer->second->mangled == mangled) {
    return *byPointer->second;
  }
  auto it = ctx.kernel_by_name.find(mangled);
  if (it == ctx.kernel_by_name.end()) {
    KernelNames n;
    n.mangled = mangled;
    const std::string demangled = core::demangleKernelName(n.mangled);
    n.name = ctx.intern(demangled);
    n.mangled_id = ctx.intern(n.mangled);
    n.short_id = ctx.intern(core::kernelShortName(demangled));
    n.nccl = isNcclKernel(mangled);
    it = ctx.kernel_by_name.emplace(n.mangled, std::move(n)).first;
  }
  ctx.kernel_by_pointer[mangled] = &it->second;
  return it->second;
}

// A copy (Memcpy6) or a memset (Memset4): the same fields under the same names, so one
// translation: a span of category memcpy on the stream's track, args bytes (a memset's value
// after it), correlation, device, stream, and the flow from the launching op.
template <typename Copy>
void translateCopy(const Copy& m, const std::string& name, TranslateContext& ctx,
                   std::vector<core::Record>& out) {
  static_assert(std::is_same_v<Copy, CUpti_ActivityMemcpy6> ||
                std::is_same_v<Copy, CUpti_ActivityMemset4>);
  auto s = spanOn(ctx, core::Category::kMemcpy, ctx.intern(name), m.start, m.end,
                  trackOf(ctx, 0, m.deviceId, m.streamId));
  ArgList a;
  a.add(key(ctx, vocab::arg::kBytes), static_cast<int64_t>(m.bytes));
  if constexpr (std::is_same_v<Copy, CUpti_ActivityMemset4>) a.add(key(ctx, "value"), m.value);
  a.add(key(ctx, "correlation"), m.correlationId);
  a.add(key(ctx, "device"), m.deviceId);
  a.add(key(ctx, "stream"), m.streamId);
  emit(s, a, out);
  flowFromOp(m.correlationId, s, ctx, out);
  ++ctx.copies;
  learnDevice(m.contextId, m.deviceId, ctx, out);
}

}  // namespace

std::string memcpyKindName(uint8_t copyKind) {
  switch (copyKind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "memcpy HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "memcpy DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOA:
      return "memcpy HtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOH:
      return "memcpy AtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOA:
      return "memcpy AtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_ATOD:
      return "memcpy AtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOA:
      return "memcpy DtoA";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "memcpy DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH:
      return "memcpy HtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "memcpy PtoP";
    default:
      return "memcpy";
  }
}

std::string syncTypeName(uint32_t type) {
  switch (type) {
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE:
      return "cudaEventSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT:
      return "cudaStreamWaitEvent";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE:
      return "cudaStreamSynchronize";
    case CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE:
      return "cudaDeviceSynchronize";
    default:
      return "cuda sync";
  }
}

std::string streamTrackName(uint32_t device, uint32_t stream) {
  return "cuda:" + std::to_string(device) + " stream " + std::to_string(stream);
}

std::string deviceSyncTrackName(uint32_t device) {
  return "cuda:" + std::to_string(device) + " sync";
}

std::string contextTrackName(uint32_t context, uint32_t stream) {
  std::string name = "cuda context " + std::to_string(context);
  if (stream != kNoStream) name += " stream " + std::to_string(stream);
  return name;
}

const std::vector<uint32_t>& launchRuntimeApis() {
  static const std::vector<uint32_t> apis{
      // kernels
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
      CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
      // copies
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DToArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DFromArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy2DArrayToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeer_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DPeerAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy3DBatchAsync_ptsz_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v12080,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyBatchAsync_ptsz_v13000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeer_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyPeerAsync_v4000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromArrayAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyArrayToArray_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbol_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyToSymbolAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbol_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyFromSymbolAsync_ptsz_v7000,
      // sets
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset2DAsync_ptsz_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3D_ptds_v7000,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_v3020,
      CUPTI_RUNTIME_TRACE_CBID_cudaMemset3DAsync_ptsz_v7000,
  };
  return apis;
}

const std::vector<uint32_t>& launchDriverApis() {
  static const std::vector<uint32_t> apis{
      // kernels
      CUPTI_DRIVER_TRACE_CBID_cuLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
      CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
      // copies
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeer_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyPeerAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoHAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoD_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoDAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2D_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy2DUnaligned_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3D_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeer_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DPeerAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpyBatchAsync_v2_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemcpy3DBatchAsync_v2_ptsz,
      // sets
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD16Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D8Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D16Async_ptsz,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32_v2_ptds,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async,
      CUPTI_DRIVER_TRACE_CBID_cuMemsetD2D32Async_ptsz,
  };
  return apis;
}

bool isNcclKernel(const char* name) noexcept {
  if (name == nullptr) return false;
  return std::strncmp(name, "ncclKernel", 10) == 0 || std::strncmp(name, "ncclDevKernel", 13) == 0;
}

void translate(const CUpti_Activity& record, TranslateContext& ctx,
               std::vector<core::Record>& out) {
  switch (record.kind) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
      const auto& k = reinterpret_cast<const CUpti_ActivityKernel10&>(record);
      const KernelNames& names = kernelNames(k.name, ctx);
      auto s = spanOn(ctx, core::Category::kKernel, names.name, k.start, k.end,
                      trackOf(ctx, 0, k.deviceId, k.streamId));
      s.detail = ctx.intern("grid=(" + std::to_string(k.gridX) + "," + std::to_string(k.gridY) +
                            "," + std::to_string(k.gridZ) + ") block=(" + std::to_string(k.blockX) +
                            "," + std::to_string(k.blockY) + "," + std::to_string(k.blockZ) + ")");
      ArgList a;
      a.add(key(ctx, "correlation"), k.correlationId);
      a.add(key(ctx, "device"), k.deviceId);
      a.add(key(ctx, "stream"), k.streamId);
      a.add(key(ctx, "registers"), k.registersPerThread);
      a.add(key(ctx, "shared_bytes"),
            int64_t{k.staticSharedMemory} + int64_t{k.dynamicSharedMemory});
      if (names.nccl) a.add(key(ctx, "nccl"), 1);
      a.add(key(ctx, vocab::arg::kMangledName), names.mangled_id);
      a.add(key(ctx, vocab::arg::kShortName), names.short_id);
      emit(s, a, out);
      flowFromOp(k.correlationId, s, ctx, out);
      ++ctx.kernels;
      if (names.nccl) ++ctx.nccl_kernels;
      learnDevice(k.contextId, k.deviceId, ctx, out);
      return;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto& m = reinterpret_cast<const CUpti_ActivityMemcpy6&>(record);
      return translateCopy(m, memcpyKindName(m.copyKind), ctx, out);
    }
    case CUPTI_ACTIVITY_KIND_MEMSET:
      return translateCopy(reinterpret_cast<const CUpti_ActivityMemset4&>(record), "memset", ctx,
                           out);
    case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
      const auto& y = reinterpret_cast<const CUpti_ActivitySynchronization2&>(record);
      ++ctx.syncs;
      // Its context's device may be learnt later (a kernel or CONTEXT record in a later buffer).
      if (placeSync(y, ctx, ctx.finished, out)) return;
      ctx.pending_syncs.push_back(y);
      if (ctx.pending_syncs.size() > TranslateContext::kMaxPendingSyncs) {
        placeSync(ctx.pending_syncs.front(), ctx, true, out);
        ctx.pending_syncs.pop_front();
      }
      return;
    }
    case CUPTI_ACTIVITY_KIND_CONTEXT: {
      // Context, Context2 and Context3 all begin kind, contextId, deviceId.
      const auto& c = reinterpret_cast<const CUpti_ActivityContext3&>(record);
      ++ctx.contexts;
      learnDevice(c.contextId, c.deviceId, ctx, out);
      return;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      noteExternal(reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(record), ctx, out);
      return;
    case CUPTI_ACTIVITY_KIND_RUNTIME:
    case CUPTI_ACTIVITY_KIND_DRIVER:
      // Enabled only because CUPTI emits external correlation records with API records.
      ++ctx.api_records;
      return;
    default:
      ++ctx.unknown;
      return;
  }
}

void finish(TranslateContext& ctx, std::vector<core::Record>& out) {
  for (const auto& y : ctx.pending_syncs) placeSync(y, ctx, true, out);
  ctx.pending_syncs.clear();
  ctx.finished = true;
  ctx.without_op += ctx.pending.size();
  ctx.pending.clear();
  ctx.external.clear();
}

uint64_t opExternalId(core::TrackId track, int64_t start_ns, int64_t base_ns) noexcept {
  constexpr int64_t kSpan = int64_t{1} << 48;
  if (track >= (core::TrackId{1} << 16) || start_ns <= base_ns || start_ns - base_ns >= kSpan) {
    return 0;
  }
  return (uint64_t{track} << 48) | static_cast<uint64_t>(start_ns - base_ns);
}

bool launchingOp(uint64_t externalId, int64_t base_ns, LaunchingOp* op) noexcept {
  if (externalId == 0) return false;
  op->track = static_cast<core::TrackId>(externalId >> 48);
  op->start_ns = base_ns + static_cast<int64_t>(externalId & ((uint64_t{1} << 48) - 1));
  return true;
}

int64_t clockOffset(const std::vector<ClockSample>& samples) noexcept {
  const ClockSample* best = nullptr;
  for (const auto& s : samples) {
    if (s.host_after < s.host_before) continue;
    if (best == nullptr || s.host_after - s.host_before < best->host_after - best->host_before) {
      best = &s;
    }
  }
  if (best == nullptr) return 0;
  const int64_t mid = best->host_before + (best->host_after - best->host_before) / 2;
  return mid - static_cast<int64_t>(best->cupti);
}

std::vector<core::SessionStat> cuptiStats(const TranslateContext& ctx, uint64_t dropped,
                                          uint64_t buffers, uint64_t records) {
  auto info = [](const char* name, uint64_t v) {
    return core::SessionStat{name, static_cast<int64_t>(v), core::StatSeverity::kInfo};
  };
  std::vector<core::SessionStat> out{
      core::SessionStat{"cupti_dropped_records", static_cast<int64_t>(dropped),
                        dropped > 0 ? core::StatSeverity::kError : core::StatSeverity::kInfo},
      info("cupti_buffers", buffers),
      info("cupti_records", records),
      info("cupti_kernels", ctx.kernels),
      info("cupti_nccl_kernels", ctx.nccl_kernels),
      info("cupti_copies", ctx.copies),
      info("cupti_syncs", ctx.syncs),
      info("cupti_syncs_without_device", ctx.syncs_without_device),
      info("cupti_contexts", ctx.contexts),
      info("cupti_api_records", ctx.api_records),
      info("cupti_kernel_op_flows", ctx.flows),
      info("cupti_records_without_op", ctx.without_op),
      info("cupti_unknown_records", ctx.unknown),
  };
  return out;
}

CuptiPartsOff parseCuptiPartsOff(const char* text, std::string* unknown) {
  CuptiPartsOff off;
  if (text == nullptr) return off;
  const std::string all(text);
  size_t start = 0;
  while (start <= all.size()) {
    size_t comma = all.find(',', start);
    if (comma == std::string::npos) comma = all.size();
    const std::string word = all.substr(start, comma - start);
    if (word == "sync") {
      off.sync = true;
    } else if (word == "clock") {
      off.clock = true;
    } else if (word == "correlation") {
      off.correlation = true;
    } else if (!word.empty() && unknown != nullptr) {
      *unknown += (unknown->empty() ? "" : ",") + word;
    }
    start = comma + 1;
  }
  return off;
}

}  // namespace tracerun::interpose::cuda
