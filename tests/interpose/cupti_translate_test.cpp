// CUPTI record -> core record translation on synthetic CUDA 13 activity records: every produced
// field is checked against the fields the test put into the records. No GPU or CUPTI calls.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "cupti_translate.h"

using namespace tracerun;
using namespace tracerun::interpose::cuda;

namespace {

struct Fixture {
  TranslateContext ctx;
  std::vector<std::string> strings{""};
  std::map<std::pair<uint32_t, uint32_t>, core::TrackId> tracks;
  core::EventId ids = 0;
  Fixture() {
    ctx.clock_offset_ns = 100;
    ctx.intern = [this](const std::string& s) {
      for (size_t i = 0; i < strings.size(); ++i) {
        if (strings[i] == s) return static_cast<core::StringId>(i);
      }
      strings.push_back(s);
      return static_cast<core::StringId>(strings.size() - 1);
    };
    ctx.stream_track = [this](uint32_t d, uint32_t s) {
      auto [it, added] = tracks.emplace(std::make_pair(d, s), 0);
      if (added) it->second = static_cast<core::TrackId>(10 + tracks.size());
      return it->second;
    };
    ctx.next_id = [this] { return ++ids; };
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

}  // namespace

TEST_CASE("kernel records: span on the stream track, shifted clock, args, flow to the launching op") {
  Fixture f;
  f.ctx.ops[99] = LaunchingOp{5, 900};
  CUpti_ActivityExternalCorrelation ext{};
  ext.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  ext.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0;
  ext.externalId = 99;
  ext.correlationId = 42;
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
  REQUIRE(out.size() == 4);  // span, 2 args records (6 args), flow
  REQUIRE(out[0].kind() == core::RecordKind::kSpan);
  const auto s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == k.name);
  CHECK(f.strings[s.detail] == "grid=(4,2,1) block=(256,1,1)");
  CHECK(s.category == core::Category::kKernel);
  CHECK(s.start_ns == 1100);
  CHECK(s.end_ns == 3100);
  CHECK(s.track == f.tracks.at({0, 7}));
  const auto args = f.argsOf(out, s.id);
  CHECK(args == std::map<std::string, int64_t>{{"correlation", 42}, {"device", 0}, {"stream", 7},
                                               {"registers", 32}, {"shared_bytes", 1536},
                                               {"nccl", 1}});
  REQUIRE(out[3].kind() == core::RecordKind::kFlow);
  const auto flow = out[3].as<core::FlowRecord>();
  CHECK(flow.flow == core::FlowKind::kOpKernel);
  CHECK(flow.src_track == 5);
  CHECK(flow.src_ts_ns == 900);
  CHECK(flow.dst_track == s.track);
  CHECK(flow.dst_ts_ns == 1100);
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
  m.streamId = 3;
  m.correlationId = 7;  // no external correlation known: no flow, counted
  translate(asActivity(m), f.ctx, out);
  REQUIRE(out.size() == 3);
  auto s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == "memcpy HtoD");
  CHECK(s.category == core::Category::kMemcpy);
  CHECK(s.start_ns == 110);
  CHECK(s.end_ns == 120);
  CHECK(s.track == f.tracks.at({1, 3}));
  CHECK(f.argsOf(out, s.id).at("bytes") == 4096);
  CHECK(f.ctx.without_op == 1);

  out.clear();
  CUpti_ActivityMemset4 z{};
  z.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  z.bytes = 128;
  z.value = 0;
  z.start = 30;
  z.end = 31;
  z.deviceId = 1;
  z.streamId = 3;
  translate(asActivity(z), f.ctx, out);
  s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == "memset");
  CHECK(s.track == f.tracks.at({1, 3}));  // same stream, same track
  CHECK(f.argsOf(out, s.id).at("bytes") == 128);

  out.clear();
  CUpti_ActivitySynchronization2 y{};
  y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
  y.start = 50;
  y.end = 40;  // end before start (clamped, never a negative span)
  y.contextId = 2;
  y.streamId = kNoStream;
  translate(asActivity(y), f.ctx, out);
  s = out[0].as<core::SpanRecord>();
  CHECK(f.strings[s.name] == "cudaDeviceSynchronize");
  CHECK(s.end_ns == s.start_ns);
  CHECK(f.argsOf(out, s.id).count("stream") == 0);
  CHECK(f.ctx.copies == 2);
  CHECK(f.ctx.syncs == 1);

  out.clear();
  CUpti_Activity other{};
  other.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  translate(other, f.ctx, out);
  CHECK(out.empty());
  CHECK(f.ctx.unknown == 1);
}
