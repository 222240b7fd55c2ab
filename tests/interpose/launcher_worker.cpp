// A small libtorch worker for the multi-rank launcher tests: prints its torchrun environment, runs
// annotated steps (a few ATen ops, "loss" and "step" counters) and fails on request (a signal or
// an exit code at a given rank and step, only in the first attempt). Not a training program.
// With --print-clock each step also prints "clock step N BEGIN END": CLOCK_MONOTONIC ns read just
// before the step's scope opened and just after it closed (the truth the merged times are checked
// against). With --ready-dir DIR every rank marks DIR/ATTEMPT.RANK once its first step is done,
// and the failing rank fails only when every rank of its attempt has (a loaded machine may start
// some ranks late; a test that checks what each rank recorded before the failure needs them all
// started). With --spoil-raw FILE the failing rank first overwrites the magic of FILE (the test
// names the rank's own raw shard, SHARDS/rankR.db.raw), a stand-in for any conversion that fails
// after the rank died (a full disk): the test checks that the launcher keeps that file.
//
// launcher_worker [--steps N] [--sleep-ms M] [--fail-rank R --fail-step S
//                  (--fail-signal SIG | --fail-code C)] [--fail-every-attempt] [--print-clock]
//                 [--ready-dir DIR] [--spoil-raw FILE]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "tracerun/annotate.h"

namespace {

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

long long monotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

std::string readyMark(const std::string& dir, int restart, int rank) {
  return dir + "/" + std::to_string(restart) + "." + std::to_string(rank);
}

// Waits (at most a minute) until every rank of this attempt has marked itself ready.
void awaitAllReady(const std::string& dir, int restart, int worldSize) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < worldSize; ++r) {
    while (::access(readyMark(dir, restart, r).c_str(), F_OK) != 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
}

void spoilMagic(const std::string& raw) {
  const int fd = ::open(raw.c_str(), O_WRONLY | O_CLOEXEC);
  const char zeros[8] = {};
  if (fd < 0 || ::pwrite(fd, zeros, sizeof zeros, 0) != static_cast<ssize_t>(sizeof zeros)) {
    std::printf("cannot spoil %s\n", raw.c_str());
  }
  if (fd >= 0) ::close(fd);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 5, sleepMs = 0, failRank = -1, failStep = -1, failSignal = 0, failCode = 0;
  bool everyAttempt = false, printClock = false;
  std::string readyDir, spoiledRaw;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--steps") steps = next();
    if (a == "--sleep-ms") sleepMs = next();
    if (a == "--fail-rank") failRank = next();
    if (a == "--fail-step") failStep = next();
    if (a == "--fail-signal") failSignal = next();
    if (a == "--fail-code") failCode = next();
    if (a == "--fail-every-attempt") everyAttempt = true;
    if (a == "--print-clock") printClock = true;
    if (a == "--ready-dir" && i + 1 < argc) readyDir = argv[++i];
    if (a == "--spoil-raw" && i + 1 < argc) spoiledRaw = argv[++i];
  }
  for (const char* name :
       {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
        "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT", "TRACERUN_RESTART", "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS", "TRACERUN_CLOCK_OFFSET_NS", "TRACERUN_CLOCK_RTT_NS",
        "TRACERUN_STORE_FILE"}) {
    const char* v = std::getenv(name);
    std::printf("env %s=%s\n", name, v != nullptr ? v : "");
  }
  std::printf("env intra_op_threads=%d\n", at::get_num_threads());
  std::fflush(stdout);
  const int rank = envInt("RANK", 0);
  const int restart = envInt("TORCHELASTIC_RESTART_COUNT", 0);
  at::Tensor w = at::ones({32, 32});
  for (int step = 1; step <= steps; ++step) {
    const long long begin = monotonicNs();
    {
      tracerun::Step s(step);
      at::Tensor x = at::ones({32, 32}) * static_cast<double>(step);
      w = (w + at::mm(x, w) * 1e-4).contiguous();
      tracerun::counter("loss", 1.0 / step);
      tracerun::counter("tokens_per_s", 1000.0);
      tracerun::counter("step", step);
    }
    const long long end = monotonicNs();
    if (printClock) std::printf("clock step %d %lld %lld\n", step, begin, end);
    std::printf("step %d\n", step);
    std::fflush(stdout);
    if (step == 1 && !readyDir.empty()) {
      if (std::FILE* mark = std::fopen(readyMark(readyDir, restart, rank).c_str(), "w")) {
        std::fclose(mark);
      }
    }
    if (rank == failRank && step == failStep && (restart == 0 || everyAttempt)) {
      if (!readyDir.empty()) awaitAllReady(readyDir, restart, envInt("WORLD_SIZE", 1));
      if (!spoiledRaw.empty()) spoilMagic(spoiledRaw);
      if (failSignal != 0) ::raise(failSignal);
      if (failCode != 0) return failCode;
    }
    if (sleepMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
  }
  std::printf("done\n");
  return 0;
}
