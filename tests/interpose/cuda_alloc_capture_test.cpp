// The CUDA caching-allocator capture's adapter (interpose/cuda/cuda_alloc_capture.cpp) in its
// libtorch 2.2 form, in process, on this machine without CUDA: the stand-in headers in
// cuda_alloc_torch22/ declare 2.2's allocator API and this file defines it (a stand-in allocator
// that keeps the attached tracker and answers getDeviceStats), plus a stand-in ATen CUDAHooks whose
// initCUDA counts calls (libtorch's lazy CUDA initialisation goes through it). The "driver" is
// CUDA's stub libcuda.so (soname libcuda.so.1), loaded by the test when it wants the program to
// look as if it started using CUDA. Checked: nothing is attached and CUDA is not initialised while
// the driver is not loaded; once it is, CUDA is initialised once and the tracker attached once;
// events given to the tracker reach the trace with device, pointer, bytes, totals based on the
// allocator's own live bytes, tag and scope; segments become the reserved counter, OOM an instant;
// the stats; a failing CUDA initialisation records nothing and only says so when `cuda` was asked;
// a process that exits normally (static destructors, then libtracerun's stopCapture) while the
// watcher polls, or after it attached, exits 0 with its trace complete.
// Each TEST_CASE runs in its own process under CTest (the driver stays loaded once loaded).
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/cuda/CUDACachingAllocator.h>  // the stand-in (cuda_alloc_torch22/)
#include <c10/cuda/CUDAFunctions.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/temp_dir.h"
#include "capture.h"
#include "cuda_alloc_capture.h"
#include "tracerun/annotate.h"
#include "tracerun/trace/reader.h"

namespace cca = c10::cuda::CUDACachingAllocator;
using namespace tracerun;

// ---- the stand-in allocator and CUDA hooks ------------------------------------------------------

namespace {
std::mutex gMu;
std::vector<cca::AllocatorTraceTracker> gTrackers;
std::atomic<int> gAttaches{0}, gInits{0};
std::atomic<bool> gInitFails{false};
std::map<int, std::pair<int64_t, int64_t>> gBytes;  // device -> (reserved, requested)
}  // namespace

namespace c10::cuda {
DeviceIndex device_count() noexcept {
  return 2;
}
namespace CUDACachingAllocator {
DeviceStats getDeviceStats(int device) {
  std::lock_guard<std::mutex> lock(gMu);
  DeviceStats s;
  s.reserved_bytes[0].current = gBytes[device].first;
  s.requested_bytes[0].current = gBytes[device].second;
  return s;
}
void attachAllocatorTraceTracker(AllocatorTraceTracker tracker) {
  std::lock_guard<std::mutex> lock(gMu);
  gTrackers.push_back(std::move(tracker));
  ++gAttaches;
}
}  // namespace CUDACachingAllocator
}  // namespace c10::cuda

namespace at {
namespace {
// Looked up by the name "CUDAHooks" the first time libtorch needs CUDA hooks (inside namespace at,
// where the registration macro expects to be).
struct CUDAHooks : CUDAHooksInterface {
  explicit CUDAHooks(CUDAHooksArgs) {}
  void initCUDA() const override {
    ++gInits;
    TORCH_CHECK(!gInitFails.load(), "no CUDA GPUs are available (stand-in)");
  }
};
REGISTER_CUDA_HOOKS(CUDAHooks);
}  // namespace
}  // namespace at

