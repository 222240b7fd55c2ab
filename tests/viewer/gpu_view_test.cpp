// The viewer's GPU parts (issue 28, point 2) on a hand-built trace with kernels on two streams of
// one device (compute on stream 7, an NCCL all-reduce on stream 13, a copy), each launched by an
// op: the stream tracks' boxes against the kernels' intervals read from the trace and their
// colours by kind; the GPU tab's numbers against answers worked out by hand and analyzeGpu; its
// bars against those numbers; a kernel's launch delay in the details and the longest instance a
// kernel row selects. Not the analysis itself (tests/trace/gpu_test.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "analysis_builder.h"
#include "app/palette.h"
#include "data/trace_data.h"
#include "e2e_common.h"
#include "tracerun/trace/analysis/gpu.h"
#include "viewer_test_util.h"
#include "views/gpu_data.h"

using namespace tracerun;
using namespace tracerun::viewertest;
namespace an = tracerun::trace::analysis;

namespace {

constexpr int64_t kB = 10'000;
const std::string kS7 = "cuda:0 stream 7", kS13 = "cuda:0 stream 13";
const std::string kNccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// A kernel (or copy) on `track`, launched by an op on main at `launch`.
void activity(testing::TraceBuilder& tb, const std::string& track, const std::string& name,
              core::Category c, int64_t start, int64_t end, int64_t launch) {
  tb.span(0, {track, name, c, start, end});
  tb.span(0, {"main", "aten::launcher", core::Category::kOp, launch, launch + 1000});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", track, launch, start});
}

// The trace, once per test process. By hand, relative to kB: gemm [0, 200 us] and [300, 550 us]
// on stream 7, the all-reduce [100, 400 us] on stream 13, a copy [600, 700 us] on stream 7;
// launches at -5, 250, 50 and 560 us (delays 5, 50, 50, 40 us).
const std::string& gpuTrace() {
  static const std::string path = [] {
    testing::TraceBuilder tb(1);
    activity(tb, kS7, "gemm", core::Category::kKernel, kB, kB + 200'000, kB - 5'000);
    activity(tb, kS7, "gemm", core::Category::kKernel, kB + 300'000, kB + 550'000, kB + 250'000);
    activity(tb, kS13, kNccl, core::Category::kKernel, kB + 100'000, kB + 400'000, kB + 50'000);
    activity(tb, kS7, "memcpy HtoD", core::Category::kMemcpy, kB + 600'000, kB + 700'000,
             kB + 560'000);
    return tb.write(testing::scratchDir("viewer_gpu_trace"));
  }();
  return path;
}

struct Box {
  int64_t track = 0;
  int depth = 0;
  double x0 = 0, x1 = 0;
  std::string kind, label;
};

std::vector<Box> readBoxes(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<Box> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 4, "box ") != 0) continue;
    std::istringstream s(line.substr(4));
    Box b;
    s >> b.track >> b.depth >> b.x0 >> b.x1 >> b.kind;
    std::getline(s >> std::ws, b.label);
    out.push_back(b);
  }
  return out;
}

std::map<std::string, int64_t> wordsAfter(const std::string& line) {
  std::istringstream s(line);
  std::map<std::string, int64_t> out;
  std::string w, k;
  s >> w >> w >> w;  // device RANK DEV
  while (s >> k) s >> out[k];
  return out;
}

}  // namespace

