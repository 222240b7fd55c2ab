// The memory view (issue 17 point 2) and its data (trace/analysis/memory_live.h): the series'
// pixel-column reduction and live set against brute-force replays of the trace's memory events
// (TraceReader), its peak against analyzeMemory; on a real traced gpttrain run (ZeRO-1, DP 2) the
// view's dumped peaks against `tracerun report --json`, its closed-form line against 8Ψ + 8Ψ/N
// with the Ψ gpttrain prints, and the screenshot's peak marker at the report's peak time; with
// --offload-optimizer nvme:DIR the device's line without the optimizer states (8Ψ); on an
// unmodified Python ResNet-18 (SGD momentum, AdamW, SGD) the report's categories, parameters,
// optimizer states and buffers equal to torchvision's bytes and the line P + G + k P; the C++
// sample's line through tracerun::tagTraining.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <utility>

#include "analysis_builder.h"
#include "app/palette.h"
#include "e2e_common.h"
#include "temp_dir.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;
namespace an = tracerun::trace::analysis;
using core::MemoryCategory;
using nlohmann::json;

namespace {

// ---------------------------------------------------------------------------------------------
// brute force over TraceReader::memory

struct Alloc {
  trace::MemoryRow row;
  int64_t end = INT64_MAX;  // ts of the event that ended it (free or re-allocation), or never
  size_t ordinal = 0;       // among the rank's allocations
};

// Every allocation of `rank` with the event that ended it, found by scanning forward.
std::vector<Alloc> allocations(const trace::TraceReader& reader, int rank) {
  const auto rows = reader.memory(rank, INT64_MIN, INT64_MAX);
  std::vector<Alloc> out;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].bytes <= 0) continue;
    Alloc a;
    a.row = rows[i];
    a.ordinal = out.size();
    for (size_t j = i + 1; j < rows.size(); ++j) {
      const auto& r = rows[j];
      if (r.ptr == a.row.ptr && r.device_type == a.row.device_type &&
          r.device_index == a.row.device_index && r.bytes != 0) {
        a.end = r.ts_ns;
        break;
      }
    }
    out.push_back(a);
  }
  return out;
}

// A trace with phases, ops and 3000 memory events on two ranks and two devices: tagged state,
// untagged blocks freed inside their op (temporaries) or in backward (activations), reused
// addresses and frees of blocks never seen.
std::string randomTrace(const std::string& dir) {
  testing::TraceBuilder tb(2);
  std::mt19937_64 rng(17);
  for (int rank = 0; rank < 2; ++rank) {
    int64_t t = 1000;
    for (int step = 0; step < 3; ++step) {
      const int64_t f0 = t, f1 = t + 40000, b1 = t + 80000;
      tb.span(rank, {"main", "forward", core::Category::kPhase, f0, f1, 0});
      tb.span(rank, {"main", "backward", core::Category::kPhase, f1, b1, 0});
      for (int64_t o = f0; o + 900 < f1; o += 1000) {
        tb.span(rank, {"main", "aten::mm", core::Category::kOp, o, o + 900, 1});
      }
      t = b1 + 5000;
    }
    std::vector<std::pair<uint64_t, int>> live;  // ptr, device
    int64_t ts = 1000;
    for (int i = 0; i < 1500; ++i) {
      ts += static_cast<int64_t>(rng() % 200);
      const int dev = static_cast<int>(rng() % 4 == 0);
      const bool alloc = live.empty() || rng() % 100 < 55;
      if (alloc) {
        // Some addresses repeat while live (an unrecorded free).
        const uint64_t ptr = 0x1000 + (rng() % 400) * 0x100;
        const int64_t bytes = 64 * static_cast<int64_t>(1 + rng() % 1000);
        const auto cat = static_cast<MemoryCategory>(rng() % 7);
        tb.memory(rank, {ts, ptr, bytes, cat, i % 3 ? "aten::mm" : "aten::empty", "scope", dev,
                         dev ? 0 : -1});
        live.emplace_back(ptr, dev);
      } else {
        const size_t k = rng() % live.size();
        tb.memory(rank, {ts, live[k].first, -1, MemoryCategory::kUnknown, "", "", live[k].second,
                         live[k].second ? 0 : -1});
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      }
      if (i % 250 == 0) {  // a block allocated before the capture
        tb.memory(rank, {ts, 0xdead0000 + static_cast<uint64_t>(i), -1, MemoryCategory::kUnknown,
                         "", "", 0, -1});
      }
    }
  }
  return tb.write(dir);
}

