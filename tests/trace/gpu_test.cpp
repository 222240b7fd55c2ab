// GPU analyses (trace/include/tracerun/trace/analysis/gpu.h) on hand-built traces whose answers
// are worked out by hand in each test: one stream with a gap of each of HTA's kinds, streams that
// overlap with NCCL on a second stream, two devices, stragglers across three ranks, the kernel
// table, and a trace without GPU records (no report section). Not the real traces: see
// gpu_traces_test.cpp.
#include <catch2/catch.hpp>

#include <map>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/gpu.h"
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/analysis/report_json.h"
#include "tracerun/trace/analysis/report_text.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using namespace tracerun::trace::analysis;

namespace {

constexpr core::Category kKernel = core::Category::kKernel;
constexpr core::Category kCopy = core::Category::kMemcpy;
const std::string kStream7 = "cuda:0 stream 7";

// A kernel (or copy) on `track`, launched by an op on main starting at `launch` (< 0: no op).
void activity(TraceBuilder& tb, int rank, const std::string& track, const std::string& name,
              core::Category c, int64_t start, int64_t end, int64_t launch = -1) {
  tb.span(rank, {track, name, c, start, end});
  if (launch < 0) return;
  tb.span(rank, {"main", "aten::op", core::Category::kOp, launch, launch + 50});
  tb.flow(rank, {core::FlowKind::kOpKernel, "main", track, launch, start});
}

}  // namespace

TEST_CASE("gpu: one stream with a gap of each idle kind, HTA's rule by hand", "[analysis][gpu]") {
  TraceBuilder tb(1);
  activity(tb, 0, kStream7, "k1", kKernel, 1000, 2000, 0);
  activity(tb, 0, kStream7, "k2", kKernel, 2010, 3000, 100);       // gap 10: kernel wait
  activity(tb, 0, kStream7, "k3", kKernel, 50000, 60000, 40000);   // launched late: host wait
  activity(tb, 0, kStream7, "k4", kKernel, 100000, 110000, 5000);  // 40 us gap: other
  activity(tb, 0, kStream7, "memcpy HtoD", kCopy, 110000, 120000, 105000);  // no gap
  activity(tb, 0, kStream7, "memset", kCopy, 125000, 126000);  // 5 us, no op: kernel wait
  // A synchronisation record on the stream is not GPU activity.
  tb.span(0, {kStream7, "cudaStreamSynchronize", core::Category::kOther, 130000, 190000});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_one_stream")));
  GpuOptions o;
  o.launch_outlier_ns = 9000;
  const GpuAnalysis g = analyzeGpu(reader, o);
  REQUIRE(g.devices.size() == 1);
  const GpuDevice& d = g.devices[0];
  CHECK(d.rank == 0);
  CHECK(d.device == 0);
  CHECK(d.window_ns == 125000);
  CHECK(d.compute_ns == 1000 + 990 + 10000 + 10000);
  CHECK(d.memory_ns == 11000);
  CHECK(d.comm_ns == 0);
  CHECK(d.busy_ns == 32990);
  CHECK(d.idle_ns == 125000 - 32990);
  CHECK(d.idle.host_wait_ns == 47000);
  CHECK(d.idle.kernel_wait_ns == 10 + 5000);
  CHECK(d.idle.other_ns == 40000);
  CHECK(d.idle.total() == d.idle_ns);
  CHECK(d.kernels == 4);
  CHECK(d.copies == 2);
  CHECK(d.overlapRatio() == -1.0);
  REQUIRE(d.streams.size() == 1);
  CHECK(d.streams[0].stream == 7);
  CHECK(d.streams[0].activities == 6);
  CHECK(d.streams[0].busy_ns == 32990);
  CHECK(d.streams[0].idle.host_wait_ns == 47000);
  CHECK(d.streams[0].idle.kernel_wait_ns == 5010);
  CHECK(d.streams[0].idle.other_ns == 40000);
  // Delays 1000, 1910, 5000, 10000, 95000: nearest-rank p50 is the 3rd, p95 the 5th.
  CHECK(d.launch.count == 5);
  CHECK(d.launch.p50_ns == 5000);
  CHECK(d.launch.p95_ns == 95000);
  CHECK(d.launch.max_ns == 95000);
  CHECK(d.launch.outliers == 2);
  // HTA's queue length: +1 at launches 0, 100, 5000, 40000, 105000; -1 at their starts.
  CHECK(d.streams[0].queue_max == 2);
  CHECK(d.streams[0].queue_mean == Approx(0.9));
  const auto q = gpuQueueLength(reader, d.streams[0].track);
  std::vector<int64_t> lengths;
  for (const GpuQueueSample& x : q) lengths.push_back(x.length);
  CHECK(lengths == std::vector<int64_t>{1, 2, 1, 0, 1, 2, 1, 0, 1, 0});
  REQUIRE(q.size() == 10);
  CHECK(q[4].ts_ns - q[0].ts_ns == 5000);
  CHECK(gpuQueueLength(reader, 1).empty());  // the main thread's track
  // A lower threshold turns the 10 ns and 5 us gaps into "other".
  GpuOptions tight;
  tight.kernel_wait_ns = 10;
  const GpuDevice t = analyzeGpu(reader, tight).devices.at(0);
  CHECK(t.idle.kernel_wait_ns == 0);
  CHECK(t.idle.other_ns == 40000 + 5010);
  CHECK(t.idle.host_wait_ns == 47000);
}

