// libtracerun_nccl.so: NCCL host calls by symbol interposition. Preloaded before libnccl, each
// function records one comm span (host call: issue to return) and forwards to the real symbol found
// with dlsym(RTLD_NEXT). It does not see device-side completion (that is CUPTI's NCCL kernels),
// and it never changes an argument or a result. Records through libtracerun's weak
// tracerun_comm_record: with no libtracerun loaded it only forwards.
#include <dlfcn.h>
#include <nccl.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>

#include "tracerun/comm_event.h"
#include "tracerun/core/vocabulary.h"

namespace {

namespace vocab = tracerun::vocab;

int64_t nowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

bool capturing() noexcept {
  return &tracerun_comm_record != nullptr && &tracerun_comm_capturing != nullptr &&
         tracerun_comm_capturing() != 0;
}

int64_t dtypeSize(ncclDataType_t t) noexcept {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
      return 1;
    case ncclFloat16:
#if NCCL_VERSION_CODE >= 21000
    case ncclBfloat16:
#endif
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
    default:
      return 1;  // fp8 types and anything newer: one byte or unknown
  }
}

// What tracerun knows of a communicator: learned at ncclCommInitRank*, else asked of NCCL.
struct CommInfo {
  std::string name;   // "nccl <16 hex digits of the unique id>" (equal on every rank)
  std::string track;  // the same name: one async track per communicator
  int rank = -1;
  int nranks = -1;
  int64_t seq = 0;
  int64_t splits = 0;  // ncclCommSplit calls made on it (every member makes them in one order)
};

std::mutex gMu;
std::unordered_map<const void*, CommInfo>& comms() {
  static auto* m = new std::unordered_map<const void*, CommInfo>();  // outlives static dtors
  return *m;
}

template <typename Fn>
Fn realSymbol(const char* name) noexcept {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) std::fprintf(stderr, "tracerun: %s not found after libtracerun_nccl\n", name);
  return reinterpret_cast<Fn>(p);
}
#define TRACERUN_REAL(fn)                                  \
  static const auto real = realSymbol<decltype(&fn)>(#fn); \
  if (real == nullptr) return ncclSystemError

std::string idName(const ncclUniqueId& id) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the whole id
  for (unsigned char c : id.internal) h = (h ^ c) * 1099511628211ull;
  char text[32];
  std::snprintf(text, sizeof text, "nccl %016llx", static_cast<unsigned long long>(h));
  return text;
}

void rememberComm(ncclComm_t comm, const ncclUniqueId& id, int rank, int nranks) {
  std::lock_guard<std::mutex> lock(gMu);
  CommInfo& c = comms()[comm];
  c.name = c.track = idName(id);
  c.rank = rank;
  c.nranks = nranks;
  c.seq = 0;
}

// The name of the communicator this split of `parent` makes, taken before the call: the parent's
// name, the split's index on the parent and the color ("nccl 00ab.../s0c1"). ncclCommSplit is
// collective over the parent, so every member counts the splits alike (one with no color too);
// "" for a parent whose creation was not seen.
std::string nextSplitName(ncclComm_t parent, int color) {
  std::lock_guard<std::mutex> lock(gMu);
  auto p = comms().find(parent);
  if (p == comms().end()) return "";
  return p->second.name + "/s" + std::to_string(p->second.splits++) + "c" + std::to_string(color);
}

// A communicator named `name`, its rank and size asked of NCCL (left -1 where NCCL cannot say).
CommInfo askedOfNccl(ncclComm_t comm, const std::string& name) {
  using CountFn = ncclResult_t (*)(const ncclComm_t, int*);
  static const auto count = reinterpret_cast<CountFn>(dlsym(RTLD_NEXT, "ncclCommCount"));
  static const auto userRank = reinterpret_cast<CountFn>(dlsym(RTLD_NEXT, "ncclCommUserRank"));
  CommInfo c;
  c.name = c.track = name;
  if (count != nullptr) count(comm, &c.nranks);
  if (userRank != nullptr) userRank(comm, &c.rank);
  return c;
}

