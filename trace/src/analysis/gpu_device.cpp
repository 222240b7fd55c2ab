// One device's GPU numbers (see gpu.h): HTA's temporal breakdown (window, busy, idle, compute,
// communication, memory time as unions), its idle-time breakdown per stream and over the device,
// communication-computation overlap, launch delays and copy bandwidth per kind. Pure: takes the
// streams read by gpu_activity.cpp, reads nothing.
#include <algorithm>
#include <array>
#include <map>

#include "gpu_activity.h"
#include "span_select.h"  // intervals, saturated arithmetic

namespace tracerun::trace::analysis::gpu {

namespace {

// HTA's per-stream idle breakdown: the gap before each activity, after the stream's previous
// ones (their latest end), classified by addGap.
GpuStream analyzeStream(const StreamActivities& s, const GpuOptions& o) {
  GpuStream out;
  out.track = s.track;
  out.stream = s.stream;
  out.activities = static_cast<int64_t>(s.items.size());
  Intervals iv;
  iv.reserve(s.items.size());
  int64_t end = INT64_MIN;
  for (const Activity& a : s.items) {
    iv.emplace_back(a.start, a.end);
    if (end != INT64_MIN) addGap(end, a.start, a.launch, o.kernel_wait_ns, out.idle);
    end = std::max(end, a.end);
  }
  normalize(iv);
  out.busy_ns = totalLength(iv);
  const std::vector<GpuQueueSample> q = queueLength(s);
  double sum = 0;
  for (const GpuQueueSample& x : q) {
    out.queue_max = std::max(out.queue_max, x.length);
    sum += double(x.length);
  }
  out.queue_mean = q.empty() ? 0.0 : sum / double(q.size());
  out.start_ns = s.items.front().start;
  out.end_ns = end;
  return out;
}

GpuDelayStats delayStats(std::vector<int64_t> delays, const GpuOptions& o) {
  GpuDelayStats st;
  std::sort(delays.begin(), delays.end());
  st.count = static_cast<int64_t>(delays.size());
  st.p50_ns = percentile(delays, 0.50);
  st.p95_ns = percentile(delays, 0.95);
  st.max_ns = delays.empty() ? 0 : delays.back();
  st.outliers = static_cast<int64_t>(
      delays.end() - std::upper_bound(delays.begin(), delays.end(), o.launch_outlier_ns));
  return st;
}

}  // namespace

GpuDevice analyzeDevice(const std::vector<const StreamActivities*>& streams, const GpuOptions& o) {
  GpuDevice d;
  d.rank = streams.front()->rank;
  d.device = streams.front()->device;
  std::vector<Activity> all;
  for (const StreamActivities* s : streams) {
    d.streams.push_back(analyzeStream(*s, o));
    all.insert(all.end(), s->items.begin(), s->items.end());
  }
  // Ties at one start: the activity with the earliest (or unknown) launch decides the gap, so
  // host wait is never claimed for a gap another activity could have filled.
  std::sort(all.begin(), all.end(), [](const Activity& a, const Activity& b) {
    return a.start != b.start ? a.start < b.start : a.launch < b.launch;
  });
  std::array<Intervals, 3> byKind;
  std::vector<int64_t> delays;
  std::map<core::StringId, GpuCopyKind> copyKinds;
  int64_t end = INT64_MIN;
  for (const Activity& a : all) {
    if (end != INT64_MIN && a.start > end) addGap(end, a.start, a.launch, o.kernel_wait_ns, d.idle);
    end = std::max(end, a.end);
    byKind[static_cast<size_t>(a.kind)].emplace_back(a.start, a.end);
    if (!a.kernel) {
      GpuCopyKind& c = copyKinds[a.name];
      c.name_id = a.name;
      ++c.count;
      c.bytes = satAdd(c.bytes, std::max<int64_t>(0, a.bytes));
      c.time_ns = satAdd(c.time_ns, satSub(a.end, a.start));
    }
    (a.kernel ? d.kernels : d.copies) += 1;
    if (a.launch != kNoLaunch) {
      ++d.launched;
      if (a.launch_record) ++d.launch_records;
      // HTA's launch delay as its documentation defines it: the kernel's start minus the end of
      // its launch call (the estimate's "end" is the op's start).
      delays.push_back(std::max<int64_t>(0, satSub(a.start, a.launch_end)));
    }
  }
  d.start_ns = all.front().start;
  d.end_ns = end;
  d.window_ns = satSub(d.end_ns, d.start_ns);
  Intervals every;
  for (const auto& k : byKind) every.insert(every.end(), k.begin(), k.end());
  normalize(every);
  d.busy_ns = totalLength(every);
  d.idle_ns = satSub(d.window_ns, d.busy_ns);
  for (Intervals& k : byKind) normalize(k);
  const Intervals& compute = byKind[static_cast<size_t>(GpuKind::kCompute)];
  const Intervals& comm = byKind[static_cast<size_t>(GpuKind::kComm)];
  d.compute_ns = totalLength(compute);
  d.comm_ns = totalLength(comm);
  d.memory_ns = totalLength(byKind[static_cast<size_t>(GpuKind::kMemory)]);
  d.comm_compute_overlap_ns = overlapLength(comm, compute);
  d.launch = delayStats(std::move(delays), o);
  for (const auto& [name, c] : copyKinds) d.copy_kinds.push_back(c);
  return d;
}

}  // namespace tracerun::trace::analysis::gpu
