// The CUDA capture's host side without a GPU: (1) the op correlation callback, in process, with
// stand-ins for cuptiActivityPush/PopExternalCorrelationId: every id pushed while an ATen op starts
// names that op's span in the written trace (checked against the name RecordFunction itself gives,
// from a callback of the test's own), pushes and pops balance, and synthetic CUPTI records carrying
// those ids translate into kOpKernel flows that start at those spans; without op frames every op
// pushes 0 and is counted; (2) the CUDA capture's start and stop in process against a stand-in
// libcupti (tests/support/fake_cupti.cpp) with CUDA's stub libcuda.so as the driver: records
// completed while capturing, and those only the stop hook's forced flush completes (after
// stopCapture set the generation to 0), become spans, and the cupti_* stats are written; only the
// launch-type APIs are enabled (the whole RUNTIME/DRIVER kinds when libcupti refuses per-API
// control); a context dumped at start names a sync's device; the same at a normal exit (the capture
// stopped by libtracerun's static destructor); launch API records become spans on their thread's
// API track that the GPU analysis times launches by (delay = kernel start - call end); (3)
// `tracerun --capture ...,cuda` on the plain libtorch sample on this driverless machine: exactly
// one "CUDA capture off" line, a cuda_capture_off stat, and the same ops as a run without cuda.
// Each TEST_CASE runs in its own process under CTest.
#include <ATen/record_function.h>
#include <cupti.h>
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fstream>
#include <nlohmann/json.hpp>

#include "../support/child_process.h"
#include "../support/kernel_names.h"
#include "../support/temp_dir.h"
#include "capture.h"
#include "cupti_translate.h"
#include "op_correlation.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/analysis/gpu.h"
#include "tracerun/trace/chrome_export.h"
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
  ctx.track = [](const std::string&, int64_t tid) {
    return static_cast<core::TrackId>(1000 + tid);  // "cuda:0 stream 7" -> 1007
  };
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

#if defined(FAKE_CUPTI) && defined(TRACERUN_CUDA_STUB_DRIVER)
namespace {

// The stand-in libcupti's controls (tests/support/fake_cupti.cpp).
struct FakeCupti {
  bool (*stage)(const void*, size_t) = nullptr;
  void (*deliver)() = nullptr;
  void (*setDropped)(size_t) = nullptr;
  uint64_t (*timestamp)() = nullptr;
  int (*enabledKinds)() = nullptr;
  int (*flushes)() = nullptr;
  bool (*kindEnabled)(int) = nullptr;
  int (*apisEnabled)(int, int) = nullptr;
  void (*refusePerApi)(bool) = nullptr;
  void (*addContext)(uint32_t, uint32_t) = nullptr;
};

template <typename Fn>
void resolve(void* lib, Fn& fn, const char* name) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  REQUIRE(fn != nullptr);
}

// The driver (CUDA's stub) and the stand-in CUPTI loaded by path, so that the capture's dlopen of
// libcuda.so.1 and libcupti.so.13 finds them by SONAME; the stand-in's test controls resolved.
FakeCupti loadFakeCupti() {
  REQUIRE(dlopen(TRACERUN_CUDA_STUB_DRIVER, RTLD_NOW | RTLD_LOCAL) != nullptr);
  void* lib = dlopen(FAKE_CUPTI, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) FAIL(dlerror());
  FakeCupti cupti;
  resolve(lib, cupti.stage, "fakeCuptiStage");
  resolve(lib, cupti.deliver, "fakeCuptiDeliver");
  resolve(lib, cupti.setDropped, "fakeCuptiSetDropped");
  resolve(lib, cupti.timestamp, "fakeCuptiTimestamp");
  resolve(lib, cupti.enabledKinds, "fakeCuptiEnabledKinds");
  resolve(lib, cupti.flushes, "fakeCuptiFlushes");
  resolve(lib, cupti.kindEnabled, "fakeCuptiKindEnabled");
  resolve(lib, cupti.apisEnabled, "fakeCuptiApisEnabled");
  resolve(lib, cupti.refusePerApi, "fakeCuptiRefusePerApi");
  resolve(lib, cupti.addContext, "fakeCuptiAddContext");
  return cupti;
}

template <typename T>
void stage(const FakeCupti& cupti, const T& record) {
  REQUIRE(cupti.stage(&record, sizeof record));
}

CUpti_ActivityKernel10 kernel(const char* name, uint64_t start, uint32_t correlation) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.name = name;
  k.deviceId = 0;
  k.streamId = 7;
  k.correlationId = correlation;
  k.start = start;
  k.end = start + 1000;
  return k;
}

}  // namespace

