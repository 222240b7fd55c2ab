// HTA's gap rule for the GPU analyses (see gpu_activity.h): the idle category of one gap, and
// nearest-rank percentiles. Pure functions; no trace reading (interval unions: span_select.h).
#include <algorithm>
#include <cmath>

#include "gpu_activity.h"
#include "span_select.h"  // satSub

namespace tracerun::trace::analysis::gpu {

// HTA's _analyze_idle_time_for_stream: host wait when ts_runtime > prev_end_ts; else kernel wait
// when idle_interval < consecutive_kernel_delay; else other.
void addGap(int64_t gap_start, int64_t gap_end, int64_t launch, int64_t kernel_wait_ns,
            GpuIdle& idle) {
  const int64_t gap = satSub(gap_end, gap_start);
  if (gap <= 0) return;
  if (launch != kNoLaunch && launch > gap_start) {
    idle.host_wait_ns = satAdd(idle.host_wait_ns, gap);
  } else if (gap < kernel_wait_ns) {
    idle.kernel_wait_ns = satAdd(idle.kernel_wait_ns, gap);
  } else {
    idle.other_ns = satAdd(idle.other_ns, gap);
  }
}

int64_t percentile(const std::vector<int64_t>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto n = static_cast<double>(sorted.size());
  auto rank = static_cast<size_t>(std::ceil(q * n));
  rank = std::clamp<size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}

}  // namespace tracerun::trace::analysis::gpu
