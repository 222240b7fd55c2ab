// NCCL's groups in a trace: a rank's ncclGroupStart ... ncclGroupEnd windows, and the all-to-alls
// and coalesced collectives they hold. The one rule of analyzeComm (comm.h) and the viewer's
// collective instances (comm_instances.h). Not the matching of calls across ranks (comm_groups.h).
//
// NCCL only queues the calls made between ncclGroupStart and ncclGroupEnd; GroupEnd launches one
// kernel for the whole group. PyTorch's all_to_all on NCCL (torch/csrc/cuda/nccl.cpp, all2all*) is
// one group of a send to and a receive from each rank of the communicator, the rank itself
// included, a peer left out when its count is 0; libtracerun_nccl records each as a host call.
// Coalesced collectives (ProcessGroupNCCL's startCoalescing/endCoalescing: all_reduce_coalesced,
// torch.distributed's _coalescing_manager, which DeepSpeed's ZeRO and Megatron's bucket groups
// use) are one group of collectives of one kind on one communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tracerun::trace::analysis {

// One ncclGroupStart or ncclGroupEnd host call of a rank (its `nccl` track).
struct NcclGroupMarker {
  bool group_start = false;  // else GroupEnd
  int64_t start = 0, end = 0;
  int64_t id = 0;  // the span's id
};

// An outermost group of a rank: from its GroupStart's start to its GroupEnd's end; the GroupEnd
// call, which launches the group's kernel, is [end_call_start, end].
struct NcclGroupWindow {
  int64_t start = 0, end = 0, end_call_start = 0;
  int64_t end_id = 0;  // the GroupEnd span's id
  // A call lies in the group when it starts at or after the GroupStart's start and ends before
  // the GroupEnd begins.
  bool holds(int64_t call_start, int64_t call_end) const {
    return call_start >= start && call_end <= end_call_start;
  }
};

// The outermost windows among one rank's markers, by nesting in time order (a GroupStart first
// where two begin at the same time). A GroupEnd without its GroupStart is passed over; a
// GroupStart never ended leaves the windows after it unclosed (*unclosed counts the windows so
// lost, 0 or 1). Two threads grouping at the same time nest into one window: NCCL's groups are
// per thread, the trace's NCCL track is not.
std::vector<NcclGroupWindow> ncclGroupWindows(std::vector<NcclGroupMarker> markers,
                                              int* unclosed = nullptr);

// One NCCL data call of a rank, as the all-to-all and coalescing rules need it.
struct NcclGroupedCall {
  enum class Kind { kSend, kRecv, kCollective };
  Kind kind = Kind::kCollective;
  std::string op;  // a collective's normalized name ("all_reduce": comm.h's normalizeCommName)
  int64_t start = 0, end = 0;
  int64_t peer = -1;  // a send's or receive's peer as NCCL numbers it (a communicator rank)
  int group_size = 0;
  int64_t group_rank = -1;
  std::string communicator;  // the span's detail
  int64_t bytes = 0;
  int64_t id = 0;          // the span's id (the viewer's instances drop folded calls by it)
  int64_t root = -1;       // a broadcast's or reduce's root (its `root` argument)
  bool decorated = false;  // seen inside a decorator span (comm.h's seenInsideDecorator)
};

// A window that is an all_to_all: only sends and receives, all on one communicator of n ranks,
// each peer in [0, n) at most once per direction, and either a send to the rank itself (what
// batch_isend_irecv's exchanges never make) or every peer both ways.
struct NcclAllToAll {
  size_t window = 0;            // index into the windows
  std::vector<size_t> members;  // indices into the calls: its sends and receives
  int64_t bytes = 0;            // what the rank sends (nccl-tests' size)
  int group_size = 0;
  int64_t group_rank = -1;
  std::string communicator;
};

// What an all_to_all's calls must match across ranks: its communicator and size, not its bytes
// (unequal splits send different amounts from each rank of one call). callSignature's spelling.
std::string ncclAllToAllSignature(const NcclAllToAll& a);

// A window of two or more collectives, all of one op on one communicator (one group size and
// place), and nothing else: coalesced collectives, which GroupEnd's one kernel runs together.
// Not a window where one of them was recorded by tracerun's c10d decorator too (the decorator's
// spans stand for them, as for any call they wrap). Broadcasts from every rank of the
// communicator (each root once) are ProcessGroupNCCL's all_gather of unequal sizes, and reduces
// to every rank its reduce_scatter of unequal sizes: op says so, for its bus-bandwidth factor.
struct NcclCoalesced {
  size_t window = 0;            // index into the windows
  std::vector<size_t> members;  // indices into the calls, in the calls' order
  std::string op;
  int64_t bytes = 0;  // the members' bytes summed (an all_gather of broadcasts: their mean)
  int group_size = 0;
  int64_t group_rank = -1;
  std::string communicator;
};

// The windows that are an all_to_all or a group of coalesced collectives (none is both), each
// window's calls found once for both rules.
struct NcclGroupFolds {
  std::vector<NcclAllToAll> all_to_alls;
  std::vector<NcclCoalesced> coalesced;
};
NcclGroupFolds ncclGroupFolds(const std::vector<NcclGroupWindow>& windows,
                              const std::vector<NcclGroupedCall>& calls);

// What a coalesced group's calls must match across ranks: op, communicator, summed bytes, group
// size and the number of calls coalesced (callSignature's spelling, "|coalesced N" after it).
std::string ncclCoalescedSignature(const NcclCoalesced& c);

}  // namespace tracerun::trace::analysis
