// A stand-in libnccl for tests (there is no GPU here): the real NCCL signatures (from nccl.h), no
// communication. Each call appends one line to $FAKE_NCCL_LOG: its name and every argument.
// Communicators are distinct dummy pointers; buffers are never touched.
#include <nccl.h>

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

struct FakeComm {
  int rank;
  int nranks;
};

void logLine(const char* format, ...) __attribute__((format(printf, 1, 2)));
void logLine(const char* format, ...) {
  const char* path = std::getenv("FAKE_NCCL_LOG");
  if (path == nullptr) return;
  FILE* f = std::fopen(path, "a");
  if (f == nullptr) return;
  va_list args;
  va_start(args, format);
  std::vfprintf(f, format, args);
  va_end(args);
  std::fputc('\n', f);
  std::fclose(f);
}

}  // namespace

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  std::memset(id->internal, 0, sizeof id->internal);
  std::strcpy(id->internal, "fake-nccl-id");
  logLine("GetUniqueId");
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  *comm = reinterpret_cast<ncclComm_t>(new FakeComm{rank, nranks});
  // $FAKE_NCCL_INIT_MS: a set-up as slow as a real one (hundreds of ms on a GPU machine).
  if (const char* ms = std::getenv("FAKE_NCCL_INIT_MS")) ::usleep(std::atoi(ms) * 1000u);
  logLine("CommInitRank nranks=%d id=%s rank=%d", nranks, id.internal, rank);
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                int rank, ncclConfig_t* config) {
  *comm = reinterpret_cast<ncclComm_t>(new FakeComm{rank, nranks});
  logLine("CommInitRankConfig nranks=%d id=%s rank=%d config=%p", nranks, id.internal, rank,
          static_cast<void*>(config));
  return ncclSuccess;
}
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)  // ncclCommSplit is 2.18's
// The new communicator's size is not knowable here (no other process is asked):
// $FAKE_NCCL_SPLIT_SIZE (default 1); its rank is the key.
FAKE_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                       ncclConfig_t* config) {
  const char* size = std::getenv("FAKE_NCCL_SPLIT_SIZE");
  *newcomm = reinterpret_cast<ncclComm_t>(new FakeComm{key, size != nullptr ? std::atoi(size) : 1});
  logLine("CommSplit comm=%d color=%d key=%d config=%p", reinterpret_cast<FakeComm*>(comm)->rank,
          color, key, static_cast<void*>(config));
  return ncclSuccess;
}
#endif
FAKE_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  *count = reinterpret_cast<FakeComm*>(comm)->nranks;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  *rank = reinterpret_cast<FakeComm*>(comm)->rank;
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  logLine("CommDestroy comm=%d", reinterpret_cast<FakeComm*>(comm)->rank);
  delete reinterpret_cast<FakeComm*>(comm);
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  logLine("CommAbort comm=%d", reinterpret_cast<FakeComm*>(comm)->rank);
  delete reinterpret_cast<FakeComm*>(comm);
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclAllReduce(const void* s, void* r, size_t count, ncclDataType_t t,
                                       ncclRedOp_t op, ncclComm_t, cudaStream_t st) {
  logLine("AllReduce send=%p recv=%p count=%zu dtype=%d op=%d stream=%p", s, r, count, int(t),
          int(op), static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclAllGather(const void* s, void* r, size_t count, ncclDataType_t t,
                                       ncclComm_t, cudaStream_t st) {
  logLine("AllGather send=%p recv=%p count=%zu dtype=%d stream=%p", s, r, count, int(t),
          static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclReduceScatter(const void* s, void* r, size_t count, ncclDataType_t t,
                                           ncclRedOp_t op, ncclComm_t, cudaStream_t st) {
  logLine("ReduceScatter send=%p recv=%p count=%zu dtype=%d op=%d stream=%p", s, r, count, int(t),
          int(op), static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclBroadcast(const void* s, void* r, size_t count, ncclDataType_t t,
                                       int root, ncclComm_t, cudaStream_t st) {
  logLine("Broadcast send=%p recv=%p count=%zu dtype=%d root=%d stream=%p", s, r, count, int(t),
          root, static_cast<void*>(st));
  return ncclSuccess;
}
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)  // 2.28's own all-to-all, gather, scatter
FAKE_EXPORT ncclResult_t ncclAlltoAll(const void* s, void* r, size_t count, ncclDataType_t t,
                                      ncclComm_t, cudaStream_t st) {
  logLine("AlltoAll send=%p recv=%p count=%zu dtype=%d stream=%p", s, r, count, int(t),
          static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclGather(const void* s, void* r, size_t count, ncclDataType_t t,
                                    int root, ncclComm_t, cudaStream_t st) {
  logLine("Gather send=%p recv=%p count=%zu dtype=%d root=%d stream=%p", s, r, count, int(t), root,
          static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclScatter(const void* s, void* r, size_t count, ncclDataType_t t,
                                     int root, ncclComm_t, cudaStream_t st) {
  logLine("Scatter send=%p recv=%p count=%zu dtype=%d root=%d stream=%p", s, r, count, int(t),
          root, static_cast<void*>(st));
  return ncclSuccess;
}
#endif
FAKE_EXPORT ncclResult_t ncclReduce(const void* s, void* r, size_t count, ncclDataType_t t,
                                    ncclRedOp_t op, int root, ncclComm_t, cudaStream_t st) {
  logLine("Reduce send=%p recv=%p count=%zu dtype=%d op=%d root=%d stream=%p", s, r, count, int(t),
          int(op), root, static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclSend(const void* s, size_t count, ncclDataType_t t, int peer,
                                  ncclComm_t, cudaStream_t st) {
  logLine("Send send=%p count=%zu dtype=%d peer=%d stream=%p", s, count, int(t), peer,
          static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclRecv(void* r, size_t count, ncclDataType_t t, int peer, ncclComm_t,
                                  cudaStream_t st) {
  logLine("Recv recv=%p count=%zu dtype=%d peer=%d stream=%p", r, count, int(t), peer,
          static_cast<void*>(st));
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclGroupStart() {
  logLine("GroupStart");
  return ncclSuccess;
}
FAKE_EXPORT ncclResult_t ncclGroupEnd() {
  logLine("GroupEnd");
  return ncclSuccess;
}
