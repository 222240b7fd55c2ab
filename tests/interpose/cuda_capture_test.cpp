// The CUDA capture's host side without a GPU: (1) the op correlation callback, in process, with
// stand-ins for cuptiActivityPush/PopExternalCorrelationId: every id pushed while an ATen op starts
// names that op's span in the written trace (checked against the name RecordFunction itself gives,
// from a callback of the test's own), pushes and pops balance, and synthetic CUPTI records carrying
// those ids translate into kOpKernel flows that start at those spans; without op frames every op
// pushes 0 and is counted; (2) `tracerun --capture ...,cuda` on the plain libtorch sample on this
// driverless machine: exactly one "CUDA capture off" line, a cuda_capture_off stat, and the same
// ops as a run without cuda.
// Each TEST_CASE runs in its own process under CTest.
#include <ATen/record_function.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "../support/child_process.h"
#include "../support/temp_dir.h"
#include "capture.h"
#include "cupti_translate.h"
#include "op_correlation.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::interpose::cuda;

namespace {

// ---- a stand-in for CUPTI's per-thread external id stacks ---------------------------------------

thread_local std::vector<uint64_t> tlsStack;
std::atomic<int64_t> gPushes{0}, gPops{0}, gBadKind{0};

CUptiResult fakePush(CUpti_ExternalCorrelationKind kind, uint64_t id) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) ++gBadKind;
  tlsStack.push_back(id);
  ++gPushes;
  return CUPTI_SUCCESS;
}

CUptiResult fakePop(CUpti_ExternalCorrelationKind kind, uint64_t* last) {
  if (kind != CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) ++gBadKind;
  if (tlsStack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  if (last != nullptr) *last = tlsStack.back();
  tlsStack.pop_back();
  ++gPops;
  return CUPTI_SUCCESS;
}

// What a kernel launched at the start of each op would be tagged with: the op's name (from
// RecordFunction) and the id on top of the stand-in stack at that moment.
struct Seen {
  std::string name;
  uint64_t id;
};
std::mutex gSeenMu;
std::vector<Seen> gSeen;

std::unique_ptr<at::ObserverContext> observeStart(const at::RecordFunction& fn) {
  std::lock_guard<std::mutex> lock(gSeenMu);
  gSeen.push_back({fn.name(), tlsStack.empty() ? ~uint64_t{0} : tlsStack.back()});
  return nullptr;
}

struct Model {
  torch::nn::Linear fc1{8, 16}, fc2{16, 1};
  std::unique_ptr<torch::optim::SGD> opt;
  torch::Tensor x = torch::randn({4, 8}), y = torch::randn({4, 1});
  Model() {
    std::vector<torch::Tensor> params = fc1->parameters();
    for (auto& p : fc2->parameters()) params.push_back(p);
    opt = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-2));
  }
  void step() {
    opt->zero_grad();
    torch::mse_loss(fc2(torch::relu(fc1(x))), y).backward();
    opt->step();
  }
};

template <typename T>
const CUpti_Activity& asActivity(const T& record) {
  return reinterpret_cast<const CUpti_Activity&>(record);
}

struct OpSpan {
  std::string name;
  core::Category category;
};

}  // namespace