TEST_CASE("CUDA capture stop: records of CUPTI's final flush and the cupti_* stats are written") {
  const FakeCupti cupti = loadFakeCupti();
  cupti.addContext(1, 1);  // a context made before the capture: device 1 (kernels say 0)

  testing::TempDir dir("tracerun-cuda");
  const std::string db = dir.file("stop.db");
  ::setenv("TRACERUN_CAPTURE", "ops,scopes,cuda-sync", 1);  // startCuda reads it
  interpose::CaptureConfig config;
  config.output = db;
  config.signal_handlers = false;
  REQUIRE(interpose::startCapture(config));
  // Kernel, memcpy, memset, sync (cuda-sync), external correlation and context records; API
  // records only for the launch-type APIs, never the whole kinds.
  CHECK(cupti.enabledKinds() == 6);
  CHECK(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_CONTEXT));
  CHECK_FALSE(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  CHECK_FALSE(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_DRIVER));
  CHECK(cupti.apisEnabled(0, -1) == static_cast<int>(launchRuntimeApis().size()));
  CHECK(cupti.apisEnabled(1, -1) == static_cast<int>(launchDriverApis().size()));
  CHECK(cupti.apisEnabled(0, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) == 1);
  CHECK(cupti.apisEnabled(1, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx) == 1);
  CHECK(cupti.apisEnabled(0, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020) == 0);

  // One buffer completed while capturing, on a thread of its own (as CUPTI's thread does).
  const uint64_t t0 = cupti.timestamp();  // the trace's clock (the capture registered it)
  stage(cupti, kernel("k_during", t0, 1));
  std::thread([&] { cupti.deliver(); }).join();

  // Records still in CUPTI's buffers at the end: only the forced flush in the stop hook
  // completes them, on the stopping thread, after stopCapture set the generation to 0.
  stage(cupti, kernel("k_final", t0 + 2000, 2));
  CUpti_ActivityMemcpy6 copy{};
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 4096;
  copy.streamId = 7;
  copy.correlationId = 3;
  copy.start = t0 + 4000;
  copy.end = t0 + 5000;
  stage(cupti, copy);
  CUpti_ActivityMemset4 set{};
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.bytes = 512;
  set.value = 0;
  set.streamId = 7;
  set.correlationId = 4;
  set.start = t0 + 6000;
  set.end = t0 + 6500;
  stage(cupti, set);
  // A sync of the dumped context: on device 1, where that context's CONTEXT record puts it.
  CUpti_ActivitySynchronization2 sync{};
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.contextId = 1;
  sync.streamId = 7;
  sync.start = t0 + 7000;
  sync.end = t0 + 7100;
  stage(cupti, sync);
  cupti.setDropped(3);
  const int flushesBefore = cupti.flushes();
  interpose::stopCapture();
  ::unsetenv("TRACERUN_CAPTURE");
  CHECK(cupti.flushes() == flushesBefore + 1);
  CHECK(cupti.enabledKinds() == 0);
  CHECK(cupti.apisEnabled(0, -1) == 0);
  CHECK(cupti.apisEnabled(1, -1) == 0);

  auto reader = trace::TraceReader::open(db);
  const int64_t origin = std::stoll(reader.meta("origin_ns"));
  std::vector<std::string> names;
  std::vector<int64_t> starts, durations;  // starts relative to t0
  std::set<int64_t> spanIds;
  for (const auto& t : reader.tracks()) {
    if (t.name != "cuda:0 stream 7") continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      names.push_back(reader.str(s.name));
      starts.push_back(origin + s.start_ns - static_cast<int64_t>(t0));
      durations.push_back(s.dur_ns);
      spanIds.insert(s.id);
      std::map<std::string, int64_t> args;
      for (const auto& a : reader.args(s.id)) args[reader.str(a.key)] = a.value;
      CHECK(args.at("stream") == 7);
      if (s.category == core::Category::kMemcpy) CHECK(args.count("bytes") == 1);
    });
  }
  CHECK(names == std::vector<std::string>{"k_during", "k_final", "memcpy HtoD", "memset"});
  std::vector<std::string> trackNames;
  for (const auto& t : reader.tracks()) trackNames.push_back(t.name);
  std::vector<std::string> syncs;
  for (const auto& t : reader.tracks()) {
    if (t.name != "cuda:1 stream 7") continue;
    CHECK(t.tid == 7);
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) { syncs.push_back(reader.str(s.name)); });
  }
  std::string shown;
  for (const auto& n : trackNames) shown += n + "; ";
  INFO("tracks: " << shown);
  CHECK(syncs == std::vector<std::string>{"cudaStreamSynchronize"});
  CHECK(spanIds.size() == 4);  // each span its own id (also those made at the stop)
  CHECK(durations == std::vector<int64_t>{1000, 1000, 1000, 500});
  const std::vector<int64_t> expected{0, 2000, 4000, 6000};
  for (size_t i = 0; i < starts.size() && i < expected.size(); ++i) {
    CHECK(std::abs(starts[i] - expected[i]) < 100'000);  // the measured offset's error: < 100 us
  }

  std::map<std::string, trace::StatRow> stats;
  for (const auto& s : reader.stats()) stats[s.name] = s;
  CHECK(stats.count("cuda_capture_off") == 0);
  REQUIRE(stats.count("cupti_kernels") == 1);
  CHECK(stats["cupti_kernels"].value == 2);
  CHECK(stats["cupti_copies"].value == 2);
  CHECK(stats["cupti_buffers"].value == 2);
  CHECK(stats["cupti_records"].value == 6);  // + the dumped context and the sync
  CHECK(stats["cupti_contexts"].value == 1);
  CHECK(stats["cupti_syncs"].value == 1);
  CHECK(stats["cupti_syncs_without_device"].value == 0);
  CHECK(stats["cupti_launch_apis_only"].value == 1);
  CHECK(stats["cupti_context_records"].value == 1);
  CHECK(stats["cupti_records_without_op"].value == 4);  // no external correlation records
  CHECK(stats["cupti_dropped_records"].value == 3);
  CHECK(stats["cupti_dropped_records"].severity == trace::Severity::kError);
  CHECK(stats.count("cupti_ops_uncorrelated") == 1);
  CHECK(stats["dropped_events"].value == 0);
}

