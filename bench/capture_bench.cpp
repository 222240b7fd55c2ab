// Per-op cost of capture on a tiny op (at::add of two 8-element tensors), and the cost on a small
// training step: configurations interleaved in random order, each run in a child forked from the
// same warmed-up process (so none leaves state behind for the others: the legacy profiler and a
// Fake-key fallback do), medians over many repetitions, ratios against baselines measured in the
// same run. Not a test: prints a table.
//
// Usage: capture_bench [repetitions=15] [iterations=200000] [step_reps=5]
// The tensor-identity rows compare the two routes to input/output identities (issue 3 item 1):
// a RecordFunction callback with boxed inputs and captured outputs, and a boxed fallback on the
// Fake dispatch key, each alone and on top of tracerun's own callback.
#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/library.h>
#include <torch/torch.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "baseline_callbacks.h"
#include "capture.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/raw_convert.h"
#include "tracerun/trace/reader.h"

namespace prof = torch::autograd::profiler;
using tracerun::bench::clockEnd;
using tracerun::bench::clockStart;
using tracerun::bench::emptyEnd;
using tracerun::bench::emptyStart;
using tracerun::interpose::CaptureConfig;

namespace {

int64_t clockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}
int64_t nowNs() {
  return clockNs(CLOCK_MONOTONIC);
}
// CPU time of the calling (traced) thread, and of the whole process (adds the writer thread).
// Minor page faults of the calling thread so far (first touches of fresh memory).
int64_t threadMinorFaults() {
  rusage u{};
  getrusage(RUSAGE_THREAD, &u);
  return u.ru_minflt;
}

int64_t threadCpuNs() {
  return clockNs(CLOCK_THREAD_CPUTIME_ID);
}
int64_t processCpuNs() {
  return clockNs(CLOCK_PROCESS_CPUTIME_ID);
}

struct Sample {
  double wall = 0, thread = 0, process = 0;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

// One measurement in a child forked from the warmed-up parent, so no configuration leaves state
// behind for the others: libtorch's legacy profiler and a registered Fake-key fallback change how
// later ops run, and tracerun's memory capture installs its allocator for the rest of the
// process. The child sends `n` doubles back through a pipe and exits.
std::vector<double> runIsolated(size_t n, const std::function<std::vector<double>()>& measure) {
  int fds[2];
  if (::pipe(fds) != 0) {
    std::perror("capture_bench: pipe");
    std::exit(1);
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    std::perror("capture_bench: fork");
    std::exit(1);
  }
  if (pid == 0) {
    ::close(fds[0]);
    const std::vector<double> values = measure();
    const auto bytes = static_cast<ssize_t>(values.size() * sizeof(double));
    const bool sent = values.size() == n && ::write(fds[1], values.data(), bytes) == bytes;
    ::_exit(sent ? 0 : 1);
  }
  ::close(fds[1]);
  std::vector<double> values(n);
  size_t got = 0;
  while (got < n * sizeof(double)) {
    const ssize_t r =
        ::read(fds[0], reinterpret_cast<char*>(values.data()) + got, n * sizeof(double) - got);
    if (r <= 0) break;
    got += static_cast<size_t>(r);
  }
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (got != n * sizeof(double) || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "capture_bench: a measurement's child process failed\n");
    std::exit(1);
  }
  return values;
}

std::string scratch() {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/tracerun_capture_bench_" + std::to_string(::getpid()) +
         ".db";
}

// One configuration: what to switch on before the timed loop and off after it; `after` runs once
// the process CPU is read (a raw shard's conversion to SQLite, timed apart; reading the counts).
struct Config {
  std::string name;
  std::function<void()> on, off, after = [] {};
};

at::CallbackHandle gEmpty = 0;
const auto& kCaptureScopes = tracerun::bench::kTracerunScopes;
int64_t gDropped = 0;  // records dropped over all tracerun runs (full per-thread buffers)
int64_t gCaptured = 0;

// The clock-only baseline (baseline_callbacks.h).
Config clockOnlyConfig() {
  return {"clock-only callback (2 reads)",
          [] {
            tracerun::core::enableTscClock();
            gEmpty = at::addGlobalCallback(
                at::RecordFunctionCallback(&clockStart, &clockEnd).scopes(kCaptureScopes));
          },
          [] { at::removeCallback(gEmpty); }};
}

