// Interval arithmetic and HTA's gap rule for the GPU analyses (see gpu_activity.h): unions,
// their lengths and intersections, the idle category of one gap, nearest-rank percentiles. Pure
// functions; no trace reading.
#include <algorithm>
#include <cmath>

#include "gpu_activity.h"

namespace tracerun::trace::analysis::gpu {

std::vector<Interval> unionOf(std::vector<Interval> v) {
  std::sort(v.begin(), v.end());
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.second < i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

int64_t lengthOf(const std::vector<Interval>& merged) {
  int64_t n = 0;
  for (const Interval& i : merged) n += i.second - i.first;
  return n;
}

int64_t intersectionLength(const std::vector<Interval>& a, const std::vector<Interval>& b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n += hi - lo;
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

// HTA's _analyze_idle_time_for_stream: host wait when ts_runtime > prev_end_ts; else kernel wait
// when idle_interval < consecutive_kernel_delay; else other.
void addGap(int64_t gap_start, int64_t gap_end, int64_t launch, int64_t kernel_wait_ns,
            GpuIdle& idle) {
  const int64_t gap = gap_end - gap_start;
  if (gap <= 0) return;
  if (launch != kNoLaunch && launch > gap_start) {
    idle.host_wait_ns += gap;
  } else if (gap < kernel_wait_ns) {
    idle.kernel_wait_ns += gap;
  } else {
    idle.other_ns += gap;
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