TEST_CASE("gpu view: stream tracks draw each kernel at its interval, coloured by kind",
          "[viewer][gpu]") {
  const std::string& db = gpuTrace();
  const auto reader = trace::TraceReader::open(db);
  // The kernels as the reader stores them, with their kind worked out by hand from the names.
  struct Expect {
    int64_t track, start, end;
    std::string kind;
  };
  std::vector<Expect> want;
  for (const trace::TrackRow& t : reader.tracks()) {
    if (t.name != kS7 && t.name != kS13) continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      const std::string& n = reader.str(s.name);
      want.push_back({t.id, s.start_ns, s.end_ns(),
                      n == kNccl ? "comm" : (n == "gemm" ? "compute" : "memory")});
    });
  }
  REQUIRE(want.size() == 4);
  const std::string shot = e2e::scratch().file("gpu_tracks.png");
  const std::string dump = e2e::scratch().file("gpu_tracks.txt");
  runTraceviewOk({db, "--size", "1600x900", "--screenshot", shot, "--dump-layout", dump},
                 e2e::scratch().path());
  const Layout l = readLayout(dump);
  const std::vector<Box> boxes = readBoxes(dump);
  const Png png = loadPng(shot);
  for (const Expect& e : want) {
    INFO("track " << e.track << " kernel " << e.start << ".." << e.end);
    const double x0 = l.xOf(static_cast<double>(e.start)) - l.area_x;
    const double x1 = l.xOf(static_cast<double>(e.end)) - l.area_x;
    const Box* found = nullptr;
    for (const Box& b : boxes) {
      if (b.track == e.track && std::fabs(b.x0 - x0) < 0.6 && std::fabs(b.x1 - x1) < 0.6)
        found = &b;
    }
    REQUIRE(found != nullptr);
    CHECK(found->depth == 0);
    CHECK(found->kind == e.kind);
    // The box's fill, sampled at its right end below the label.
    REQUIRE(l.rows.count(e.track));
    const auto& row = l.rows.at(e.track);
    const int px = static_cast<int>(std::lround(l.area_x + x1 - 4));
    const int py = static_cast<int>(row.y + 2 + l.row_h - 3);
    const int k = e.kind == "compute" ? 0 : (e.kind == "comm" ? 1 : 2);
    CHECK(png.rgb(px, py) == paletteRgb(viewer::palette::gpuKind(k, false)));
  }
  // No other box on the two stream tracks: each kernel is one box.
  size_t onStreams = 0;
  for (const Box& b : boxes) {
    for (const Expect& e : want) {
      if (b.track == e.track) {
        ++onStreams;
        break;
      }
    }
  }
  CHECK(onStreams == want.size());
}

