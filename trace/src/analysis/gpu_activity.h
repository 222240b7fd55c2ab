// The GPU analyses' private parts (see tracerun/trace/analysis/gpu.h): the activities of each
// stream as they read them from the trace, HTA's gap rule, and the steps
// analyzeGpu runs (device breakdown, kernel table, stragglers), each in its own gpu_*.cpp. Not a
// public API: dot/ and viewer/ call analyzeGpu.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "attempt_ranks.h"
#include "tracerun/trace/analysis/gpu.h"

namespace tracerun::trace::analysis::gpu {

// An activity whose launching op no flow names.
inline constexpr int64_t kNoLaunch = INT64_MIN;

// One kernel, copy or set on a stream. Its launch: the launch API call's start and end when the
// trace keeps that record (CUPTI's runtime/driver record of the same correlation id, on a
// "cuda api thread T" track of the same rank); else both are the launching op's start (an
// estimate: earlier than the call).
struct Activity {
  int64_t start = 0, end = 0;
  int64_t launch = kNoLaunch;      // the launch call's start (or the launching op's start)
  int64_t launch_end = kNoLaunch;  // the launch call's end (or the launching op's start)
  bool launch_record = false;      // launch and launch_end from a launch API record
  int64_t bytes = 0;               // a copy's or set's `bytes` argument (0: kernels, none)
  core::StringId name = 0;
  GpuKind kind = GpuKind::kCompute;
  bool kernel = true;  // category kernel (else memcpy: a copy or set)
};

// One stream's activities in start order.
struct StreamActivities {
  int rank = 0, device = 0;
  int64_t track = 0, stream = 0;
  std::vector<Activity> items;
};

// "cuda:D stream S" (interpose/cuda's streamTrackName) -> D, S. False for any other name.
bool parseStreamTrackName(std::string_view name, int* device, int64_t* stream);
// "cuda api thread T" (interpose/cuda's apiTrackName): a CPU thread's launch API calls.
bool isLaunchApiTrackName(std::string_view name);

// Every stream track's kernel and memcpy spans with their launch times (gpu_activity.cpp), by
// rank, device, stream; with only_track >= 0, that track's alone; with only_rank >= 0, that
// rank's.
std::vector<StreamActivities> readActivities(const TraceReader& reader, int64_t only_track = -1,
                                             int only_rank = -1);

// HTA's idle category of the gap [gap_start, gap_end) before an activity launched at `launch`
// (kNoLaunch: unknown, never host wait), added to `idle`. Empty or negative gaps add nothing.
void addGap(int64_t gap_start, int64_t gap_end, int64_t launch, int64_t kernel_wait_ns,
            GpuIdle& idle);

// The queue length samples of one stream (gpu_queue.cpp).
std::vector<GpuQueueSample> queueLength(const StreamActivities& s);

// Nearest-rank percentile q in (0, 1] of sorted values; 0 when empty.
int64_t percentile(const std::vector<int64_t>& sorted, double q);

// One device's numbers from its streams (gpu_device.cpp).
GpuDevice analyzeDevice(const std::vector<const StreamActivities*>& streams,
                        const GpuOptions& options);
// The kernel table over every stream (gpu_kernels.cpp).
std::vector<GpuKernelRow> kernelTable(const TraceReader& reader,
                                      const std::vector<StreamActivities>& streams);
// Collectives matched across the ranks of one attempt and each rank's lateness
// (gpu_stragglers.cpp).
std::vector<GpuStraggler> stragglers(const std::vector<StreamActivities>& streams,
                                     const AttemptRanks& attempts, int64_t* collectives);

}  // namespace tracerun::trace::analysis::gpu