TEST_CASE("gpu: overlapping streams, NCCL on a second stream, two devices", "[analysis][gpu]") {
  TraceBuilder tb(1);
  activity(tb, 0, kStream7, "gemm", kKernel, 0, 1000);
  activity(tb, 0, kStream7, "gemm", kKernel, 1500, 3000);
  activity(tb, 0, "cuda:0 stream 13", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", kKernel, 500,
           2000);
  // Demangled, HTA's `.*ncclKernel.*` matches too.
  activity(tb, 0, "cuda:0 stream 13", "void ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)",
           kKernel, 2500, 2600);
  activity(tb, 0, "cuda:1 stream 7", "gemm", kKernel, 100, 400);
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_two_streams")));
  const GpuAnalysis g = analyzeGpu(reader);
  REQUIRE(g.devices.size() == 2);
  const GpuDevice* d0 = g.device(0, 0);
  REQUIRE(d0 != nullptr);
  CHECK(d0->window_ns == 3000);
  CHECK(d0->busy_ns == 3000);
  CHECK(d0->idle_ns == 0);
  CHECK(d0->idle.total() == 0);
  CHECK(d0->compute_ns == 2500);
  CHECK(d0->comm_ns == 1600);
  // [500, 1000] and [1500, 2000] of the all-reduce, all of the all-gather.
  CHECK(d0->comm_compute_overlap_ns == 1100);
  CHECK(d0->overlapRatio() == Approx(1100.0 / 1600.0));
  REQUIRE(d0->streams.size() == 2);
  CHECK(d0->streams[0].stream == 7);
  CHECK(d0->streams[0].idle.kernel_wait_ns == 500);  // busy on the device, idle on the stream
  CHECK(d0->streams[1].stream == 13);
  CHECK(d0->streams[1].idle.kernel_wait_ns == 500);
  CHECK(d0->launch.count == 0);
  const GpuDevice* d1 = g.device(0, 1);
  REQUIRE(d1 != nullptr);
  CHECK(d1->window_ns == 300);
  CHECK(d1->busy_ns == 300);
  CHECK(g.stragglers.empty());  // one rank
}

