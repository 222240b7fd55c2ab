// A process group as the trainer sees it (Group) and the few collectives it needs, each choosing
// per backend between the native call and a fallback (Gloo in libtorch 1.13 throws on
// _allgather_base and reduce_scatter), counting which ran. No autograd here (see mappings.h).
#pragma once

#define TRACERUN_COMPAT_C10D
#include <tracerun/torch_compat.h>

#include <tracerun/annotate.h>

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace gpttrain {

// Which implementation of a collective ran; the counts say so after a run (and in traces).
enum class CollectiveImpl : int {
  kAllReduce,
  kAllGatherBase,           // native one-buffer all-gather
  kAllGatherList,           // fallback: all-gather into a list, then cat
  kReduceScatterBase,       // native one-buffer reduce-scatter
  kReduceScatterAllReduce,  // fallback: all-reduce, then keep this rank's slice
  kCount,
};
const char* collectiveImplName(CollectiveImpl impl);

// One group of ranks. size 1 means no communication at all (pg is null): every collective below
// is then the identity, so the single-process run takes the same code path as a parallel one.
// Threading: collectives on one Group must be issued in the same order on all its ranks.
struct Group : torch::CustomClassHolder {
  std::string name;  // "world", "tp", "dp", "pp"
  int rank = 0;      // rank inside the group
  int size = 1;
  std::vector<int> global_ranks;  // member i is global rank global_ranks[i]
  tracerun::compat::CollectiveGroupPtr pg;
  bool native_base_collectives = false;  // _allgather_base / _reduce_scatter_base available
  // Gloo (libtorch 1.13) has no bfloat16 (nor int16): sums of such tensors travel as fp32, gathers
  // as their bytes (collectives.cpp).
  bool native_bf16 = false;
  // Gloo's send/recv read and write host memory only: CUDA tensors travel through a CPU copy.
  bool host_p2p = true;
  std::array<std::int64_t, static_cast<int>(CollectiveImpl::kCount)> counts{};

  void count(CollectiveImpl impl) { ++counts[static_cast<int>(impl)]; }
};
using GroupPtr = c10::intrusive_ptr<Group>;

// A Group of one rank (what every group is in a single-process run).
GroupPtr makeSoloGroup(const std::string& name, int global_rank);

enum class ReduceOp { kSum, kMax };

// In place, blocking. `t` must be contiguous.
void allReduce(Group& g, at::Tensor& t, ReduceOp op = ReduceOp::kSum);
// In place, returns the pending work (null when g.size == 1). `t` must be contiguous. A bfloat16
// `t` on a group without native_bf16 is summed in an fp32 copy (a temporary) that the work's wait()
// rounds back into `t`.
c10::intrusive_ptr<c10d::Work> allReduceAsync(Group& g, at::Tensor& t);
// What a gather or broadcast of `t` sends on `g`: `t`, or, bfloat16 on a group without it, its
// bytes (a uint8 view, the last dimension doubled; exact). fromWire undoes it.
at::Tensor wireView(const Group& g, const at::Tensor& t);
at::Tensor fromWire(const at::Tensor& wire, at::ScalarType dtype);
// Concatenation along `dim` of every rank's `t` (same shape on all ranks), in rank order.
at::Tensor allGather(Group& g, const at::Tensor& t, int64_t dim);
// Sum over ranks of `t`, split in g.size equal slices along `dim`; returns this rank's slice.
at::Tensor reduceScatter(Group& g, const at::Tensor& t, int64_t dim);

// Point-to-point (pipeline stages). Messages between two ranks are matched by `tag`, not by order.
// Non-blocking send of `t` to group rank `peer`: returns the pending work, which keeps the sent
// buffer alive; wait on it before the step ends. bfloat16 travels as fp32; on a host_p2p group a
// CUDA tensor travels through a CPU copy.
c10::intrusive_ptr<c10d::Work> sendAsync(Group& g, const at::Tensor& t, int peer, int tag);
// Blocking receive of a tensor of `shape` (fp32, allocated on `device`) from group rank `peer`.
at::Tensor recv(Group& g, at::IntArrayRef shape, torch::Device device, int peer, int tag);
// A receive posted now and waited for later (so a message can land while this rank computes).
// The buffer is on the CPU when a host_p2p group receives for a CUDA device: take() after the wait
// moves it there.
struct PostedRecv {
  at::Tensor buffer;
  c10::intrusive_ptr<c10d::Work> work;
  torch::Device device{torch::kCPU};  // where the receiver wants it
  at::Tensor take() const { return buffer.to(device); }
};
PostedRecv postRecv(Group& g, at::IntArrayRef shape, torch::Device device, int peer, int tag);

}  // namespace gpttrain
