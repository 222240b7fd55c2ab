// CUPTI record -> core record translation on synthetic CUDA 13 activity records: every produced
// field is checked against the fields the test put into the records; kernel names (real ones from
// the H100 traces) against c++filt's text; tracks against the devices and streams the records
// name, in both orders of a sync and the record that reveals its context's device; the launch-API
// list against CUPTI's callback ids. No GPU or CUPTI calls.
#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "../support/kernel_names.h"
#include "cupti_translate.h"
#include "tracerun/core/vocabulary.h"

using namespace tracerun;
using namespace tracerun::interpose::cuda;

namespace {

struct Fixture {
  TranslateContext ctx;
  std::vector<std::string> strings{""};
  std::map<std::string, std::pair<core::TrackId, int64_t>> tracks;  // name -> (id, tid)
  int trackCalls = 0;
  core::EventId ids = 0;
  Fixture() {
    ctx.clock_offset_ns = 100;
    ctx.op_base_ns = 400;
    ctx.intern = [this](const std::string& s) {
      for (size_t i = 0; i < strings.size(); ++i) {
        if (strings[i] == s) return static_cast<core::StringId>(i);
      }
      strings.push_back(s);
      return static_cast<core::StringId>(strings.size() - 1);
    };
    ctx.track = [this](const std::string& name, int64_t tid) {
      ++trackCalls;
      auto [it, added] = tracks.emplace(name, std::make_pair(core::TrackId{0}, tid));
      if (added) it->second.first = static_cast<core::TrackId>(10 + tracks.size());
      return it->second.first;
    };
    ctx.next_id = [this] { return ++ids; };
  }
  core::TrackId track(const std::string& name) const { return tracks.at(name).first; }
  std::string nameOfTrack(core::TrackId id) const {
    for (const auto& [name, t] : tracks) {
      if (t.first == id) return name;
    }
    return "?";
  }
  std::map<std::string, int64_t> argsOf(const std::vector<core::Record>& out, core::EventId id) {
    std::map<std::string, int64_t> m;
    for (const auto& r : out) {
      if (r.kind() != core::RecordKind::kArgs) continue;
      auto a = r.as<core::ArgsRecord>();
      if (a.owner != id) continue;
      for (int i = 0; i < a.count; ++i) m[strings[a.args[i].key]] = a.args[i].value;
    }
    return m;
  }
};

template <typename T>
const CUpti_Activity& asActivity(const T& r) {
  return reinterpret_cast<const CUpti_Activity&>(r);
}

CUpti_ActivityExternalCorrelation externalRecord(
    uint32_t correlationId, uint64_t externalId,
    CUpti_ExternalCorrelationKind kind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
  CUpti_ActivityExternalCorrelation e{};
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = kind;
  e.externalId = externalId;
  e.correlationId = correlationId;
  return e;
}

CUpti_ActivityKernel10 kernelRecord(uint32_t correlationId, uint64_t start, uint32_t stream) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "volta_sgemm_128x64_nn";
  k.start = start;
  k.end = start + 500;
  k.streamId = stream;
  k.correlationId = correlationId;
  return k;
}

std::vector<core::FlowRecord> flowsIn(const std::vector<core::Record>& out) {
  std::vector<core::FlowRecord> flows;
  for (const auto& r : out) {
    if (r.kind() == core::RecordKind::kFlow) flows.push_back(r.as<core::FlowRecord>());
  }
  return flows;
}

}  // namespace

