// The report as one JSON object (see report_json.h): formats a built Report key by key; every
// value comes from the Report, nothing is computed or read here.
//
// Sections: memory devices · the object (headline, pipeline, memory, ops, comm, stats)
#include "tracerun/trace/analysis/report_json.h"

#include <nlohmann/json.hpp>

#include "gpu_report.h"

namespace tracerun::trace::analysis {

namespace {

using core::MemoryCategory;
using nlohmann::ordered_json;

ordered_json categories(const CategoryBytes& b) {
  ordered_json j = ordered_json::object();
  for (MemoryCategory c : kReportCategories) j[core::memoryCategoryName(c)] = at(b, c);
  return j;
}

ordered_json deviceJson(const ReportDevice& rd) {
  const DeviceMemory& d = rd.memory;
  ordered_json j;
  j["rank"] = d.rank;
  j["device"] = rd.device;
  j["peak_bytes"] = d.peak_bytes;
  j["peak_ts_ns"] = d.peak_ts_ns;
  j["by_category"] = categories(d.at_peak);
  j["category_peaks"] = categories(d.category_peaks);
  j["allocated"] = categories(d.allocated);
  j["live_at_end"] = d.live_at_end;
  j["allocations"] = d.allocations;
  j["frees"] = d.frees;
  j["unmatched_frees"] = d.unmatched_frees;
  j["inferred_activations"] = d.inferred_activations;
  j["inferred_temporaries"] = d.inferred_temporaries;
  j["largest_at_peak"] = ordered_json::array();
  for (const ReportAllocation& a : rd.largest_at_peak) {
    j["largest_at_peak"].push_back({{"bytes", a.bytes},
                                    {"category", core::memoryCategoryName(a.category)},
                                    {"tag", core::memoryCategoryName(a.tag)},
                                    {"op", a.op},
                                    {"scope", a.scope},
                                    {"ts_ns", a.ts_ns}});
  }
  return j;
}

// The critical path of the pipeline's default step: its length against the step's window and
// the chain, each action with where it ran and what it adds. null when there is none.
ordered_json criticalPathJson(const PipelineCriticalPath& cp) {
  if (!cp.found) return nullptr;
  bool chunks = false;
  for (const PipelineAction& a : cp.actions) chunks = chunks || a.chunk > 0;
  ordered_json chain = ordered_json::array();
  for (const CriticalPathLink& l : cp.chain) {
    const PipelineAction& a = cp.actions[l.action];
    chain.push_back({{"action", criticalPathActionName(a, chunks)},
                     {"rank", a.rank},
                     {"stage", a.stage},
                     {"chunk", a.chunk},
                     {"microbatch", a.microbatch},
                     {"start_ns", a.start_ns},
                     {"end_ns", a.end_ns},
                     {"weight_ns", l.weight_ns}});
  }
  return {{"step", cp.step},       {"replica", cp.replica},     {"length_ns", cp.length_ns},
          {"step_ns", cp.step_ns}, {"share", cp.shareOfStep()}, {"chain", chain}};
}

}  // namespace

std::string reportJson(const Report& r, int indent) {
  ordered_json j;
  j["path"] = r.path;
  j["ranks"] = r.ranks.size();
  j["world_size"] = r.world_size;
  j["traced_ranks"] = r.traced_ranks.empty() ? ordered_json() : ordered_json(r.traced_ranks);
  j["attempts"] = ordered_json::array();
  for (const auto& a : r.attempts) {
    ordered_json ranks = ordered_json::array();
    for (const auto& k : r.ranks) {
      if (k.attempt == a.attempt)
        ranks.push_back({{"rank", k.rank}, {"attempt_rank", k.attempt_rank}});
    }
    j["attempts"].push_back({{"attempt", a.attempt},
                             {"world_size", a.world_size},
                             {"start_ns", a.start_ns},
                             {"end_ns", a.end_ns},
                             {"ranks", ranks}});
  }
  j["steps"] = r.steps;
  j["step_mean_ns"] = r.step_mean_ns;
  j["events"] = {{"spans", r.counts.spans},       {"args", r.counts.args},
                 {"instants", r.counts.instants}, {"counters", r.counts.counters},
                 {"memory", r.counts.memory},     {"flows", r.counts.flows}};

  const PipelineAnalysis& p = r.pipeline;
  if (!p.present) {
    j["pipeline"] = nullptr;
  } else {
    ordered_json pj;
    pj["schedule"] = p.schedule;
    pj["stages"] = p.stages;
    pj["microbatches"] = p.microbatches;
    pj["virtual"] = p.virtual_stages;
    pj["bubble_measured"] = p.bubble_measured;
    pj["bubble_theory"] = p.bubble_theory;
    pj["bubble_formula"] = p.bubble_formula;
    pj["bubble_modeled"] = p.bubble_modeled;
    pj["steps"] = p.steps;
    pj["replicas"] = p.replicas;
    pj["per_stage"] = ordered_json::array();
    for (const PipelineStage& s : p.per_stage) {
      pj["per_stage"].push_back({{"stage", s.stage},
                                 {"ranks", s.ranks},
                                 {"window_ns", s.window_ns},
                                 {"forward_ns", s.forward_ns},
                                 {"backward_ns", s.backward_ns},
                                 {"send_ns", s.send_ns},
                                 {"recv_wait_ns", s.recv_wait_ns},
                                 {"idle_ns", s.idle_ns},
                                 {"bubble", s.bubble},
                                 {"bubble_modeled", s.modeled_bubble}});
    }
    pj["per_step"] = ordered_json::array();
    for (const PipelineStep& s : p.per_step) {
      pj["per_step"].push_back({{"step", s.step},
                                {"replica", s.replica},
                                {"start_ns", s.start_ns},
                                {"end_ns", s.end_ns},
                                {"bubble", s.bubble},
                                {"bubble_modeled", s.modeled_bubble}});
    }
    pj["critical_path"] = criticalPathJson(r.critical_path);
    pj["unmatched_recvs"] = p.unmatched_recvs;
    pj["notes"] = p.notes;
    j["pipeline"] = pj;
  }

  ordered_json mj;
  mj["per_rank"] = ordered_json::array();
  for (const ReportRankMemory& m : r.memory_ranks) {
    ordered_json pr = deviceJson(r.memory_devices[m.primary]);
    pr["devices"] = ordered_json::array();
    for (size_t i : m.others) pr["devices"].push_back(deviceJson(r.memory_devices[i]));
    mj["per_rank"].push_back(pr);
  }
  // {"parameter": "bf16", ...}: only when the program named dtypes (memoryDtypes).
  if (!r.memory_dtypes.empty()) mj["dtypes"] = r.memory_dtypes;
  j["memory"] = mj;

  ordered_json oj;
  oj["count"] = r.op_spans;
  oj["distinct"] = r.op_names;
  oj["top"] = ordered_json::array();
  for (const OpRow& o : r.top_ops) {
    oj["top"].push_back({{"name", o.name},
                         {"category", core::categoryName(o.category)},
                         {"count", o.count},
                         {"total_ns", o.total_ns},
                         {"self_ns", o.self_ns},
                         {"ranks", o.ranks}});
  }
  j["ops"] = oj;

  ordered_json cj;
  cj["collectives"] = ordered_json::array();
  for (const CollectiveStats& c : r.comm.collectives) {
    ordered_json x = {{"op", c.op},
                      {"via", c.via},
                      {"ranks", c.ranks},
                      {"group_size", c.group_size > 0 ? ordered_json(c.group_size) : nullptr},
                      {"group_source", c.group_source},
                      {"calls", c.calls},
                      {"bytes", c.bytes},
                      {"time_ns", c.time_ns},
                      {"host_call_time", c.host_call_time},
                      {"kernel_time", c.kernel_time},
                      {"coalesced_calls", c.coalesced_calls}};
    x["algbw_gbps"] = c.host_call_time ? ordered_json(nullptr) : ordered_json(c.algbw_gbps);
    x["busbw_gbps"] =
        c.group_size > 0 && !c.host_call_time ? ordered_json(c.busbw_gbps) : ordered_json(nullptr);
    cj["collectives"].push_back(x);
  }
  cj["p2p"] = ordered_json::array();
  for (const PointToPointStats& s : r.comm.p2p) {
    cj["p2p"].push_back({{"src", s.src >= 0 ? ordered_json(s.src) : nullptr},
                         {"dst", s.dst >= 0 ? ordered_json(s.dst) : nullptr},
                         {"kind", s.kind},
                         {"messages", s.messages},
                         {"bytes", s.bytes},
                         {"recv_ns", s.recv_ns},
                         {"wait_ns", s.wait_ns},
                         {"transfer_ns", s.transfer_ns},
                         {"matched", s.matched}});
  }
  cj["control"] = ordered_json::array();
  for (const CommControlStats& c : r.comm.control) {
    cj["control"].push_back({{"name", c.name},
                             {"ranks", c.ranks},
                             {"calls", c.calls},
                             {"total_ns", c.total_ns},
                             {"longest_ns", c.longest_ns}});
  }
  cj["per_rank"] = ordered_json::array();
  for (const RankCommStats& s : r.comm.ranks) {
    cj["per_rank"].push_back({{"rank", s.rank},
                              {"comm_ns", s.comm_ns},
                              {"compute_ns", s.compute_ns},
                              {"overlap_ns", s.overlap_ns},
                              {"measured_on", s.gpu_kernels ? "gpu kernels" : "cpu spans"},
                              {"recv_ns", s.recv_ns},
                              {"recv_wait_ns", s.recv_wait_ns},
                              {"recv_transfer_ns", s.recv_transfer_ns},
                              {"unmatched_recvs", s.unmatched_recvs}});
  }
  j["comm"] = cj;
  if (r.gpu.present()) j["gpu"] = gpuReportJson(r.gpu);  // no GPU records: no key

  ordered_json sj;
  sj["dropped_events"] = r.dropped_events;
  sj["lost_data"] = !r.lost.empty();
  sj["errors"] = r.lost;
  sj["rows"] = ordered_json::array();
  for (const StatRow& s : r.stats) {
    sj["rows"].push_back({{"rank", s.rank},
                          {"name", s.name},
                          {"value", s.value},
                          {"severity", severityName(s.severity)}});
  }
  j["stats"] = sj;
  return j.dump(indent, ' ', false, ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace tracerun::trace::analysis
