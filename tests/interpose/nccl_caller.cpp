// A program that calls NCCL (the stand-in libnccl of fake_nccl.cpp) with known arguments, for the
// interposer test: nccl_interpose_test.cpp holds the same lists. Links libtracerun, which captures
// when TRACERUN_OUTPUT is set. Checks nothing itself except NCCL's return codes.
//   nccl_caller         every collective and point-to-point call, then ncclCommDestroy
//   nccl_caller abort   a communicator, one all-reduce, then ncclCommAbort
#include <nccl.h>

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {
void* ptr(uintptr_t v) { return reinterpret_cast<void*>(v); }
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
