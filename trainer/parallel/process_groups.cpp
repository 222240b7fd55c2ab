// Rendezvous and group construction (see process_groups.h).
#include "parallel/process_groups.h"

#include <torch/cuda.h>
#include <tracerun/traced_group.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

namespace gpttrain {
namespace {

constexpr std::chrono::milliseconds kTimeout{std::chrono::minutes(5)};

int envInt(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return fallback;
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0 || value > 1 << 30) {
    throw std::runtime_error(std::string("environment variable ") + name + "='" + text +
                             "' is not a non-negative integer");
  }
  return static_cast<int>(value);
}

bool isLoopback(const std::string& addr) {
  return addr == "localhost" || addr.rfind("127.", 0) == 0 || addr == "::1";
}

tracerun::compat::CollectiveGroupPtr makeBackend(CommBackend backend,
                                                 const c10::intrusive_ptr<c10d::Store>& store,
                                                 int rank, int size, const std::string& hostname) {
#if defined(TRACERUN_TORCH_HAS_NCCL)
  if (backend == CommBackend::kNccl) {
    return tracerun::compat::makeNcclGroup(store, rank, size, kTimeout);
  }
#else
  if (backend == CommBackend::kNccl) {
    throw std::runtime_error("--backend nccl needs a libtorch built with CUDA");
  }
#endif
  return tracerun::compat::makeGlooGroup(store, rank, size, hostname, kTimeout);
}

GroupPtr makeGroup(const std::string& name, const std::vector<int>& members, int global_rank,
                   const c10::intrusive_ptr<c10d::Store>& store, const std::string& hostname,
                   CommBackend backend) {
  auto g = makeSoloGroup(name, global_rank);
  g->global_ranks = members;
  g->size = static_cast<int>(members.size());
  for (int i = 0; i < g->size; ++i) {
    if (members[i] == global_rank) g->rank = i;
  }
  if (g->size == 1) return g;
  std::string prefix = name;
  for (int r : members) prefix += "/" + std::to_string(r);
  auto sub = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
  // The decorator records each collective when libtracerun is loaded (else: the group itself).
  g->pg =
      tracerun::traceGroup(makeBackend(backend, sub, g->rank, g->size, hostname), name, members);
  g->native_base_collectives = g->pg->getBackendName() != "gloo";
  g->native_bf16 = g->pg->getBackendName() != "gloo";
  g->host_p2p = g->pg->getBackendName() == "gloo";
  return g;
}

}  // namespace

std::string backendError(const std::string& backend) {
  if (backend != "nccl") return "";
#if defined(TRACERUN_TORCH_HAS_NCCL)
  if (!torch::cuda::is_available()) return "--backend nccl needs a CUDA device (none is visible)";
  return "";
#else
  return "--backend nccl needs a libtorch built with CUDA";
#endif
}

std::string deviceError(const std::string& device, const std::string& backend,
                        const LaunchEnv& env) {
  if (device != "cuda") {
    return backend == "nccl" ? "--backend nccl needs --device cuda (NCCL takes CUDA tensors only)"
                             : "";
  }
#if defined(TRACERUN_TORCH_HAS_CUDA)
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  if (count == 0) return "--device cuda needs a CUDA device (none is visible)";
  if (env.local_rank >= count) {
    return "--device cuda: LOCAL_RANK " + std::to_string(env.local_rank) + " but only " +
           std::to_string(count) + " CUDA device(s) are visible (one per local rank)";
  }
  return "";
#else
  (void)env;
  return "--device cuda needs a libtorch built with CUDA (this one is CPU-only)";
#endif
}

torch::Device rankDevice(const std::string& device, const LaunchEnv& env) {
  if (device != "cuda") return torch::Device(torch::kCPU);
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
}

LaunchEnv readLaunchEnv() {
  LaunchEnv env;
  if (std::getenv("RANK") == nullptr || std::getenv("WORLD_SIZE") == nullptr) return env;
  env.launched = true;
  env.rank = envInt("RANK", 0);
  env.world = envInt("WORLD_SIZE", 1);
  env.local_rank = envInt("LOCAL_RANK", env.rank);
  env.local_world = envInt("LOCAL_WORLD_SIZE", env.world);
  env.master_port = envInt("MASTER_PORT", env.master_port);
  if (const char* addr = std::getenv("MASTER_ADDR")) env.master_addr = addr;
  if (const char* file = std::getenv("TRACERUN_STORE_FILE")) env.store_file = file;
  if (env.world < 1 || env.rank >= env.world) {
    throw std::runtime_error("RANK " + std::to_string(env.rank) + " is not below WORLD_SIZE " +
                             std::to_string(env.world));
  }
  return env;
}

ProcessGroups makeProcessGroups(const LaunchEnv& env, int tp, int pp, CommBackend backend,
                                bool chimera) {
  ProcessGroups groups;
  groups.grid = RankGrid(env.world, tp, pp);
  groups.rank = env.rank;
  groups.coords = groups.grid.coords(env.rank);
  std::vector<int> everyone;
  for (int r = 0; r < env.world; ++r) everyone.push_back(r);
  if (env.world == 1) {
    groups.world = makeSoloGroup("world", 0);
    groups.tp = makeSoloGroup("tp", 0);
    groups.dp = makeSoloGroup("dp", 0);
    groups.pp = makeSoloGroup("pp", 0);
    groups.embedding = makeSoloGroup("embedding", 0);
    groups.mirror = makeSoloGroup("mirror", 0);
    return groups;
  }
  if (!env.store_file.empty()) {
    // Every rank opens the same file; the last one to destroy its store removes it (the launcher
    // removes it when ranks die first). A fresh file per attempt: it keeps every key it had.
    groups.store = c10::make_intrusive<c10d::FileStore>(env.store_file, env.world);
    groups.store->setTimeout(kTimeout);
  } else {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(env.master_port);
    options.isServer = env.rank == 0;
    options.numWorkers = env.world;
    options.timeout = kTimeout;
    groups.store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, options);
  }
  const bool oneHost = !env.store_file.empty() && env.local_world == env.world;
  const std::string hostname = oneHost || isLoopback(env.master_addr) ? "127.0.0.1" : "";
  // Same order on every rank; each group connects only its own members.
  auto group = [&](const std::string& name, const std::vector<int>& members) {
    return makeGroup(name, members, env.rank, groups.store, hostname, backend);
  };
  groups.world = group("world", everyone);
  groups.tp = group("tp", groups.grid.tpGroup(env.rank));
  groups.dp = group("dp", groups.grid.dpGroup(env.rank));
  groups.pp = group("pp", groups.grid.ppGroup(env.rank));
  const std::vector<int> stages = groups.grid.ppGroup(env.rank);
  const bool ends = pp > 1 && (groups.coords.pp == 0 || groups.coords.pp == pp - 1);
  groups.embedding = ends ? group("embedding", {stages.front(), stages.back()})
                          : makeSoloGroup("embedding", env.rank);
  const int pr = groups.coords.pp, mirror_pr = pp - 1 - pr;
  groups.mirror =
      chimera && pr != mirror_pr
          ? group("mirror", {stages[std::min(pr, mirror_pr)], stages[std::max(pr, mirror_pr)]})
          : makeSoloGroup("mirror", env.rank);
  return groups;
}

}  // namespace gpttrain