TEST_CASE("op correlation: each pushed id names the op's own span, and kernels flow from it") {
  testing::TempDir dir("tracerun-cuda");
  const std::string db = dir.file("corr.db");
  ::setenv("OMP_NUM_THREADS", "1", 1);
  Model model;
  interpose::CaptureConfig config;
  config.output = db;
  config.signal_handlers = false;
  REQUIRE(interpose::startCapture(config));
  const int64_t base = core::nowNs() - 1;
  REQUIRE(startOpCorrelation(&fakePush, &fakePop, base));
  CHECK_FALSE(startOpCorrelation(&fakePush, &fakePop, base));  // once
  // Added after the correlation callback, so it sees the id pushed for the same op.
  const auto observer = at::addGlobalCallback(
      at::RecordFunctionCallback(&observeStart).scopes({at::RecordScope::FUNCTION}));
  for (int i = 0; i < 2; ++i) model.step();
  at::removeCallback(observer);
  stopOpCorrelation();
  const int64_t pushesWhileOn = gPushes.load();
  model.step();  // not correlated any more: nothing pushed
  interpose::stopCapture();

  CHECK(gPushes.load() == pushesWhileOn);
  CHECK(gPushes.load() == gPops.load());
  CHECK(uncorrelatedOps() == 0);
  CHECK(tlsStack.empty());
  CHECK(gBadKind.load() == 0);

  // The recorded spans by (track, start on the capture's clock: the file's times are relative to
  // meta origin_ns).
  auto reader = trace::TraceReader::open(db);
  const int64_t origin = std::stoll(reader.meta("origin_ns"));
  std::map<std::pair<int64_t, int64_t>, OpSpan> spans;
  for (const auto& t : reader.tracks()) {
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      spans[{t.id, origin + s.start_ns}] = OpSpan{reader.str(s.name), s.category};
    });
  }
  REQUIRE(gSeen.size() > 50);
  std::set<uint64_t> ids;
  std::map<std::string, int> names;
  for (const auto& seen : gSeen) {
    INFO(seen.name);
    REQUIRE(seen.id != ~uint64_t{0});  // something was pushed before the op's own callbacks ran
    LaunchingOp op;
    REQUIRE(launchingOp(seen.id, base, &op));
    auto it = spans.find({op.track, op.start_ns});
    REQUIRE(it != spans.end());
    CHECK(it->second.name == seen.name);  // the innermost op: the one being started
    CHECK(it->second.category == core::Category::kOp);
    ids.insert(seen.id);
    ++names[seen.name];
  }
  CHECK(ids.size() == gSeen.size());  // one span, one id
  CHECK(names["aten::addmm"] == 4);   // 2 layers x 2 steps
  CHECK(names["aten::mm"] >= 4);      // backward

  // Synthetic CUPTI records for a kernel launched inside each aten::addmm: the flows start at
  // the addmm spans of the trace and end at the kernels (CUPTI time + offset).
  TranslateContext ctx;
  ctx.clock_offset_ns = -1'700'000'000'000'000'000;  // CUPTI on CLOCK_REALTIME
  ctx.op_base_ns = base;
  ctx.stream_track = [](uint32_t, uint32_t stream) { return core::TrackId{1000 + stream}; };
  ctx.intern = [](const std::string&) { return core::StringId{1}; };
  core::EventId nextId = 0;
  ctx.next_id = [&nextId] { return ++nextId; };
  std::vector<core::Record> out;
  uint32_t correlation = 1;
  std::vector<std::pair<int64_t, int64_t>> addmmSpans;  // (track, start) expected as sources
  for (const auto& seen : gSeen) {
    if (seen.name != "aten::addmm") continue;
    CUpti_ActivityExternalCorrelation e{};
    e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
    e.externalKind = kOpCorrelationKind;
    e.externalId = seen.id;
    e.correlationId = correlation;
    translate(asActivity(e), ctx, out);
    CUpti_ActivityKernel10 k{};
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = "gemm";
    k.streamId = 7;
    k.correlationId = correlation++;
    k.start = static_cast<uint64_t>(1'700'000'000'000'000'000 + 5'000'000'000 + correlation);
    k.end = k.start + 100;
    translate(asActivity(k), ctx, out);
    LaunchingOp op;
    REQUIRE(launchingOp(seen.id, base, &op));
    addmmSpans.push_back({op.track, op.start_ns});
  }
  std::vector<std::pair<int64_t, int64_t>> flowSources;
  for (const auto& r : out) {
    if (r.kind() != core::RecordKind::kFlow) continue;
    const auto f = r.as<core::FlowRecord>();
    CHECK(f.flow == core::FlowKind::kOpKernel);
    CHECK(spans.at({f.src_track, f.src_ts_ns}).name == "aten::addmm");
    CHECK(f.dst_track == 1007);
    CHECK(f.dst_ts_ns > 5'000'000'000);
    CHECK(f.dst_ts_ns < 5'000'001'000);
    flowSources.push_back({f.src_track, f.src_ts_ns});
  }
  CHECK(flowSources == addmmSpans);
}

TEST_CASE("op correlation without op capture: every op pushes 0 and is counted, pops balance") {
  testing::TempDir dir("tracerun-cuda");
  Model model;
  interpose::CaptureConfig config;
  config.output = dir.file("scopes.db");
  config.signal_handlers = false;
  config.ops = false;  // user scopes only: no op frames to name
  REQUIRE(interpose::startCapture(config));
  REQUIRE(startOpCorrelation(&fakePush, &fakePop, core::nowNs() - 1));
  const auto observer = at::addGlobalCallback(
      at::RecordFunctionCallback(&observeStart).scopes({at::RecordScope::FUNCTION}));
  model.step();
  at::removeCallback(observer);
  stopOpCorrelation();
  interpose::stopCapture();
  REQUIRE(gSeen.size() > 10);
  for (const auto& seen : gSeen) CHECK(seen.id == 0);
  CHECK(uncorrelatedOps() == gSeen.size());
  CHECK(gPushes.load() == static_cast<int64_t>(gSeen.size()));
  CHECK(gPops.load() == gPushes.load());
}

#if defined(TRACERUN_BIN) && defined(SAMPLE_BIN)
namespace {

std::map<std::string, int64_t> opCounts(const trace::TraceReader& r) {
  std::map<std::string, int64_t> m;
  for (const auto& t : r.tracks()) {
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (s.category == core::Category::kOp || s.category == core::Category::kBackward) {
        ++m[r.str(s.name)];
      }
    });
  }
  return m;
}

}  // namespace

