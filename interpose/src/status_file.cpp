// Writes the per-rank status file for the launcher (status_file.h): one line
// "step=S samples=N loss=L tokens_per_s=T\n", replaced atomically (temporary file, rename) every
// 0.5 s while it changes. Does not parse or read anything the program prints; no libtorch.
#include "status_file.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

namespace tracerun::interpose {

namespace {

std::atomic<double> gStep{-1.0};  // a "step" counter, when the program sends one
std::atomic<double> gLoss{0.0};
std::atomic<double> gTokensPerS{0.0};
std::atomic<long> gLossSamples{0};  // the step when no "step" counter exists
std::atomic<long> gVersion{0};
std::atomic<bool> gEnabled{false};
std::once_flag gOnce;

std::string statusPath() {
  const char* path = std::getenv("TRACERUN_STATUS");
  if (path == nullptr || *path == '\0') return {};
  std::string out = path;
  const char* rank = std::getenv("RANK");
  for (auto p = out.find("%r"); p != std::string::npos; p = out.find("%r")) {
    out.replace(p, 2, rank != nullptr ? rank : "0");
  }
  return out;
}

void writerMain(std::string path) {
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, nullptr);  // signals belong to the program's threads
  const pid_t owner = ::getpid();
  const std::string tmp = path + ".tmp";
  long written = -1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (::getpid() != owner) return;
    const long version = gVersion.load(std::memory_order_acquire);
    if (version == written) continue;
    written = version;
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (f == nullptr) continue;
    const double step = gStep.load(std::memory_order_relaxed);
    std::fprintf(f, "step=%.0f samples=%ld loss=%.6g tokens_per_s=%.6g\n",
                 step >= 0 ? step : static_cast<double>(gLossSamples.load()), gLossSamples.load(),
                 gLoss.load(), gTokensPerS.load());
    std::fclose(f);
    std::rename(tmp.c_str(), path.c_str());
  }
}

}  // namespace

void noteStatusCounter(const char* name, double value) noexcept {
  std::call_once(gOnce, [] {
    std::string path = statusPath();
    if (path.empty()) return;
    try {
      std::thread(writerMain, std::move(path)).detach();  // process lifetime, sleeps when idle
      gEnabled.store(true, std::memory_order_release);
    } catch (...) {
    }
  });
  if (!gEnabled.load(std::memory_order_acquire)) return;
  if (std::strcmp(name, "loss") == 0) {
    gLoss.store(value, std::memory_order_relaxed);
    gLossSamples.fetch_add(1, std::memory_order_relaxed);
  } else if (std::strcmp(name, "tokens_per_s") == 0) {
    gTokensPerS.store(value, std::memory_order_relaxed);
  } else if (std::strcmp(name, "step") == 0) {
    gStep.store(value, std::memory_order_relaxed);
  } else {
    return;
  }
  gVersion.fetch_add(1, std::memory_order_release);
}

}  // namespace tracerun::interpose