TEST_CASE("gpu: stragglers from late collective kernels across three ranks", "[analysis][gpu]") {
  TraceBuilder tb(3);
  const std::string ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  const int64_t late[3][3] = {{0, 0, 0}, {0, 50, 0}, {100, 300, 200}};
  for (int rank = 0; rank < 3; ++rank) {
    for (int k = 0; k < 3; ++k) {
      const int64_t t = 10000 * (k + 1) + late[rank][k];
      activity(tb, rank, "cuda:0 stream 13", ar, kKernel, t, t + 1000);
      activity(tb, rank, kStream7, "gemm", kKernel, t - 2000, t - 1000);
    }
  }
  // Only rank 0 runs a fourth: not matched.
  activity(tb, 0, "cuda:0 stream 13", ar, kKernel, 50000, 51000);
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_stragglers")));
  const GpuAnalysis g = analyzeGpu(reader);
  CHECK(g.devices.size() == 3);
  CHECK(g.collectives == 3);
  REQUIRE(g.stragglers.size() == 3);
  CHECK(g.stragglers[0].rank == 2);
  CHECK(g.stragglers[0].collectives == 3);
  CHECK(g.stragglers[0].last == 3);
  CHECK(g.stragglers[0].mean_late_ns == 200);
  CHECK(g.stragglers[0].max_late_ns == 300);
  CHECK(g.stragglers[1].rank == 1);
  CHECK(g.stragglers[1].last == 0);
  CHECK(g.stragglers[1].mean_late_ns == 50 / 3);
  CHECK(g.stragglers[1].max_late_ns == 50);
  CHECK(g.stragglers[2].rank == 0);
  CHECK(g.stragglers[2].mean_late_ns == 0);
}

TEST_CASE("gpu: the kernel table, names as c++filt shows them", "[analysis][gpu]") {
  TraceBuilder tb(2);
  // c++filt: void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>,
  // std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)
  const std::string fill =
      "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
      "11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_"
      "T1_";
  activity(tb, 0, kStream7, fill, kKernel, 0, 10);
  activity(tb, 0, kStream7, fill, kKernel, 100, 120);
  activity(tb, 1, kStream7, fill, kKernel, 0, 30);
  activity(tb, 1, kStream7, fill, kKernel, 100, 140);
  activity(tb, 0, kStream7, "sm80_xmma_gemm_f32f32", kKernel, 200, 400);
  activity(tb, 0, kStream7, "memcpy DtoD", kCopy, 500, 505);
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_kernel_table")));
  const GpuAnalysis g = analyzeGpu(reader);
  REQUIRE(g.kernels.size() == 3);
  CHECK(g.kernels[0].name == "sm80_xmma_gemm_f32f32");
  CHECK(g.kernels[0].short_name == "sm80_xmma_gemm_f32f32");
  CHECK(g.kernels[0].total_ns == 200);
  const GpuKernelRow& k = g.kernels[1];
  CHECK(k.name ==
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)");
  CHECK(k.short_name == "vectorized_elementwise_kernel");
  CHECK(k.kind == GpuKind::kCompute);
  CHECK(k.count == 4);
  CHECK(k.total_ns == 100);
  CHECK(k.mean_ns == 25);
  CHECK(k.min_ns == 10);
  CHECK(k.max_ns == 40);
  CHECK(k.p50_ns == 20);  // nearest rank: the 2nd of 10, 20, 30, 40
  CHECK(k.ranks == 2);
  CHECK(g.kernels[2].name == "memcpy DtoD");
  CHECK(g.kernels[2].kind == GpuKind::kMemory);
  CHECK(reader.str(k.name_id) == fill);
  // One rank's table (a GPU tab's): rank 1 ran only the fill kernel, 30 + 40 ns.
  GpuOptions one;
  one.rank = 1;
  const GpuAnalysis r1 = analyzeGpu(reader, one);
  REQUIRE(r1.devices.size() == 1);
  CHECK(r1.devices[0].rank == 1);
  REQUIRE(r1.kernels.size() == 1);
  CHECK(r1.kernels[0].total_ns == 70);
  CHECK(r1.kernels[0].p50_ns == 30);
}

TEST_CASE("gpu: HTA's kernel kinds by name", "[analysis][gpu]") {
  CHECK(gpuKindOf(kKernel, "ncclDevKernel_AllReduce_Sum_f32_RING_LL") == GpuKind::kComm);
  CHECK(gpuKindOf(kKernel, "void ncclKernel_AllReduce(ncclWorkElem)") == GpuKind::kComm);
  CHECK(gpuKindOf(kKernel, "hcclAllReduce") == GpuKind::kComm);
  CHECK(gpuKindOf(kKernel, "void at::native::reduce_kernel<512>()") == GpuKind::kCompute);
  CHECK(gpuKindOf(kCopy, "memcpy HtoD") == GpuKind::kMemory);
  CHECK(gpuKindOf(kCopy, "nccl looking copy") == GpuKind::kMemory);
}