TEST_CASE(
    "kernel records: span on the stream track, shifted clock, args, flow to the launching op") {
  Fixture f;
  // The op span (track 5, host time 900) as the op capture encodes it.
  CUpti_ActivityExternalCorrelation ext =
      externalRecord(42, opExternalId(5, 900, f.ctx.op_base_ns));
  std::vector<core::Record> out;
  translate(asActivity(ext), f.ctx, out);
  CHECK(out.empty());

  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  k.start = 1000;
  k.end = 3000;
  k.deviceId = 0;
  k.streamId = 7;
  k.correlationId = 42;
  k.gridX = 4, k.gridY = 2, k.gridZ = 1, k.blockX = 256, k.blockY = 1, k.blockZ = 1;
  k.registersPerThread = 32;
  k.staticSharedMemory = 1024;
  k.dynamicSharedMemory = 512;
  translate(asActivity(k), f.ctx, out);
  REQUIRE(out.size() == 5);  // span, 3 args records (8 args), flow
  REQUIRE(out[0].kind() == core::RecordKind::kSpan);
  const auto s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == k.name);  // not mangled C++: the name as it is
  CHECK(f.strings[s.detail] == "grid=(4,2,1) block=(256,1,1)");
  CHECK(s.category == core::Category::kKernel);
  CHECK(s.start_ns == 1100);
  CHECK(s.end_ns == 3100);
  CHECK(s.track == f.track("cuda:0 stream 7"));
  CHECK(f.tracks.at("cuda:0 stream 7").second == 7);  // tid: the stream
  auto args = f.argsOf(out, s.id);
  CHECK(f.strings.at(args.at(vocab::arg::kMangledName)) == k.name);
  CHECK(f.strings.at(args.at(vocab::arg::kShortName)) == k.name);
  args.erase(vocab::arg::kMangledName);
  args.erase(vocab::arg::kShortName);
  CHECK(args == std::map<std::string, int64_t>{{"correlation", 42},
                                               {"device", 0},
                                               {"stream", 7},
                                               {"registers", 32},
                                               {"shared_bytes", 1536},
                                               {"nccl", 1}});
  REQUIRE(out[4].kind() == core::RecordKind::kFlow);
  const auto flow = out[4].as<core::FlowRecord>();
  CHECK(flow.flow == core::FlowKind::kOpKernel);
  CHECK(flow.src_track == 5);
  CHECK(flow.src_ts_ns == 900);  // the op's host time, not shifted by the CUPTI clock offset
  CHECK(flow.dst_track == s.track);
  CHECK(flow.dst_ts_ns == 1100);  // the kernel's CUPTI start + offset: the span's own start
  CHECK(f.ctx.flows == 1);
  CHECK(f.ctx.kernels == 1);
  CHECK(f.ctx.nccl_kernels == 1);
  CHECK(f.ctx.without_op == 0);
}

TEST_CASE("memcpy, memset and synchronization records") {
  Fixture f;
  std::vector<core::Record> out;
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  m.bytes = 4096;
  m.start = 10;
  m.end = 20;
  m.deviceId = 1;
  m.contextId = 4;
  m.streamId = 3;
  m.correlationId = 7;  // no external correlation known (yet): no flow, waits
  translate(asActivity(m), f.ctx, out);
  REQUIRE(out.size() == 3);
  auto s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == "memcpy HtoD");
  CHECK(s.category == core::Category::kMemcpy);
  CHECK(s.start_ns == 110);
  CHECK(s.end_ns == 120);
  CHECK(s.track == f.track("cuda:1 stream 3"));
  CHECK(f.argsOf(out, s.id) ==
        std::map<std::string, int64_t>{
            {"bytes", 4096}, {"correlation", 7}, {"device", 1}, {"stream", 3}});
  CHECK(f.ctx.pending.count(7) == 1);
  CHECK(f.ctx.without_op == 0);

  out.clear();
  CUpti_ActivityMemset4 z{};
  z.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  z.bytes = 128;
  z.value = 0xab;
  z.start = 30;
  z.end = 31;
  z.deviceId = 1;
  z.streamId = 3;
  z.correlationId = 8;
  translate(asActivity(z), f.ctx, out);
  REQUIRE(out.size() == 3);  // the span, its 5 args in two records
  s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == "memset");
  CHECK(s.category == core::Category::kMemcpy);
  CHECK(s.start_ns == 130);
  CHECK(s.end_ns == 131);
  CHECK(s.track == f.track("cuda:1 stream 3"));  // same stream, same track
  CHECK(f.argsOf(out, s.id) ==
        std::map<std::string, int64_t>{
            {"bytes", 128}, {"value", 0xab}, {"correlation", 8}, {"device", 1}, {"stream", 3}});
  CHECK(f.ctx.pending.count(8) == 1);

  out.clear();
  CUpti_ActivitySynchronization2 y{};
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  y.start = 50;
  y.end = 40;       // end before start (clamped, never a negative span)
  y.contextId = 4;  // the memcpy's context: device 1
  y.streamId = kNoStream;
  translate(asActivity(y), f.ctx, out);
  s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == "cudaDeviceSynchronize");
  CHECK(s.end_ns == s.start_ns);
  CHECK(s.track == f.track("cuda:1 sync"));
  CHECK(f.tracks.at("cuda:1 sync").second == 0);  // no stream: no tid
  CHECK(f.argsOf(out, s.id) ==
        std::map<std::string, int64_t>{{"correlation", 0}, {"context", 4}, {"device", 1}});
  CHECK(f.ctx.copies == 2);
  CHECK(f.ctx.syncs == 1);

  out.clear();
  CUpti_Activity other{};
  other.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  translate(other, f.ctx, out);
  CHECK(out.empty());
  CHECK(f.ctx.unknown == 1);
  finish(f.ctx, out);  // neither the copy's nor the memset's launch named an op
  CHECK(f.ctx.without_op == 2);
}

