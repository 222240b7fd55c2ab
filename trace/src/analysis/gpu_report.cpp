// The report's gpu section in text and JSON (see gpu_report.h). Every number comes from the
// GpuAnalysis; nothing is computed here beyond shares of a device's window.
//
// Sections: helpers · text (devices, idle by cause, launch delay, kernels, stragglers) · JSON
#include "gpu_report.h"

#include <cstdio>

#include "tracerun/trace/format.h"

namespace tracerun::trace::analysis {

namespace {

using nlohmann::ordered_json;

std::string dur(int64_t ns) {
  return formatDuration(double(ns));
}

// "12.3 ms 45.6%": a part of the device's window.
std::string part(int64_t ns, int64_t window) {
  return dur(ns) + " " + (window > 0 ? formatShare(double(ns) / double(window)) : "-");
}

std::string dev(const GpuDevice& d) {
  return "cuda:" + std::to_string(d.device);
}

// -------------------------------------------------------------------------------------------
// text

void devicesText(const GpuAnalysis& g, std::string& out) {
  out += "gpu: per rank and device, as Holistic Trace Analysis breaks time down (docs/report.md)\n";
  out += formatPrintf("  %-4s %-7s %11s %20s %20s %20s %20s %20s %9s\n", "rank", "device", "window",
                      "busy", "idle", "compute", "comm", "memory", "comm ovl");
  for (const GpuDevice& d : g.devices) {
    const double ovl = d.overlapRatio();
    out +=
        formatPrintf("  %-4d %-7s %11s %20s %20s %20s %20s %20s %9s\n", d.rank, dev(d).c_str(),
                     dur(d.window_ns).c_str(), part(d.busy_ns, d.window_ns).c_str(),
                     part(d.idle_ns, d.window_ns).c_str(), part(d.compute_ns, d.window_ns).c_str(),
                     part(d.comm_ns, d.window_ns).c_str(), part(d.memory_ns, d.window_ns).c_str(),
                     ovl >= 0 ? formatShare(ovl).c_str() : "-");
  }
}

void idleText(const GpuAnalysis& g, std::string& out) {
  out += formatPrintf(
      "  idle by cause (kernel wait: gaps under %s; host wait: launched after the gap began)\n",
      dur(g.options.kernel_wait_ns).c_str());
  out += formatPrintf("  %-4s %-7s %-10s %10s %12s %12s %12s %9s\n", "rank", "device", "stream",
                      "activities", "host wait", "kernel wait", "other", "queue max");
  for (const GpuDevice& d : g.devices) {
    out += formatPrintf("  %-4d %-7s %-10s %10lld %12s %12s %12s\n", d.rank, dev(d).c_str(),
                        "(device)", static_cast<long long>(d.kernels + d.copies),
                        dur(d.idle.host_wait_ns).c_str(), dur(d.idle.kernel_wait_ns).c_str(),
                        dur(d.idle.other_ns).c_str());
    for (const GpuStream& s : d.streams) {
      out +=
          formatPrintf("  %-4d %-7s %-10lld %10lld %12s %12s %12s %9lld\n", d.rank, dev(d).c_str(),
                       static_cast<long long>(s.stream), static_cast<long long>(s.activities),
                       dur(s.idle.host_wait_ns).c_str(), dur(s.idle.kernel_wait_ns).c_str(),
                       dur(s.idle.other_ns).c_str(), static_cast<long long>(s.queue_max));
    }
  }
}

void launchText(const GpuAnalysis& g, std::string& out) {
  out += formatPrintf("  launch delay (launch call's end -> activity start; outliers over %s)\n",
                      dur(g.options.launch_outlier_ns).c_str());
  out += formatPrintf("  %-4s %-7s %10s %12s %12s %12s %9s  %s\n", "rank", "device", "launched",
                      "p50", "p95", "max", "outliers", "launch source");
  for (const GpuDevice& d : g.devices) {
    if (d.launch.count == 0) {
      out += formatPrintf("  %-4d %-7s %10s\n", d.rank, dev(d).c_str(),
                          "(no launch records or op flows)");
      continue;
    }
    out += formatPrintf("  %-4d %-7s %10lld %12s %12s %12s %9lld  %s\n", d.rank, dev(d).c_str(),
                        static_cast<long long>(d.launch.count), dur(d.launch.p50_ns).c_str(),
                        dur(d.launch.p95_ns).c_str(), dur(d.launch.max_ns).c_str(),
                        static_cast<long long>(d.launch.outliers), d.launchSource());
  }
}

void copiesText(const GpuAnalysis& g, std::string& out) {
  bool any = false;
  for (const GpuDevice& d : g.devices) any = any || !d.copy_kinds.empty();
  if (!any) return;
  out += "  copies and sets by kind (bandwidth: bytes over the copies' own time)\n";
  out += formatPrintf("  %-4s %-7s %-14s %8s %12s %12s %10s\n", "rank", "device", "kind", "count",
                      "bytes", "time", "GB/s");
  for (const GpuDevice& d : g.devices) {
    for (const GpuCopyKind& c : d.copy_kinds) {
      out += formatPrintf("  %-4d %-7s %-14s %8lld %12s %12s %10.2f\n", d.rank, dev(d).c_str(),
                          c.name.c_str(), static_cast<long long>(c.count),
                          formatBytes(double(c.bytes)).c_str(), dur(c.time_ns).c_str(), c.gbps());
    }
  }
}

void kernelsText(const GpuAnalysis& g, size_t top, std::string& out) {
  const size_t n = std::min(top, g.kernels.size());
  out += formatPrintf("  kernels: %zu names, top %zu by total time (all ranks)\n", g.kernels.size(),
                      n);
  // As wide as the widest label shown, 40 at least (labels: gpu.h).
  int width = 40;
  for (size_t i = 0; i < n; ++i)
    width = std::max(width, static_cast<int>(g.kernels[i].label.size()));
  out += formatPrintf("  %-*s %-7s %8s %12s %11s %11s %11s %11s %5s\n", width, "short name", "kind",
                      "count", "total", "mean", "p50", "min", "max", "ranks");
  for (size_t i = 0; i < n; ++i) {
    const GpuKernelRow& k = g.kernels[i];
    out += formatPrintf("  %-*s %-7s %8lld %12s %11s %11s %11s %11s %5d\n", width, k.label.c_str(),
                        gpuKindName(k.kind), static_cast<long long>(k.count),
                        dur(k.total_ns).c_str(), dur(k.mean_ns).c_str(), dur(k.p50_ns).c_str(),
                        dur(k.min_ns).c_str(), dur(k.max_ns).c_str(), k.ranks);
  }
}

void stragglersText(const GpuAnalysis& g, std::string& out) {
  if (g.stragglers.empty()) return;
  out += formatPrintf("  stragglers: %lld collective kernels matched across ranks, latest first\n",
                      static_cast<long long>(g.collectives));
  out += formatPrintf("  %-4s %11s %8s %12s %12s\n", "rank", "collectives", "last", "mean late",
                      "max late");
  for (const GpuStraggler& s : g.stragglers) {
    out += formatPrintf("  %-4d %11lld %8lld %12s %12s\n", s.rank,
                        static_cast<long long>(s.collectives), static_cast<long long>(s.last),
                        dur(s.mean_late_ns).c_str(), dur(s.max_late_ns).c_str());
  }
}

// -------------------------------------------------------------------------------------------
// JSON

ordered_json idleJson(const GpuIdle& i) {
  return {{"host_wait_ns", i.host_wait_ns},
          {"kernel_wait_ns", i.kernel_wait_ns},
          {"other_ns", i.other_ns}};
}

ordered_json deviceJson(const GpuDevice& d) {
  ordered_json j;
  j["rank"] = d.rank;
  j["device"] = dev(d);
  j["start_ns"] = d.start_ns;
  j["end_ns"] = d.end_ns;
  j["window_ns"] = d.window_ns;
  j["busy_ns"] = d.busy_ns;
  j["idle_ns"] = d.idle_ns;
  j["compute_ns"] = d.compute_ns;
  j["comm_ns"] = d.comm_ns;
  j["memory_ns"] = d.memory_ns;
  j["comm_compute_overlap_ns"] = d.comm_compute_overlap_ns;
  const double ovl = d.overlapRatio();
  j["comm_compute_overlap"] = ovl >= 0 ? ordered_json(ovl) : ordered_json(nullptr);
  j["kernels"] = d.kernels;
  j["copies"] = d.copies;
  j["idle"] = idleJson(d.idle);
  j["launch_source"] = d.launchSource();
  j["launch"] = {{"launched", d.launch.count}, {"launch_records", d.launch_records},
                 {"p50_ns", d.launch.p50_ns},  {"p95_ns", d.launch.p95_ns},
                 {"max_ns", d.launch.max_ns},  {"outliers", d.launch.outliers}};
  j["copy_kinds"] = ordered_json::array();
  for (const GpuCopyKind& c : d.copy_kinds) {
    j["copy_kinds"].push_back({{"name", c.name},
                               {"count", c.count},
                               {"bytes", c.bytes},
                               {"time_ns", c.time_ns},
                               {"gbps", c.gbps()}});
  }
  j["streams"] = ordered_json::array();
  for (const GpuStream& s : d.streams) {
    j["streams"].push_back({{"stream", s.stream},
                            {"activities", s.activities},
                            {"start_ns", s.start_ns},
                            {"end_ns", s.end_ns},
                            {"busy_ns", s.busy_ns},
                            {"idle", idleJson(s.idle)},
                            {"queue_max", s.queue_max},
                            {"queue_mean", s.queue_mean}});
  }
  return j;
}

}  // namespace

std::string gpuReportText(const GpuAnalysis& g, size_t top_kernels) {
  std::string out;
  devicesText(g, out);
  idleText(g, out);
  launchText(g, out);
  copiesText(g, out);
  kernelsText(g, top_kernels, out);
  stragglersText(g, out);
  return out;
}

ordered_json gpuReportJson(const GpuAnalysis& g) {
  ordered_json j;
  j["kernel_wait_threshold_ns"] = g.options.kernel_wait_ns;
  j["launch_outlier_ns"] = g.options.launch_outlier_ns;
  // "cupti" when every device's launches come from launch records, "op_start" when none do
  // (traces from before the capture kept them), "mixed" otherwise; per device: launch_source.
  int64_t launched = 0, records = 0;
  for (const GpuDevice& d : g.devices) {
    launched += d.launched;
    records += d.launch_records;
  }
  j["launch_from"] = records == 0 ? "op_start" : records == launched ? "cupti" : "mixed";
  j["devices"] = ordered_json::array();
  for (const GpuDevice& d : g.devices) j["devices"].push_back(deviceJson(d));
  j["kernels"] = ordered_json::array();
  for (const GpuKernelRow& k : g.kernels) {
    j["kernels"].push_back({{"name", k.name},
                            {"short_name", k.short_name},
                            {"label", k.label},
                            {"kind", gpuKindName(k.kind)},
                            {"count", k.count},
                            {"total_ns", k.total_ns},
                            {"mean_ns", k.mean_ns},
                            {"min_ns", k.min_ns},
                            {"max_ns", k.max_ns},
                            {"p50_ns", k.p50_ns},
                            {"ranks", k.ranks}});
  }
  j["collectives_matched"] = g.collectives;
  j["stragglers"] = ordered_json::array();
  for (const GpuStraggler& s : g.stragglers) {
    j["stragglers"].push_back({{"rank", s.rank},
                               {"collectives", s.collectives},
                               {"last", s.last},
                               {"mean_late_ns", s.mean_late_ns},
                               {"max_late_ns", s.max_late_ns}});
  }
  return j;
}

}  // namespace tracerun::trace::analysis
