// The GPU analyses' input (see gpu_activity.h): which tracks are streams, which spans are GPU
// activity, what kind each is, and when each was launched (its launch API record, joined by
// CUPTI's correlation id, else its launching op's start). Reads through TraceReader; computes
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

// A launch API call: [start, end] on the host.
struct LaunchCall {
  int64_t start = 0, end = 0;
};
// Per rank, CUPTI correlation id -> the launch calls carrying it (one, unless a restarted process
// reused the id).
using LaunchCalls = std::map<int, std::unordered_map<int64_t, std::vector<LaunchCall>>>;

// Whether an argument key id names `text` ("correlation", "bytes"): decided once per id.
class ArgKey {
 public:
  ArgKey(const TraceReader& reader, const char* text) : reader_(reader), text_(text) {}
  bool is(core::StringId key) {
    auto it = known_.find(key);
    if (it == known_.end()) it = known_.emplace(key, reader_.str(key) == text_).first;
    return it->second;
  }

 private:
  const TraceReader& reader_;
  const char* text_;
  std::unordered_map<core::StringId, bool> known_;
};

// span id -> its `key` argument, over one track.
std::unordered_map<int64_t, int64_t> argValues(const TraceReader& reader, int64_t track,
                                               ArgKey& key) {
  std::unordered_map<int64_t, int64_t> out;
  for (const ArgRow& a : reader.argsOfTrack(track)) {
    if (key.is(a.key)) out[a.span] = a.value;
  }
  return out;
}

// Every launch API span (category other on a "cuda api thread T" track) with its correlation.
LaunchCalls launchCalls(const TraceReader& reader, const std::vector<TrackRow>& tracks,
                        ArgKey& key) {
  LaunchCalls out;
  for (const TrackRow& t : tracks) {
    if (!isLaunchApiTrackName(t.name)) continue;
    const auto corr = argValues(reader, t.id, key);
    auto& calls = out[t.rank];
    reader.forEachSpan(t.id, [&](const SpanRow& r) {
      if (r.category != core::Category::kOther) return;
      auto c = corr.find(r.id);
      if (c == corr.end()) return;
      calls[c->second].push_back({r.start_ns, std::max(r.start_ns, r.end_ns())});
    });
  }
  return out;
}

// The call that launched an activity starting at `start`: the latest one starting by then (a
// reused id's earlier call is another process's), else the earliest. Null when none.
const LaunchCall* launchOf(const std::vector<LaunchCall>& calls, int64_t start) {
  const LaunchCall *before = nullptr, *after = nullptr;
  for (const LaunchCall& c : calls) {
    if (c.start <= start) {
      if (before == nullptr || c.start > before->start) before = &c;
    } else if (after == nullptr || c.start < after->start) {
      after = &c;
    }
  }
  return before != nullptr ? before : after;
}

}  // namespace

bool isLaunchApiTrackName(std::string_view name) {
  constexpr std::string_view kPrefix = "cuda api thread ";
  return name.size() > kPrefix.size() && name.substr(0, kPrefix.size()) == kPrefix;
}

std::vector<StreamActivities> readActivities(const TraceReader& reader, int64_t only_track,
                                             int only_rank) {
  std::vector<StreamActivities> out;
  const std::vector<TrackRow> tracks = reader.tracks();
  for (const TrackRow& t : tracks) {
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
  ArgKey key(reader, "correlation"), bytesKey(reader, "bytes");
  const LaunchCalls calls = launchCalls(reader, tracks, key);
  std::unordered_map<core::StringId, GpuKind> kinds;  // per distinct name: demangle once
  for (StreamActivities& s : out) {
    const auto rankCalls = calls.find(s.rank);
    std::unordered_map<int64_t, int64_t> corr;
    if (rankCalls != calls.end()) corr = argValues(reader, s.track, key);
    const auto bytes = argValues(reader, s.track, bytesKey);  // copies' and sets' sizes
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
      if (auto b = bytes.find(r.id); !a.kernel && b != bytes.end()) a.bytes = b->second;
      auto l = launches.find({s.track, r.start_ns});
      if (l != launches.end()) a.launch = a.launch_end = l->second;
      if (auto c = corr.find(r.id); c != corr.end()) {
        auto same = rankCalls->second.find(c->second);
        if (same != rankCalls->second.end()) {
          if (const LaunchCall* call = launchOf(same->second, a.start)) {
            a.launch = call->start;
            a.launch_end = call->end;
            a.launch_record = true;
          }
        }
      }
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
