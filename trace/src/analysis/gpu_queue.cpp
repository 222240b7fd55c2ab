// HTA's queue length per stream (see gpu.h, gpuQueueLength): activities launched and not yet
// started, as a time series. Pure apart from gpuQueueLength's reading of one track.
#include <algorithm>

#include "gpu_activity.h"

namespace tracerun::trace::analysis {

namespace gpu {

std::vector<GpuQueueSample> queueLength(const StreamActivities& s) {
  std::vector<std::pair<int64_t, int>> ev;  // (time, +1 launch / -1 start)
  for (const Activity& a : s.items) {
    if (a.launch == kNoLaunch) continue;
    ev.emplace_back(a.launch, +1);
    ev.emplace_back(a.start, -1);
  }
  std::sort(ev.begin(), ev.end());  // at one time, starts (-1) before launches
  std::vector<GpuQueueSample> out;
  out.reserve(ev.size());
  int64_t n = 0;
  for (const auto& [ts, delta] : ev) {
    n += delta;
    out.push_back({ts, n});
  }
  return out;
}

}  // namespace gpu

std::vector<GpuQueueSample> gpuQueueLength(const TraceReader& reader, int64_t track) {
  const auto streams = gpu::readActivities(reader, track);
  return streams.empty() ? std::vector<GpuQueueSample>{} : gpu::queueLength(streams.front());
}

}  // namespace tracerun::trace::analysis