TEST_CASE("gpu: a trace without GPU records has no gpu section", "[analysis][gpu]") {
  TraceBuilder tb(1);
  tb.span(0, {"main", "aten::mm", core::Category::kOp, 0, 100});
  // A stream track with only a synchronisation record is no GPU activity either.
  tb.span(0, {kStream7, "cudaStreamSynchronize", core::Category::kOther, 0, 100});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_none")));
  CHECK_FALSE(analyzeGpu(reader).present());
  const Report r = buildReport(reader);
  CHECK(reportText(r).find("\ngpu") == std::string::npos);  // (the path holds "gpu")
  CHECK(reportJson(r).find("\"gpu\"") == std::string::npos);
}

TEST_CASE("gpu: the report's text and JSON carry the section", "[analysis][gpu]") {
  TraceBuilder tb(1);
  activity(tb, 0, kStream7, "gemm", kKernel, 0, 1000, 0);
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_report")));
  const Report r = buildReport(reader);
  REQUIRE(r.gpu.present());
  CHECK(reportText(r).find("gpu: per rank and device") != std::string::npos);
  const std::string j = reportJson(r);
  CHECK(j.find("\"gpu\"") != std::string::npos);
  CHECK(j.find("\"busy_ns\": 1000") != std::string::npos);
}

TEST_CASE("gpu: launch API records give HTA's launch times, the op's start stands in without one",
          "[analysis][gpu]") {
  // Rank 0, one stream. Each kernel has its launching op (flow) and, but for k4, its launch call
  // on the thread's "cuda api thread 555" track, joined by the correlation argument as CUPTI
  // records them. Rank 1 reuses correlation id 1 for a call of its own: the join is per rank.
  TraceBuilder tb(2);
  const std::string api = "cuda api thread 555";
  auto launched = [&](int rank, const std::string& name, int64_t corr, int64_t op, int64_t call0,
                      int64_t call1, int64_t start, int64_t end) {
    tb.span(rank, {kStream7, name, kKernel, start, end, 0, {{"correlation", corr}}});
    tb.span(rank, {"main", "aten::op", core::Category::kOp, op, op + 50});
    tb.flow(rank, {core::FlowKind::kOpKernel, "main", kStream7, op, start});
    if (call0 < 0) return;
    tb.span(rank, {api,
                   "cudaLaunchKernel",
                   core::Category::kOther,
                   call0,
                   call1,
                   0,
                   {{"correlation", corr}, {"cbid", 211}}});
  };
  launched(0, "k1", 1, 0, 100, 300, 1000, 2000);           // delay 1000 - 300 = 700
  launched(0, "k2", 2, 1500, 1600, 1700, 2010, 3000);      // gap 10 (launched before): kernel wait
  launched(0, "k3", 3, 2500, 40000, 45000, 50000, 60000);  // call after the gap began: host wait
  launched(0, "k4", 4, 5000, -1, -1, 100000, 110000);      // no record: the op's start, gap other
  launched(1, "k1", 1, 800, 900, 950, 5000, 6000);         // rank 1: delay 4050
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_launch_records")));
  const GpuAnalysis g = analyzeGpu(reader);
  REQUIRE(g.devices.size() == 2);
  const GpuDevice& d = *g.device(0, 0);
  CHECK(d.launched == 4);
  CHECK(d.launch_records == 3);
  CHECK(std::string(d.launchSource()) == "cupti + op start (estimate)");
  // Delays 700, 310, 5000 (call end -> start) and 95000 (op start -> start): p50 the 2nd of 4.
  CHECK(d.launch.count == 4);
  CHECK(d.launch.p50_ns == 700);
  CHECK(d.launch.p95_ns == 95000);
  CHECK(d.launch.max_ns == 95000);
  // By the op's start k3 (op 2500 < gap start 3000) would be "other"; its call says host wait.
  CHECK(d.idle.host_wait_ns == 47000);
  CHECK(d.idle.kernel_wait_ns == 10);
  CHECK(d.idle.other_ns == 40000);
  // Queue: +1 at the calls' starts 100, 1600, 40000 and k4's op start 5000; -1 at each start.
  std::vector<int64_t> lengths, times;
  for (const GpuQueueSample& x : gpuQueueLength(reader, d.streams.at(0).track)) {
    lengths.push_back(x.length);
    times.push_back(x.ts_ns - g.device(0, 0)->start_ns + 1000);
  }
  CHECK(lengths == std::vector<int64_t>{1, 0, 1, 0, 1, 2, 1, 0});
  CHECK(times == std::vector<int64_t>{100, 1000, 1600, 2010, 5000, 40000, 50000, 100000});
  const GpuDevice& d1 = *g.device(1, 0);
  CHECK(d1.launch_records == 1);
  CHECK(std::string(d1.launchSource()) == "cupti");
  CHECK(d1.launch.p50_ns == 4050);
  // The report says which source each device's numbers come from.
  const Report rep = buildReport(reader);
  const std::string j = reportJson(rep);
  CHECK(j.find("\"launch_from\": \"mixed\"") != std::string::npos);
  CHECK(j.find("\"launch_source\": \"cupti + op start (estimate)\"") != std::string::npos);
  CHECK(j.find("\"launch_source\": \"cupti\"") != std::string::npos);
  CHECK(j.find("\"launch_records\": 3") != std::string::npos);
  CHECK(reportText(rep).find("cupti + op start (estimate)") != std::string::npos);
  // Without the records (the op -> kernel flows alone), the estimate as before: k1's delay 1000.
  TraceBuilder old(1);
  activity(old, 0, kStream7, "k1", kKernel, 1000, 2000, 0);
  const auto r2 = trace::TraceReader::open(old.write(scratchDir("gpu_launch_no_records")));
  const GpuAnalysis g2 = analyzeGpu(r2);
  CHECK(std::string(g2.devices.at(0).launchSource()) == "op start (estimate)");
  CHECK(g2.devices.at(0).launch.p50_ns == 1000);
  CHECK(reportJson(buildReport(r2)).find("\"launch_from\": \"op_start\"") != std::string::npos);
}

