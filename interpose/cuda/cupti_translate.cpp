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

// A runtime or driver API record: kept only for a launch-type API (launchApiName), as a span of
// category other named after the API on its thread's API track (apiTrackName), args correlation
// and cbid; the analyses join it to the device records by correlation id (HTA's launch delay).
// Records of other APIs (the whole RUNTIME/DRIVER kinds when per-API enabling is refused) and
// records without timestamps (start = end = 0) are counted and dropped.
void translateLaunch(const CUpti_ActivityAPI& a, TranslateContext& ctx,
                     std::vector<core::Record>& out) {
  const bool driver = a.kind == CUPTI_ACTIVITY_KIND_DRIVER;
  const uint64_t api = (uint64_t{driver} << 32) | a.cbid;
  auto known = ctx.launch_names.find(api);
  if (known == ctx.launch_names.end()) {
    const std::string name = launchApiName(driver, a.cbid);
    known = ctx.launch_names.emplace(api, name.empty() ? 0 : ctx.intern(name)).first;
  }
  const core::StringId name = known->second;  // 0: not a launch-type API
  if (name == 0 || (a.start == 0 && a.end == 0)) {
    ++ctx.api_records_dropped;
    return;
  }
  auto it = ctx.api_tracks.find(a.threadId);
  if (it == ctx.api_tracks.end()) {
    it = ctx.api_tracks.emplace(a.threadId, ctx.track(apiTrackName(a.threadId), a.threadId)).first;
  }
  auto s = spanOn(ctx, core::Category::kOther, name, a.start, a.end, it->second);
  ArgList args;
  args.add(key(ctx, "correlation"), a.correlationId);
  args.add(key(ctx, "cbid"), a.cbid);
  emit(s, args, out);
  ++ctx.launches;
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

std::string apiTrackName(uint32_t thread) {
  return "cuda api thread " + std::to_string(thread);
}

std::string contextTrackName(uint32_t context, uint32_t stream) {
  std::string name = "cuda context " + std::to_string(context);
  if (stream != kNoStream) name += " stream " + std::to_string(stream);
  return name;
}

namespace {

// The launch-type APIs with the names people know them by: CUPTI's callback id names less the
// runtime's version suffix (cudaLaunchKernel_v7000 -> cudaLaunchKernel, as Kineto and HTA name
// them; _ptsz/_ptds stay); the driver's names are the entry points (cuMemcpyHtoD_v2 stays).
struct LaunchApi {
  uint32_t cbid;
  const char* id_name;
};
#define RT(x)                        \
  LaunchApi {                        \
    CUPTI_RUNTIME_TRACE_CBID_##x, #x \
  }
#define DR(x)                       \
  LaunchApi {                       \
    CUPTI_DRIVER_TRACE_CBID_##x, #x \
  }

// Constant-initialized (no constructor, no destructor): translate runs from CUPTI's thread during
// exit, after the static destructors of this library (stopCapture's final flush runs from one);
// a function-local std::map here was destroyed by then, and every launch record of the final
// flush read a freed tree (real GPUs: "basic_string: construction from null", or SIGSEGV).
constexpr LaunchApi kRuntimeLaunches[] = {
    // kernels
    RT(cudaLaunch_v3020),
    RT(cudaLaunch_ptsz_v7000),
    RT(cudaLaunchKernel_v7000),
    RT(cudaLaunchKernel_ptsz_v7000),
    RT(cudaLaunchKernelExC_v11060),
    RT(cudaLaunchKernelExC_ptsz_v11060),
    RT(cudaLaunchCooperativeKernel_v9000),
    RT(cudaLaunchCooperativeKernel_ptsz_v9000),
    RT(cudaLaunchCooperativeKernelMultiDevice_v9000),
    RT(cudaGraphLaunch_v10000),
    RT(cudaGraphLaunch_ptsz_v10000),
    // copies
    RT(cudaMemcpy_v3020),
    RT(cudaMemcpy_ptds_v7000),
    RT(cudaMemcpyAsync_v3020),
    RT(cudaMemcpyAsync_ptsz_v7000),
    RT(cudaMemcpy2D_v3020),
    RT(cudaMemcpy2D_ptds_v7000),
    RT(cudaMemcpy2DAsync_v3020),
    RT(cudaMemcpy2DAsync_ptsz_v7000),
    RT(cudaMemcpy2DToArray_v3020),
    RT(cudaMemcpy2DToArray_ptds_v7000),
    RT(cudaMemcpy2DToArrayAsync_v3020),
    RT(cudaMemcpy2DToArrayAsync_ptsz_v7000),
    RT(cudaMemcpy2DFromArray_v3020),
    RT(cudaMemcpy2DFromArray_ptds_v7000),
    RT(cudaMemcpy2DFromArrayAsync_v3020),
    RT(cudaMemcpy2DFromArrayAsync_ptsz_v7000),
    RT(cudaMemcpy2DArrayToArray_v3020),
    RT(cudaMemcpy2DArrayToArray_ptds_v7000),
    RT(cudaMemcpy3D_v3020),
    RT(cudaMemcpy3D_ptds_v7000),
    RT(cudaMemcpy3DAsync_v3020),
    RT(cudaMemcpy3DAsync_ptsz_v7000),
    RT(cudaMemcpy3DPeer_v4000),
    RT(cudaMemcpy3DPeer_ptds_v7000),
    RT(cudaMemcpy3DPeerAsync_v4000),
    RT(cudaMemcpy3DPeerAsync_ptsz_v7000),
    RT(cudaMemcpy3DBatchAsync_v12080),
    RT(cudaMemcpy3DBatchAsync_ptsz_v12080),
    RT(cudaMemcpy3DBatchAsync_v13000),
    RT(cudaMemcpy3DBatchAsync_ptsz_v13000),
    RT(cudaMemcpyBatchAsync_v12080),
    RT(cudaMemcpyBatchAsync_ptsz_v12080),
    RT(cudaMemcpyBatchAsync_v13000),
    RT(cudaMemcpyBatchAsync_ptsz_v13000),
    RT(cudaMemcpyPeer_v4000),
    RT(cudaMemcpyPeerAsync_v4000),
    RT(cudaMemcpyToArray_v3020),
    RT(cudaMemcpyToArray_ptds_v7000),
    RT(cudaMemcpyToArrayAsync_v3020),
    RT(cudaMemcpyToArrayAsync_ptsz_v7000),
    RT(cudaMemcpyFromArray_v3020),
    RT(cudaMemcpyFromArray_ptds_v7000),
    RT(cudaMemcpyFromArrayAsync_v3020),
    RT(cudaMemcpyFromArrayAsync_ptsz_v7000),
    RT(cudaMemcpyArrayToArray_v3020),
    RT(cudaMemcpyArrayToArray_ptds_v7000),
    RT(cudaMemcpyToSymbol_v3020),
    RT(cudaMemcpyToSymbol_ptds_v7000),
    RT(cudaMemcpyToSymbolAsync_v3020),
    RT(cudaMemcpyToSymbolAsync_ptsz_v7000),
    RT(cudaMemcpyFromSymbol_v3020),
    RT(cudaMemcpyFromSymbol_ptds_v7000),
    RT(cudaMemcpyFromSymbolAsync_v3020),
    RT(cudaMemcpyFromSymbolAsync_ptsz_v7000),
    // sets
    RT(cudaMemset_v3020),
    RT(cudaMemset_ptds_v7000),
    RT(cudaMemsetAsync_v3020),
    RT(cudaMemsetAsync_ptsz_v7000),
    RT(cudaMemset2D_v3020),
    RT(cudaMemset2D_ptds_v7000),
    RT(cudaMemset2DAsync_v3020),
    RT(cudaMemset2DAsync_ptsz_v7000),
    RT(cudaMemset3D_v3020),
    RT(cudaMemset3D_ptds_v7000),
    RT(cudaMemset3DAsync_v3020),
    RT(cudaMemset3DAsync_ptsz_v7000),
};

constexpr LaunchApi kDriverLaunches[] = {
    // kernels
    DR(cuLaunch),
    DR(cuLaunchGrid),
    DR(cuLaunchGridAsync),
    DR(cuLaunchKernel),
    DR(cuLaunchKernel_ptsz),
    DR(cuLaunchKernelEx),
    DR(cuLaunchKernelEx_ptsz),
    DR(cuLaunchCooperativeKernel),
    DR(cuLaunchCooperativeKernel_ptsz),
    DR(cuLaunchCooperativeKernelMultiDevice),
    DR(cuGraphLaunch),
    DR(cuGraphLaunch_ptsz),
    // copies
    DR(cuMemcpy),
    DR(cuMemcpy_ptds),
    DR(cuMemcpyAsync),
    DR(cuMemcpyAsync_ptsz),
    DR(cuMemcpyPeer),
    DR(cuMemcpyPeer_ptds),
    DR(cuMemcpyPeerAsync),
    DR(cuMemcpyPeerAsync_ptsz),
    DR(cuMemcpyHtoD_v2),
    DR(cuMemcpyHtoD_v2_ptds),
    DR(cuMemcpyHtoDAsync_v2),
    DR(cuMemcpyHtoDAsync_v2_ptsz),
    DR(cuMemcpyDtoH_v2),
    DR(cuMemcpyDtoH_v2_ptds),
    DR(cuMemcpyDtoHAsync_v2),
    DR(cuMemcpyDtoHAsync_v2_ptsz),
    DR(cuMemcpyDtoD_v2),
    DR(cuMemcpyDtoD_v2_ptds),
    DR(cuMemcpyDtoDAsync_v2),
    DR(cuMemcpyDtoDAsync_v2_ptsz),
    DR(cuMemcpy2D_v2),
    DR(cuMemcpy2D_v2_ptds),
    DR(cuMemcpy2DAsync_v2),
    DR(cuMemcpy2DAsync_v2_ptsz),
    DR(cuMemcpy2DUnaligned_v2),
    DR(cuMemcpy2DUnaligned_v2_ptds),
    DR(cuMemcpy3D_v2),
    DR(cuMemcpy3D_v2_ptds),
    DR(cuMemcpy3DAsync_v2),
    DR(cuMemcpy3DAsync_v2_ptsz),
    DR(cuMemcpy3DPeer),
    DR(cuMemcpy3DPeer_ptds),
    DR(cuMemcpy3DPeerAsync),
    DR(cuMemcpy3DPeerAsync_ptsz),
    DR(cuMemcpyBatchAsync),
    DR(cuMemcpyBatchAsync_ptsz),
    DR(cuMemcpyBatchAsync_v2),
    DR(cuMemcpyBatchAsync_v2_ptsz),
    DR(cuMemcpy3DBatchAsync),
    DR(cuMemcpy3DBatchAsync_ptsz),
    DR(cuMemcpy3DBatchAsync_v2),
    DR(cuMemcpy3DBatchAsync_v2_ptsz),
    // sets
    DR(cuMemsetD8_v2),
    DR(cuMemsetD8_v2_ptds),
    DR(cuMemsetD8Async),
    DR(cuMemsetD8Async_ptsz),
    DR(cuMemsetD16_v2),
    DR(cuMemsetD16_v2_ptds),
    DR(cuMemsetD16Async),
    DR(cuMemsetD16Async_ptsz),
    DR(cuMemsetD32_v2),
    DR(cuMemsetD32_v2_ptds),
    DR(cuMemsetD32Async),
    DR(cuMemsetD32Async_ptsz),
    DR(cuMemsetD2D8_v2),
    DR(cuMemsetD2D8_v2_ptds),
    DR(cuMemsetD2D8Async),
    DR(cuMemsetD2D8Async_ptsz),
    DR(cuMemsetD2D16_v2),
    DR(cuMemsetD2D16_v2_ptds),
    DR(cuMemsetD2D16Async),
    DR(cuMemsetD2D16Async_ptsz),
    DR(cuMemsetD2D32_v2),
    DR(cuMemsetD2D32_v2_ptds),
    DR(cuMemsetD2D32Async),
    DR(cuMemsetD2D32Async_ptsz),
};
#undef RT
#undef DR

template <size_t N>
std::vector<uint32_t> cbids(const LaunchApi (&apis)[N]) {
  std::vector<uint32_t> out;
  for (const LaunchApi& a : apis) out.push_back(a.cbid);
  return out;
}

template <size_t N>
const char* idNameOf(const LaunchApi (&apis)[N], uint32_t cbid) {
  for (const LaunchApi& a : apis) {
    if (a.cbid == cbid) return a.id_name;
  }
  return nullptr;
}

// The runtime's name less its version suffix: cudaLaunchKernel_v7000 -> cudaLaunchKernel.
std::string runtimeName(std::string name) {
  const size_t v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() &&
      name.find_first_not_of("0123456789", v + 2) == std::string::npos) {
    name.resize(v);
  }
  return name;
}

}  // namespace

std::vector<uint32_t> launchRuntimeApis() {
  return cbids(kRuntimeLaunches);
}

std::vector<uint32_t> launchDriverApis() {
  return cbids(kDriverLaunches);
}

std::string launchApiName(bool driver, uint32_t cbid) {
  const char* id_name = driver ? idNameOf(kDriverLaunches, cbid) : idNameOf(kRuntimeLaunches, cbid);
  if (id_name == nullptr) return {};
  return driver ? std::string(id_name) : runtimeName(id_name);
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
      ++ctx.api_records;
      return translateLaunch(reinterpret_cast<const CUpti_ActivityAPI&>(record), ctx, out);
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
      info("cupti_launch_records", ctx.launches),
      info("cupti_api_records_dropped", ctx.api_records_dropped),
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