TEST_CASE(
    "tracerun --capture with cuda and no driver: one line, the rest of the trace as without") {
  testing::TempDir dir("tracerun-cuda");
  ::setenv("OMP_NUM_THREADS", "1", 1);
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  auto run = [&](const std::string& db, const std::string& words) {
    testing::Child child({TRACERUN_BIN, "-o", db, "--capture", words, "--", SAMPLE_BIN, "2"},
                         dir.path.string());
    return child.wait();
  };
  const std::string with = dir.file("with.db"), without = dir.file("without.db");
  const auto a = run(with, "ops,scopes,memory,comm,cuda");
  INFO(a.describe());
  REQUIRE(a.code == 0);
  size_t lines = 0;
  for (size_t at = a.err.find("CUDA capture off"); at != std::string::npos;
       at = a.err.find("CUDA capture off", at + 1)) {
    ++lines;
  }
  CHECK(lines == 1);
  CHECK(a.err.find("tracerun: CUDA capture off: ") != std::string::npos);
  const auto b = run(without, "ops,scopes,memory,comm");
  REQUIRE(b.code == 0);
  CHECK(b.err.find("CUDA capture off") == std::string::npos);

  auto rw = trace::TraceReader::open(with);
  auto ro = trace::TraceReader::open(without);
  const auto counts = opCounts(rw);
  CHECK(counts.size() > 10);
  CHECK(counts == opCounts(ro));
  CHECK(rw.counts().flows == ro.counts().flows);
  CHECK(rw.counts().memory == ro.counts().memory);
  std::map<std::string, trace::StatRow> stats;
  for (const auto& s : rw.stats()) stats[s.name] = s;
  REQUIRE(stats.count("cuda_capture_off") == 1);
  CHECK(stats["cuda_capture_off"].value == 1);
  CHECK(stats["cuda_capture_off"].severity == trace::Severity::kWarning);
  CHECK(stats["dropped_events"].value == 0);
  CHECK(stats.count("cupti_kernels") == 0);  // CUPTI never started
  for (const auto& s : ro.stats()) CHECK(s.name != "cuda_capture_off");
}
#endif