TEST_CASE("CUDA capture where libcupti refuses per-API control: the whole API kinds instead") {
  const FakeCupti cupti = loadFakeCupti();
  cupti.refusePerApi(true);
  testing::TempDir dir("tracerun-cuda");
  const std::string db = dir.file("fallback.db");
  ::setenv("TRACERUN_CAPTURE", "ops,scopes,cuda", 1);
  interpose::CaptureConfig config;
  config.output = db;
  config.signal_handlers = false;
  REQUIRE(interpose::startCapture(config));
  CHECK(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_RUNTIME));
  CHECK(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_DRIVER));
  CHECK(cupti.apisEnabled(0, -1) == 0);
  CHECK(cupti.apisEnabled(1, -1) == 0);
  // `cuda` without `cuda-sync`: no synchronization records (torch.profiler's default).
  CHECK_FALSE(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(cupti.enabledKinds() == 7);
  interpose::stopCapture();
  ::unsetenv("TRACERUN_CAPTURE");
  CHECK(cupti.enabledKinds() == 0);
  auto reader = trace::TraceReader::open(db);
  std::map<std::string, int64_t> stats;
  for (const auto& s : reader.stats()) stats[s.name] = s.value;
  CHECK(stats.count("cuda_capture_off") == 0);
  CHECK(stats["cupti_launch_apis_only"] == 0);
}

TEST_CASE("CUDA capture stop at a normal exit: the final flush's records reach the trace") {
  // The launcher's usual case: the program returns from main and libtracerun's static destructor
  // stops the capture, after the main thread's thread_locals were destroyed.
  const FakeCupti cupti = loadFakeCupti();
  testing::TempDir dir("tracerun-cuda");
  const std::string db = dir.file("exit.db");
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // no Catch2 in the child: its exit status says what went wrong
    ::setenv("TRACERUN_CAPTURE", "ops,scopes,cuda", 1);
    interpose::CaptureConfig config;
    config.output = db;
    config.signal_handlers = false;
    if (!interpose::startCapture(config)) ::_exit(2);
    const uint64_t t0 = cupti.timestamp();
    const auto k = kernel("k_at_exit", t0, 1);
    if (!cupti.stage(&k, sizeof k)) ::_exit(3);
    std::exit(0);  // the capture stops in static destructors
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);

  auto reader = trace::TraceReader::open(db);
  std::vector<std::string> names;
  for (const auto& t : reader.tracks()) {
    if (t.name != "cuda:0 stream 7") continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) { names.push_back(reader.str(s.name)); });
  }
  CHECK(names == std::vector<std::string>{"k_at_exit"});
  std::map<std::string, int64_t> stats;
  for (const auto& s : reader.stats()) stats[s.name] = s.value;
  CHECK(stats["cupti_kernels"] == 1);
  CHECK(stats["cupti_buffers"] == 1);
}
#endif

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

