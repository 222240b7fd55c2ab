// Communication analysis: per collective and process group, calls, bytes, time, algorithm
// bandwidth and bus bandwidth (nccl-tests' factors); point-to-point traffic with the time a
// receive spent waiting for its send versus transferring; and per rank, how much communication
// overlapped computation. Reads through TraceReader only; never guesses from a command line.
//
// What it reads (docs/report.md):
// - collectives: comm-category spans ("gloo:all_reduce", "nccl:all_gather"...; bytes from a
//   "bytes" argument or the input shapes in the detail text); the caller's implementation from
//   the innermost user scope enclosing the call ("reduce_scatter[all_reduce+narrow]");
// - groups: the members matched across ranks (comm_groups.h): ranks that made the same calls
//   (op, shapes, recorded group size) the same number of times, every k-th call overlapping in
//   time, form one group, cut by the ranks' recorded group_rank when larger than the recorded
//   group_size (single-rank traces: unknown); the size from a "group_size" argument when the
//   capture records one (the c10d dispatcher op's group, docs/capture.md), else the members';
// - point-to-point: user scopes "send_*" / "recv_*" with a "peer" argument (gpttrain's pipeline)
//   paired in order; without them, comm spans named send / recv (the decorator's peer is a rank
//   of the attempt, NCCL's a rank of the communicator: both are mapped to trace ranks);
// - control calls (vocab::nccl::isControlCall: a communicator's set-up and tear-down, group
//   markers) are listed apart and never counted as communication;
// - the c10d decorator's spans replace the calls Gloo recorded inside them (a non-decorator span
//   lying within a decorator span of its rank); calls of groups it does not wrap stay;
// - rank-valued numbers (peer, a decorator track's members) are RANKs of the attempt that wrote
//   them, mapped to trace ranks (attempt_ranks.h), so attempts of a restarted job never mix;
// - computation: leaf op spans (ops with no child span) on thread tracks, so a node that only
//   waits for a collective is not counted as computing.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct CollectiveStats {
  std::string op;   // all_reduce, all_gather, reduce_scatter, broadcast, reduce, all_to_all...
  std::string via;  // the enclosing caller scope, "" when none
  std::vector<int> ranks;    // the group; the one rank alone when the group is unknown
  int group_size = 0;        // 0: unknown
  std::string group_source;  // "annotated", "matched" or "unknown"
  int64_t calls = 0;         // collective calls, each counted once for the whole group
  int64_t bytes = 0;         // nccl-tests' size per call, summed (all_gather, gather: the gathered
                             // output; scatter: the root's send buffer)
  int64_t time_ns = 0;       // per call the mean over members of the span's length, summed
  double algbw_gbps = 0;     // bytes / time; 0 for NCCL's host calls
  double busbw_gbps = 0;     // algbw x factor(op, group size); 0 when the size is unknown
  // NCCL's host calls (libtracerun_nccl): the span is the enqueue, not the transfer (the kernel
  // runs later on the GPU), so its length gives no bandwidth (an H100 trace read 4,012 GB/s).
  // When the trace has the kernels each call launched (`cuda` captured: their launch records lie
  // inside the call), time_ns is theirs and the bandwidths follow: kernel_time. When a call of
  // the row has none, algbw and busbw are left at 0: host_call_time.
  bool host_call_time = false;
  bool kernel_time = false;
  // NCCL's coalesced collectives (nccl_groups.h): the program's calls the row's calls hold, each
  // group of them one call (0: none coalesced).
  int64_t coalesced_calls = 0;
};

struct PointToPointStats {
  int src = -1, dst = -1;  // global ranks; -1 unknown
  std::string kind;        // "forward", "backward" (pipeline messages) or the span's name
  int64_t messages = 0, bytes = 0;
  int64_t recv_ns = 0;      // inside the receiver's receive spans
  int64_t wait_ns = 0;      // of which before the matching send started
  int64_t transfer_ns = 0;  // of which after (recv_ns - wait_ns for matched receives)
  int64_t matched = 0;      // receives paired with their send
};