// The dump's "rank R device D peak_bytes ... " and "chart R x X y Y w W h H" lines.
struct DumpedRank {
  std::map<std::string, std::string> kv;
  double x = 0, y = 0, w = 0, h = 0;
  std::vector<double> closed;
  std::vector<std::string> formulas;  // of the closed forms, in their order
};
struct Dumped {
  double t0 = 0, t1 = 0, ymax = 0;
  std::string summary;    // "stored" or "replayed"
  int legend_forms = -1;  // whether the legend names the closed forms
  std::map<int, DumpedRank> ranks;
};
Dumped readDump(const std::string& path) {
  std::istringstream in(e2e::readFile(path));
  Dumped d;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string head;
    ls >> head;
    if (head == "memory") {
      std::string k;
      while (ls >> k) {
        if (k == "range") ls >> d.t0 >> d.t1;
        if (k == "ymax") ls >> d.ymax;
        if (k == "summary") ls >> d.summary;
        if (k == "legend_forms") ls >> d.legend_forms;
      }
    } else if (head == "rank") {
      int r = 0;
      ls >> r;
      std::string k, v;
      while (ls >> k >> v) d.ranks[r].kv[k] = v;
    } else if (head == "chart") {
      int r = 0;
      std::string k;
      ls >> r;
      auto& dr = d.ranks[r];
      ls >> k >> dr.x >> k >> dr.y >> k >> dr.w >> k >> dr.h;
    } else if (head == "closed_form") {
      int r = 0;
      std::string k;
      double b = 0;
      std::string formula;
      ls >> r >> k >> b >> k;
      std::getline(ls, formula);
      d.ranks[r].closed.push_back(b);
      d.ranks[r].formulas.push_back(formula.empty() ? formula : formula.substr(1));
    }
  }
  return d;
}

}  // namespace

TEST_CASE("memory series: peaks equal analyzeMemory, columns equal a brute-force replay",
          "[viewer][memory]") {
  testing::TempDir dir("memview-series");
  const std::string db = randomTrace(dir.path.string());
  const auto reader = trace::TraceReader::open(db);
  an::MemoryOptions mo;
  mo.keep_categories = true;
  const an::MemoryAnalysis ma = an::analyzeMemory(reader, mo);
  const auto series = an::buildMemorySeries(reader, ma);
  REQUIRE(series.size() == ma.devices.size());
  REQUIRE(series.size() == 4);
  for (const an::MemorySeries& s : series) {
    INFO("rank " << s.rank << " device " << s.device_type);
    const an::DeviceMemory* d = nullptr;
    for (const auto& x : ma.devices) {
      if (x.rank == s.rank && x.device_type == s.device_type) d = &x;
    }
    REQUIRE(d != nullptr);
    CHECK(s.peak_bytes == d->peak_bytes);
    CHECK(s.peak_ts_ns == d->peak_ts_ns);
    CHECK(s.at_peak == d->at_peak);
    const auto steps =
        replayLevels(reader, s.rank, s.device_type, s.device_index, ma.categories.at(s.rank));
    REQUIRE(steps.size() == s.size());
    REQUIRE(steps.size() > 200);
    CHECK(steps.back().levels == s.levelsAfter(s.size()));
    // Windows: the whole run, a zoom inside it, one narrower than an event gap, one beyond.
    const double a = double(steps.front().ts), b = double(steps.back().ts);
    for (auto [t0, t1, w] : std::vector<std::tuple<double, double, size_t>>{
             {a - 100, b + 100, 700},
             {a + (b - a) * 0.3, a + (b - a) * 0.6, 333},
             {a + (b - a) * 0.5, a + (b - a) * 0.5 + 50, 40},
             {b + 10, b + 1000, 5},
             {a, b, 3}}) {
      checkMemoryColumns(s, steps, t0, t1, w);
    }
  }
}

