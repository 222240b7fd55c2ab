// The GPU analyses' input (see gpu_activity.h): which tracks are streams, which spans are GPU
// activity, what kind each is, and when each was launched. Reads through TraceReader; computes
// no statistics.
#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include "gpu_activity.h"
#include "tracerun/core/kernel_name.h"

namespace tracerun::trace::analysis {

const char* gpuKindName(GpuKind k) noexcept {
  switch (k) {
    case GpuKind::kCompute:
      return "compute";
    case GpuKind::kComm:
      return "comm";
    case GpuKind::kMemory:
      return "memory";
  }
  return "compute";
}

GpuKind gpuKindOf(core::Category category, std::string_view name) noexcept {
  if (category == core::Category::kMemcpy) return GpuKind::kMemory;
  // HTA's CommunicateKernelGroupingPattern: (^nccl.*)|(^hip)|(^hccl)|(.*ncclKernel.*).
  auto starts = [&](std::string_view p) { return name.substr(0, p.size()) == p; };
  if (starts("nccl") || starts("hip") || starts("hccl") ||
      name.find("ncclKernel") != std::string_view::npos)
    return GpuKind::kComm;
  return GpuKind::kCompute;
}

namespace gpu {

bool parseStreamTrackName(std::string_view name, int* device, int64_t* stream) {
  constexpr std::string_view kCuda = "cuda:", kStream = " stream ";
  if (name.substr(0, kCuda.size()) != kCuda) return false;
  name.remove_prefix(kCuda.size());
  const char* end = name.data() + name.size();
  auto d = std::from_chars(name.data(), end, *device);
  if (d.ec != std::errc() || d.ptr == name.data()) return false;
  std::string_view rest(d.ptr, static_cast<size_t>(end - d.ptr));
  if (rest.substr(0, kStream.size()) != kStream) return false;
  rest.remove_prefix(kStream.size());
  auto s = std::from_chars(rest.data(), end, *stream);
  return s.ec == std::errc() && s.ptr == end && s.ptr != rest.data();
}

namespace {

// (track, start) of each op -> kernel flow's device end -> the launching op's start. Several
// flows to one activity (none today) keep the latest op start: the launch closest to it.
std::map<std::pair<int64_t, int64_t>, int64_t> launchTimes(const TraceReader& reader) {
  std::map<std::pair<int64_t, int64_t>, int64_t> out;
  for (const FlowRow& f : reader.flows()) {
    if (f.kind != core::FlowKind::kOpKernel) continue;
    auto [it, fresh] = out.emplace(std::make_pair(f.dst_track, f.dst_ts_ns), f.src_ts_ns);
    if (!fresh) it->second = std::max(it->second, f.src_ts_ns);
  }
  return out;
}

}  // namespace

std::vector<StreamActivities> readActivities(const TraceReader& reader, int64_t only_track,
                                             int only_rank) {
  std::vector<StreamActivities> out;
  for (const TrackRow& t : reader.tracks()) {
    if (only_track >= 0 && t.id != only_track) continue;
    if (only_rank >= 0 && t.rank != only_rank) continue;
    StreamActivities s;
    if (!parseStreamTrackName(t.name, &s.device, &s.stream)) continue;
    s.rank = t.rank;
    s.track = t.id;
    out.push_back(std::move(s));
  }
  if (out.empty()) return out;
  const auto launches = launchTimes(reader);
  std::unordered_map<core::StringId, GpuKind> kinds;  // per distinct name: demangle once
  for (StreamActivities& s : out) {
    reader.forEachSpan(s.track, [&](const SpanRow& r) {
      if (r.category != core::Category::kKernel && r.category != core::Category::kMemcpy) return;
      Activity a;
      a.start = r.start_ns;
      a.end = std::max(r.start_ns, r.end_ns());
      a.name = r.name;
      a.kernel = r.category == core::Category::kKernel;
      auto k = kinds.find(r.name);
      if (k == kinds.end()) {
        const GpuKind kind = gpuKindOf(r.category, core::demangleKernelName(reader.str(r.name)));
        k = kinds.emplace(r.name, kind).first;
      }
      a.kind = a.kernel ? k->second : GpuKind::kMemory;
      auto l = launches.find({s.track, r.start_ns});
      if (l != launches.end()) a.launch = l->second;
      s.items.push_back(a);
    });
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [](const StreamActivities& s) { return s.items.empty(); }),
            out.end());
  std::sort(out.begin(), out.end(), [](const StreamActivities& a, const StreamActivities& b) {
    return std::tie(a.rank, a.device, a.stream, a.track) <
           std::tie(b.rank, b.device, b.stream, b.track);
  });
  return out;
}

}  // namespace gpu
}  // namespace tracerun::trace::analysis