TEST_CASE("op external ids: track and host start survive the round trip, out-of-range ids are 0") {
  const int64_t base = 1'000'000'000'000;  // ~17 minutes of uptime
  LaunchingOp op;
  for (auto [track, start] : {std::pair<core::TrackId, int64_t>{1, base + 1},
                              {7, base + 123'456'789},
                              {65535, base + (int64_t{1} << 48) - 1}}) {
    const uint64_t id = opExternalId(track, start, base);
    REQUIRE(id != 0);
    REQUIRE(launchingOp(id, base, &op));
    CHECK(op.track == track);
    CHECK(op.start_ns == start);
  }
  CHECK(opExternalId(65536, base + 10, base) == 0);  // track does not fit in 16 bits
  CHECK(opExternalId(3, base, base) == 0);           // not after the base
  CHECK(opExternalId(3, base - 5, base) == 0);
  CHECK(opExternalId(3, base + (int64_t{1} << 48), base) == 0);  // 78 hours after the base
  CHECK_FALSE(launchingOp(0, base, &op));
  CHECK(opExternalId(2, base + 5, base) != opExternalId(3, base + 5, base));
  CHECK(opExternalId(2, base + 5, base) != opExternalId(2, base + 6, base));
}

TEST_CASE("kernel record before its external correlation record: the flow comes with the latter") {
  Fixture f;
  std::vector<core::Record> out;
  const auto k = kernelRecord(77, 5000, 2);
  translate(asActivity(k), f.ctx, out);
  CHECK(flowsIn(out).empty());
  CHECK(f.ctx.pending.size() == 1);
  const auto span = out[0].as<core::SpanRecord>();

  out.clear();
  const auto ext = externalRecord(77, opExternalId(9, 4321, f.ctx.op_base_ns));
  translate(asActivity(ext), f.ctx, out);
  const auto flows = flowsIn(out);
  REQUIRE(flows.size() == 1);
  CHECK(out.size() == 1);
  CHECK(flows[0].flow == core::FlowKind::kOpKernel);
  CHECK(flows[0].src_track == 9);
  CHECK(flows[0].src_ts_ns == 4321);
  CHECK(flows[0].dst_track == span.track);
  CHECK(flows[0].dst_ts_ns == 5100);
  CHECK(span.start_ns == 5100);
  CHECK(f.ctx.pending.empty());
  finish(f.ctx, out);
  CHECK(f.ctx.without_op == 0);
  CHECK(f.ctx.flows == 1);
}

TEST_CASE("a graph launch: several device records under one correlation id, in both orders") {
  Fixture f;
  const int64_t base = f.ctx.op_base_ns;
  std::vector<core::Record> out;
  // Two kernels of the graph complete before the correlation record, one after it.
  translate(asActivity(kernelRecord(50, 1000, 4)), f.ctx, out);
  translate(asActivity(kernelRecord(50, 2000, 4)), f.ctx, out);
  CHECK(f.ctx.pending.size() == 2);
  translate(asActivity(externalRecord(50, opExternalId(6, 700, base))), f.ctx, out);
  translate(asActivity(kernelRecord(50, 3000, 4)), f.ctx, out);
  std::vector<int64_t> kernelStarts;
  for (const auto& fl : flowsIn(out)) {
    CHECK(fl.src_track == 6);
    CHECK(fl.src_ts_ns == 700);
    kernelStarts.push_back(fl.dst_ts_ns);
  }
  std::sort(kernelStarts.begin(), kernelStarts.end());
  CHECK(kernelStarts == std::vector<int64_t>{1100, 2100, 3100});
  finish(f.ctx, out);
  CHECK(f.ctx.without_op == 0);
}