// The legend names the closed forms only when a chart draws one: a trace whose only optimizer
// record is of an unknown kind (states -1) has no line and no legend entry; the same trace with an
// AdamW record has both (the line 2P + 2P of its param_bytes).
TEST_CASE("memory view: the legend names the closed forms only when a line is drawn",
          "[viewer][memory]") {
  testing::TempDir dir("memview-legend");
  for (const int64_t states : {int64_t{-1}, int64_t{2}}) {
    INFO("states " << states);
    testing::TraceBuilder tb;
    const int64_t p = 4000;
    tb.span(0, {"main",
                "model_states",
                core::Category::kPhase,
                500,
                500,
                0,
                {{"params", p / 4},
                 {"param_bytes", p},
                 {"states", states},
                 {"state_bytes", states < 0 ? -1 : states * p}},
                states < 0 ? "Adagrad" : "AdamW"});
    tb.memory(0, {100, 0x1000, p, MemoryCategory::kParameter, "", "", 0, -1});
    tb.memory(0, {600, 0x2000, p, MemoryCategory::kGradient, "", "", 0, -1});
    tb.memory(0, {700, 0x1000, -p, MemoryCategory::kUnknown, "", "", 0, -1});
    const std::string sub = (dir.path / std::to_string(states + 1)).string();
    std::filesystem::create_directories(sub);
    const std::string db = tb.write(sub);
    const std::string dump = sub + "/memory.txt";
    runTraceviewOk({db, "--view", "memory", "--screenshot", sub + "/memory.png", "--size",
                    "900x500", "--dump-view", dump},
                   sub);
    const Dumped d = readDump(dump);
    REQUIRE(d.ranks.count(0) == 1);
    if (states < 0) {
      CHECK(d.legend_forms == 0);
      CHECK(d.ranks.at(0).closed.empty());
    } else {
      CHECK(d.legend_forms == 1);
      REQUIRE(d.ranks.at(0).closed.size() == 1);
      CHECK(d.ranks.at(0).closed[0] == 4.0 * p);
      CHECK(d.ranks.at(0).formulas[0] == "P + G + 2P");
    }
  }
}

TEST_CASE("memory live set: liveAt equals a brute-force scan of the memory events",
          "[viewer][memory]") {
  testing::TempDir dir("memview-live");
  const std::string db = randomTrace(dir.path.string());
  const auto reader = trace::TraceReader::open(db);
  an::MemoryOptions mo;
  mo.keep_categories = true;
  mo.top_allocations = 20;
  const an::MemoryAnalysis ma = an::analyzeMemory(reader, mo);
  for (int rank : {0, 1}) {
    const auto all = allocations(reader, rank);
    const auto& cats = ma.categories.at(rank);
    const auto rows = reader.memory(rank, INT64_MIN, INT64_MAX);
    for (size_t i = 0; i < rows.size(); i += rows.size() / 7) {
      const int64_t t = rows[i].ts_ns;
      INFO("rank " << rank << " t " << t);
      std::vector<std::tuple<int64_t, int64_t, uint64_t, MemoryCategory>> want, got;
      for (const Alloc& a : all) {
        if (a.row.ts_ns <= t && a.end > t) {
          want.emplace_back(a.row.bytes, a.row.ts_ns, a.row.ptr, cats[a.ordinal]);
        }
      }
      for (const an::LiveBlock& b : an::liveAt(reader, rank, t, cats)) {
        got.emplace_back(b.bytes, b.ts_ns, b.ptr, b.category);
      }
      // liveAt's order: largest first, then oldest.
      CHECK(std::is_sorted(got.begin(), got.end(), [](const auto& x, const auto& y) {
        return std::get<0>(x) != std::get<0>(y) ? std::get<0>(x) > std::get<0>(y)
                                                : std::get<1>(x) < std::get<1>(y);
      }));
      std::sort(want.begin(), want.end());
      std::sort(got.begin(), got.end());
      CHECK(got == want);
    }
    // At the peak of the rank's CPU device, the largest blocks are the report's.
    const an::DeviceMemory* cpu = nullptr;
    for (const auto& d : ma.devices) {
      if (d.rank == rank && d.device_type == 0) cpu = &d;
    }
    REQUIRE(cpu != nullptr);
    std::vector<an::LiveBlock> onCpu;
    for (const auto& b : an::liveAt(reader, rank, cpu->peak_ts_ns, cats)) {
      if (b.device_type == 0) onCpu.push_back(b);
    }
    REQUIRE(onCpu.size() >= cpu->largest_at_peak.size());
    for (size_t k = 0; k < cpu->largest_at_peak.size(); ++k) {
      CHECK(onCpu[k].bytes == cpu->largest_at_peak[k].bytes);
      CHECK(onCpu[k].category == cpu->largest_at_peak[k].category);
    }
  }
}