TEST_CASE("gpu: copy bandwidth per kind, bytes over the copies' own time", "[analysis][gpu]") {
  TraceBuilder tb(1);
  // Two HtoD copies of 1 MB in 1 us and 3 us (4 us in all: 500 GB/s), a DtoH of 64 KB in 2 us
  // (32 GB/s), a memset of 4 KB in 1 us, a kernel (not a copy).
  tb.span(0, {kStream7, "memcpy HtoD", kCopy, 0, 1000, 0, {{"bytes", 1'000'000}}});
  tb.span(0, {kStream7, "memcpy HtoD", kCopy, 5000, 8000, 0, {{"bytes", 1'000'000}}});
  tb.span(0, {"cuda:0 stream 13", "memcpy DtoH", kCopy, 2000, 4000, 0, {{"bytes", 64'000}}});
  tb.span(0, {kStream7, "memset", kCopy, 9000, 10000, 0, {{"bytes", 4096}, {"value", 0}}});
  tb.span(0, {kStream7, "gemm", kKernel, 10000, 20000});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_copy_bandwidth")));
  const GpuAnalysis g = analyzeGpu(reader);
  REQUIRE(g.devices.size() == 1);
  std::map<std::string, GpuCopyKind> kinds;
  for (const GpuCopyKind& c : g.devices[0].copy_kinds) kinds[c.name] = c;
  REQUIRE(kinds.size() == 3);
  CHECK(kinds["memcpy HtoD"].count == 2);
  CHECK(kinds["memcpy HtoD"].bytes == 2'000'000);
  CHECK(kinds["memcpy HtoD"].time_ns == 4000);
  CHECK(kinds["memcpy HtoD"].gbps() == Approx(500.0));
  CHECK(kinds["memcpy DtoH"].gbps() == Approx(32.0));
  CHECK(kinds["memset"].bytes == 4096);
  CHECK(kinds["memset"].gbps() == Approx(4.096));
  const Report r = buildReport(reader);
  CHECK(reportText(r).find("copies and sets by kind") != std::string::npos);
  CHECK(reportJson(r).find("\"gbps\": 500.0") != std::string::npos);
}