TEST_CASE("nested ops: each device record goes to the op its launch was correlated with") {
  // aten::linear (track 3, t=1000) contains aten::addmm (t=1010) which launches a kernel and a
  // memset; aten::relu (t=2000) launches one kernel. CUPTI reports the innermost id per launch.
  Fixture f;
  const int64_t base = f.ctx.op_base_ns;
  std::vector<core::Record> out;
  for (const auto& e : {externalRecord(1, opExternalId(3, 1010, base)),
                        externalRecord(2, opExternalId(3, 1010, base)),
                        externalRecord(3, opExternalId(3, 2000, base))}) {
    translate(asActivity(e), f.ctx, out);
  }
  // API records of the launches (counted only) and a CUSTOM1 id of some other tool.
  CUpti_ActivityAPI api{};
  api.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  api.correlationId = 1;
  translate(asActivity(api), f.ctx, out);
  translate(asActivity(externalRecord(3, 555, CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1)), f.ctx,
            out);
  CHECK(out.empty());
  CHECK(f.ctx.api_records == 1);

  CUpti_ActivityMemset4 z{};
  z.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  z.bytes = 64;
  z.start = 3000;
  z.end = 3010;
  z.streamId = 1;
  z.correlationId = 2;
  translate(asActivity(kernelRecord(3, 4000, 1)), f.ctx, out);
  translate(asActivity(z), f.ctx, out);
  translate(asActivity(kernelRecord(1, 2500, 1)), f.ctx, out);
  translate(asActivity(kernelRecord(9, 6000, 1)), f.ctx, out);  // launched outside any op
  std::map<int64_t, int64_t> opOfDeviceStart;
  for (const auto& fl : flowsIn(out)) {
    CHECK(fl.src_track == 3);
    opOfDeviceStart[fl.dst_ts_ns] = fl.src_ts_ns;
  }
  CHECK(opOfDeviceStart == std::map<int64_t, int64_t>{{4100, 2000}, {3100, 1010}, {2600, 1010}});
  finish(f.ctx, out);
  CHECK(f.ctx.flows == 3);
  CHECK(f.ctx.without_op == 1);
}

TEST_CASE("an op the capture could not name (id 0) and bounded waiting lists") {
  Fixture f;
  std::vector<core::Record> out;
  translate(asActivity(externalRecord(5, 0)), f.ctx, out);
  translate(asActivity(kernelRecord(5, 100, 1)), f.ctx, out);
  CHECK(flowsIn(out).empty());
  CHECK(f.ctx.without_op == 1);

  // Device records whose launch never reports an op: the oldest are forgotten past the bound.
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.streamId = 1;
  for (uint32_t c = 100; c < 100 + TranslateContext::kMaxPending + 1; ++c) {
    m.correlationId = c;
    out.clear();
    translate(asActivity(m), f.ctx, out);
  }
  CHECK(f.ctx.pending.size() == TranslateContext::kMaxPending);
  CHECK(f.ctx.pending.count(100) == 0);  // the oldest went
  CHECK(f.ctx.without_op == 2);
  // Correlation records of API calls that launch nothing are bounded too.
  for (uint32_t c = 1'000'000; c < 1'000'000 + TranslateContext::kMaxExternal + 3; ++c) {
    translate(asActivity(externalRecord(c, 1)), f.ctx, out);
  }
  CHECK(f.ctx.external.size() == TranslateContext::kMaxExternal);
  CHECK(f.ctx.external.count(1'000'000) == 0);
  finish(f.ctx, out);
  CHECK(f.ctx.without_op == 2 + TranslateContext::kMaxPending);
  CHECK(f.ctx.pending.empty());
  CHECK(f.ctx.external.empty());
}

TEST_CASE("clock alignment: the tightest host bracket around a CUPTI read gives the offset") {
  // CUPTI's default clock is CLOCK_REALTIME: here 1.7e18 ns ahead of the host's monotonic clock.
  const int64_t ahead = 1'700'000'000'000'000'000;
  auto sample = [&](int64_t before, int64_t after, int64_t cuptiAtHost) {
    return ClockSample{before, static_cast<uint64_t>(cuptiAtHost + ahead), after};
  };
  const std::vector<ClockSample> samples{
      sample(1000, 1400, 1390),  // wide bracket (preempted): midpoint 1200 is 190 ns off
      sample(2000, 2040, 2020),  // tight: midpoint exact
      sample(3000, 3090, 3010), sample(5000, 4000, 4500),  // host clock went back: ignored
  };
  CHECK(clockOffset(samples) == -ahead);
  CHECK(clockOffset({}) == 0);
}

TEST_CASE("CUPTI stats: dropped records are lost data, the rest is information") {
  Fixture f;
  f.ctx.kernels = 10;
  f.ctx.nccl_kernels = 2;
  f.ctx.copies = 3;
  f.ctx.flows = 9;
  f.ctx.without_op = 4;
  auto byName = [](const std::vector<core::SessionStat>& v) {
    std::map<std::string, core::SessionStat> m;
    for (const auto& s : v) m[s.name] = s;
    return m;
  };
  auto clean = byName(cuptiStats(f.ctx, 0, 3, 40));
  CHECK(clean.at("cupti_dropped_records").value == 0);
  CHECK(clean.at("cupti_dropped_records").severity == core::StatSeverity::kInfo);
  CHECK(clean.at("cupti_buffers").value == 3);
  CHECK(clean.at("cupti_records").value == 40);
  CHECK(clean.at("cupti_kernels").value == 10);
  CHECK(clean.at("cupti_nccl_kernels").value == 2);
  CHECK(clean.at("cupti_copies").value == 3);
  CHECK(clean.at("cupti_kernel_op_flows").value == 9);
  CHECK(clean.at("cupti_records_without_op").value == 4);
  for (const auto& [name, s] : clean) CHECK(s.severity == core::StatSeverity::kInfo);
  auto lossy = byName(cuptiStats(f.ctx, 17, 3, 40));
  CHECK(lossy.at("cupti_dropped_records").value == 17);
  CHECK(lossy.at("cupti_dropped_records").severity == core::StatSeverity::kError);
}