// ---- the two routes to tensor identities (issue 3 item 1), each alone, computing the same
// identities (storage data address + version) into a sink

int64_t identity(const at::Tensor& t) {
  if (!t.defined() || !t.unsafeGetTensorImpl()->unsafe_storage()) return 0;
  const auto& v = t.unsafeGetTensorImpl()->version_counter();
  return static_cast<int64_t>(
      reinterpret_cast<uint64_t>(t.unsafeGetTensorImpl()->unsafe_storage().data()) |
      (uint64_t(v.enabled() ? v.current_version() : 0) << 48));
}
template <typename Values>
int64_t identities(const Values& values) {
  int64_t h = 0;
  for (const c10::IValue& v : values) {
    if (v.isTensor()) h ^= identity(v.toTensor());
  }
  return h;
}
std::atomic<int64_t> gSink{0};

// RecordFunction: libtorch boxes the inputs for the start callback and captures the outputs for
// the end callback.
std::unique_ptr<at::ObserverContext> idsStart(const at::RecordFunction& fn) {
  gSink.fetch_xor(identities(fn.inputs()), std::memory_order_relaxed);
  return nullptr;
}
void idsEnd(const at::RecordFunction& fn, at::ObserverContext*) {
  gSink.fetch_xor(identities(fn.outputs()), std::memory_order_relaxed);
}

// A boxed fallback on the Fake dispatch key (the C++ analogue of __torch_dispatch__): every op
// below autograd arrives boxed; read the inputs, run the rest of the dispatch, read the outputs.
// Active only on threads whose TLS includes the key (the configuration below sets it).
void idsFallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  gSink.fetch_xor(
      identities(c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - nargs, nargs)),
      std::memory_order_relaxed);
  op.redispatchBoxed(
      ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::Fake), stack);
  const size_t nret = op.schema().returns().size();
  gSink.fetch_xor(
      identities(c10::ArrayRef<c10::IValue>(stack->data() + stack->size() - nret, nret)),
      std::memory_order_relaxed);
}
std::optional<c10::impl::IncludeDispatchKeyGuard> gFakeKey;

// idleWriter: the writer does not drain during the timed loop (only when the capture stops), to
// separate the traced thread's own cost from the writer's competition for the CPU.
// raw: the raw shard writer (TRACERUN_WRITER=raw); stopping closes it, the conversion to SQLite
// runs in `after` (outside the process CPU of the per-op table; its own column).
enum class Writer { kSqlite, kRaw };
Config tracerunConfig(const std::string& name, bool shapes, bool memory, bool idleWriter = false,
                      bool tensors = false, Writer writer = Writer::kSqlite) {
  const bool raw = writer == Writer::kRaw;
  return {name,
          [=] {
            CaptureConfig c;
            c.output = scratch();
            c.shapes = shapes;
            c.memory = memory;
            c.tensors = tensors;
            if (idleWriter) c.drain_interval_ms = 600000;
            c.signal_handlers = false;
            c.raw_writer = raw;
            c.convert_at_stop = false;
            if (!tracerun::interpose::startCapture(c)) std::exit(1);
          },
          [] { tracerun::interpose::stopCapture(); },
          [raw] {
            if (raw) {
              const std::string rawPath = tracerun::trace::rawShardPath(scratch());
              tracerun::trace::convertRawShard(rawPath, scratch());
              ::unlink(rawPath.c_str());
            }
            const auto reader = tracerun::trace::TraceReader::open(scratch());
            for (const auto& st : reader.stats()) {
              if (st.name == "dropped_events") gDropped += st.value;
            }
            const auto counts = reader.counts();
            gCaptured += counts.spans + counts.memory;
            ::unlink(scratch().c_str());
          }};
}

// The same capture with nowNs() on clock_gettime instead of the TSC (core/clock.h): what the
// TSC clock saves per op.
Config monotonicClockConfig(const std::string& name) {
  Config c = tracerunConfig(name, false, false, false, false);
  auto on = c.on, off = c.off;
  c.on = [on] {
    on();
    tracerun::interpose::setTscClock(false);
  };
  c.off = [off] {
    tracerun::interpose::setTscClock(true);
    off();
  };
  return c;
}