// Remembers a split's communicator under that name. Without it each rank named it by its own
// address and the report could not tell which ranks a send/recv joined.
void rememberSplit(ncclComm_t comm, const std::string& name) {
  const CommInfo c = askedOfNccl(comm, name);
  std::lock_guard<std::mutex> lock(gMu);
  comms()[comm] = c;
}

// Copies what is known of comm into e (group, track, rank, size, seq); asks NCCL when unknown.
void describeComm(ncclComm_t comm, tracerun_comm_event& e, std::string& name) {
  std::lock_guard<std::mutex> lock(gMu);
  auto it = comms().find(comm);
  if (it == comms().end()) {
    char text[40];
    std::snprintf(text, sizeof text, "nccl comm@%p", static_cast<void*>(comm));
    it = comms().emplace(comm, askedOfNccl(comm, text)).first;
  }
  name = it->second.name;
  e.group_rank = it->second.rank;
  e.group_size = it->second.nranks;
  e.seq = it->second.seq++;
}

// One host call being recorded (constructed before forwarding, recorded after).
class HostCall {
 public:
  HostCall(const char* op, ncclComm_t comm, int64_t bytes, int64_t dtype, int64_t peer,
           int64_t root)
      : on_(capturing()) {
    if (!on_) return;
    e_.op = op;
    e_.bytes = bytes;
    e_.dtype = dtype;
    e_.peer = peer;
    e_.root = root;
    e_.tag = -1;
    e_.group_rank = e_.group_size = e_.seq = -1;
    if (comm != nullptr) describeComm(comm, e_, name_);
    e_.start_ns = nowNs();
  }
  ~HostCall() {
    if (!on_) return;
    e_.end_ns = nowNs();
    e_.group = name_.empty() ? nullptr : name_.c_str();
    e_.track = name_.empty() ? "nccl" : name_.c_str();
    tracerun_comm_record(&e_);
  }
  HostCall(const HostCall&) = delete;
  HostCall& operator=(const HostCall&) = delete;
  // The bytes given are per rank of the communicator: times its size, which describing the call
  // learnt (from NCCL itself for a communicator made by a call not interposed).
  void timesGroupSize() {
    if (on_ && e_.group_size > 0) e_.bytes *= e_.group_size;
  }

 private:
  bool on_;
  tracerun_comm_event e_{};
  std::string name_;
};

// CommDestroy and CommAbort: traced like any call, then the communicator is forgotten.
ncclResult_t endComm(const char* name, ncclResult_t (*real)(ncclComm_t), ncclComm_t comm) {
  ncclResult_t r;
  {
    HostCall call(name, comm, 0, -1, -1, -1);
    r = real(comm);
  }
  std::lock_guard<std::mutex> lock(gMu);
  comms().erase(comm);
  return r;
}

}  // namespace

#define TRACERUN_EXPORT extern "C" __attribute__((visibility("default")))

TRACERUN_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId,
                                              int rank) {
  TRACERUN_REAL(ncclCommInitRank);
  ncclResult_t r;
  {
    HostCall call(vocab::nccl::kCommInitRank, nullptr, 0, -1, -1, -1);
    r = real(comm, nranks, commId, rank);
  }
  if (r == ncclSuccess && comm != nullptr) rememberComm(*comm, commId, rank, nranks);
  return r;
}

TRACERUN_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks,
                                                    ncclUniqueId commId, int rank,
                                                    ncclConfig_t* config) {
  TRACERUN_REAL(ncclCommInitRankConfig);
  ncclResult_t r;
  {
    HostCall call(vocab::nccl::kCommInitRankConfig, nullptr, 0, -1, -1, -1);
    r = real(comm, nranks, commId, rank, config);
  }
  if ((r == ncclSuccess || r == ncclInProgress) && comm != nullptr) {
    rememberComm(*comm, commId, rank, nranks);
  }
  return r;
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)  // ncclCommSplit is 2.18's
TRACERUN_EXPORT ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
                                           ncclConfig_t* config) {
  TRACERUN_REAL(ncclCommSplit);
  const std::string name = nextSplitName(comm, color);
  ncclResult_t r;
  {
    HostCall call(vocab::nccl::kCommSplit, comm, 0, -1, -1, -1);
    r = real(comm, color, key, newcomm, config);
  }
  if ((r == ncclSuccess || r == ncclInProgress) && newcomm != nullptr && *newcomm != nullptr &&
      !name.empty()) {
    rememberSplit(*newcomm, name);
  }
  return r;
}
#endif

