// The GPU tab's data (gpu_data.h): bar segments, the longest instance of a kernel, the dump text.
// No ImGui here.
#include "views/gpu_data.h"

#include <algorithm>
#include <cstdio>

namespace tracerun::viewer {
namespace {

namespace an = trace::analysis;

std::vector<GpuBarSegment> layOut(const std::vector<std::pair<const char*, int64_t>>& parts,
                                  int64_t whole, float width) {
  std::vector<GpuBarSegment> out;
  if (whole <= 0) return out;
  int64_t sum = 0;
  for (const auto& [part, ns] : parts) {
    const int64_t v = std::max<int64_t>(0, ns);
    GpuBarSegment s;
    s.part = part;
    s.ns = v;
    s.x0 = static_cast<float>(static_cast<double>(sum) / static_cast<double>(whole) * width);
    sum += v;
    s.x1 = static_cast<float>(static_cast<double>(sum) / static_cast<double>(whole) * width);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

std::vector<GpuBarSegment> gpuTemporalBar(const an::GpuDevice& d, float width) {
  const int64_t commOnly = d.comm_ns - d.comm_compute_overlap_ns;
  const int64_t memoryOnly = d.busy_ns - d.compute_ns - commOnly;
  return layOut(
      {{"compute", d.compute_ns}, {"comm", commOnly}, {"memory", memoryOnly}, {"idle", d.idle_ns}},
      d.window_ns, width);
}

std::vector<GpuBarSegment> gpuIdleBar(const an::GpuDevice& d, float width) {
  return layOut({{"host_wait", d.idle.host_wait_ns},
                 {"kernel_wait", d.idle.kernel_wait_ns},
                 {"other", d.idle.other_ns}},
                d.idle.total(), width);
}

std::optional<trace::SpanRow> longestGpuInstance(const trace::TraceReader& reader,
                                                 core::StringId name, int rank,
                                                 const std::atomic<bool>* cancel) {
  std::optional<trace::SpanRow> best;
  for (const trace::TrackRow& t : reader.tracks()) {
    if ((rank >= 0 && t.rank != rank) || !an::gpuStreamTrack(t.name)) continue;
    if (cancel && cancel->load()) return std::nullopt;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (s.name != name) return;
      if (s.category != core::Category::kKernel && s.category != core::Category::kMemcpy) return;
      if (!best || s.dur_ns > best->dur_ns) best = s;
    });
  }
  return best;
}

std::string gpuDumpText(const an::GpuAnalysis& g, float width) {
  std::string out;
  char b[640];
  for (const an::GpuDevice& d : g.devices) {
    std::snprintf(
        b, sizeof b,
        "device %d %d window %lld busy %lld idle %lld compute %lld comm %lld memory %lld "
        "overlap %lld host_wait %lld kernel_wait %lld other %lld kernels %lld copies "
        "%lld launch_count %lld launch_p50 %lld launch_p95 %lld launch_max %lld "
        "launch_outliers %lld\n",
        d.rank, d.device, static_cast<long long>(d.window_ns), static_cast<long long>(d.busy_ns),
        static_cast<long long>(d.idle_ns), static_cast<long long>(d.compute_ns),
        static_cast<long long>(d.comm_ns), static_cast<long long>(d.memory_ns),
        static_cast<long long>(d.comm_compute_overlap_ns),
        static_cast<long long>(d.idle.host_wait_ns), static_cast<long long>(d.idle.kernel_wait_ns),
        static_cast<long long>(d.idle.other_ns), static_cast<long long>(d.kernels),
        static_cast<long long>(d.copies), static_cast<long long>(d.launch.count),
        static_cast<long long>(d.launch.p50_ns), static_cast<long long>(d.launch.p95_ns),
        static_cast<long long>(d.launch.max_ns), static_cast<long long>(d.launch.outliers));
    out += b;
    const auto bars = {std::make_pair("temporal", gpuTemporalBar(d, width)),
                       std::make_pair("idle", gpuIdleBar(d, width))};
    for (const auto& [bar, segs] : bars) {
      for (const GpuBarSegment& s : segs) {
        std::snprintf(b, sizeof b, "bar %d %d %s %s %lld %.2f %.2f\n", d.rank, d.device, bar,
                      s.part.c_str(), static_cast<long long>(s.ns), s.x0, s.x1);
        out += b;
      }
    }
  }
  for (const an::GpuKernelRow& k : g.kernels) {
    std::snprintf(b, sizeof b, "kernel %s %lld %lld %lld %lld %lld %lld %d ",
                  an::gpuKindName(k.kind), static_cast<long long>(k.count),
                  static_cast<long long>(k.total_ns), static_cast<long long>(k.mean_ns),
                  static_cast<long long>(k.min_ns), static_cast<long long>(k.p50_ns),
                  static_cast<long long>(k.max_ns), k.ranks);
    out += b + k.name + "\n";
  }
  return out;
}

}  // namespace tracerun::viewer