TEST_CASE("gpu view: the GPU tab's numbers and bars are the hand-worked breakdown",
          "[viewer][gpu]") {
  const std::string& db = gpuTrace();
  const std::string dump = e2e::scratch().file("gpu_tab.txt");
  runTraceviewOk({db, "--view", "gpu", "--size", "1600x900", "--screenshot",
                  e2e::scratch().file("gpu_tab.png"), "--dump-view", dump},
                 e2e::scratch().path());
  std::ifstream in(dump);
  REQUIRE(in);
  std::vector<std::string> devices, kernels;
  std::map<std::string, std::pair<double, double>> temporal, idle;
  std::map<std::string, int64_t> temporalNs;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::string w;
    s >> w;
    if (w == "device") devices.push_back(line);
    if (w == "kernel") kernels.push_back(line);
    if (w == "bar") {
      int r = 0, d = 0;
      std::string bar, part;
      int64_t ns = 0;
      double x0 = 0, x1 = 0;
      s >> r >> d >> bar >> part >> ns >> x0 >> x1;
      (bar == "temporal" ? temporal : idle)[part] = {x0, x1};
      if (bar == "temporal") temporalNs[part] = ns;
    }
  }
  REQUIRE(devices.size() == 1);
  const auto v = wordsAfter(devices[0]);
  // By hand (see gpuTrace): the device is busy on [0, 550] and [600, 700] us.
  CHECK(v.at("window") == 700'000);
  CHECK(v.at("busy") == 650'000);
  CHECK(v.at("idle") == 50'000);
  CHECK(v.at("compute") == 450'000);
  CHECK(v.at("comm") == 300'000);
  CHECK(v.at("memory") == 100'000);
  CHECK(v.at("overlap") == 200'000);   // [100, 200] and [300, 400] us
  CHECK(v.at("host_wait") == 50'000);  // the copy was launched after the gap began
  CHECK(v.at("kernel_wait") == 0);
  CHECK(v.at("other") == 0);
  CHECK(v.at("launch_count") == 4);
  CHECK(v.at("launch_p50") == 40'000);  // delays 5, 40, 50, 50 us: nearest rank
  CHECK(v.at("launch_max") == 50'000);
  // The temporal bar: disjoint parts that add up to the window.
  CHECK(temporalNs.at("compute") == 450'000);
  CHECK(temporalNs.at("comm") == 100'000);    // the all-reduce's [200, 300] us, under no gemm
  CHECK(temporalNs.at("memory") == 100'000);  // the copy
  CHECK(temporalNs.at("idle") == 50'000);
  const double w = temporal.at("idle").second;
  REQUIRE(w > 100);
  CHECK(temporal.at("compute").first == 0);
  CHECK(temporal.at("compute").second == Approx(w * 450.0 / 700.0).margin(0.01));
  CHECK(temporal.at("comm").second == Approx(w * 550.0 / 700.0).margin(0.01));
  CHECK(temporal.at("memory").second == Approx(w * 650.0 / 700.0).margin(0.01));
  CHECK(idle.at("host_wait").first == 0);
  CHECK(idle.at("host_wait").second == Approx(w).margin(0.01));
  // The kernel table: by total, the report's analysis, and by hand.
  REQUIRE(kernels.size() == 3);
  CHECK(kernels[0] == "kernel compute 2 450000 225000 200000 200000 250000 1 gemm");
  CHECK(kernels[1] == "kernel comm 1 300000 300000 300000 300000 300000 1 " + kNccl);
  CHECK(kernels[2] == "kernel memory 1 100000 100000 100000 100000 100000 1 memcpy HtoD");
  // The dump is the analysis the report prints (no number of the tab's own).
  const auto reader = trace::TraceReader::open(db);
  const std::string shown = e2e::readFile(dump);
  const std::string fromAnalysis =
      viewer::gpuDumpText(an::analyzeGpu(reader), static_cast<float>(w));
  CHECK(shown.substr(0, fromAnalysis.size()) == fromAnalysis);
  CHECK(shown.find("row 0 ") == fromAnalysis.size());  // then where the rows are
}

TEST_CASE("gpu view: a kernel's launch delay in the details, a row's longest instance",
          "[viewer][gpu]") {
  const std::string& db = gpuTrace();
  const auto reader = trace::TraceReader::open(db);
  std::vector<trace::SpanRow> gemms;
  int64_t s7 = 0, main = 0;
  for (const trace::TrackRow& t : reader.tracks()) {
    if (t.name == kS7) s7 = t.id;
    if (t.name == "main") main = t.id;
  }
  REQUIRE(s7 != 0);
  REQUIRE(main != 0);
  core::StringId gemm = 0;
  reader.forEachSpan(s7, [&](const trace::SpanRow& s) {
    if (reader.str(s.name) == "gemm") {
      gemms.push_back(s);
      gemm = s.name;
    }
  });
  REQUIRE(gemms.size() == 2);
  // The second gemm (250 us, launched 50 us before it started) is the longest.
  const auto longest = viewer::longestGpuInstance(reader, gemm, -1);
  REQUIRE(longest);
  CHECK(longest->id == gemms[1].id);
  CHECK(!viewer::longestGpuInstance(reader, gemm, 1));  // no rank 1
  const viewer::TraceData data = viewer::TraceData::open(db);
  const trace::SpanRow& g = gemms[1];
  const viewer::SpanDetails d =
      data.details({g.id, g.track, g.start_ns, g.end_ns(), g.depth, g.name});
  REQUIRE(d.launch);
  CHECK(!d.launch->record);  // no launch API records here: the op's start stands in
  CHECK(d.launch->delay_ns == 50'000);
  CHECK(g.start_ns - d.launch->call_end_ns == 50'000);
  // An op has no launch.
  reader.forEachSpan(main, [&](const trace::SpanRow& s) {
    const viewer::SpanDetails od =
        data.details({s.id, s.track, s.start_ns, s.end_ns(), s.depth, s.name});
    CHECK(!od.launch);
  });
  // With CUPTI's launch API record (same correlation id on a "cuda api thread" track): the delay
  // starts at the call's end, 60 us here, not at the op's start 30 us earlier.
  testing::TraceBuilder tb(1);
  tb.span(0, {kS7, "gemm", core::Category::kKernel, 100'000, 200'000, 0, {{"correlation", 7}}});
  tb.span(0, {"cuda api thread 5",
              "cudaLaunchKernel",
              core::Category::kOther,
              20'000,
              40'000,
              0,
              {{"correlation", 7}}});
  tb.span(0, {"main", "aten::mm", core::Category::kOp, 10'000, 50'000});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", kS7, 10'000, 100'000});
  const std::string withRecord = tb.write(testing::scratchDir("viewer_gpu_launch_record"));
  const auto r2 = trace::TraceReader::open(withRecord);
  const auto dev = an::analyzeGpu(r2).devices.at(0);
  const viewer::TraceData data2 = viewer::TraceData::open(withRecord);
  for (const trace::TrackRow& t : r2.tracks()) {
    if (t.name != kS7) continue;
    r2.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      const viewer::SpanDetails k =
          data2.details({s.id, s.track, s.start_ns, s.end_ns(), s.depth, s.name});
      REQUIRE(k.launch);
      CHECK(k.launch->record);
      CHECK(k.launch->delay_ns == 60'000);
      CHECK(dev.launch.max_ns == 60'000);  // the report's launch statistics count the same
      CHECK(dev.launch_records == 1);
    });
  }
}

TEST_CASE("gpu view: the Statistics tab's kernel table, and one line without GPU records",
          "[viewer][gpu]") {
  const std::string& db = gpuTrace();
  const std::string stats = e2e::scratch().file("gpu_stats.txt");
  runTraceviewOk({db, "--view", "stats", "--screenshot", e2e::scratch().file("gpu_stats.png"),
                  "--dump-view", stats},
                 e2e::scratch().path());
  std::ifstream in(stats);
  std::stringstream text;
  text << in.rdbuf();
  // The kernel rows worked out by hand (see gpuTrace), largest total first.
  CHECK(text.str().find("table kernels\n"
                        "name,kind,count,total_ns,mean_ns,min_ns,p50_ns,max_ns,ranks\n"
                        "gemm,compute,2,450000,225000,200000,200000,250000,1\n" +
                        kNccl +
                        ",comm,1,300000,300000,300000,300000,300000,1\n"
                        "memcpy HtoD,memory,1,100000,100000,100000,100000,100000,1\n") !=
        std::string::npos);
  // A trace without GPU streams: the GPU tab says so, the Statistics tab has no kernel table.
  const std::string plain = e2e::scratch().file("plain.db");
  writeSmallTrace(plain, 20);
  const std::string gpuDump = e2e::scratch().file("plain_gpu.txt");
  runTraceviewOk({plain, "--view", "gpu", "--screenshot", e2e::scratch().file("plain_gpu.png"),
                  "--dump-view", gpuDump},
                 e2e::scratch().path());
  std::ifstream g(gpuDump);
  std::string first;
  std::getline(g, first);
  CHECK(first == "no-gpu");
  const std::string plainStats = e2e::scratch().file("plain_stats.txt");
  runTraceviewOk({plain, "--view", "stats", "--screenshot", e2e::scratch().file("plain_stats.png"),
                  "--dump-view", plainStats},
                 e2e::scratch().path());
  std::ifstream ps(plainStats);
  std::stringstream pt;
  pt << ps.rdbuf();
  CHECK(pt.str().find("table ranks") != std::string::npos);
  CHECK(pt.str().find("table kernels") == std::string::npos);
}

TEST_CASE("gpu view: a script clicks a kernel row and its longest instance is selected",
          "[viewer][gpu]") {
  const std::string& db = gpuTrace();
  const auto reader = trace::TraceReader::open(db);
  // The gemm spans (row 0, the largest total) as the reader has them: the longer is the answer.
  int64_t want = 0, longest = -1;
  for (const trace::TrackRow& t : reader.tracks()) {
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (reader.str(s.name) == "gemm" && s.dur_ns > longest) {
        longest = s.dur_ns;
        want = s.id;
      }
    });
  }
  REQUIRE(longest == 250'000);
  // Where row 0 is: the tab's dump of a first run.
  const std::string first = e2e::scratch().file("gpu_rows.txt");
  runTraceviewOk({db, "--view", "gpu", "--size", "1600x900", "--screenshot",
                  e2e::scratch().file("gpu_rows.png"), "--dump-view", first},
                 e2e::scratch().path());
  std::ifstream in(first);
  std::string line;
  double x0 = -1, y0 = 0, x1 = 0, y1 = 0;
  while (std::getline(in, line)) {
    int row = -1;
    if (std::sscanf(line.c_str(), "row %d %lf %lf %lf %lf", &row, &x0, &y0, &x1, &y1) == 5 &&
        row == 0)
      break;
  }
  REQUIRE(x0 >= 0);
  const std::string at = std::to_string(static_cast<int>((x0 + x1) / 4)) + " " +
                         std::to_string(static_cast<int>((y0 + y1) / 2));
  const std::string after = e2e::scratch().file("gpu_click.txt");
  const auto r = runScript(
      {db, "--size", "1600x900"},
      {"0 tab gpu", "+1 settle", "+0 move " + at, "+1 click", "+2 settle", "+0 dump-view " + after},
      e2e::scratch().path(), "gpu-click.txt");
  INFO(r.out);
  CHECK(r.out.find("gpu kernel longest " + std::to_string(want) + " gemm") != std::string::npos);
  CHECK(r.out.find("selected span " + std::to_string(want)) != std::string::npos);
  CHECK(e2e::readFile(after).find("selected " + std::to_string(want) + "\n") != std::string::npos);
}
