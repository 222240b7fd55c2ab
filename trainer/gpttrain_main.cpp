// gpttrain's entry point: flags, layout check, thread pinning, process groups, then the trainer.
// Exit codes: 0 done, 2 bad flags / impossible layout / unusable input, 1 anything else.
#include "config.h"
#include "process_groups.h"
#include "trainer.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <c10/core/DeviceGuard.h>

#include <cstdio>
#include <exception>
#include <optional>

namespace {

// Torch intra-op threads and OpenBLAS threads add up (shared/NOTES.md): pin both.
void pinThreads(int threads) {
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

// Every microbatch frees its activations and allocates them again at the same sizes. By default
// glibc gives each block over its dynamic mmap threshold (at most 32 MiB) its own mapping, unmapped
// on free, and trims the heap top after a large free: each page of such a tensor then costs a page
// fault and a zero-fill on first touch, every microbatch (some 40,000 faults, 4% of a step at the
// benchmark's target size; docs/performance.md). So large blocks come from the heap and the heap
// keeps its pages. Process-wide, so set once here; glibc only.
void keepFreedMemoryMapped() {
#if defined(__GLIBC__)
  constexpr int kOneGiB = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kOneGiB);
  mallopt(M_TRIM_THRESHOLD, kOneGiB);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  keepFreedMemoryMapped();
  gpttrain::TrainConfig config;
  if (auto code = gpttrain::parseArgs(argc, argv, config)) return *code;
  gpttrain::LaunchEnv env;
  try {
    env = gpttrain::readLaunchEnv();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpttrain: error: %s\n", e.what());
    return 2;
  }
  if (std::string problem = gpttrain::layoutError(config, env.world); !problem.empty()) {
    std::fprintf(stderr, "gpttrain: error: %s\n", problem.c_str());
    return 2;
  }
  if (std::string problem = gpttrain::backendError(config.backend); !problem.empty()) {
    std::fprintf(stderr, "gpttrain: %s\n", problem.c_str());
    return 2;
  }
  if (std::string problem = gpttrain::deviceError(config.deviceType(), config.backend, env);
      !problem.empty()) {
    std::fprintf(stderr, "gpttrain: %s\n", problem.c_str());
    return 2;
  }
  // CUDA: device LOCAL_RANK is current for the rank's lifetime (NCCL communicators, streams and
  // allocations made without an explicit device use it).
  const torch::Device device = gpttrain::rankDevice(config.deviceType(), env);
  std::optional<c10::DeviceGuard> device_guard;
  if (device.is_cuda()) device_guard.emplace(device);
  const auto backend =
      config.backend == "nccl" ? gpttrain::CommBackend::kNccl : gpttrain::CommBackend::kGloo;
  if (config.threads > 0) {
    pinThreads(config.threads);
  } else if (env.local_world > 1) {
    pinThreads(1);  // ranks share this machine
  }
  try {
    gpttrain::ProcessGroups groups =
        gpttrain::makeProcessGroups(env, config.tp, config.pp, backend);
    std::unique_ptr<gpttrain::Trainer> trainer;
    try {
      trainer = std::make_unique<gpttrain::Trainer>(config, groups, device);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "gpttrain: error: %s\n", e.what());
      return 2;
    }
    return trainer->run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpttrain: rank %d: %s\n", env.rank, e.what());
    return 1;
  }
}