namespace {

CUpti_ActivitySynchronization2 syncRecord(uint32_t context, uint32_t stream, uint64_t start,
                                          uint32_t type) {
  CUpti_ActivitySynchronization2 y{};
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = static_cast<CUpti_ActivitySynchronizationType>(type);
  y.start = start;
  y.end = start + 10;
  y.contextId = context;
  y.streamId = stream;
  return y;
}

CUpti_ActivityKernel10 kernelOn(uint32_t context, uint32_t device, uint32_t stream,
                                uint64_t start) {
  auto k = kernelRecord(1, start, stream);
  k.contextId = context;
  k.deviceId = device;
  return k;
}

// The spans in out: (name, track name).
std::vector<std::pair<std::string, std::string>> spansIn(const Fixture& f,
                                                         const std::vector<core::Record>& out) {
  std::vector<std::pair<std::string, std::string>> v;
  for (const auto& r : out) {
    if (r.kind() != core::RecordKind::kSpan) continue;
    const auto s = r.as<core::SpanRecord>();
    v.emplace_back(f.strings[s.name], f.nameOfTrack(s.track));
  }
  return v;
}

constexpr uint32_t kStreamSync = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
constexpr uint32_t kDeviceSync = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;

}  // namespace

TEST_CASE("kernel names: demangled as c++filt prints them, mangled and short names as args") {
  Fixture f;
  std::vector<core::Record> out;
  uint32_t correlation = 1;
  // Each kernel twice, the second time from another copy of the text (a different pointer).
  std::vector<std::string> copies;
  for (const auto& c : testing::kKernelNameCases) copies.emplace_back(c.mangled);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < std::size(testing::kKernelNameCases); ++i) {
      const auto& c = testing::kKernelNameCases[i];
      INFO(c.mangled);
      auto k = kernelRecord(correlation, 1000 * correlation, 7);
      ++correlation;
      k.name = round == 0 ? c.mangled : copies[i].c_str();
      out.clear();
      translate(asActivity(k), f.ctx, out);
      REQUIRE(out[0].kind() == core::RecordKind::kSpan);
      const auto s = out[0].as<core::SpanRecord>();
      CHECK(f.strings[s.name] == c.demangled);
      const auto args = f.argsOf(out, s.id);
      CHECK(f.strings.at(args.at(vocab::arg::kMangledName)) == c.mangled);
      CHECK(f.strings.at(args.at(vocab::arg::kShortName)) == c.short_name);
      CHECK(args.count("nccl") == 0);
    }
  }
  // Demangled once per distinct kernel (by text, whatever the pointer).
  CHECK(f.ctx.kernel_by_name.size() == std::size(testing::kKernelNameCases));
  CHECK(f.ctx.kernels == 2 * std::size(testing::kKernelNameCases));
  CHECK(f.trackCalls == 1);  // one stream, one track lookup
}

TEST_CASE("devices: a sync before the kernel that reveals its context's device waits for it") {
  Fixture f;
  std::vector<core::Record> out;
  translate(asActivity(syncRecord(1, 7, 100, kStreamSync)), f.ctx, out);
  translate(asActivity(syncRecord(1, kNoStream, 200, kDeviceSync)), f.ctx, out);
  CHECK(out.empty());
  CHECK(f.ctx.pending_syncs.size() == 2);
  // A kernel of another context does not release them.
  translate(asActivity(kernelOn(2, 3, 9, 300)), f.ctx, out);
  CHECK(f.ctx.pending_syncs.size() == 2);
  out.clear();
  translate(asActivity(kernelOn(1, 0, 7, 400)), f.ctx, out);
  using P = std::pair<std::string, std::string>;
  CHECK(spansIn(f, out) == std::vector<P>{{"volta_sgemm_128x64_nn", "cuda:0 stream 7"},
                                          {"cudaStreamSynchronize", "cuda:0 stream 7"},
                                          {"cudaDeviceSynchronize", "cuda:0 sync"}});
  CHECK(f.ctx.pending_syncs.empty());
  CHECK(f.tracks.at("cuda:0 sync").second == 0);
  for (const auto& [name, t] : f.tracks) {
    CHECK(name.find("cuda:1") == std::string::npos);  // the context id is no device
    CHECK(t.second != kNoStream);
  }
  finish(f.ctx, out);
  CHECK(f.ctx.syncs == 2);
  CHECK(f.ctx.syncs_without_device == 0);
}

