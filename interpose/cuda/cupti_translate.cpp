// CUPTI activity records -> core records (see cupti_translate.h). Only CUDA 13's record versions
// (Kernel10, Memcpy6, Memset4, Synchronization2, ExternalCorrelation); no CUPTI calls.
#include "cupti_translate.h"

#include <cstring>
#include <type_traits>

namespace tracerun::interpose::cuda {
namespace {

struct ArgList {
  core::ArgsRecord::Arg args[6];
  int n = 0;
  void add(core::StringId key, int64_t value) {
    if (n < 6) args[n++] = core::ArgsRecord::Arg{key, 0, value};
  }
};

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

core::SpanRecord spanOn(TranslateContext& ctx, core::Category c, const std::string& name,
                        uint64_t start, uint64_t end, uint32_t device, uint32_t stream) {
  core::SpanRecord s;
  s.category = c;
  s.name = ctx.intern(name);
  s.start_ns = static_cast<int64_t>(start) + ctx.clock_offset_ns;
  s.end_ns = static_cast<int64_t>(end < start ? start : end) + ctx.clock_offset_ns;
  s.id = ctx.next_id();
  s.track = ctx.stream_track(device, stream);
  return s;
}

// A copy (Memcpy6) or a memset (Memset4): the same fields under the same names, so one
// translation: a span of category memcpy on the stream's track, args bytes (a memset's value
// after it), correlation, device, stream, and the flow from the launching op.
template <typename Copy>
void translateCopy(const Copy& m, const std::string& name, TranslateContext& ctx,
                   std::vector<core::Record>& out) {
  static_assert(std::is_same_v<Copy, CUpti_ActivityMemcpy6> ||
                std::is_same_v<Copy, CUpti_ActivityMemset4>);
  auto s = spanOn(ctx, core::Category::kMemcpy, name, m.start, m.end, m.deviceId, m.streamId);
  ArgList a;
  a.add(ctx.intern("bytes"), static_cast<int64_t>(m.bytes));
  if constexpr (std::is_same_v<Copy, CUpti_ActivityMemset4>) a.add(ctx.intern("value"), m.value);
  a.add(ctx.intern("correlation"), m.correlationId);
  a.add(ctx.intern("device"), m.deviceId);
  a.add(ctx.intern("stream"), m.streamId);
  emit(s, a, out);
  flowFromOp(m.correlationId, s, ctx, out);
  ++ctx.copies;
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
      const bool nccl = isNcclKernel(k.name);
      auto s = spanOn(ctx, core::Category::kKernel, k.name ? k.name : "kernel", k.start, k.end,
                      k.deviceId, k.streamId);
      s.detail = ctx.intern("grid=(" + std::to_string(k.gridX) + "," + std::to_string(k.gridY) +
                            "," + std::to_string(k.gridZ) + ") block=(" + std::to_string(k.blockX) +
                            "," + std::to_string(k.blockY) + "," + std::to_string(k.blockZ) + ")");
      ArgList a;
      a.add(ctx.intern("correlation"), k.correlationId);
      a.add(ctx.intern("device"), k.deviceId);
      a.add(ctx.intern("stream"), k.streamId);
      a.add(ctx.intern("registers"), k.registersPerThread);
      a.add(ctx.intern("shared_bytes"),
            int64_t{k.staticSharedMemory} + int64_t{k.dynamicSharedMemory});
      if (nccl) a.add(ctx.intern("nccl"), 1);
      emit(s, a, out);
      flowFromOp(k.correlationId, s, ctx, out);
      ++ctx.kernels;
      if (nccl) ++ctx.nccl_kernels;
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
      // Device-wide syncs have no stream: they go to the context's track (stream kNoStream).
      auto s = spanOn(ctx, core::Category::kOther, syncTypeName(y.type), y.start, y.end,
                      y.contextId, y.streamId);
      ArgList a;
      a.add(ctx.intern("correlation"), y.correlationId);
      a.add(ctx.intern("context"), y.contextId);
      if (y.streamId != kNoStream) a.add(ctx.intern("stream"), y.streamId);
      emit(s, a, out);
      ++ctx.syncs;
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

void finish(TranslateContext& ctx) {
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
      info("cupti_api_records", ctx.api_records),
      info("cupti_kernel_op_flows", ctx.flows),
      info("cupti_records_without_op", ctx.without_op),
      info("cupti_unknown_records", ctx.unknown),
  };
  return out;
}

}  // namespace tracerun::interpose::cuda