#ifdef GPTTRAIN_BIN
namespace {

// A traced ZeRO-1 run of a tiny gpttrain on 2 ranks (2 AdamW steps), `extra` appended: the Ψ
// gpttrain prints for rank 0, and the report (both ranks in it).
std::pair<double, json> traceZero1(const std::string& db, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {
      "--zero",  "1", "--layers",    "2",     "--hidden",       "32",
      "--heads", "4", "--seq-len",   "16",    "--global-batch", "4",
      "--steps", "2", "--optimizer", "adamw", "--bucket-mb",    "0.02"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto run = traceGpttrain(db, {"--nproc-per-node", "2"}, args);
  INFO(run.describe());
  std::smatch m;
  REQUIRE(std::regex_search(run.out, m, std::regex("([0-9]+) parameters on rank 0")));
  json report = reportJson(db);
  REQUIRE(report["memory"]["per_rank"].size() == 2);
  return {std::stod(m[1].str()), report};
}

}  // namespace

TEST_CASE(
    "memory view on a traced gpttrain run (ZeRO-1, DP 2): report's peaks, closed form, "
    "peak marker",
    "[viewer][memory][e2e]") {
  const std::string db = e2e::scratch().file("zero1.db");
  const auto [psi, report] = traceZero1(db, {});

  const std::string shot = e2e::scratch().file("memory.png");
  const std::string dump = e2e::scratch().file("memory.txt");
  runTraceviewOk(
      {db, "--view", "memory", "--screenshot", shot, "--size", "1400x900", "--dump-view", dump},
      e2e::scratch().path());
  const Dumped d = readDump(dump);
  REQUIRE(d.ranks.size() == 2);
  // The run's merge stored the per-category summary (memory_summary.h): the view read it.
  CHECK(d.summary == "stored");
  const Png png = loadPng(shot);
  const uint32_t peakRgb = paletteRgb(viewer::palette::kMemoryPeak);
  for (const auto& r : report["memory"]["per_rank"]) {
    const int rank = r["rank"].get<int>();
    INFO("rank " << rank << ": " << r.dump());
    const DumpedRank& dr = d.ranks.at(rank);
    CHECK(dr.kv.at("device") == r["device"].get<std::string>());
    CHECK(std::stoll(dr.kv.at("peak_bytes")) == r["peak_bytes"].get<int64_t>());
    CHECK(std::stoll(dr.kv.at("peak_ts_ns")) == r["peak_ts_ns"].get<int64_t>());
    for (const auto& [cat, bytes] : r["by_category"].items()) {
      CHECK(std::stoll(dr.kv.at(cat)) == bytes.get<int64_t>());
    }
    // The closed form of ZeRO-1 (optimizer states sharded) over N = 2 with the Ψ gpttrain printed.
    REQUIRE(dr.closed.size() == 1);
    CHECK(dr.closed[0] == Approx(8 * psi + 8 * psi / 2).epsilon(1e-9));
    // The peak marker: at the x of the report's peak time, in the chart's top rows (above every
    // stack: the scale leaves 8% over the highest peak); not 8 px either side.
    const double x = dr.x + (r["peak_ts_ns"].get<double>() - d.t0) / (d.t1 - d.t0) * dr.w;
    // The marker covers [floor(x), floor(x) + 2): x rounded lies in it whatever the dump's
    // rounding of the geometry.
    const int px = static_cast<int>(std::lround(x)), py = static_cast<int>(dr.y + 1);
    const int mid = static_cast<int>(dr.y + dr.h / 2);
    INFO("peak at x " << x << " y " << py << " (range " << d.t0 << " .. " << d.t1 << ", chart x "
                      << dr.x << " w " << dr.w << ")");
    CHECK(png.rgb(px, py) == peakRgb);
    CHECK(png.rgb(px, mid) == peakRgb);
    CHECK(png.rgb(px - 4, mid) != peakRgb);
    CHECK(png.rgb(px + 4, mid) != peakRgb);
  }

  // The live set at each rank's peak against a brute-force scan, and the report's largest blocks.
  const auto reader = trace::TraceReader::open(db);
  an::MemoryOptions mo;
  mo.keep_categories = true;
  const an::MemoryAnalysis ma = an::analyzeMemory(reader, mo);
  for (const auto& r : report["memory"]["per_rank"]) {
    const int rank = r["rank"].get<int>();
    const int64_t t = r["peak_ts_ns"].get<int64_t>();
    const auto blocks = an::liveAt(reader, rank, t, ma.categories.at(rank), 20);
    std::multiset<int64_t> want, got;
    for (const Alloc& a : allocations(reader, rank)) {
      if (a.row.ts_ns <= t && a.end > t) want.insert(a.row.bytes);
    }
    for (const auto& b : blocks) got.insert(b.bytes);
    CHECK(got == want);
    const auto& largest = r["largest_at_peak"];
    REQUIRE(blocks.size() >= largest.size());
    for (size_t k = 0; k < largest.size(); ++k) {
      INFO("block " << k << " " << largest[k].dump());
      CHECK(blocks[k].bytes == largest[k]["bytes"].get<int64_t>());
      CHECK(core::memoryCategoryName(blocks[k].category) == largest[k]["category"]);
      CHECK(reader.str(blocks[k].op) == largest[k]["op"].get<std::string>());
      CHECK(reader.str(blocks[k].scope) == largest[k]["scope"].get<std::string>());
    }
    // Modules: at allocation times through the run, every module named is a module scope of the
    // rank covering the block's allocation (brute force over its spans), and some are named.
    std::vector<trace::SpanRow> moduleSpans;
    for (const auto& tr : reader.tracks()) {
      if (tr.rank != rank || tr.kind != core::TrackKind::kThread) continue;
      for (const auto& s : reader.spans(tr.id, INT64_MIN / 4, INT64_MAX / 4)) {
        if (s.category == core::Category::kModule) moduleSpans.push_back(s);
      }
    }
    const auto all = allocations(reader, rank);
    int named = 0;
    for (size_t i = 0; i < all.size(); i += all.size() / 10) {
      for (const auto& b : an::liveAt(reader, rank, all[i].row.ts_ns, ma.categories.at(rank))) {
        if (b.module.empty()) continue;
        ++named;
        const bool covered =
            std::any_of(moduleSpans.begin(), moduleSpans.end(), [&](const auto& s) {
              return reader.str(s.name) == b.module && s.start_ns <= b.ts_ns &&
                     s.end_ns() >= b.ts_ns;
            });
        CHECK(covered);
      }
    }
    CHECK(named > 0);
  }
}

// ZeRO-Offload in the view: a ZeRO-1 DP 2 run with --offload-optimizer nvme:DIR dumps, for the
// rank's own device, the line of what ZeRO-1 keeps there without the optimizer states, 8 psi with
// the psi gpttrain prints (not 8 psi + 8 psi/N), which is the report's parameter and gradient bytes
// at that device's peak; and for the nvme chart 12 psi/N, the report's peak of that device.
TEST_CASE("memory view on an offloaded gpttrain run: the device's ZeRO line leaves out the states",
          "[viewer][memory][e2e][offload]") {
  const std::string db = e2e::scratch().file("offload.db");
  const std::string states = e2e::scratch().file("offload_states");
  REQUIRE(std::system(("mkdir -p " + states).c_str()) == 0);
  const auto [psi, report] = traceZero1(db, {"--offload-optimizer", "nvme:" + states});
  const std::string dump = e2e::scratch().file("offload_memory.txt");
  runTraceviewOk({db, "--view", "memory", "--screenshot", e2e::scratch().file("offload.png"),
                  "--size", "1200x900", "--dump-view", dump},
                 e2e::scratch().path());
  const Dumped d = readDump(dump);
  REQUIRE(d.ranks.size() == 2);
  for (const auto& r : report["memory"]["per_rank"]) {
    INFO("rank " << r["rank"] << ": " << r.dump());
    const auto& closed = d.ranks.at(r["rank"].get<int>()).closed;
    REQUIRE(closed.size() == 2);  // the cpu chart's, then the nvme chart's
    CHECK(closed[0] == Approx(8 * psi).epsilon(1e-9));
    const json& at = r["by_category"];
    CHECK(at["optimizer_state"] == 0);
    CHECK(closed[0] == Approx(at["parameter"].get<double>() + at["gradient"].get<double>())
                           .epsilon(0.01));  // the buckets' padding to N apart
    CHECK(closed[1] == Approx(12 * psi / 2).epsilon(1e-9));
    for (const auto& dev : r["devices"]) {
      if (dev["device"] == "nvme") {
        CHECK(closed[1] == Approx(dev["peak_bytes"].get<double>()).epsilon(0.01));
      }
    }
  }
}

// The activation lines (trace/analysis/activation_form.h) as the view draws them: a one-process
// flash run (dropout 0) dumps the ZeRO-0 line, model states + L x 4(16sbh + asb + 4sb) and the
// standard line L x 4(a s^2 b - a s b) above it, each computed here from the flags; the chart's
// scale reaches the highest line.
TEST_CASE("memory view on a flash gpttrain run: the activation lines from the flags",
          "[viewer][memory][e2e]") {
  const int64_t L = 2, h = 32, a = 8, s = 64, b = 2;
  const std::string db = e2e::scratch().file("flash.db");
  const auto run = traceGpttrain(
      db, {},
      {"--layers", std::to_string(L), "--hidden", std::to_string(h), "--heads", std::to_string(a),
       "--seq-len", std::to_string(s), "--micro-batch-size", std::to_string(b), "--global-batch",
       std::to_string(b), "--dropout", "0", "--attention", "flash", "--steps", "1"});
  INFO(run.describe());
  std::smatch m;
  REQUIRE(std::regex_search(run.out, m, std::regex("([0-9]+) parameters on rank 0")));
  const double psi = std::stod(m[1].str());
  const std::string dump = e2e::scratch().file("flash_memory.txt");
  runTraceviewOk({db, "--view", "memory", "--screenshot", e2e::scratch().file("flash.png"),
                  "--size", "1200x700", "--dump-view", dump},
                 e2e::scratch().path());
  const Dumped d = readDump(dump);
  REQUIRE(d.ranks.size() == 1);
  const auto& closed = d.ranks.begin()->second.closed;
  REQUIRE(closed.size() == 3);
  const double flashLayer = 4.0 * (16 * s * b * h + a * s * b + 4 * s * b);
  const double matrix = 4.0 * (a * s * s * b - a * s * b);
  CHECK(closed[0] == Approx(16 * psi).epsilon(1e-12));
  CHECK(closed[1] == Approx(16 * psi + L * flashLayer).epsilon(1e-12));
  CHECK(closed[2] == Approx(16 * psi + L * flashLayer + L * matrix).epsilon(1e-12));
  CHECK(d.ymax >= closed[2]);
}
#endif

#if defined(GPTTRAIN_BIN) && defined(RESNET18_STEP_PY)
// Issue 33 point 5: an unmodified Python program's memory by category in the view, with its
// closed-form line. torchvision's ResNet-18, 3 steps of batch 4, no tracerun code in the script,
// under SGD with momentum, AdamW and plain SGD. Truths: the report's categories at the peak (the
// view must show the same numbers) and, from outside tracerun, torchvision's own parameter bytes
// psi and buffer bytes (sum numel x element size over parameters() and buffers()): parameter and
// gradient equal psi, the optimizer state k x psi (k = 1, 2, 0; AdamW's 4-byte step counters on
// top), other the buffers (BatchNorm's running statistics, tagged by the hooks), and the dashed
// line psi + psi + k psi with the optimizer's formula.
TEST_CASE(
    "memory view on an unmodified Python ResNet-18: the report's categories, torchvision's "
    "parameter and buffer bytes, and the closed form P + G + k P for SGD momentum, AdamW and SGD",
    "[viewer][memory][python]") {
  const e2e::ProcessResult truth =
      e2e::runProcess("/usr/bin/python3",
                      {"-c",
                       "import torchvision\n"
                       "m = torchvision.models.resnet18(num_classes=10)\n"
                       "print(sum(p.numel() * p.element_size() for p in m.parameters()),\n"
                       "      sum(b.numel() * b.element_size() for b in m.buffers()),\n"
                       "      len(list(m.parameters())))\n"},
                      e2e::scratch().path());
  INFO(truth.describe());
  REQUIRE(truth.exit_code == 0);
  std::istringstream truthLine(truth.out);
  int64_t psi = 0, buffers = 0, tensors = 0;
  truthLine >> psi >> buffers >> tensors;
  REQUIRE(psi > 0);
  REQUIRE(buffers > 0);
  struct Optimizer {
    const char* name;
    int k;
    const char* formula;
  };
  for (const Optimizer& o : {Optimizer{"sgdm", 1, "P + G + P"}, Optimizer{"adamw", 2, "P + G + 2P"},
                             Optimizer{"sgd", 0, "P + G"}}) {
    INFO(o.name);
    const std::string db = e2e::scratch().file(std::string("resnet18_") + o.name + ".db");
    const e2e::ProcessResult run =
        e2e::runTracerun({"--status", "off", "-o", db, "--", "/usr/bin/python3", RESNET18_STEP_PY,
                          "4", "3", o.name});
    INFO(run.describe());
    REQUIRE(run.exit_code == 0);
    const json report = reportJson(db);
    REQUIRE(report["memory"]["per_rank"].size() == 1);
    const json& r = report["memory"]["per_rank"][0];
    INFO(r.dump());
    const std::string dump = e2e::scratch().file(std::string("resnet18_") + o.name + ".txt");
    runTraceviewOk({db, "--view", "memory", "--screenshot",
                    e2e::scratch().file(std::string("resnet18_") + o.name + ".png"), "--size",
                    "1200x700", "--dump-view", dump},
                   e2e::scratch().path());
    const Dumped d = readDump(dump);
    REQUIRE(d.ranks.count(0) == 1);
    const DumpedRank& dr = d.ranks.at(0);
    CHECK(std::stoll(dr.kv.at("peak_bytes")) == r["peak_bytes"].get<int64_t>());
    for (const auto& [cat, bytes] : r["by_category"].items()) {
      INFO(cat);
      CHECK(std::stoll(dr.kv.at(cat)) == bytes.get<int64_t>());
    }
    CHECK(std::stoll(dr.kv.at("parameter")) == psi);
    CHECK(std::stoll(dr.kv.at("gradient")) == psi);
    const int64_t state = std::stoll(dr.kv.at("optimizer_state"));
    CHECK(state >= o.k * psi);
    CHECK(state <= o.k * psi + (o.k == 2 ? 16 * tensors : 0));  // AdamW's step counters
    CHECK(std::stoll(dr.kv.at("other")) == buffers);  // module buffers: other, not activation
    // The line: parameters + gradients + k x parameters, in torchvision's bytes.
    REQUIRE(dr.closed.size() == 1);
    CHECK(dr.closed[0] == static_cast<double>((2 + o.k) * psi));
    CHECK(dr.formulas[0] == o.formula);
    CHECK(d.legend_forms == 1);
  }
}
#endif

#if defined(GPTTRAIN_BIN) && defined(RESNET18_CPP_BIN)
// The C++ twin (samples/resnet18_cpp: SGD with momentum, tracerun::tagTraining after each step)
// gets its line too: P + G + P, against the parameter count the program prints (fp32, 4 bytes).
TEST_CASE("memory view on the C++ ResNet-18 sample: tagTraining's closed form P + G + P",
          "[viewer][memory]") {
  const std::string db = e2e::scratch().file("resnet18_cpp.db");
  const e2e::ProcessResult run =
      e2e::runTracerun({"--status", "off", "-o", db, "--", RESNET18_CPP_BIN, "4", "3"});
  INFO(run.describe());
  REQUIRE(run.exit_code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(run.out, m, std::regex("resnet18_cpp: ([0-9]+) parameters")));
  const int64_t psi = 4 * std::stoll(m[1].str());
  const std::string dump = e2e::scratch().file("resnet18_cpp.txt");
  runTraceviewOk({db, "--view", "memory", "--screenshot", e2e::scratch().file("resnet18_cpp.png"),
                  "--size", "1200x700", "--dump-view", dump},
                 e2e::scratch().path());
  const Dumped d = readDump(dump);
  REQUIRE(d.ranks.count(0) == 1);
  const DumpedRank& dr = d.ranks.at(0);
  CHECK(std::stoll(dr.kv.at("parameter")) == psi);
  REQUIRE(dr.closed.size() == 1);
  CHECK(dr.closed[0] == static_cast<double>(3 * psi));
  CHECK(dr.formulas[0] == "P + G + P");
  CHECK(d.legend_forms == 1);
}
#endif
