// GPU analyses as Holistic Trace Analysis (HTA, facebookresearch/HolisticTraceAnalysis) computes
// them, per rank and device on the trace's one time axis: the temporal breakdown (busy, idle,
// compute, communication, memory time, each a union of intervals), HTA's idle-time breakdown
// (host wait / kernel wait / other) per stream and per device, communication-computation overlap,
// launch delays, the kernel table, and stragglers from late collective kernels across ranks.
// One call, analyzeGpu, returns everything a report section or a viewer tab shows; it formats
// nothing. Not here: CPU-side op analyses (callgraph.h, comm.h) and drawing.
//
// What it reads (docs/report.md, "gpu"): every span of category kernel or memcpy (CUPTI's
// kernels, copies and sets; synchronisation records are not GPU activity) on a track named
// "cuda:D stream S" (one stream of device D; any track kind), the launch API calls (spans of
// category other on the rank's "cuda api thread T" tracks, joined to activities by their
// `correlation` argument, CUPTI's correlation id), and the op -> kernel flows, whose source is
// the start of the op that launched the activity. An activity's launch is its launch call, as
// HTA's; where the trace has no launch record for it (traces from before the capture kept them),
// the launching op's start stands in for the call's start and end: earlier than the call, so host
// wait is then a lower bound and launch delay an upper bound of HTA's (GpuDevice::launchSource).
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

// HTA's kernel types (hta/common/types.py): communication by name (NCCL), memory (copies and
// sets), computation for every other kernel.
enum class GpuKind : uint8_t { kCompute = 0, kComm = 1, kMemory = 2 };
const char* gpuKindName(GpuKind k) noexcept;  // "compute", "comm", "memory"
// The kind of an activity of this category and (demangled) name: memcpy category -> memory;
// a name matching HTA's CommunicateKernelGroupingPattern `^nccl|^hip|^hccl|ncclKernel` ->
// comm; else compute.
GpuKind gpuKindOf(core::Category category, std::string_view name) noexcept;

// True when `track_name` names a GPU stream track, "cuda:D stream S" (the tracks analyzeGpu
// reads); then sets *device and *stream when given. For readers that draw such tracks apart.
bool gpuStreamTrack(std::string_view track_name, int* device = nullptr, int64_t* stream = nullptr);

struct GpuOptions {
  int rank = -1;  // >= 0: that rank's streams only (a GPU tab's per-rank kernel table)
  // HTA's consecutive_kernel_delay (get_idle_time_breakdown, default 30): a gap under it between
  // consecutive activities is kernel wait. HTA compares it with Kineto's microsecond times, so
  // its default is 30 us in effect (its docstring says nanoseconds).
  int64_t kernel_wait_ns = 30'000;
  // HTA's launch_delay_cutoff (get_cuda_kernel_launch_stats, default 100 us): delays above it are
  // outliers.
  int64_t launch_outlier_ns = 100'000;
};

// Idle time split as HTA's IdleTimeType: a gap before an activity is host wait when the activity
// was launched after the gap began (the CPU had not enqueued it yet), else kernel wait when the
// gap is under GpuOptions::kernel_wait_ns, else other.
struct GpuIdle {
  int64_t host_wait_ns = 0, kernel_wait_ns = 0, other_ns = 0;
  int64_t total() const { return host_wait_ns + kernel_wait_ns + other_ns; }
};

// Launch delay: activity start - the end of its launch call (HTA's documented definition: "the
// difference between GPU kernel starting and CPU operator ending"), clipped at 0; with only the
// launching op known, activity start - op start. Percentiles by nearest rank. count 0: no
// activity had a launch call or a launching op.
struct GpuDelayStats {
  int64_t count = 0, p50_ns = 0, p95_ns = 0, max_ns = 0, outliers = 0;
};

// One stream: HTA's per-stream idle breakdown (gaps between consecutive activities on it).
struct GpuStream {
  int64_t track = 0;   // tracks.id
  int64_t stream = 0;  // CUDA's stream id
  int64_t activities = 0, busy_ns = 0;
  int64_t start_ns = 0, end_ns = 0;  // first start, last end
  GpuIdle idle;
  // HTA's queue length (trace_counters.py): activities launched and not yet started, over the
  // samples of gpuQueueLength: its largest value and its mean over the samples (HTA's summary
  // takes pandas' describe() of the samples). 0 without launch times.
  int64_t queue_max = 0;
  double queue_mean = 0;
};

