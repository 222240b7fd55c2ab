// The process group of a collective, carried from the call to the backend's own span.
//
// torch.distributed's calls go through the dispatcher (c10d::allreduce_, c10d::allgather_...),
// whose inputs hold the ProcessGroup: its size and this rank's place in it are known there, on
// the caller's thread. Gloo then records the call again as an async scope ("gloo:all_reduce") on
// the group's worker thread, with the same input tensors but nothing of the group. Without the
// group, two groups making identical calls at the same time (tensor parallel {0,1} and {2,3})
// look like one group of four to the analysis (docs/report.md "Groups").
//
// So op_capture.cpp publishes, at the dispatcher op, the group under the data addresses of the
// call's tensors, and the async scope of the same collective takes it by its first input's
// address. A small process-
// wide table of the latest calls, lock-free: written by callers, read by workers. Not a record
// of the groups (the spans' group_size / group_rank arguments are), and no libtorch here.
#pragma once

#include <cstdint>

namespace tracerun::interpose {

struct CollectiveGroup {
  int64_t size = 0;  // ranks in the group
  int64_t rank = 0;  // this process's rank in it
  int64_t id = -1;   // its name (vocab::arg::kGroupId) where the Python hooks gave it; -1: none
};

// The collective a name calls, as both sides spell it: the letters after the last ':', lowercase,
// with a trailing "base" dropped ("c10d::allreduce_" and "gloo:all_reduce" -> "allreduce";
// "c10d::_allgather_base_" -> "allgather"), hashed (FNV-1a). A call is taken only by a span of
// the same collective: an entry no span took (a scatter, whose Gloo span names another tensor)
// is then never taken by another collective on reused memory.
uint32_t collectiveOpCode(const char* name) noexcept;
// Is `name` a barrier ("c10d::barrier", "gloo:barrier")? Its Gloo span has no input, while 2.x
// hands the op a dummy tensor: a barrier is published under kNoTensorKey whatever it was given.
bool isBarrierName(const char* name) noexcept;

// Calls kept: a worker starts a call a few microseconds to a few milliseconds after it was made;
// more calls than this in flight at once lose their group (the span then has none).
inline constexpr int kCollectiveGroupSlots = 64;
// Addresses one call publishes its group under (for alltoall_base_(output, input): both, since
// the backend's span names only one of them).
inline constexpr int kCollectiveGroupKeys = 2;
// The key of a call with no tensor (a barrier): never a data address.
inline constexpr uint64_t kNoTensorKey = 1;

// Publishes the group of a call of collective `op` (collectiveOpCode) under up to
// kCollectiveGroupKeys non-zero data addresses. Any thread. A call under kNoTensorKey first takes
// away the older untaken calls of its collective there: calls without a tensor (barriers) wait
// for their end, so an untaken one is another backend's (NCCL's barrier records an all-reduce of
// its own tensor), which the next Gloo barrier must not take.
void publishCollectiveGroup(const uint64_t* keys, int nkeys, uint32_t op,
                            CollectiveGroup group) noexcept;

// The group of the oldest published call of collective `op`, not yet taken, that has `key` among
// its addresses; the call is then taken. False when none (key 0: never). Any thread.
bool takeCollectiveGroup(uint64_t key, uint32_t op, CollectiveGroup* group) noexcept;

// Forgets every published call (a capture's start; tests).
void clearCollectiveGroups() noexcept;

// ---- process group names ------------------------------------------------------------------------
// Size and place cannot tell an interleaved layout ({0,3},{1,2}) from a strided one, nor two
// groups of one size on a rank apart. torch.distributed names every group alike on every rank
// ("0" the world, then "1", "2"... in creation order, or a hash of its ranks): the Python hooks
// (_tracerun_groups.py) give each group's name, as a number (vocab::arg::kGroupId), under its
// ProcessGroup's address, right after torch creates it; a call's dispatcher op looks its group up
// by that address. An address is only compared, never read. A C++ program's groups have no name.

// Addresses named in one process; groups at further addresses stay unnamed.
inline constexpr int kNamedGroupSlots = 256;

// The group at `address` is named `id`, replacing what the address was named before (a group made
// where a destroyed one was); id -1 forgets it (a destroyed group). Any thread; one writer at a
// time per address (torch creates and destroys groups collectively, from one thread).
void nameProcessGroup(uint64_t address, int64_t id) noexcept;

// The name given to the group at `address`; -1 when none. Any thread.
int64_t processGroupId(uint64_t address) noexcept;

// Forgets every name (tests).
void clearProcessGroupNames() noexcept;

}  // namespace tracerun::interpose