// Capture -> trace -> Chrome export, end to end: a kernel CUPTI names by its mangled symbol is a
// span named as c++filt prints it, and the export shows its mangled and short names as text
// (string-valued args), not as string ids. Also TRACERUN_CUPTI_OFF=sync: no synchronization
// records enabled even with `cuda-sync`, and the trace says so.
TEST_CASE(
    "CUDA capture to Chrome export: demangled kernel names, mangled and short names as text") {
  const FakeCupti cupti = loadFakeCupti();
  const auto& name = testing::kKernelNameCases[0];
  testing::TempDir dir("tracerun-cuda");
  const std::string db = dir.file("names.db");
  ::setenv("TRACERUN_CAPTURE", "ops,scopes,cuda-sync", 1);
  ::setenv("TRACERUN_CUPTI_OFF", "sync", 1);
  interpose::CaptureConfig config;
  config.output = db;
  config.signal_handlers = false;
  REQUIRE(interpose::startCapture(config));
  CHECK_FALSE(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));
  CHECK(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  stage(cupti, kernel(name.mangled, cupti.timestamp(), 1));
  interpose::stopCapture();
  ::unsetenv("TRACERUN_CAPTURE");
  ::unsetenv("TRACERUN_CUPTI_OFF");

  const auto reader = trace::TraceReader::open(db);
  std::map<std::string, trace::StatRow> stats;
  for (const auto& st : reader.stats()) stats[st.name] = st;
  REQUIRE(stats.count("cupti_parts_off") == 1);
  CHECK(stats["cupti_parts_off"].value == 1);
  const std::string json = dir.file("names.json");
  trace::exportChrome(reader, json);
  std::ifstream in(json);
  const auto doc = nlohmann::json::parse(in);
  int kernels = 0;
  for (const auto& ev : doc["traceEvents"]) {
    if (ev.value("ph", "") != "X" || ev.value("cat", "") != "kernel") continue;
    ++kernels;
    CHECK(ev["name"] == name.demangled);
    REQUIRE(ev.contains("args"));
    CHECK(ev["args"]["mangled_name"] == name.mangled);
    CHECK(ev["args"]["short_name"] == name.short_name);
  }
  CHECK(kernels == 1);
}

TEST_CASE("CUDA capture: launch API records land on their thread's API track and time the launch") {
  const FakeCupti cupti = loadFakeCupti();
  testing::TempDir dir("tracerun-cuda");
  const std::string db = dir.file("launch.db");
  ::setenv("TRACERUN_CAPTURE", "ops,scopes,cuda", 1);
  interpose::CaptureConfig config;
  config.output = db;
  config.signal_handlers = false;
  REQUIRE(interpose::startCapture(config));
  CHECK_FALSE(cupti.kindEnabled(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION));  // cuda alone: none
  const uint64_t t0 = cupti.timestamp();
  // A cudaLaunchKernel call [10 us, 12 us] and its kernel at 50 us (correlation 21); an API that
  // launches nothing (dropped); a kernel whose call CUPTI never reported (no launch: not timed).
  CUpti_ActivityAPI call{};
  call.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
  call.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
  call.start = t0 + 10000;
  call.end = t0 + 12000;
  call.threadId = 4242;
  call.correlationId = 21;
  stage(cupti, call);
  CUpti_ActivityAPI other = call;
  other.cbid = CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020;
  other.correlationId = 20;
  stage(cupti, other);
  stage(cupti, kernel("k_launched", t0 + 50000, 21));
  stage(cupti, kernel("k_unreported", t0 + 80000, 22));
  std::thread([&] { cupti.deliver(); }).join();
  interpose::stopCapture();
  ::unsetenv("TRACERUN_CAPTURE");

  auto reader = trace::TraceReader::open(db);
  std::vector<std::string> calls;
  int64_t callStart = 0, callEnd = 0, kernelStart = 0;
  for (const auto& t : reader.tracks()) {
    if (t.name == "cuda api thread 4242") {
      CHECK(t.tid == 4242);
      reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
        calls.push_back(reader.str(s.name));
        CHECK(s.category == core::Category::kOther);
        callStart = s.start_ns;
        callEnd = s.end_ns();
        std::map<std::string, int64_t> args;
        for (const auto& a : reader.args(s.id)) args[reader.str(a.key)] = a.value;
        CHECK(args.at("correlation") == 21);
        CHECK(args.at("cbid") == CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000);
      });
    }
    if (t.name == "cuda:0 stream 7") {
      reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
        if (reader.str(s.name) == "k_launched") kernelStart = s.start_ns;
      });
    }
  }
  CHECK(calls == std::vector<std::string>{"cudaLaunchKernel"});
  CHECK(callEnd - callStart == 2000);
  CHECK(kernelStart - callEnd == 38000);  // one clock for both: the difference is exact
  std::map<std::string, int64_t> stats;
  for (const auto& s : reader.stats()) stats[s.name] = s.value;
  CHECK(stats["cupti_launch_records"] == 1);
  CHECK(stats["cupti_api_records_dropped"] == 1);

  // The GPU analysis times k_launched by its call (HTA's launch delay: kernel start - call end).
  const auto g = trace::analysis::analyzeGpu(reader);
  REQUIRE(g.devices.size() == 1);
  const auto& d = g.devices[0];
  CHECK(d.launched == 1);
  CHECK(d.launch_records == 1);
  CHECK(std::string(d.launchSource()) == "cupti");
  CHECK(d.launch.p50_ns == 38000);
  CHECK(d.launch.max_ns == 38000);
}