TRACERUN_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  TRACERUN_REAL(ncclCommDestroy);
  return endComm(vocab::nccl::kCommDestroy, real, comm);
}

TRACERUN_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  TRACERUN_REAL(ncclCommAbort);
  return endComm(vocab::nccl::kCommAbort, real, comm);
}

TRACERUN_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                           cudaStream_t stream) {
  TRACERUN_REAL(ncclAllReduce);
  HostCall call(vocab::nccl::kAllReduce, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, -1, -1);
  return real(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                           ncclDataType_t datatype, ncclComm_t comm,
                                           cudaStream_t stream) {
  TRACERUN_REAL(ncclAllGather);
  HostCall call(vocab::nccl::kAllGather, comm,
                static_cast<int64_t>(sendcount) * dtypeSize(datatype), datatype, -1, -1);
  return real(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff,
                                               size_t recvcount, ncclDataType_t datatype,
                                               ncclRedOp_t op, ncclComm_t comm,
                                               cudaStream_t stream) {
  TRACERUN_REAL(ncclReduceScatter);
  // bytes: this rank's input (recvcount x nranks elements), as for the c10d decorator.
  HostCall call(vocab::nccl::kReduceScatter, comm,
                static_cast<int64_t>(recvcount) * dtypeSize(datatype), datatype, -1, -1);
  call.timesGroupSize();
  return real(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                           ncclDataType_t datatype, int root, ncclComm_t comm,
                                           cudaStream_t stream) {
  TRACERUN_REAL(ncclBroadcast);
  HostCall call(vocab::nccl::kBroadcast, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, -1, root);
  return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, int root,
                                        ncclComm_t comm, cudaStream_t stream) {
  TRACERUN_REAL(ncclReduce);
  HostCall call(vocab::nccl::kReduce, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, -1, root);
  return real(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)  // NCCL 2.28's own all-to-all, gather, scatter
TRACERUN_EXPORT ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count,
                                          ncclDataType_t datatype, ncclComm_t comm,
                                          cudaStream_t stream) {
  TRACERUN_REAL(ncclAlltoAll);
  // bytes: what this rank sends, count to each of the nranks (nccl-tests' size).
  HostCall call(vocab::nccl::kAlltoAll, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, -1, -1);
  call.timesGroupSize();
  return real(sendbuff, recvbuff, count, datatype, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream) {
  TRACERUN_REAL(ncclGather);
  HostCall call(vocab::nccl::kGather, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, -1, root);  // bytes: what each rank sends
  return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count,
                                         ncclDataType_t datatype, int root, ncclComm_t comm,
                                         cudaStream_t stream) {
  TRACERUN_REAL(ncclScatter);
  HostCall call(vocab::nccl::kScatter, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, -1, root);  // bytes: what each rank receives
  return real(sendbuff, recvbuff, count, datatype, root, comm, stream);
}
#endif

TRACERUN_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                      int peer, ncclComm_t comm, cudaStream_t stream) {
  TRACERUN_REAL(ncclSend);
  HostCall call(vocab::nccl::kSend, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, peer, -1);
  return real(sendbuff, count, datatype, peer, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype,
                                      int peer, ncclComm_t comm, cudaStream_t stream) {
  TRACERUN_REAL(ncclRecv);
  HostCall call(vocab::nccl::kRecv, comm, static_cast<int64_t>(count) * dtypeSize(datatype),
                datatype, peer, -1);
  return real(recvbuff, count, datatype, peer, comm, stream);
}

TRACERUN_EXPORT ncclResult_t ncclGroupStart() {
  TRACERUN_REAL(ncclGroupStart);
  HostCall call(vocab::nccl::kGroupStart, nullptr, 0, -1, -1, -1);
  return real();
}

TRACERUN_EXPORT ncclResult_t ncclGroupEnd() {
  TRACERUN_REAL(ncclGroupEnd);
  HostCall call(vocab::nccl::kGroupEnd, nullptr, 0, -1, -1, -1);
  return real();
}
