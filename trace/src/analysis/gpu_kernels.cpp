// The GPU kernel table (see gpu.h, GpuKernelRow): per kernel (or copy) name over every rank and
// device, count, total, mean, min, max and median duration, largest total first, names as nsys
// shows them. HTA's kernel breakdown (_aggr_gpu_kernel_time) without its "others" folding: the
// writers show the top rows. Pure apart from reading names through the reader.
#include <algorithm>
#include <set>
#include <unordered_map>

#include "gpu_activity.h"
#include "span_select.h"  // satAdd
#include "tracerun/core/kernel_name.h"

namespace tracerun::trace::analysis::gpu {

std::vector<GpuKernelRow> kernelTable(const TraceReader& reader,
                                      const std::vector<StreamActivities>& streams) {
  struct Acc {
    GpuKind kind = GpuKind::kCompute;
    std::vector<int64_t> durations;
    std::set<int> ranks;
  };
  std::unordered_map<core::StringId, Acc> byName;
  for (const StreamActivities& s : streams) {
    for (const Activity& a : s.items) {
      Acc& acc = byName[a.name];
      acc.kind = a.kind;
      acc.durations.push_back(satSub(a.end, a.start));
      acc.ranks.insert(s.rank);
    }
  }
  std::vector<GpuKernelRow> rows;
  rows.reserve(byName.size());
  for (auto& [name, acc] : byName) {
    GpuKernelRow row;
    row.name_id = name;
    row.name = core::demangleKernelName(reader.str(name));
    row.short_name = core::kernelShortName(row.name);
    row.kind = acc.kind;
    std::sort(acc.durations.begin(), acc.durations.end());
    row.count = static_cast<int64_t>(acc.durations.size());
    for (int64_t d : acc.durations) row.total_ns = satAdd(row.total_ns, d);
    row.mean_ns = row.total_ns / row.count;
    row.min_ns = acc.durations.front();
    row.max_ns = acc.durations.back();
    row.p50_ns = percentile(acc.durations, 0.5);
    row.ranks = static_cast<int>(acc.ranks.size());
    rows.push_back(std::move(row));
  }
  std::sort(rows.begin(), rows.end(), [](const GpuKernelRow& a, const GpuKernelRow& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  std::vector<std::string> names;
  names.reserve(rows.size());
  for (const GpuKernelRow& r : rows) names.push_back(r.name);
  std::vector<std::string> labels = core::kernelTableLabels(names, kKernelLabelWidth);
  for (size_t i = 0; i < rows.size(); ++i) rows[i].label = std::move(labels[i]);
  return rows;
}

}  // namespace tracerun::trace::analysis::gpu