std::vector<Config> configs() {
  return {
      {"nothing", [] {}, [] {}},
      {"empty callback, all scopes",
       [] { gEmpty = at::addGlobalCallback(at::RecordFunctionCallback(&emptyStart, &emptyEnd)); },
       [] { at::removeCallback(gEmpty); }},
      {"empty callback, tracerun scopes",
       [] {
         gEmpty = at::addGlobalCallback(
             at::RecordFunctionCallback(&emptyStart, &emptyEnd).scopes(kCaptureScopes));
       },
       [] { at::removeCallback(gEmpty); }},
      {"empty callback, +inputs",
       [] {
         gEmpty = at::addGlobalCallback(at::RecordFunctionCallback(&emptyStart, &emptyEnd)
                                            .scopes(kCaptureScopes)
                                            .needsInputs(true));
       },
       [] { at::removeCallback(gEmpty); }},
      clockOnlyConfig(),
      tracerunConfig("tracerun ops, shapes", true, false),
      tracerunConfig("tracerun ops, no shapes", false, false),
      tracerunConfig("tracerun ops, shapes, writer idle", true, false, true),
      tracerunConfig("tracerun ops, no shapes, writer idle", false, false, true),
      monotonicClockConfig("tracerun ops, no shapes, clock_gettime"),
      tracerunConfig("tracerun ops+memory, shapes", true, true),
      tracerunConfig("raw: tracerun ops, shapes", true, false, false, false, Writer::kRaw),
      tracerunConfig("raw: tracerun ops, no shapes", false, false, false, false, Writer::kRaw),
      tracerunConfig("raw: ops+memory, shapes", true, true, false, false, Writer::kRaw),
      {"ids: callback, in+outputs",
       [] {
         gEmpty = at::addGlobalCallback(at::RecordFunctionCallback(&idsStart, &idsEnd)
                                            .scopes(kCaptureScopes)
                                            .needsInputs(true)
                                            .needsOutputs(true));
       },
       [] { at::removeCallback(gEmpty); }},
      {"ids: Fake-key boxed fallback", [] { gFakeKey.emplace(c10::DispatchKey::Fake); },
       [] { gFakeKey.reset(); }},
      tracerunConfig("tracerun ops, shapes, tensors", true, false, false, true),
      {"tracerun ops, shapes + fallback",
       [] {
         tracerunConfig("", true, false).on();
         gFakeKey.emplace(c10::DispatchKey::Fake);
       },
       [] {
         gFakeKey.reset();
         tracerunConfig("", true, false).off();
       },
       tracerunConfig("", true, false).after},
      {"legacy profiler, shapes",
       [] {
         prof::enableProfilerLegacy(prof::ProfilerConfig(prof::ProfilerState::CPU, true, false));
       },
       [] { prof::disableProfilerLegacy(); }},
  };
}

struct Mlp {
  torch::nn::Linear fc1{256, 256}, fc2{256, 256}, fc3{256, 1};
  std::unique_ptr<torch::optim::Adam> opt;
  torch::Tensor x, y;
  Mlp() {
    std::vector<torch::Tensor> params;
    for (auto* l : {&fc1, &fc2, &fc3}) {
      for (auto& p : (*l)->parameters()) params.push_back(p);
    }
    opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-3));
    x = torch::randn({64, 256});
    y = torch::randn({64, 1});
  }
  void step() {
    opt->zero_grad();
    auto loss = torch::mse_loss(fc3(torch::relu(fc2(torch::relu(fc1(x))))), y);
    loss.backward();
    opt->step();
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(_, Fake, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&idsFallback>());
}

