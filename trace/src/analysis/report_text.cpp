// The report as tables (see report_text.h): formats a built Report line by line; every number
// comes from the Report, nothing is computed or read here.
//
// Sections: formatting helpers · headline · pipeline · memory · ops · communication · stats ·
// the whole text
#include "tracerun/trace/analysis/report_text.h"

#include <algorithm>
#include <climits>
#include <cstdio>

#include "../utf8.h"
#include "gpu_report.h"
#include "tracerun/trace/format.h"  // durations, bytes

namespace tracerun::trace::analysis {

namespace {

using core::MemoryCategory;

// Durations and bytes are spelled by trace/format.h, like every other command's.
std::string duration(double ns) {
  return formatDuration(ns);
}

std::string bytes(double b) {
  return formatBytes(b);
}

std::string percent(double f) {
  return formatPrintf("%.1f%%", f * 100);
}

std::string rankList(const std::vector<int>& ranks) {
  std::string s;
  for (int r : ranks) s += (s.empty() ? "" : ",") + std::to_string(r);
  return s;
}

// Appends one line of text.
struct Lines {
  std::string text;
  void operator()(const std::string& s) { text += s + "\n"; }
};

// ---------------------------------------------------------------------------------------------
// headline

void headlineSection(const Report& r, Lines& line) {
  line(formatPrintf(
      "%s: %zu rank%s (world size %d), %d step%s (mean %s), %lld spans, %lld memory events",
      r.path.c_str(), r.ranks.size(), r.ranks.size() == 1 ? "" : "s", r.world_size, r.steps,
      r.steps == 1 ? "" : "s", duration(double(r.step_mean_ns)).c_str(),
      static_cast<long long>(r.counts.spans), static_cast<long long>(r.counts.memory)));
  if (!r.traced_ranks.empty()) {
    line("traced ranks " + r.traced_ranks + " only (tracerun --ranks): what crosses ranks is " +
         "seen from these");
  }
  if (r.attempts.size() > 1) {  // "2 attempts: world 2 (ranks 1-2), then world 1 (ranks 0-0)"
    std::string text =
        std::to_string(r.attempts.size()) + " attempts (restarts or elastic rounds):";
    for (const auto& a : r.attempts) {
      int lo = INT_MAX, hi = -1;
      for (const auto& k : r.ranks) {
        if (k.attempt == a.attempt) lo = std::min(lo, k.rank), hi = std::max(hi, k.rank);
      }
      text += std::string(&a == &r.attempts.front() ? "" : ", then") + " world " +
              std::to_string(a.world_size);
      if (hi == lo) text += " (rank " + std::to_string(lo) + ")";
      if (hi > lo) text += " (ranks " + std::to_string(lo) + "-" + std::to_string(hi) + ")";
    }
    line(text + "; an earlier attempt's ranks are numbered after the last one's");
  }
}

// ---------------------------------------------------------------------------------------------
// pipeline

void pipelineSection(const Report& r, Lines& line) {
  const PipelineAnalysis& p = r.pipeline;
  if (!p.present) {
    line("pipeline: none (no forward/backward phases with more than one stage)");
  } else {
    line(formatPrintf(
        "pipeline: %s, p=%d stages, m=%d microbatches, v=%d, %zu replica%s, %d step%s",
        p.schedule.c_str(), p.stages, p.microbatches, p.virtual_stages, p.replicas.size(),
        p.replicas.size() == 1 ? "" : "s", p.steps, p.steps == 1 ? "" : "s"));
    line(formatPrintf("  bubble: measured %s, closed form %s, modeled %s (median over steps)",
                      percent(p.bubble_measured).c_str(), percent(p.bubble_theory).c_str(),
                      percent(p.bubble_modeled).c_str()));
    if (!p.bubble_formula.empty()) line("  closed form: " + p.bubble_formula);
    if (const PipelineCriticalPath& cp = r.critical_path; cp.found) {
      line(formatPrintf("  critical path: %s of step %d's %s (%s), %zu actions: %s",
                        duration(double(cp.length_ns)).c_str(), cp.step,
                        duration(double(cp.step_ns)).c_str(), percent(cp.shareOfStep()).c_str(),
                        cp.chain.size(), criticalPathChainText(cp, 12).c_str()));
    }
    line(formatPrintf("  %-5s %-10s %12s %12s %12s %12s %12s %12s %7s %8s", "stage", "ranks",
                      "window", "forward", "backward", "send", "recv wait", "idle", "bubble",
                      "modeled"));
    for (const PipelineStage& s : p.per_stage) {
      line(formatPrintf("  %-5d %-10s %12s %12s %12s %12s %12s %12s %7s %8s", s.stage,
                        rankList(s.ranks).c_str(), duration(s.window_ns).c_str(),
                        duration(s.forward_ns).c_str(), duration(s.backward_ns).c_str(),
                        duration(s.send_ns).c_str(), duration(s.recv_wait_ns).c_str(),
                        duration(s.idle_ns).c_str(), percent(s.bubble).c_str(),
                        percent(s.modeled_bubble).c_str()));
    }
    line("  (per step and stage, averaged over steps and replicas)");
    for (const std::string& n : p.notes) line("  note: " + n);
  }
}

// ---------------------------------------------------------------------------------------------
// memory

void memorySection(const Report& r, Lines& line) {
  line("memory: live bytes by category at each rank's peak");
  if (!r.memory_dtypes.empty()) {
    std::string named;
    for (const auto& [category, dtype] : r.memory_dtypes) {
      named += (named.empty() ? "" : ", ") + category + " " + dtype;
    }
    line("  dtypes, as the program named them: " + named);
  }
  line(formatPrintf("  %-4s %-7s %10s %10s %10s %10s %10s %10s %10s %10s", "rank", "device", "peak",
                    "parameter", "gradient", "optimizer", "activation", "temporary", "input",
                    "other"));
  for (const ReportDevice& rd : r.memory_devices) {
    const DeviceMemory& d = rd.memory;
    std::string row = formatPrintf("  %-4d %-7s %10s", d.rank, rd.device.c_str(),
                                   bytes(double(d.peak_bytes)).c_str());
    for (MemoryCategory c : kReportCategories) {
      row += formatPrintf(" %10s", bytes(double(at(d.at_peak, c))).c_str());
    }
    line(row);
  }
  for (const ReportRankMemory& m : r.memory_ranks) {
    const ReportDevice& d = r.memory_devices[m.primary];
    if (m.rank != 0 || d.largest_at_peak.empty()) continue;
    line(formatPrintf("  largest live at rank %d's peak (%s, at %s):", m.rank, d.device.c_str(),
                      duration(double(d.memory.peak_ts_ns)).c_str()));
    for (const ReportAllocation& a : d.largest_at_peak) {
      line(formatPrintf("    %10s  %-16s %-28s %s", bytes(double(a.bytes)).c_str(),
                        core::memoryCategoryName(a.category), a.op.c_str(), a.scope.c_str()));
    }
  }
  if (r.memory_devices.empty()) line("  (no memory events)");
}

// ---------------------------------------------------------------------------------------------
// ops

void opsSection(const Report& r, Lines& line) {
  line(formatPrintf(
      "ops: %lld spans of %lld ops and autograd nodes; top %zu by self time (all ranks)",
      static_cast<long long>(r.op_spans), static_cast<long long>(r.op_names), r.top_ops.size()));
  line(formatPrintf("  %-44s %-8s %9s %12s %12s", "name", "kind", "count", "total", "self"));
  for (const OpRow& o : r.top_ops) {
    std::string name = o.name.size() > 44 ? utf8Prefix(o.name, 41) + "..." : o.name;
    line(formatPrintf("  %-44s %-8s %9lld %12s %12s", name.c_str(), core::categoryName(o.category),
                      static_cast<long long>(o.count), duration(double(o.total_ns)).c_str(),
                      duration(double(o.self_ns)).c_str()));
  }
}

// ---------------------------------------------------------------------------------------------
// communication

void commSection(const Report& r, Lines& line) {
  line("communication: collectives (bus bandwidth with nccl-tests' factors)");
  if (r.comm.collectives.empty()) line("  (none)");
  bool hostCalls = false;
  for (const CollectiveStats& c : r.comm.collectives) {
    const std::string group = c.group_size > 0
                                  ? "[" + rankList(c.ranks) + "] (" + c.group_source + ")"
                                  : "? (rank " + rankList(c.ranks) + ")";
    // NCCL's host calls: the enqueue's length gives no bandwidth (comm.h, host_call_time).
    const std::string algbw =
        c.host_call_time ? "       -     " : formatPrintf("%8.3f GB/s", c.algbw_gbps);
    line(formatPrintf(
        "  %-14s %-22s calls %6lld  %10s  %12s  algbw %s  busbw %s", c.op.c_str(), group.c_str(),
        static_cast<long long>(c.calls), bytes(double(c.bytes)).c_str(),
        duration(double(c.time_ns)).c_str(), algbw.c_str(),
        c.group_size > 0 && !c.host_call_time ? formatPrintf("%8.3f GB/s", c.busbw_gbps).c_str()
                                              : "       -"));
    hostCalls = hostCalls || c.host_call_time;
    if (!c.via.empty()) line("      via " + c.via);
    if (c.kernel_time) line("      timed by the NCCL kernels the calls launched");
    if (c.coalesced_calls > 0) {
      line(formatPrintf(
          "      coalesced: the program's %lld calls, grouped (one NCCL kernel a group)",
          static_cast<long long>(c.coalesced_calls)));
    }
  }
  if (hostCalls) {
    line(
        "  algbw/busbw -: NCCL host calls whose spans are the enqueues, with no kernel known to "
        "be their own (cuda not captured; several calls grouped by ncclGroupStart/End, which "
        "share one kernel; a nonblocking communicator; a one-rank communicator, which copies)");
  }
  if (!r.comm.p2p.empty()) {
    line("  point-to-point (receive time split into waiting for the send and transferring)");
    line(formatPrintf("  %-5s %-5s %-9s %8s %10s %12s %12s %12s", "src", "dst", "kind", "messages",
                      "bytes", "recv", "wait", "transfer"));
    for (const PointToPointStats& s : r.comm.p2p) {
      line(formatPrintf("  %-5s %-5s %-9s %8lld %10s %12s %12s %12s",
                        s.src >= 0 ? std::to_string(s.src).c_str() : "?",
                        s.dst >= 0 ? std::to_string(s.dst).c_str() : "?", s.kind.c_str(),
                        static_cast<long long>(s.messages), bytes(double(s.bytes)).c_str(),
                        duration(double(s.recv_ns)).c_str(), duration(double(s.wait_ns)).c_str(),
                        duration(double(s.transfer_ns)).c_str()));
    }
  }
  if (!r.comm.control.empty()) {
    line("  not communication: communicator set-up and tear-down, group markers (no data moved)");
    for (const CommControlStats& c : r.comm.control) {
      line(formatPrintf("  %-28s ranks %4d  calls %6lld  %12s  longest %12s", c.name.c_str(),
                        c.ranks, static_cast<long long>(c.calls),
                        duration(double(c.total_ns)).c_str(),
                        duration(double(c.longest_ns)).c_str()));
    }
  }
  line(
      "  per rank: communication overlapped with computation (on CPU: spans, leaf ops; on GPU: "
      "kernels)");
  line(formatPrintf("  %-4s %12s %12s %12s %8s  %s", "rank", "comm", "compute", "overlap",
                    "of comm", "on"));
  for (size_t i = 0; i < r.comm.ranks.size(); ++i) {
    const RankCommStats& s = r.comm.ranks[i];
    const double of_comm = r.comm_overlap[i];
    line(
        formatPrintf("  %-4d %12s %12s %12s %8s  %s", s.rank, duration(double(s.comm_ns)).c_str(),
                     duration(double(s.compute_ns)).c_str(), duration(double(s.overlap_ns)).c_str(),
                     of_comm >= 0 ? percent(of_comm).c_str() : "-", s.gpu_kernels ? "GPU" : "CPU"));
  }
}

// ---------------------------------------------------------------------------------------------
// stats

void statsSection(const Report& r, Lines& line) {
  line(formatPrintf("stats: dropped events %lld", static_cast<long long>(r.dropped_events)));
  for (const StatRow& s : r.stats) {
    if (s.severity == Severity::kInfo) continue;
    line(formatPrintf("  rank %d %s = %lld (%s)", s.rank, s.name.c_str(),
                      static_cast<long long>(s.value), severityName(s.severity)));
  }
  if (!r.lost.empty()) line("  the capture lost data: this report is incomplete");
}

}  // namespace

std::string reportText(const Report& r) {
  Lines line;
  headlineSection(r, line);
  line("");
  pipelineSection(r, line);
  line("");
  memorySection(r, line);
  line("");
  opsSection(r, line);
  line("");
  commSection(r, line);
  line("");
  if (r.gpu.present()) line.text += gpuReportText(r.gpu) + "\n";  // no GPU records: no section
  statsSection(r, line);
  return line.text;
}

}  // namespace tracerun::trace::analysis
