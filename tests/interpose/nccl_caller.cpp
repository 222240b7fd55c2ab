// A program that calls NCCL (the stand-in libnccl of fake_nccl.cpp) with known arguments, for the
// interposer test: nccl_interpose_test.cpp holds the same lists. Links libtracerun, which captures
// when TRACERUN_OUTPUT is set. Checks nothing itself except NCCL's return codes.
//   nccl_caller         every collective and point-to-point call, then ncclCommDestroy
//   nccl_caller abort   a communicator, one all-reduce, then ncclCommAbort
//   nccl_caller split   rank RANK of WORLD_SIZE (the launcher's): the world communicator split
//                       by RANK % 2 (key RANK / 2); in each half, its rank 0 sends three
//                       messages to its rank 1; then both communicators destroyed
//   nccl_caller v2.28   NCCL 2.28's all-to-all, gather and scatter on a 4-rank communicator
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {
void* ptr(uintptr_t v) {
  return reinterpret_cast<void*>(v);
}
}  // namespace

int main(int argc, char** argv) {
  const auto stream = static_cast<cudaStream_t>(ptr(0x77));
  ncclUniqueId id;
  int bad = 0;
  if (argc > 1 && std::strcmp(argv[1], "abort") == 0) {
    bad += ncclGetUniqueId(&id) != ncclSuccess;
    ncclComm_t comm = nullptr;
    bad += ncclCommInitRank(&comm, 2, id, 1) != ncclSuccess;
    bad += ncclAllReduce(ptr(0x1000), ptr(0x2000), 16, ncclFloat32, ncclSum, comm, stream) != 0;
    bad += ncclCommAbort(comm) != ncclSuccess;
    if (bad != 0) std::fprintf(stderr, "nccl_caller: %d calls failed\n", bad);
    return bad == 0 ? 0 : 1;
  }
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
  if (argc > 1 && std::strcmp(argv[1], "v2.28") == 0) {
    bad += ncclGetUniqueId(&id) != ncclSuccess;
    ncclComm_t comm = nullptr;
    bad += ncclCommInitRank(&comm, 4, id, 2) != ncclSuccess;
    bad += ncclAlltoAll(ptr(0x1000), ptr(0x2000), 32, ncclFloat32, comm, stream) != 0;
    bad += ncclGather(ptr(0x1000), ptr(0x2000), 16, ncclFloat16, 1, comm, stream) != 0;
    bad += ncclScatter(ptr(0x1000), ptr(0x2000), 8, ncclInt64, 0, comm, stream) != 0;
    bad += ncclCommDestroy(comm) != ncclSuccess;
    if (bad != 0) std::fprintf(stderr, "nccl_caller: %d calls failed\n", bad);
    return bad == 0 ? 0 : 1;
  }
#endif
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)  // ncclCommSplit is 2.18's
  if (argc > 1 && std::strcmp(argv[1], "split") == 0) {
    const char* rankText = std::getenv("RANK");
    const char* worldText = std::getenv("WORLD_SIZE");
    const int rank = rankText != nullptr ? std::atoi(rankText) : 0;
    const int world = worldText != nullptr ? std::atoi(worldText) : 1;
    bad += ncclGetUniqueId(&id) != ncclSuccess;  // the stand-in's id is the same everywhere
    ncclComm_t all = nullptr, half = nullptr;
    bad += ncclCommInitRank(&all, world, id, rank) != ncclSuccess;
    bad += ncclCommSplit(all, rank % 2, rank / 2, &half, nullptr) != ncclSuccess;
    for (int k = 0; k < 3; ++k) {
      if (rank / 2 == 0) {
        bad += ncclSend(ptr(0x1000), 64, ncclFloat32, 1, half, stream) != 0;
      } else {
        bad += ncclRecv(ptr(0x2000), 64, ncclFloat32, 0, half, stream) != 0;
      }
    }
    bad += ncclCommDestroy(half) != ncclSuccess;
    bad += ncclCommDestroy(all) != ncclSuccess;
    if (bad != 0) std::fprintf(stderr, "nccl_caller: %d calls failed\n", bad);
    return bad == 0 ? 0 : 1;
  }
#endif
  bad += ncclGetUniqueId(&id) != ncclSuccess;
  ncclComm_t comm = nullptr;
  bad += ncclCommInitRank(&comm, 4, id, 2) != ncclSuccess;
  bad += ncclGroupStart() != ncclSuccess;
  bad += ncclAllReduce(ptr(0x1000), ptr(0x2000), 1000, ncclFloat32, ncclSum, comm, stream) != 0;
  bad += ncclBroadcast(ptr(0x1000), ptr(0x1000), 10, ncclInt64, 1, comm, stream) != 0;
  bad += ncclAllGather(ptr(0x1000), ptr(0x3000), 256, ncclFloat16, comm, stream) != 0;
  bad += ncclReduceScatter(ptr(0x3000), ptr(0x1000), 64, ncclFloat64, ncclMax, comm, stream) != 0;
  bad += ncclReduce(ptr(0x1000), ptr(0x2000), 7, ncclInt32, ncclProd, 3, comm, stream) != 0;
  bad += ncclSend(ptr(0x1000), 100, ncclUint8, 3, comm, stream) != 0;
  bad += ncclRecv(ptr(0x2000), 50, ncclBfloat16, 1, comm, stream) != 0;
  bad += ncclGroupEnd() != ncclSuccess;
  bad += ncclCommDestroy(comm) != ncclSuccess;
  if (bad != 0) std::fprintf(stderr, "nccl_caller: %d calls failed\n", bad);
  return bad == 0 ? 0 : 1;
}