// The per-op cost of at::add under each configuration, interleaved in random order.
void benchPerOp(int reps, int iters, std::mt19937& rng) {
  const auto a = at::ones({8});
  const auto b = at::ones({8});
  auto cs = configs();
  // CAPTURE_BENCH_ONLY=text: only the configurations whose name contains it (and "nothing"), for
  // profiling one of them with perf.
  if (const char* only = std::getenv("CAPTURE_BENCH_ONLY")) {
    cs.erase(std::remove_if(cs.begin(), cs.end(),
                            [only](const Config& c) {
                              std::string alts = only;  // "a|b|c": any of them
                              size_t from = 0;
                              while (from <= alts.size()) {
                                const size_t bar = std::min(alts.find('|', from), alts.size());
                                const std::string alt = alts.substr(from, bar - from);
                                if (alt[0] == '=' ? c.name == alt.substr(1)  // "=name": exactly
                                                  : c.name.find(alt) != std::string::npos) {
                                  return false;
                                }
                                from = bar + 1;
                              }
                              return c.name != "nothing";
                            }),
             cs.end());
  }
  std::map<std::string, std::vector<double>> perOp, perOpCpu, perOpProc, perOpFaults, perOpConv;
  for (int r = 0; r < reps; ++r) {
    std::vector<size_t> order(cs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      const Config& c = cs[i];
      const std::vector<double> v = runIsolated(7, [&] {
        gDropped = gCaptured = 0;  // the child's own counts go back to the parent
        c.on();
        for (int k = 0; k < 2000; ++k) at::add(a, b);  // warm caches (names, shapes)
        const int64_t f0 = threadMinorFaults();
        const int64_t t0 = nowNs(), c0 = threadCpuNs(), p0 = processCpuNs();
        for (int k = 0; k < iters; ++k) at::add(a, b);
        const int64_t t1 = nowNs(), c1 = threadCpuNs(), f1 = threadMinorFaults();
        c.off();  // a tracerun capture's writer drains the rest here: counted as process CPU
        const int64_t p1 = processCpuNs();
        c.after();  // a raw shard's conversion to SQLite: after the run, its own column
        const int64_t p2 = processCpuNs();
        return std::vector<double>{double(t1 - t0) / iters,       double(c1 - c0) / iters,
                                   double(p1 - p0) / iters,       double(f1 - f0) * 1000.0 / iters,
                                   static_cast<double>(gDropped), static_cast<double>(gCaptured),
                                   double(p2 - p1) / iters};
      });
      perOp[c.name].push_back(v[0]);
      perOpCpu[c.name].push_back(v[1]);
      perOpProc[c.name].push_back(v[2]);
      perOpFaults[c.name].push_back(v[3]);
      perOpConv[c.name].push_back(v[6]);
      if (v[4] > 0) {
        std::fprintf(stderr, "dropped %lld records in '%s'\n", static_cast<long long>(v[4]),
                     c.name.c_str());
      }
      gDropped += static_cast<int64_t>(v[4]);
      gCaptured += static_cast<int64_t>(v[5]);
    }
  }
  std::printf("per-op cost: at::add on 8 floats, %d iterations, median of %d interleaved runs\n",
              iters, reps);
  std::printf(
      "  wall: elapsed time; thread: CPU time of the traced thread; process: CPU time of\n"
      "  the whole process (adds tracerun's writer thread, until its shard is closed);\n"
      "  after: process CPU per op after the run (raw: the conversion to SQLite; else reading\n"
      "  the shard's counts)\n");
  std::printf("%-32s %8s %8s %8s %8s %9s %9s %7s %10s %10s %11s %9s\n", "configuration", "wall",
              "+wall", "thread", "+thread", "process", "+process", "after", "+thr/empty",
              "+thr/emp+in", "+thr/legacy", "faults/1k");
  const double baseWall = median(perOp["nothing"]);
  const double baseCpu = median(perOpCpu["nothing"]);
  const double baseProc = median(perOpProc["nothing"]);
  const double emptyAdded = median(perOpCpu["empty callback, tracerun scopes"]) - baseCpu;
  const double legacyAdded = median(perOpCpu["legacy profiler, shapes"]) - baseCpu;
  const double emptyInputsAdded = median(perOpCpu["empty callback, +inputs"]) - baseCpu;
  for (const auto& c : cs) {
    const double wall = median(perOp[c.name]);
    const double cpu = median(perOpCpu[c.name]);
    const double added = cpu - baseCpu;
    const double proc = median(perOpProc[c.name]);
    std::printf("%-32s %8.1f %8.1f %8.1f %8.1f %9.1f %9.1f %7.1f %10.2f %10.2f %11.2f %9.2f\n",
                c.name.c_str(), wall, wall - baseWall, cpu, added, proc, proc - baseProc,
                median(perOpConv[c.name]), emptyAdded > 0 ? added / emptyAdded : 0.0,
                emptyInputsAdded > 0 ? added / emptyInputsAdded : 0.0,
                legacyAdded > 0 ? added / legacyAdded : 0.0, median(perOpFaults[c.name]));
  }

  std::printf("records written by these tracerun runs: %lld, dropped (buffers full): %lld\n",
              static_cast<long long>(gCaptured), static_cast<long long>(gDropped));
  gCaptured = gDropped = 0;
}