TEST_CASE("devices: a sync after the kernel that revealed its context's device goes at once") {
  Fixture f;
  std::vector<core::Record> out;
  translate(asActivity(kernelOn(1, 0, 7, 100)), f.ctx, out);
  out.clear();
  translate(asActivity(syncRecord(1, 13, 200, kStreamSync)), f.ctx, out);
  translate(asActivity(syncRecord(1, kNoStream, 300,
                                  CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE)),
            f.ctx, out);
  using P = std::pair<std::string, std::string>;
  CHECK(spansIn(f, out) == std::vector<P>{{"cudaStreamSynchronize", "cuda:0 stream 13"},
                                          {"cudaEventSynchronize", "cuda:0 sync"}});
  const auto s = out[0].as<core::SpanRecord>();
  CHECK(f.argsOf(out, s.id) ==
        std::map<std::string, int64_t>{
            {"correlation", 0}, {"context", 1}, {"device", 0}, {"stream", 13}});
  CHECK(f.ctx.pending_syncs.empty());
}

TEST_CASE("devices: CONTEXT records (as cuptiActivityEnableAndDump gives them) name the device") {
  Fixture f;
  std::vector<core::Record> out;
  translate(asActivity(syncRecord(5, 7, 100, kStreamSync)), f.ctx, out);
  CHECK(out.empty());
  CUpti_ActivityContext3 c{};
  c.kind = CUPTI_ACTIVITY_KIND_CONTEXT;
  c.contextId = 5;
  c.deviceId = 2;
  translate(asActivity(c), f.ctx, out);
  using P = std::pair<std::string, std::string>;
  CHECK(spansIn(f, out) == std::vector<P>{{"cudaStreamSynchronize", "cuda:2 stream 7"}});
  CHECK(f.ctx.contexts == 1);
  CHECK(f.ctx.context_device.at(5) == 2);
}

TEST_CASE("devices: at finish, unknown contexts go on the only device, else on their own track") {
  SECTION("one device seen") {
    Fixture f;
    std::vector<core::Record> out;
    translate(asActivity(kernelOn(1, 0, 7, 100)), f.ctx, out);
    translate(asActivity(syncRecord(9, 7, 200, kStreamSync)), f.ctx, out);  // never revealed
    out.clear();
    finish(f.ctx, out);
    using P = std::pair<std::string, std::string>;
    CHECK(spansIn(f, out) == std::vector<P>{{"cudaStreamSynchronize", "cuda:0 stream 7"}});
    CHECK(f.ctx.syncs_without_device == 0);
  }
  SECTION("two devices seen, or none") {
    for (bool twoDevices : {true, false}) {
      Fixture f;
      std::vector<core::Record> out;
      if (twoDevices) {
        translate(asActivity(kernelOn(1, 0, 7, 100)), f.ctx, out);
        translate(asActivity(kernelOn(2, 1, 7, 100)), f.ctx, out);
      }
      translate(asActivity(syncRecord(9, 4, 200, kStreamSync)), f.ctx, out);
      translate(asActivity(syncRecord(9, kNoStream, 300, kDeviceSync)), f.ctx, out);
      out.clear();
      finish(f.ctx, out);
      using P = std::pair<std::string, std::string>;
      CHECK(spansIn(f, out) == std::vector<P>{{"cudaStreamSynchronize", "cuda context 9 stream 4"},
                                              {"cudaDeviceSynchronize", "cuda context 9"}});
      CHECK(f.tracks.at("cuda context 9 stream 4").second == 4);
      CHECK(f.tracks.at("cuda context 9").second == 0);
      CHECK(f.argsOf(out, out[0].as<core::SpanRecord>().id).count("device") == 0);
      CHECK(f.ctx.syncs_without_device == 2);
      // After finish (a buffer completed late): placed at once by the same rule.
      out.clear();
      translate(asActivity(syncRecord(9, 4, 400, kStreamSync)), f.ctx, out);
      CHECK(spansIn(f, out) ==
            std::vector<P>{{"cudaStreamSynchronize", "cuda context 9 stream 4"}});
    }
  }
}

