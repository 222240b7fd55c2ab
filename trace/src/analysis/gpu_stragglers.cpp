// Stragglers from late collective kernels (see gpu.h, GpuStraggler): the k-th communication
// kernel of one name on each rank is one collective; each rank's start minus the earliest start
// is its lateness; ranks of different attempts (a restarted job) never ran one together, so
// the k-th is counted per attempt. HTA's metric (hta/analyzers/straggler.py: "the later a kernel
// starts, the bigger overall delay it likely causes") without its choice of one (stream, kernel)
// pair: every collective counts. Pure: takes the streams read by gpu_activity.cpp.
#include <algorithm>
#include <map>
#include <tuple>

#include "gpu_activity.h"
#include "span_select.h"  // saturated arithmetic

namespace tracerun::trace::analysis::gpu {

std::vector<GpuStraggler> stragglers(const std::vector<StreamActivities>& streams,
                                     const AttemptRanks& attempts, int64_t* collectives) {
  *collectives = 0;
  // rank -> name -> starts of its communication kernels, in order.
  std::map<int, std::map<core::StringId, std::vector<int64_t>>> starts;
  for (const StreamActivities& s : streams) {
    for (const Activity& a : s.items) {
      if (a.kind == GpuKind::kComm) starts[s.rank][a.name].push_back(a.start);
    }
  }
  if (starts.size() < 2) return {};
  for (auto& [rank, names] : starts) {
    for (auto& [name, v] : names) std::sort(v.begin(), v.end());
  }
  struct Acc {
    int64_t collectives = 0, last = 0, late_sum = 0, late_max = 0;
  };
  std::map<int, Acc> acc;
  // (attempt, name, k) -> (rank, start) of every rank that ran it.
  std::map<std::tuple<int, core::StringId, size_t>, std::vector<std::pair<int, int64_t>>> instances;
  for (const auto& [rank, names] : starts) {
    const int attempt = attempts.attemptOf(rank);
    for (const auto& [name, v] : names) {
      for (size_t k = 0; k < v.size(); ++k) instances[{attempt, name, k}].emplace_back(rank, v[k]);
    }
  }
  for (const auto& [key, members] : instances) {
    if (members.size() < 2) continue;
    ++*collectives;
    int64_t first = INT64_MAX, last = INT64_MIN;
    for (const auto& m : members) {
      first = std::min(first, m.second);
      last = std::max(last, m.second);
    }
    for (const auto& [rank, start] : members) {
      Acc& a = acc[rank];
      ++a.collectives;
      const int64_t late = satSub(start, first);
      a.late_sum = satAdd(a.late_sum, late);
      a.late_max = std::max(a.late_max, late);
      if (start == last && last > first) ++a.last;
    }
  }
  std::vector<GpuStraggler> out;
  for (const auto& [rank, a] : acc) {
    out.push_back({rank, a.collectives, a.last, a.late_sum / a.collectives, a.late_max});
  }
  std::sort(out.begin(), out.end(), [](const GpuStraggler& x, const GpuStraggler& y) {
    return x.mean_late_ns != y.mean_late_ns ? x.mean_late_ns > y.mean_late_ns : x.rank < y.rank;
  });
  return out;
}

}  // namespace tracerun::trace::analysis::gpu
