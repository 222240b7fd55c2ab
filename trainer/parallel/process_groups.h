// The rank's place in the job (torchrun environment) and every process group it belongs to,
// built once and passed explicitly: no global state. It does not decide what runs on which group.
#pragma once

#include "parallel/collectives.h"
#include "parallel/rank_grid.h"

#include <string>

namespace gpttrain {

// RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and tracerun's
// TRACERUN_STORE_FILE. Without RANK and WORLD_SIZE: one process (launched == false). Throws
// std::runtime_error on malformed values.
struct LaunchEnv {
  bool launched = false;
  int rank = 0;
  int local_rank = 0;
  int world = 1;
  int local_world = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // A c10d FileStore path (tracerun's one-node launch: no socket); empty: TCPStore on
  // MASTER_ADDR:MASTER_PORT, as under torchrun.
  std::string store_file;
};
LaunchEnv readLaunchEnv();

struct ProcessGroups {
  RankGrid grid{1, 1, 1};
  int rank = 0;
  RankCoords coords;
  GroupPtr world;
  GroupPtr tp;
  GroupPtr dp;
  GroupPtr pp;
  // The first and the last pipeline stage of this (tp, dp) position, which both hold the tied
  // embedding; a group of one on the other stages and without pipeline parallelism.
  GroupPtr embedding;
  // --schedule chimera: this rank and pipeline rank p-1-r of its (tp, dp) position, which hold the
  // same stages (both replicas sum their gradients); a group of one otherwise.
  GroupPtr mirror;
  c10::intrusive_ptr<c10d::Store> store;  // null in a single-process run
};

// Which c10d backend the multi-rank groups use. kNccl exists only in a build against a libtorch
// with CUDA and c10d NCCL (TRACERUN_TORCH_HAS_NCCL); backendError() says when it cannot run.
enum class CommBackend { kGloo, kNccl };

// Empty when `backend` ("gloo" or "nccl", as --backend takes it) can run in this build on this
// machine; else one line for the user (without the "gpttrain: " prefix).
std::string backendError(const std::string& backend);

// Empty when this rank can compute on `device` ("cpu" or "cuda", TrainConfig::deviceType) with
// `backend`: cuda needs a libtorch with CUDA (TRACERUN_TORCH_HAS_CUDA) and a visible device
// LOCAL_RANK; nccl needs cuda. Else one line for the user (without the "gpttrain: " prefix).
std::string deviceError(const std::string& device, const std::string& backend,
                        const LaunchEnv& env);
// The device this rank computes on: the CPU, or CUDA device LOCAL_RANK (one GPU per local rank).
// The caller makes it current (c10::DeviceGuard) for the rank's lifetime.
torch::Device rankDevice(const std::string& device, const LaunchEnv& env);

// Rendezvous over a FileStore at env.store_file when set (opens no socket), else over a TCPStore at
// MASTER_ADDR:MASTER_PORT (rank 0 serves it, on every interface: libtorch 1.13 has no bind
// address), then one group per grid dimension (Gloo, or NCCL when asked and compiled) behind its
// own PrefixStore; groups of one rank need no communication. Gloo binds 127.0.0.1 when every rank
// is on this host (loopback MASTER_ADDR, or a FileStore with LOCAL_WORLD_SIZE == WORLD_SIZE).
// Blocks until every rank has joined. Requires env.world % (tp * pp) == 0.
ProcessGroups makeProcessGroups(const LaunchEnv& env, int tp, int pp,
                                CommBackend backend = CommBackend::kGloo, bool chimera = false);

}  // namespace gpttrain