TEST_CASE("devices: waiting syncs are bounded, the oldest placed when the bound is passed") {
  Fixture f;
  std::vector<core::Record> out;
  translate(asActivity(kernelOn(1, 0, 7, 100)), f.ctx, out);
  out.clear();
  for (size_t i = 0; i <= TranslateContext::kMaxPendingSyncs; ++i) {
    translate(asActivity(syncRecord(9, 7, 1000 + i, kStreamSync)), f.ctx, out);
  }
  CHECK(f.ctx.pending_syncs.size() == TranslateContext::kMaxPendingSyncs);
  REQUIRE(spansIn(f, out).size() == 1);
  CHECK(out[0].as<core::SpanRecord>().start_ns == 1100);  // the oldest, on the only device
  CHECK(spansIn(f, out)[0].second == "cuda:0 stream 7");
}

TEST_CASE("launch APIs: kernels, graphs, copies and sets, not the calls that launch nothing") {
  const auto& rt = launchRuntimeApis();
  const auto& drv = launchDriverApis();
  const std::set<uint32_t> r(rt.begin(), rt.end()), d(drv.begin(), drv.end());
  CHECK(r.size() == rt.size());  // no duplicates
  CHECK(d.size() == drv.size());
  for (uint32_t cbid :
       {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020}) {
    INFO(cbid);
    CHECK(r.count(cbid) == 1);
  }
  for (uint32_t cbid :
       {CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, CUPTI_RUNTIME_TRACE_CBID_cudaSetDevice_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGetLastError_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventCreate_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventDestroy_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaEventRecord_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020,
        CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000}) {
    INFO(cbid);
    CHECK(r.count(cbid) == 0);
  }
  for (uint32_t cbid :
       {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
        CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
        CUPTI_DRIVER_TRACE_CBID_cuMemcpyAsync, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2,
        CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, CUPTI_DRIVER_TRACE_CBID_cuMemsetD32Async}) {
    INFO(cbid);
    CHECK(d.count(cbid) == 1);
  }
  for (uint32_t cbid :
       {CUPTI_DRIVER_TRACE_CBID_cuCtxGetDevice, CUPTI_DRIVER_TRACE_CBID_cuEventRecord,
        CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize, CUPTI_DRIVER_TRACE_CBID_cuLaunchHostFunc}) {
    INFO(cbid);
    CHECK(d.count(cbid) == 0);
  }
}

TEST_CASE("TRACERUN_CUPTI_OFF: the parts a cost measurement turns off, unknown words reported") {
  std::string unknown;
  CHECK(parseCuptiPartsOff(nullptr, &unknown).bits() == 0);
  CHECK(parseCuptiPartsOff("", &unknown).bits() == 0);
  CHECK(unknown.empty());
  const auto one = parseCuptiPartsOff("sync", &unknown);
  CHECK(one.sync);
  CHECK_FALSE(one.clock);
  CHECK_FALSE(one.correlation);
  CHECK(one.bits() == 1);
  CHECK(parseCuptiPartsOff("clock", &unknown).bits() == 2);
  CHECK(parseCuptiPartsOff("correlation", &unknown).bits() == 4);
  CHECK(parseCuptiPartsOff("correlation,,sync,clock", &unknown).bits() == 7);
  CHECK(unknown.empty());
  const auto some = parseCuptiPartsOff("sync,kernels,Clock", &unknown);
  CHECK(some.bits() == 1);
  CHECK(unknown == "kernels,Clock");
}

namespace {

CUpti_ActivityAPI apiRecord(CUpti_ActivityKind kind, uint32_t cbid, uint32_t correlationId,
                            uint64_t start, uint64_t end, uint32_t thread) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = start;
  a.end = end;
  a.threadId = thread;
  a.correlationId = correlationId;
  return a;
}

}  // namespace