// HTA's memory bandwidth (trace_counters.py, get_memory_bw_summary) per copy kind of one device,
// as one number: bytes moved over the time the copies of that kind ran (the sum of their
// durations: the mean bandwidth a copy of that kind saw, weighted by its time). Kinds by span
// name: "memcpy HtoD", "memcpy DtoH", "memcpy DtoD", "memset"...; copies without a `bytes`
// argument count 0 bytes.
struct GpuCopyKind {
  core::StringId name_id = 0;
  std::string name;
  int64_t count = 0, bytes = 0, time_ns = 0;
  double gbps() const { return time_ns > 0 ? double(bytes) / double(time_ns) : 0.0; }  // GB/s
};

// One device of one rank.
struct GpuDevice {
  int rank = 0;
  int device = 0;                       // cuda:<device>
  int64_t start_ns = 0, end_ns = 0;     // first activity's start, last activity's end
  int64_t window_ns = 0;                // end - start (HTA's kernel_time)
  int64_t busy_ns = 0;                  // union of every activity
  int64_t idle_ns = 0;                  // window - busy (HTA's idle_time)
  int64_t compute_ns = 0;               // union of compute kernels (HTA's compute_time)
  int64_t comm_ns = 0;                  // union of communication kernels
  int64_t memory_ns = 0;                // union of copies and sets
  int64_t comm_compute_overlap_ns = 0;  // |union(comm) ∩ union(compute)|
  int64_t kernels = 0, copies = 0;      // activities of category kernel / memcpy
  int64_t launched = 0;                 // activities whose launch (call or op) is known
  int64_t launch_records = 0;           // ... of them, by their launch API record
  GpuIdle idle;                         // the gaps of the device's busy union, split as HTA
  GpuDelayStats launch;
  std::vector<GpuStream> streams;       // by stream id
  std::vector<GpuCopyKind> copy_kinds;  // by name id
  // Where the launch times came from: "cupti" (every launched activity's launch API record), "op
  // start (estimate)" (none: the launching ops' starts), "cupti + op start (estimate)" (some).
  const char* launchSource() const {
    if (launch_records == 0) return "op start (estimate)";
    return launch_records == launched ? "cupti" : "cupti + op start (estimate)";
  }
  // HTA's comp_comm_overlap_ratio; -1 without communication.
  double overlapRatio() const {
    return comm_ns > 0 ? double(comm_compute_overlap_ns) / double(comm_ns) : -1.0;
  }
};

// The widest label of a kernel row (GpuKernelRow::label).
constexpr size_t kKernelLabelWidth = 64;

// One kernel (or copy) name over every rank and device.
struct GpuKernelRow {
  core::StringId name_id = 0;  // the spans' name as stored (for the reader's name search)
  std::string name;            // demangled, as nsys and torch.profiler show it
  std::string short_name;      // nsys' shortName (core/kernel_name.h)
  // What the report's table shows: the short name, told apart from the other rows that share it
  // (core::kernelTableLabels, at most kKernelLabelWidth characters).
  std::string label;
  GpuKind kind = GpuKind::kCompute;
  int64_t count = 0, total_ns = 0, mean_ns = 0, min_ns = 0, max_ns = 0, p50_ns = 0;
  int ranks = 0;
};

// A rank's lateness at the collectives every rank ran: the k-th communication kernel of one
// name on each rank is one collective (NCCL enqueues a communicator's collectives in the same
// order on every rank); a rank is late by its start minus the earliest rank's start. HTA's
// straggler metric is this start time ("the later a kernel starts, the bigger overall delay it
// likely causes").
struct GpuStraggler {
  int rank = 0;
  int64_t collectives = 0;  // collectives it took part in (seen on at least two ranks)
  int64_t last = 0;         // of those, how often it started last (strictly after another)
  int64_t mean_late_ns = 0, max_late_ns = 0;
};

struct GpuAnalysis {
  GpuOptions options;
  std::vector<GpuDevice> devices;        // by rank, then device
  std::vector<GpuKernelRow> kernels;     // largest total first, then by name
  std::vector<GpuStraggler> stragglers;  // latest on average first; empty under two ranks
  int64_t collectives = 0;               // matched across ranks
  bool present() const { return !devices.empty(); }
  const GpuDevice* device(int rank, int device) const;
};

// Every number above, from one pass over the stream tracks and the flows.
GpuAnalysis analyzeGpu(const TraceReader& reader, const GpuOptions& options = {});

// HTA's queue length time series of one stream track (get_queue_length_time_series): +1 at each
// activity's launch (its launch call's start; else its launching op's start, see above: then an
// upper bound of HTA's), -1 at its start; one sample after each change, in time order (a
// start before a launch at the same nanosecond). Activities without a launch are left out.
// Empty for a track that is not a GPU stream. For a counter track in a viewer.
struct GpuQueueSample {
  int64_t ts_ns = 0;
  int64_t length = 0;
};
std::vector<GpuQueueSample> gpuQueueLength(const TraceReader& reader, int64_t track);

}  // namespace tracerun::trace::analysis