// Calls that move no data: a communicator's set-up and tear-down, group markers (NCCL).
struct CommControlStats {
  std::string name;        // the span's name ("nccl:CommInitRankConfig")
  int ranks = 0;           // ranks that made it
  int64_t calls = 0;       // over all ranks
  int64_t total_ns = 0;    // over all ranks
  int64_t longest_ns = 0;  // one call's
};

struct RankCommStats {
  int rank = 0;
  // From the rank's CPU spans: comm the union of collective and receive spans (a send's span is
  // the time until the peer received, so sends are left out), compute the union of leaf op spans.
  // From its GPU kernels (gpu_kernels) where its communication is NCCL's host calls, whose spans
  // are only enqueues: comm the union of its communication kernels, compute of its other kernels.
  int64_t comm_ns = 0;
  int64_t compute_ns = 0;
  int64_t overlap_ns = 0;  // intersection of the two
  bool gpu_kernels = false;
  int64_t recv_ns = 0, recv_wait_ns = 0, recv_transfer_ns = 0;
  int64_t unmatched_recvs = 0;
};

struct CommAnalysis {
  std::vector<CollectiveStats> collectives;  // by op, then group, then via
  std::vector<PointToPointStats> p2p;        // by src, dst, kind
  std::vector<RankCommStats> ranks;
  std::vector<CommControlStats> control;  // by name
};

// nccl-tests' bus-bandwidth factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all
// (n-1)/n; broadcast, reduce 1; 0 for an unknown op or n < 1.
double busBandwidthFactor(const std::string& op, int n);
// "gloo:all_reduce", "c10d::allreduce_", "nccl:AllReduce" -> "all_reduce"; "" if not a collective
// or point-to-point name.
std::string normalizeCommName(const std::string& name);
// Bytes of the tensors in a shapes text such as "f32[32,1,64], i64[8]" (0 when none).
int64_t bytesOfShapes(const std::string& detail);
// Is `track_name` a track of tracerun's c10d decorator ("c10d dp [0,2]", traced_group.h's names)?
// Then `members` gets the group's ranks from the brackets, sorted and unique (none when the name
// carries no list).
bool decoratorTrack(const std::string& track_name, std::vector<int>* members);

CommAnalysis analyzeComm(const TraceReader& reader);

// One rank's comm span as far as the decorator rule needs it.
struct CommCallView {
  std::string op;  // normalizeCommName's
  int64_t start = 0, end = 0;
  bool decorator = false;  // on a decorator track
};
// Which of one rank's calls are a decorator call seen again from below: a non-decorator span of
// the same op that started inside a decorator span (10 us slack for clock reads on two threads).
// Gloo's own span starts inside the decorator's call but may end after it: the work's future,
// whose completion ends the decorator's span, completes before Gloo's scope is closed. The one
// rule of analyzeComm and the viewer's collective instances (comm_instances.h).
std::vector<bool> seenInsideDecorator(const std::vector<CommCallView>& calls);

// seenInsideDecorator over one rank's `calls` (any type with op, start, end and decorator
// members).
template <class Call>
std::vector<bool> seenInsideDecoratorOf(const std::vector<Call>& calls) {
  std::vector<CommCallView> views;
  views.reserve(calls.size());
  for (const Call& c : calls) views.push_back({c.op, c.start, c.end, c.decorator});
  return seenInsideDecorator(views);
}

// Erases from one rank's `calls` those seenInsideDecorator marks, keeping the order of the rest.
template <class Call>
void eraseSeenInsideDecorator(std::vector<Call>& calls) {
  const std::vector<bool> inside = seenInsideDecoratorOf(calls);
  size_t keep = 0;
  for (size_t k = 0; k < calls.size(); ++k) {
    if (inside[k]) continue;
    if (keep != k) calls[keep] = std::move(calls[k]);  // never onto itself: a self-move empties it
    ++keep;
  }
  calls.resize(keep);
}

}  // namespace tracerun::trace::analysis