// A small training step (3-layer MLP 256 wide, batch 64, Adam) traced vs untraced.
void benchTrainingStep(int stepReps, std::mt19937& rng) {
  Mlp mlp;
  std::vector<Config> stepConfigs = {
      {"untraced", [] {}, [] {}},
      {"empty callback, tracerun scopes",
       [] {
         gEmpty = at::addGlobalCallback(
             at::RecordFunctionCallback(&emptyStart, &emptyEnd).scopes(kCaptureScopes));
       },
       [] { at::removeCallback(gEmpty); }},
      {"same, needing inputs",
       [] {
         gEmpty = at::addGlobalCallback(at::RecordFunctionCallback(&emptyStart, &emptyEnd)
                                            .scopes(kCaptureScopes)
                                            .needsInputs(true));
       },
       [] { at::removeCallback(gEmpty); }},
      clockOnlyConfig(),
      tracerunConfig("tracerun ops+memory, shapes", true, true),
      tracerunConfig("tracerun ops, no shapes", false, false),
      tracerunConfig("same, writer idle while timed", true, true, true),
      tracerunConfig("raw: ops+memory, shapes", true, true, false, false, Writer::kRaw),
      tracerunConfig("tracerun ops+memory+tensors", true, true, false, true)};
  std::map<std::string, std::vector<double>> perStep, perStepCpu;
  for (int k = 0; k < 5; ++k) mlp.step();
  for (int r = 0; r < stepReps * 3; ++r) {
    std::vector<size_t> order(stepConfigs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      const Config& c = stepConfigs[i];
      const std::vector<double> v = runIsolated(4, [&] {
        gDropped = gCaptured = 0;
        c.on();
        mlp.step();
        const int64_t t0 = nowNs(), c0 = threadCpuNs();
        for (int k = 0; k < 20; ++k) mlp.step();
        const int64_t t1 = nowNs(), c1 = threadCpuNs();
        c.off();
        c.after();
        return std::vector<double>{double(t1 - t0) / 20 / 1e3, double(c1 - c0) / 20 / 1e3,
                                   static_cast<double>(gDropped), static_cast<double>(gCaptured)};
      });
      perStep[c.name].push_back(v[0]);
      perStepCpu[c.name].push_back(v[1]);
      gDropped += static_cast<int64_t>(v[2]);
      gCaptured += static_cast<int64_t>(v[3]);
    }
  }
  const double stepBase = median(perStep["untraced"]);
  const double stepBaseCpu = median(perStepCpu["untraced"]);
  std::printf(
      "\ntraining step: MLP 256-256-256-1, batch 64, Adam; median of %d interleaved runs "
      "of 20 steps\n",
      stepReps * 3);
  std::printf("%-30s %9s %9s %11s %9s\n", "configuration", "us/step", "ratio", "thread us",
              "ratio");
  for (const auto& c : stepConfigs) {
    const double med = median(perStep[c.name]);
    const double cpu = median(perStepCpu[c.name]);
    std::printf("%-30s %9.1f %9.3f %11.1f %9.3f\n", c.name.c_str(), med, med / stepBase, cpu,
                cpu / stepBaseCpu);
  }
  std::printf("records written by these tracerun runs: %lld, dropped (buffers full): %lld\n",
              static_cast<long long>(gCaptured), static_cast<long long>(gDropped));
}

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) {
    std::printf(
        "capture_bench: per-op cost of at::add on 8 elements under each capture configuration,\n"
        "interleaved in random order, and a small training step traced vs untraced.\n"
        "usage: capture_bench [REPS=15] [ITERS=200000] [STEP_REPS=5]\n"
        "CAPTURE_BENCH_ONLY=TEXT[|TEXT...]: only the per-op configurations whose name contains "
        "one\n"
        "  of the TEXTs (and \"nothing\")\n");
    return 0;
  }
  const int reps = argc > 1 ? std::atoi(argv[1]) : 15;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 200000;
  const int stepReps = argc > 3 ? std::atoi(argv[3]) : 5;
  at::set_num_threads(1);
  std::mt19937 rng(12345);
  benchPerOp(reps, iters, rng);
  benchTrainingStep(stepReps, rng);
  return 0;
}