namespace {

// What the allocator does on an event: every attached tracker sees it.
void allocatorEvent(cca::TraceEntry::Action action, int device, int64_t addr, size_t size) {
  std::vector<cca::AllocatorTraceTracker> trackers;
  {
    std::lock_guard<std::mutex> lock(gMu);
    trackers = gTrackers;
  }
  const cca::TraceEntry e(action, device, addr, size, nullptr);
  for (const auto& t : trackers) t(e);
}

bool driverLoaded() {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (h != nullptr) dlclose(h);
  return h != nullptr;
}

void loadDriver() {
  void* h = dlopen(TRACERUN_CUDA_STUB_DRIVER, RTLD_NOW | RTLD_LOCAL);
  INFO(dlerror());
  REQUIRE(h != nullptr);
  REQUIRE(driverLoaded());  // found by its soname, as the capture looks for it
}

template <typename F>
bool waitFor(F&& condition) {
  for (int i = 0; i < 12000; ++i) {  // 60 s: a bound for a hang, not a timing
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return condition();
}

interpose::CaptureConfig configFor(const std::string& db) {
  interpose::CaptureConfig config;
  config.output = db;
  config.signal_handlers = false;
  return config;
}

// Sends this process's stderr to a file until text() (the test's own output included).
class StderrToFile {
 public:
  explicit StderrToFile(std::string path) : path_(std::move(path)) {
    std::fflush(stderr);
    saved_ = dup(2);
    const int fd = ::open(path_.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 2);
    close(fd);
  }
  std::string text() {
    std::fflush(stderr);
    dup2(saved_, 2);
    close(saved_);
    return peek();
  }
  // What was written so far, still redirected.
  std::string peek() const {
    std::fflush(stderr);
    std::ifstream in(path_);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

std::map<std::string, trace::StatRow> statsOf(const trace::TraceReader& r) {
  std::map<std::string, trace::StatRow> m;
  for (const auto& s : r.stats()) m[s.name] = s;
  return m;
}

}  // namespace

TEST_CASE("CUDA alloc capture: nothing is attached or initialised before the driver is loaded") {
  REQUIRE_FALSE(driverLoaded());
  testing::TempDir dir("tracerun-cuda-alloc");
  const std::string db = dir.file("none.db");
  REQUIRE(interpose::startCapture(configFor(db)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // ~20 checks of the driver
  CHECK(gInits.load() == 0);
  CHECK(gAttaches.load() == 0);
  CHECK_FALSE(interpose::cuda::cudaAllocRecording());
  interpose::stopCapture();
  const auto r = trace::TraceReader::open(db);
  const auto stats = statsOf(r);
  CHECK(stats.count("cuda_alloc_events") == 0);  // no CUDA rows in a run that never used CUDA
  CHECK(stats.count("cuda_alloc_capture_off") == 0);

  // The watcher did run all along (the checks above also pass if it never started): in a second
  // capture, the driver loaded after 100 ms of polling is seen, and only then is CUDA initialised
  // and the tracker attached.
  const std::string db2 = dir.file("then.db");
  REQUIRE(interpose::startCapture(configFor(db2)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(gAttaches.load() == 0);
  loadDriver();
  CHECK(waitFor([] { return interpose::cuda::cudaAllocRecording(); }));
  CHECK(gInits.load() == 1);
  CHECK(gAttaches.load() == 1);
  interpose::stopCapture();
}

TEST_CASE("CUDA alloc capture: once the driver is loaded, events reach the trace") {
  ::unsetenv("TRACERUN_CAPTURE");
  {
    std::lock_guard<std::mutex> lock(gMu);
    gBytes[0] = {4 << 20, 1000};  // what the program allocated before the tracker was attached
    gBytes[1] = {0, 0};
  }
  testing::TempDir dir("tracerun-cuda-alloc");
  const std::string db = dir.file("events.db");
  REQUIRE(interpose::startCapture(configFor(db)));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  CHECK(gAttaches.load() == 0);
  loadDriver();
  REQUIRE(waitFor([] { return interpose::cuda::cudaAllocRecording(); }));
  CHECK(gInits.load() == 1);
  CHECK(gAttaches.load() == 1);

  using A = cca::TraceEntry;
  {
    tracerun::Scope scope("phase A");
    tracerun::MemoryTag tag(tracerun::MemoryCategory::kActivation);
    allocatorEvent(A::ALLOC, 0, 0x7000, 256);
    allocatorEvent(A::SEGMENT_ALLOC, 1, 0x9000000, 2 << 20);
    allocatorEvent(A::ALLOC, 1, 0x9000000, 100);
  }
  allocatorEvent(A::FREE_REQUESTED, 0, 0x7000, 256);
  allocatorEvent(A::FREE_COMPLETED, 0, 0x7000, 256);  // after record_stream: not a second free
  allocatorEvent(A::SEGMENT_ALLOC, 0, 0x8000000, 20 << 20);
  allocatorEvent(A::SNAPSHOT, 0, 0, 0);
  std::thread other([] {  // libtorch's autograd device threads free too
    allocatorEvent(A::FREE_REQUESTED, 1, 0x9000000, 100);
    allocatorEvent(A::OOM, 1, /*free bytes*/ 12345, 64 << 20);
  });
  other.join();
  interpose::stopCapture();
  CHECK_FALSE(interpose::cuda::cudaAllocRecording());
  allocatorEvent(A::ALLOC, 0, 0x7000, 64);  // after the capture: ignored, and harmless

  const auto r = trace::TraceReader::open(db);
  std::vector<trace::MemoryRow> cuda;
  for (const auto& m : r.memory(0, INT64_MIN, INT64_MAX)) {
    if (m.device_type == 1) cuda.push_back(m);
  }
  REQUIRE(cuda.size() == 4);
  // Totals start from the allocator's live requested bytes at the start (1000 on device 0).
  CHECK(cuda[0].device_index == 0);
  CHECK(cuda[0].ptr == 0x7000);
  CHECK(cuda[0].bytes == 256);
  CHECK(cuda[0].total == 1256);
  CHECK(cuda[0].category == core::MemoryCategory::kActivation);
  CHECK(r.str(cuda[0].scope) == "phase A");
  CHECK(cuda[1].device_index == 1);
  CHECK(cuda[1].bytes == 100);
  CHECK(cuda[1].total == 100);
  CHECK(cuda[2].device_index == 0);
  CHECK(cuda[2].bytes == -256);
  CHECK(cuda[2].total == 1000);
  CHECK(cuda[2].scope == 0);
  CHECK(cuda[3].device_index == 1);
  CHECK(cuda[3].bytes == -100);
  CHECK(cuda[3].total == 0);
  for (size_t i = 1; i < cuda.size(); ++i) CHECK(cuda[i].ts_ns >= cuda[i - 1].ts_ns);

  // Reserved bytes: one counter track per device; device 0's starts from the allocator's 4 MiB.
  std::map<std::string, std::vector<double>> counters;
  std::map<std::string, std::vector<int64_t>> instants;
  for (const auto& t : r.tracks()) {
    for (const auto& c : r.counters(t.id, INT64_MIN, INT64_MAX))
      counters[t.name].push_back(c.value);
    for (const auto& i : r.instants(t.id, INT64_MIN, INT64_MAX)) {
      instants[r.str(i.name)].push_back(i.value);
    }
  }
  CHECK(counters["cuda:1 reserved bytes"] == std::vector<double>{2 << 20});
  CHECK(counters["cuda:0 reserved bytes"] == std::vector<double>{24 << 20});
  CHECK(instants["cuda:1 out of memory"] == std::vector<int64_t>{64 << 20});

  const auto stats = statsOf(r);
  CHECK(stats.at("cuda_alloc_events").value == 4);
  CHECK(stats.at("cuda_alloc_live_bytes_at_attach").value == 1000);
  CHECK(stats.at("cuda_alloc_peak_bytes").value == 1256);
  CHECK(stats.at("cuda_reserved_peak_bytes").value == 24 << 20);
  CHECK(stats.at("cuda_alloc_live_bytes_at_end").value == 1000);
  CHECK(stats.at("cuda_alloc_frees_completed").value == 1);
  CHECK(stats.at("cuda_alloc_ooms").value == 1);
  CHECK(stats.at("cuda_alloc_ooms").severity == trace::Severity::kWarning);
  CHECK(stats.count("cuda_alloc_capture_off") == 0);

  // A second capture in the same process reuses the attached tracker (no second attach).
  const std::string db2 = dir.file("again.db");
  REQUIRE(interpose::startCapture(configFor(db2)));
  REQUIRE(waitFor([] { return interpose::cuda::cudaAllocRecording(); }));
  allocatorEvent(A::ALLOC, 1, 0xa000, 10);
  interpose::stopCapture();
  CHECK(gAttaches.load() == 1);
  CHECK(gInits.load() == 1);
  const auto r2 = trace::TraceReader::open(db2);
  int rows = 0;
  for (const auto& m : r2.memory(0, INT64_MIN, INT64_MAX)) rows += m.device_type == 1;
  CHECK(rows == 1);
}

TEST_CASE("CUDA alloc capture: CUDA that cannot start records nothing, silently without `cuda`") {
  ::unsetenv("TRACERUN_CAPTURE");
  gInitFails = true;
  testing::TempDir dir("tracerun-cuda-alloc");
  const std::string db = dir.file("quiet.db");
  loadDriver();
  StderrToFile err(dir.file("stderr.txt"));
  REQUIRE(interpose::startCapture(configFor(db)));
  const bool tried = waitFor([] { return gInits.load() == 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  interpose::stopCapture();
  const std::string said = err.text();
  REQUIRE(tried);
  CHECK(said.find("tracerun") == std::string::npos);
  CHECK(gAttaches.load() == 0);
  const auto r = trace::TraceReader::open(db);
  const auto stats = statsOf(r);
  CHECK(stats.count("cuda_alloc_capture_off") == 0);
  CHECK(stats.count("cuda_alloc_events") == 0);
}

TEST_CASE("CUDA alloc capture: CUDA that cannot start is one warning stat when `cuda` is asked") {
  ::unsetenv("TRACERUN_CAPTURE");
  gInitFails = true;
  testing::TempDir dir("tracerun-cuda-alloc");
  const std::string db = dir.file("said.db");
  REQUIRE(interpose::startCapture(configFor(db)));
  // Asked for after the start, so that libtracerun's CUPTI side (which reads it at the start)
  // stays off; the allocator side reads it when it has something to say.
  ::setenv("TRACERUN_CAPTURE", "ops,scopes,memory,cuda", 1);
  StderrToFile err(dir.file("stderr.txt"));
  loadDriver();
  const bool tried = waitFor([] { return gInits.load() == 1; });
  // The watcher says it after the failed start: wait for the line, not for a fixed time.
  waitFor([&err] { return err.peek().find('\n') != std::string::npos; });
  interpose::stopCapture();
  const std::string said = err.text();
  REQUIRE(tried);
  CHECK(said ==
        "tracerun: CUDA allocator events off: cannot initialise CUDA: no CUDA GPUs are available "
        "(stand-in)\n");
  CHECK(gAttaches.load() == 0);
  const auto r = trace::TraceReader::open(db);
  const auto stats = statsOf(r);
  REQUIRE(stats.count("cuda_alloc_capture_off") == 1);
  CHECK(stats.at("cuda_alloc_capture_off").severity == trace::Severity::kWarning);
}

// ---- exit: a traced process that returns from main keeps its trace -----------------------------
//
// The child process starts a capture (memory on, as by default) and calls exit(0), which runs the
// static destructors (this binary's, then libtracerun.so's, whose LibraryLifetime stops the
// capture). Before the watcher's owner joined it in its destructor, the joinable std::thread
// terminated the process (SIGABRT) and the shard was never closed: these two failed.

namespace {

// Forks; the child runs `child` (its return value is its exit code if it returns non-zero, else
// it calls exit(0)). Returns the child's wait status.
template <typename F>
int inChild(F&& child) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    const int code = child();
    if (code != 0) _exit(code);
    std::exit(0);  // a normal exit: atexit handlers and static destructors run
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

void requireCleanExit(int status) {
  INFO("wait status " << status << (WIFSIGNALED(status) ? " (killed by a signal)" : ""));
  REQUIRE_FALSE(WIFSIGNALED(status));
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
}

}  // namespace

TEST_CASE("CUDA alloc capture: a process that exits while the watcher polls keeps its trace") {
  ::unsetenv("TRACERUN_CAPTURE");
  testing::TempDir dir("tracerun-cuda-alloc");
  const std::string db = dir.file("exit-polling.db");
  const int status = inChild([&] {
    if (!interpose::startCapture(configFor(db))) return 3;
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the watcher polls the driver
    return 0;
  });
  requireCleanExit(status);
  const auto r = trace::TraceReader::open(db);  // throws on a shard that was never closed
  const auto stats = statsOf(r);
  CHECK(stats.count("memory_peak_bytes") == 1);  // written by stopCapture, last of all
  CHECK(stats.count("cuda_alloc_events") == 0);  // never attached: no CUDA rows
}

TEST_CASE("CUDA alloc capture: a process that exits after the tracker attached keeps its trace") {
  ::unsetenv("TRACERUN_CAPTURE");
  {
    std::lock_guard<std::mutex> lock(gMu);
    gBytes[0] = {2 << 20, 0};
    gBytes[1] = {0, 0};
  }
  testing::TempDir dir("tracerun-cuda-alloc");
  const std::string db = dir.file("exit-attached.db");
  const int status = inChild([&] {
    if (!interpose::startCapture(configFor(db))) return 3;
    void* h = dlopen(TRACERUN_CUDA_STUB_DRIVER, RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return 4;
    if (!waitFor([] { return interpose::cuda::cudaAllocRecording(); })) return 5;
    allocatorEvent(cca::TraceEntry::ALLOC, 0, 0x7000, 512);  // live at exit
    return 0;  // the watcher has returned but is still joinable
  });
  requireCleanExit(status);
  const auto r = trace::TraceReader::open(db);
  int rows = 0;
  for (const auto& m : r.memory(0, INT64_MIN, INT64_MAX)) {
    if (m.device_type == 1) {
      ++rows;
      CHECK(m.bytes == 512);
    }
  }
  CHECK(rows == 1);
  const auto stats = statsOf(r);
  CHECK(stats.count("memory_peak_bytes") == 1);
  REQUIRE(stats.count("cuda_alloc_events") == 1);
  CHECK(stats.at("cuda_alloc_events").value == 1);
  CHECK(stats.at("cuda_alloc_live_bytes_at_end").value == 512);
}
