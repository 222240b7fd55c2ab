// The report's one shared pass (issue 29 point 3) against two independent paths on multi-rank
// traces: (1) the analyses' public functions, each reading the trace with a pass of its own
// (analyzePipeline, pipelineCriticalPath, analyzeMemory, analyzeComm: what dot/ and viewer/
// call), field by field; (2) a brute-force replay of every memory event held in memory (the
// reader's memory() rows and the categories analyzeMemory assigned) for each device's peak, bytes
// at the peak, category peaks, allocated bytes, live bytes at the end and largest blocks at the
// peak, which the memory analysis now finds in two streamed passes instead of three.
// Traces: the fixture (3 ranks, clock offsets) and, when gpttrain is built, a traced 4-rank run
// with tensor, sequence and pipeline parallelism (pipeline, collectives, p2p, memory all present).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "e2e_common.h"
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::trace::analysis;
using tracerun::e2e::scratch;

namespace {

std::string num(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

std::string bytesText(const CategoryBytes& b) {
  std::string s = "[";
  for (int64_t x : b) s += std::to_string(x) + " ";
  return s + "]";
}

// Every field of the analyses as text: a mismatch shows where.
std::string describe(const PipelineAnalysis& p) {
  std::string s = "present " + std::to_string(p.present) + " schedule " + p.schedule + " p " +
                  std::to_string(p.stages) + " m " + std::to_string(p.microbatches) + " v " +
                  std::to_string(p.virtual_stages) + " steps " + std::to_string(p.steps) +
                  " measured " + num(p.bubble_measured) + " theory " + num(p.bubble_theory) +
                  " formula " + p.bubble_formula + " modeled " + num(p.bubble_modeled) +
                  " unmatched " + std::to_string(p.unmatched_recvs) + "\n";
  for (const auto& r : p.replicas) {
    s += "replica";
    for (int x : r) s += " " + std::to_string(x);
    s += "\n";
  }
  for (const PipelineStage& st : p.per_stage) {
    s += "stage " + std::to_string(st.stage) + " " + num(st.window_ns) + " " + num(st.forward_ns) +
         " " + num(st.backward_ns) + " " + num(st.send_ns) + " " + num(st.recv_wait_ns) + " " +
         num(st.idle_ns) + " " + num(st.bubble) + " " + num(st.modeled_bubble) + "\n";
  }
  for (const PipelineStep& st : p.per_step) {
    s += "step " + std::to_string(st.step) + " " + std::to_string(st.replica) + " " +
         std::to_string(st.start_ns) + " " + std::to_string(st.end_ns) + " " + num(st.bubble) +
         " " + num(st.modeled_bubble) + "\n";
  }
  for (const std::string& n : p.notes) s += "note " + n + "\n";
  return s;
}

std::string describe(const PipelineCriticalPath& p) {
  std::string s = "found " + std::to_string(p.found) + " step " + std::to_string(p.step) +
                  " replica " + std::to_string(p.replica) + " length " +
                  std::to_string(p.length_ns) + " step_ns " + std::to_string(p.step_ns) +
                  " actions " + std::to_string(p.actions.size()) + "\n";
  for (const PipelineAction& a : p.actions) {
    s += std::to_string(static_cast<int>(a.kind)) + " r" + std::to_string(a.rank) + " s" +
         std::to_string(a.stage) + " mb" + std::to_string(a.microbatch) + " " +
         std::to_string(a.start_ns) + "-" + std::to_string(a.end_ns) + " m" +
         std::to_string(a.match) + " id" + std::to_string(a.span_id) + "\n";
  }
  for (const CriticalPathLink& l : p.chain) {
    s += "link " + std::to_string(l.action) + " " + std::to_string(l.weight_ns) + "\n";
  }
  return s;
}

std::string describe(const LiveAllocation& a) {
  return std::to_string(a.ptr) + " " + std::to_string(a.bytes) + " " + std::to_string(a.ts_ns) +
         " c" + std::to_string(static_cast<int>(a.category)) + " t" +
         std::to_string(static_cast<int>(a.tag)) + " op" + std::to_string(a.op) + " sc" +
         std::to_string(a.scope);
}

std::string describe(const DeviceMemory& d) {
  std::string s =
      "rank " + std::to_string(d.rank) + " dev " + std::to_string(d.device_type) + ":" +
      std::to_string(d.device_index) + " alloc " + std::to_string(d.allocations) + " frees " +
      std::to_string(d.frees) + " unmatched " + std::to_string(d.unmatched_frees) + " reused " +
      std::to_string(d.reused_pointers) + " peak " + std::to_string(d.peak_bytes) + " at " +
      std::to_string(d.peak_ts_ns) + " at_peak " + bytesText(d.at_peak) + " category_peaks " +
      bytesText(d.category_peaks) + " allocated " + bytesText(d.allocated) + " end " +
      std::to_string(d.live_at_end) + " inferred " + std::to_string(d.inferred_activations) + "/" +
      std::to_string(d.inferred_temporaries) + " timeline " + std::to_string(d.timeline.size()) +
      "\n";
  for (const LiveAllocation& a : d.largest_at_peak) s += "  " + describe(a) + "\n";
  return s;
}

std::string describe(const MemoryAnalysis& m) {
  std::string s;
  for (const DeviceMemory& d : m.devices) s += describe(d);
  return s;
}

std::string describe(const CommAnalysis& c) {
  std::string s;
  for (const CollectiveStats& x : c.collectives) {
    s += "coll " + x.op + " via " + x.via + " [";
    for (int r : x.ranks) s += std::to_string(r) + " ";
    s += "] " + std::to_string(x.group_size) + " " + x.group_source + " " +
         std::to_string(x.calls) + " " + std::to_string(x.bytes) + " " + std::to_string(x.time_ns) +
         " " + num(x.algbw_gbps) + " " + num(x.busbw_gbps) + "\n";
  }
  for (const PointToPointStats& x : c.p2p) {
    s += "p2p " + std::to_string(x.src) + "->" + std::to_string(x.dst) + " " + x.kind + " " +
         std::to_string(x.messages) + " " + std::to_string(x.bytes) + " " +
         std::to_string(x.recv_ns) + " " + std::to_string(x.wait_ns) + " " +
         std::to_string(x.transfer_ns) + " " + std::to_string(x.matched) + "\n";
  }
  for (const RankCommStats& x : c.ranks) {
    s += "rank " + std::to_string(x.rank) + " " + std::to_string(x.comm_ns) + " " +
         std::to_string(x.compute_ns) + " " + std::to_string(x.overlap_ns) + " " +
         std::to_string(x.recv_ns) + " " + std::to_string(x.recv_wait_ns) + " " +
         std::to_string(x.recv_transfer_ns) + " " + std::to_string(x.unmatched_recvs) + "\n";
  }
  return s;
}

// The report's options and the memory options its analysis uses.
constexpr size_t kTop = 5;
MemoryOptions reportMemoryOptions() {
  MemoryOptions mo;
  mo.timeline_points = 0;
  mo.top_allocations = kTop;
  return mo;
}

void checkAgainstOwnPasses(const trace::TraceReader& reader, const Report& r) {
  const PipelineAnalysis pipeline = analyzePipeline(reader);
  CHECK(describe(r.pipeline) == describe(pipeline));
  const PipelineCriticalPath path =
      pipeline.present ? pipelineCriticalPath(reader) : PipelineCriticalPath{};
  CHECK(describe(r.critical_path) == describe(path));
  CHECK(describe(r.memory) == describe(analyzeMemory(reader, reportMemoryOptions())));
  CHECK(describe(r.comm) == describe(analyzeComm(reader)));
}

// One device's numbers from every memory event of its rank held at once, replayed naively with the
// categories analyzeMemory assigned (the rank's allocations in forEachMemory order).
struct BruteDevice {
  int64_t peak = 0, peak_ts = 0, end = 0;
  CategoryBytes live{}, at_peak{}, category_peaks{}, allocated{};
  std::map<uint64_t, LiveAllocation> blocks;
  std::vector<LiveAllocation> largest;
};

std::map<std::pair<int, int>, BruteDevice> bruteForce(
    const trace::TraceReader& reader, int rank, const std::vector<core::MemoryCategory>& cat) {
  std::map<std::pair<int, int>, BruteDevice> devs;
  size_t ordinal = 0;
  for (const trace::MemoryRow& m : reader.memory(rank, INT64_MIN, INT64_MAX)) {
    BruteDevice& d = devs[{m.device_type, m.device_index}];
    if (m.bytes > 0) {
      REQUIRE(ordinal < cat.size());
      const core::MemoryCategory c = cat[ordinal++];
      auto old = d.blocks.find(m.ptr);
      if (old != d.blocks.end()) {  // an unrecorded free: the earlier block is dropped
        at(d.live, old->second.category) -= old->second.bytes;
        d.end -= old->second.bytes;
      }
      LiveAllocation a;
      a.ptr = m.ptr;
      a.bytes = m.bytes;
      a.ts_ns = m.ts_ns;
      a.category = c;
      a.tag = m.category;
      a.op = m.op;
      a.scope = m.scope;
      d.blocks[m.ptr] = a;
      at(d.live, c) += m.bytes;
      at(d.allocated, c) += m.bytes;
      d.end += m.bytes;
      at(d.category_peaks, c) = std::max(at(d.category_peaks, c), at(d.live, c));
      if (d.end > d.peak) {  // the first moment of the highest total
        d.peak = d.end;
        d.peak_ts = m.ts_ns;
        d.at_peak = d.live;
        d.largest.clear();
        for (const auto& [ptr, b] : d.blocks) d.largest.push_back(b);
        std::sort(d.largest.begin(), d.largest.end(),
                  [](const LiveAllocation& x, const LiveAllocation& y) {
                    return x.bytes != y.bytes ? x.bytes > y.bytes : x.ts_ns < y.ts_ns;
                  });
        d.largest.resize(std::min(d.largest.size(), kTop));
      }
    } else if (m.bytes < 0) {
      auto it = d.blocks.find(m.ptr);
      if (it == d.blocks.end()) continue;
      at(d.live, it->second.category) -= it->second.bytes;
      d.end -= it->second.bytes;
      d.blocks.erase(it);
    }
  }
  return devs;
}

void checkMemoryAgainstBruteForce(const trace::TraceReader& reader, const Report& r) {
  MemoryOptions keep = reportMemoryOptions();
  keep.keep_categories = true;
  keep.replay = false;
  const MemoryAnalysis categories = analyzeMemory(reader, keep);
  REQUIRE_FALSE(r.memory.devices.empty());
  for (const auto& [rank, cat] : categories.categories) {
    const auto brute = bruteForce(reader, rank, cat);
    for (const auto& [key, b] : brute) {
      INFO("rank " << rank << " device " << key.first << ":" << key.second);
      const DeviceMemory* d = nullptr;
      for (const DeviceMemory& x : r.memory.devices) {
        if (x.rank == rank && x.device_type == key.first && x.device_index == key.second) d = &x;
      }
      REQUIRE(d != nullptr);
      CHECK(d->peak_bytes == b.peak);
      CHECK(d->peak_ts_ns == b.peak_ts);
      CHECK(bytesText(d->at_peak) == bytesText(b.at_peak));
      CHECK(bytesText(d->category_peaks) == bytesText(b.category_peaks));
      CHECK(bytesText(d->allocated) == bytesText(b.allocated));
      CHECK(d->live_at_end == b.end);
      std::string want, got;
      for (const LiveAllocation& a : b.largest) want += describe(a) + "\n";
      for (const LiveAllocation& a : d->largest_at_peak) got += describe(a) + "\n";
      CHECK(got == want);
    }
  }
}

}  // namespace

TEST_CASE("report one pass: the fixture trace equals the analyses' own passes and a brute force",
          "[report][one_pass]") {
  const auto& g = tracerun::e2e::fixtureTrace();
  const auto reader = trace::TraceReader::open(g.merged);
  ReportOptions o;
  o.top_allocations = kTop;
  const Report r = buildReport(reader, o);
  REQUIRE(r.ranks.size() == 3);
  checkAgainstOwnPasses(reader, r);
  checkMemoryAgainstBruteForce(reader, r);
}

#ifdef GPTTRAIN_BIN

TEST_CASE(
    "report one pass: a traced 4-rank TP 2 + SP + PP 2 gpttrain run equals the analyses' "
    "own passes and a brute force",
    "[report][one_pass]") {
  const std::string db = scratch().file("one_pass.db");
  const auto run = tracerun::e2e::runGpttrain(
      {"--nproc-per-node", "4", "-o", db, "--status", "off"}, GPTTRAIN_BIN,
      {"--tp", "2", "--sp", "--pp", "2", "--global-batch", "8", "--layers", "2", "--steps", "3",
       "--hidden", "64", "--heads", "4", "--seq-len", "32", "--quiet"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  const auto reader = trace::TraceReader::open(db);
  ReportOptions o;
  o.top_allocations = kTop;
  const Report r = buildReport(reader, o);
  REQUIRE(r.ranks.size() == 4);
  // Every section the shared pass feeds has something to compare.
  CHECK(r.pipeline.present);
  CHECK(r.critical_path.found);
  CHECK_FALSE(r.comm.collectives.empty());
  CHECK_FALSE(r.comm.p2p.empty());
  CHECK(r.memory.devices.size() == 4);
  checkAgainstOwnPasses(reader, r);
  checkMemoryAgainstBruteForce(reader, r);
}

#endif  // GPTTRAIN_BIN