TEST_CASE(
    "launch API records: a span per launch on its thread's API track, joined by correlation") {
  Fixture f;
  std::vector<core::Record> out;
  // Kineto's and HTA's names: the runtime's version suffix dropped, _ptsz and driver names kept.
  CHECK(std::string(launchApiName(false, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000)) ==
        "cudaLaunchKernel");
  CHECK(std::string(launchApiName(false, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000)) ==
        "cudaMemcpyAsync_ptsz");
  CHECK(std::string(launchApiName(false, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020)) ==
        "cudaMemsetAsync");
  CHECK(std::string(launchApiName(true, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx)) ==
        "cuLaunchKernelEx");
  CHECK(std::string(launchApiName(true, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2)) ==
        "cuMemcpyHtoDAsync_v2");
  CHECK(launchApiName(false, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020).empty());

  // The API record, its external correlation record, the kernel: as CUPTI orders them.
  const auto api = apiRecord(CUPTI_ACTIVITY_KIND_RUNTIME,
                             CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 31, 4000, 4700, 555);
  translate(asActivity(externalRecord(31, opExternalId(9, 3900, f.ctx.op_base_ns))), f.ctx, out);
  translate(asActivity(api), f.ctx, out);
  const auto k = kernelRecord(31, 6000, 7);
  translate(asActivity(k), f.ctx, out);
  // A driver launch on another thread (NCCL's), and two records translate must drop: an API that
  // launches nothing (the whole RUNTIME kind enabled) and a launch without timestamps.
  translate(asActivity(apiRecord(CUPTI_ACTIVITY_KIND_DRIVER,
                                 CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 32, 8000, 8100, 556)),
            f.ctx, out);
  translate(
      asActivity(apiRecord(CUPTI_ACTIVITY_KIND_RUNTIME,
                           CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020, 33, 9000, 9001, 555)),
      f.ctx, out);
  translate(asActivity(apiRecord(CUPTI_ACTIVITY_KIND_RUNTIME,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 34, 0, 0, 555)),
            f.ctx, out);

  std::vector<core::SpanRecord> launches, kernels;
  for (const auto& r : out) {
    if (r.kind() != core::RecordKind::kSpan) continue;
    const auto s = r.as<core::SpanRecord>();
    (s.category == core::Category::kOther ? launches : kernels).push_back(s);
  }
  REQUIRE(launches.size() == 2);
  REQUIRE(kernels.size() == 1);
  const auto& l = launches[0];
  CHECK(f.strings[l.name] == "cudaLaunchKernel");
  CHECK(l.start_ns == 4100);  // the clock offset (100) applied as to device records
  CHECK(l.end_ns == 4800);
  CHECK(f.nameOfTrack(l.track) == "cuda api thread 555");
  CHECK(f.tracks.at("cuda api thread 555").second == 555);
  CHECK(f.argsOf(out, l.id) ==
        std::map<std::string, int64_t>{{"correlation", 31},
                                       {"cbid", CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000}});
  CHECK(f.argsOf(out, kernels[0].id).at("correlation") == 31);  // the join key, on both ends
  CHECK(f.nameOfTrack(kernels[0].track) == "cuda:0 stream 7");
  CHECK(f.strings[launches[1].name] == "cuLaunchKernelEx");
  CHECK(f.nameOfTrack(launches[1].track) == "cuda api thread 556");
  CHECK(f.argsOf(out, launches[1].id).at("correlation") == 32);
  // The op -> kernel flow is unchanged by the launch record.
  const auto flows = flowsIn(out);
  REQUIRE(flows.size() == 1);
  CHECK(flows[0].src_track == 9);
  CHECK(flows[0].src_ts_ns == 3900);
  CHECK(f.ctx.api_records == 4);
  CHECK(f.ctx.launches == 2);
  CHECK(f.ctx.api_records_dropped == 2);
  bool launchStat = false, droppedStat = false;
  for (const auto& st : cuptiStats(f.ctx, 0, 1, 6)) {
    if (st.name == "cupti_launch_records") launchStat = st.value == 2;
    if (st.name == "cupti_api_records_dropped") droppedStat = st.value == 2;
  }
  CHECK(launchStat);
  CHECK(droppedStat);
}

namespace {

// The exit-order check below, run by an atexit handler of a forked child: a fresh translation of
// a launch record must still name it. _exit(0) when it does, 3 when the name is wrong.
void translateLaunchAtExit() {
  Fixture f;
  std::vector<core::Record> out;
  translate(asActivity(apiRecord(CUPTI_ACTIVITY_KIND_RUNTIME,
                                 CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 41, 10, 20, 7)),
            f.ctx, out);
  const bool named = !out.empty() && out[0].kind() == core::RecordKind::kSpan &&
                     f.strings[out[0].as<core::SpanRecord>().name] == "cudaLaunchKernel";
  ::_exit(named ? 0 : 3);
}

}  // namespace

// translate runs from CUPTI's thread inside the final flush, which stopCapture runs from
// libtracerun's static destructor at a normal exit, after the destructors of statics made later.
// On an H200 every launch record of that flush failed ("basic_string: construction from null") or
// the process died of SIGSEGV: the launch names were a function-local std::map, made at the first
// launch record of the run and destroyed before the flush. Here a handler registered before the
// first translation runs after everything that translation constructed was destroyed.
TEST_CASE("launch API records: translated after the static destructors of a normal exit") {
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::atexit(translateLaunchAtExit);
    {
      Fixture f;
      std::vector<core::Record> out;
      translate(asActivity(apiRecord(CUPTI_ACTIVITY_KIND_DRIVER,
                                     CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 40, 1, 2, 7)),
                f.ctx, out);
    }
    std::exit(0);  // static destructors, then translateLaunchAtExit
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  INFO("wait status " << status);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
