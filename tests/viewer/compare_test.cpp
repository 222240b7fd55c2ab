// The compare view (traceview A --compare B --view compare) on real traced gpttrain runs: a run
// against itself shows no differences; against the same config with a wider model (slower ops) the
// slower ops come first with positive differences equal to the difference of the two runs'
// `tracerun report --json` ops totals; the screenshot shows both strips, each run's step box
// where its own step times put it on the shared axis (positions computed from the traces).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "e2e_common.h"
#include "palette.h"
#include "tracerun/trace/analysis/compare.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;
using nlohmann::json;

#ifdef GPTTRAIN_BIN

namespace {

// ---- the view's --dump-view text
// -----------------------------------------------------------------

struct NameLine {
  std::string name, category;
  int64_t count_a = 0, count_b = 0, count_diff = 0;
  int64_t total_a = 0, total_b = 0, total_diff = 0;
  int64_t self_a = 0, self_b = 0, self_diff = 0;
};
struct StepLine {
  int number = 0, rank = 0;
  std::optional<int64_t> a, b, diff;
};
struct RowLine {
  char run = 'A';
  int rank = 0;
  int64_t track = 0;
  int depth = 0;
  double y = 0, h = 0;
};
struct Dump {
  std::vector<NameLine> names;
  std::vector<StepLine> steps;
  std::vector<RowLine> rows;
  double area_x = 0, area_w = 0, r0 = 0, r1 = 1;
  double origin_a = 0, origin_b = 0;
  int aligned = 0;
  double xOf(double r) const { return area_x + (r - r0) / (r1 - r0) * area_w; }
  const RowLine* row(char run, int64_t track, int depth) const {
    for (const auto& r : rows)
      if (r.run == run && r.track == track && r.depth == depth) return &r;
    return nullptr;
  }
};

std::vector<std::string> fields(const std::string& line) {
  std::vector<std::string> out;
  std::string f;
  std::istringstream in(line);
  while (std::getline(in, f, '\t')) out.push_back(f);
  return out;
}

std::optional<int64_t> num(const std::string& s) {
  if (s == "-") return std::nullopt;
  return std::stoll(s);
}

Dump readDump(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  Dump d;
  std::string line;
  while (std::getline(in, line)) {
    const auto f = fields(line);
    REQUIRE(!f.empty());
    if (f[0] == "name") {
      REQUIRE(f.size() == 12);
      NameLine n{f[1], f[2]};
      int64_t* v[] = {&n.count_a,    &n.count_b, &n.count_diff, &n.total_a,  &n.total_b,
                      &n.total_diff, &n.self_a,  &n.self_b,     &n.self_diff};
      for (size_t i = 0; i < 9; ++i) *v[i] = std::stoll(f[3 + i]);
      d.names.push_back(n);
    } else if (f[0] == "step") {
      REQUIRE(f.size() == 6);
      d.steps.push_back({std::stoi(f[1]), std::stoi(f[2]), num(f[3]), num(f[4]), num(f[5])});
    } else if (f[0] == "row") {
      REQUIRE(f.size() == 7);
      d.rows.push_back({f[1][0], std::stoi(f[2]), std::stoll(f[3]), std::stoi(f[4]),
                        std::stod(f[5]), std::stod(f[6])});
    } else if (f[0] == "area") {
      REQUIRE(f.size() == 5);
      d.area_x = std::stod(f[1]), d.area_w = std::stod(f[2]);
      d.r0 = std::stod(f[3]), d.r1 = std::stod(f[4]);
    } else if (f[0] == "aligned") {
      REQUIRE(f.size() == 4);
      d.aligned = std::stoi(f[1]);
      d.origin_a = std::stod(f[2]), d.origin_b = std::stod(f[3]);
    }
  }
  return d;
}

// ---- the runs and the report
// -----------------------------------------------------------------------

// One traced gpttrain run (one rank, 3 steps); `hidden` sets the model's width (its ops' cost).
std::string gptRun(const std::string& name, int hidden) {
  return scratchGpttrain(
      name, {},
      {"--layers", "2", "--hidden", std::to_string(hidden), "--heads", "4", "--seq-len", "32",
       "--global-batch", "4", "--micro-batch-size", "4", "--steps", "3", "--quiet"});
}

using OpKey = std::pair<std::string, std::string>;  // name, category
struct OpTotals {
  int64_t count = 0, total = 0, self = 0;
};

// Every row of the report's ops table (--top large enough for all of them).
std::map<OpKey, OpTotals> reportOps(const std::string& db, int64_t* stepMean = nullptr) {
  const json j = reportJson(db, {"--top", "1000000"});
  std::map<OpKey, OpTotals> out;
  for (const auto& o : j["ops"]["top"]) {
    out[{o["name"].get<std::string>(), o["category"].get<std::string>()}] = {
        o["count"].get<int64_t>(), o["total_ns"].get<int64_t>(), o["self_ns"].get<int64_t>()};
  }
  REQUIRE(out.size() == j["ops"]["top"].size());
  if (stepMean) *stepMean = j["step_mean_ns"].get<int64_t>();
  return out;
}

struct Shown {
  e2e::ProcessResult run;
  std::string png, dump;
};

Shown showCompare(const std::string& a, const std::string& b, const std::string& tag) {
  Shown s;
  s.png = e2e::scratch().file(tag + ".png");
  s.dump = e2e::scratch().file(tag + ".txt");
  s.run = runTraceviewOk({a, "--compare", b, "--view", "compare", "--size", "1600x900",
                          "--screenshot", s.png, "--dump-view", s.dump},
                         e2e::scratch().path());
  return s;
}

// The first "step" phase span of the trace (rank 0's first step, the one the view aligns on).
trace::SpanRow firstStep(const trace::TraceReader& reader) {
  std::optional<trace::SpanRow> best;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (s.category == core::Category::kPhase && reader.str(s.name) == "step" &&
          (!best || s.start_ns < best->start_ns))
        best = s;
    });
  }
  REQUIRE(best);
  return *best;
}

struct Sampled {
  int checked = 0, matched = 0;
  std::string firstMismatch;
  // Columns with no span of the row within 3 px: none of the row's span colours there.
  int emptyChecked = 0, emptyMatched = 0;
  std::string firstFilled;
};

// Every 3rd pixel column of one strip row: where a span of that row (track and depth) at least
// 12 px wide covers the column with 3 px to spare on both sides, and the column is past the span's
// label (8 px per character) and the strip's mark, the pixel has the span's category colour.
Sampled sampleRow(const Png& png, const Dump& d, const RowLine& row,
                  const trace::TraceReader& reader, double origin) {
  struct Box {
    double x0, x1, text;
    core::Category category;
  };
  std::vector<Box> boxes;
  reader.forEachSpan(row.track, [&](const trace::SpanRow& s) {
    if (s.depth != row.depth) return;
    const double x0 = d.xOf(static_cast<double>(s.start_ns) - origin);
    const double x1 = d.xOf(static_cast<double>(s.end_ns()) - origin);
    // A span that starts left of the strip keeps its label at the strip's left edge.
    const double label =
        std::max(x0, d.area_x) + 3 + 8.0 * static_cast<double>(reader.str(s.name).size());
    boxes.push_back({x0, x1, label, s.category});
  });
  Sampled out;
  const int y = static_cast<int>(row.y + row.h / 2);
  // (The strip's last 20 px hold its "A" or "B" mark.)
  for (double x = d.area_x + 4; x < d.area_x + d.area_w - 20; x += 3) {
    const Box* cover = nullptr;
    bool near = false;
    for (const Box& b : boxes) {
      if (b.x1 < x - 3 || b.x0 > x + 3) continue;
      if (b.x1 - b.x0 >= 12 && b.x0 <= x - 3 && b.x1 >= x + 3 && x > b.text) {
        cover = &b;
      } else {
        near = true;
      }
    }
    if (!cover && !near) {
      const uint32_t got = png.rgb(static_cast<int>(x), y);
      bool spanColour = false;
      for (const Box& b : boxes) {
        spanColour = spanColour ||
                     got == paletteRgb(viewer::palette::category(static_cast<uint8_t>(b.category)));
      }
      ++out.emptyChecked;
      if (!spanColour) {
        ++out.emptyMatched;
      } else if (out.firstFilled.empty()) {
        char b[160];
        std::snprintf(b, sizeof b, "(%.0f, %d): %06x where no span is", x, y, got);
        out.firstFilled = b;
      }
    }
    if (!cover || near) continue;
    const uint32_t want =
        paletteRgb(viewer::palette::category(static_cast<uint8_t>(cover->category)));
    const uint32_t got = png.rgb(static_cast<int>(x), y);
    ++out.checked;
    if (got == want) {
      ++out.matched;
    } else if (out.firstMismatch.empty()) {
      char b[160];
      std::snprintf(b, sizeof b, "(%.0f, %d): %06x, want %06x", x, y, got, want);
      out.firstMismatch = b;
    }
  }
  return out;
}

void checkAgainstReports(const Dump& d, const std::map<OpKey, OpTotals>& a,
                         const std::map<OpKey, OpTotals>& b) {
  std::map<OpKey, bool> seen;
  for (const NameLine& n : d.names) {
    INFO("row " << n.name << " (" << n.category << ")");
    const OpKey k{n.name, n.category};
    seen[k] = true;
    const OpTotals none;
    const OpTotals& ra = a.count(k) ? a.at(k) : none;
    const OpTotals& rb = b.count(k) ? b.at(k) : none;
    REQUIRE((a.count(k) || b.count(k)));
    CHECK(n.count_a == ra.count);
    CHECK(n.count_b == rb.count);
    CHECK(n.total_a == ra.total);
    CHECK(n.total_b == rb.total);
    CHECK(n.self_a == ra.self);
    CHECK(n.self_b == rb.self);
    CHECK(n.count_diff == rb.count - ra.count);
    CHECK(n.total_diff == rb.total - ra.total);
    CHECK(n.self_diff == rb.self - ra.self);
  }
  // Every name of either report has its row.
  for (const auto& kv : a) CHECK(seen.count(kv.first));
  for (const auto& kv : b) CHECK(seen.count(kv.first));
}

}  // namespace

TEST_CASE("compare view: a run against itself shows no differences", "[viewer][compare]") {
  const std::string a = gptRun("narrow", 32);
  const Shown s = showCompare(a, a, "self");
  const Dump d = readDump(s.dump);
  const auto ops = reportOps(a);
  REQUIRE(!d.names.empty());
  checkAgainstReports(d, ops, ops);
  for (const NameLine& n : d.names) {
    INFO(n.name);
    CHECK(n.count_diff == 0);
    CHECK(n.total_diff == 0);
    CHECK(n.self_diff == 0);
  }
  REQUIRE(d.steps.size() == 3);  // 3 steps on one rank
  for (const StepLine& st : d.steps) {
    REQUIRE(st.a);
    CHECK(st.a == st.b);
    CHECK(st.diff == int64_t{0});
  }
  // The analysis itself, on the same reader twice.
  const auto reader = trace::TraceReader::open(a);
  for (const auto& row : trace::analysis::compareRuns(reader, reader).rows) {
    CHECK(row.totalDiff() == 0);
    CHECK(row.ratio() == 1.0);
  }
}

TEST_CASE("compare view: a wider model's slower ops come first, as the reports differ",
          "[viewer][compare]") {
  const std::string a = gptRun("narrow", 32);
  const std::string b = gptRun("wide", 384);
  const Shown s = showCompare(a, b, "wider");
  const Dump d = readDump(s.dump);
  int64_t meanA = 0, meanB = 0;
  const auto opsA = reportOps(a, &meanA);
  const auto opsB = reportOps(b, &meanB);
  checkAgainstReports(d, opsA, opsB);

  // Sorted by the absolute total difference, largest first; the first ones are slower in B.
  REQUIRE(d.names.size() >= 3);
  for (size_t i = 1; i < d.names.size(); ++i) {
    INFO("row " << i << " " << d.names[i].name);
    CHECK(std::llabs(d.names[i - 1].total_diff) >= std::llabs(d.names[i].total_diff));
  }
  for (size_t i = 0; i < 3; ++i) {
    INFO("row " << i << " " << d.names[i].name << " diff " << d.names[i].total_diff);
    CHECK(d.names[i].total_diff > 0);
  }

  // Steps: the n-th of A beside the n-th of B; their means are the reports' step means.
  REQUIRE(d.steps.size() == 3);
  int64_t sumA = 0, sumB = 0;
  for (const StepLine& st : d.steps) {
    REQUIRE(st.a);
    REQUIRE(st.b);
    CHECK(*st.diff == *st.b - *st.a);
    sumA += *st.a, sumB += *st.b;
  }
  CHECK(sumA / 3 == meanA);
  CHECK(sumB / 3 == meanB);

  // The screenshot: both strips on one axis, each drawing its own run from its own step start.
  const auto ra = trace::TraceReader::open(a);
  const auto rb = trace::TraceReader::open(b);
  const trace::SpanRow sa = firstStep(ra), sb = firstStep(rb);
  REQUIRE(d.aligned == 1);
  CHECK(d.origin_a == Approx(static_cast<double>(sa.start_ns)));
  CHECK(d.origin_b == Approx(static_cast<double>(sb.start_ns)));
  const double la = static_cast<double>(sa.dur_ns), lb = static_cast<double>(sb.dur_ns);
  INFO("step 1: A " << la << " ns, B " << lb << " ns");
  REQUIRE(d.xOf(lb) - d.xOf(la) > 20);  // the premise: the wider model's step is longer
  const RowLine* rowA = d.row('A', sa.track, sa.depth);
  const RowLine* rowB = d.row('B', sb.track, sb.depth);
  REQUIRE(rowA);
  REQUIRE(rowB);
  const Png png = loadPng(s.png);
  CHECK(png.distinctColours() > 20);
  const uint32_t phase =
      paletteRgb(viewer::palette::category(static_cast<uint8_t>(core::Category::kPhase)));
  const int yA = static_cast<int>(rowA->y + rowA->h / 2);
  const int yB = static_cast<int>(rowB->y + rowB->h / 2);
  // Step 1's middle in both strips; past A's step-1 end, B's strip still shows B's step 1.
  const int inBoth = static_cast<int>(d.xOf(la / 2));
  const int onlyB = static_cast<int>(d.xOf((la + lb) / 2));
  INFO("A strip row y " << yA << ", B strip row y " << yB << ", x " << inBoth << " and " << onlyB);
  CHECK(png.rgb(inBoth, yA) == phase);
  CHECK(png.rgb(inBoth, yB) == phase);
  CHECK(png.rgb(onlyB, yB) == phase);
  // Along both strips' top rows, every column well inside a wide span of that run's row (away
  // from its label) has the span's category colour: each strip shows its own run.
  const Sampled sA = sampleRow(png, d, *rowA, ra, d.origin_a);
  const Sampled sB = sampleRow(png, d, *rowB, rb, d.origin_b);
  INFO("A: " << sA.matched << "/" << sA.checked << " " << sA.firstMismatch);
  INFO("B: " << sB.matched << "/" << sB.checked << " " << sB.firstMismatch);
  CHECK(sA.checked > 30);
  CHECK(sB.checked > 30);
  CHECK(sA.matched == sA.checked);
  CHECK(sB.matched == sB.checked);
}

TEST_CASE("a real window: dragging and wheeling the compare strips moves both together",
          "[viewer][compare][window]") {
  const std::string a = gptRun("narrow", 32);
  const std::string b = gptRun("wide", 384);
  const std::string dir = e2e::scratch().path();
  const std::string dumpFile = e2e::scratch().file("live-compare.txt");
  const ViewerWindow view(
      dir, {a, "--compare", b, "--view", "compare", "--size", "1600x900", "--dump-view", dumpFile});
  INFO(view.logs());
  auto xdo = [&](const std::vector<std::string>& args) {
    view.xdotool(args);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  };
  // After input (from > 0): the view settles again ("settled"; at open the first complete frame
  // was the settle), its dump stops changing, and F12 takes a screenshot.
  std::string rulerX = "600", rulerY = "120";  // the shared ruler above the strips (from the dump)
  auto settle = [&](size_t from) {
    xdo({"mousemove", rulerX, rulerY});  // off the strips: no hover tooltip over them
    if (from > 0) REQUIRE(view.waitFor("settled", 30, from) != std::string::npos);
    std::string last;
    for (int i = 0; i < 50; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const std::string now = e2e::readFile(dumpFile);
      if (now == last) break;
      last = now;
    }
    const size_t mark = view.out().size();
    // Down and up in separate frames (both in one batch of events would be no press at all).
    view.press("F12");
    const size_t saved = view.waitFor("saved screenshot ", 20, mark);
    REQUIRE(saved != std::string::npos);
    const std::string out = view.out();
    const std::string png = dir + "/" + out.substr(saved, out.find('\n', saved) - saved);
    return std::make_pair(readDump(dumpFile), loadPng(png));
  };
  const auto ra = trace::TraceReader::open(a);
  const auto rb = trace::TraceReader::open(b);
  const trace::SpanRow sa = firstStep(ra), sb = firstStep(rb);
  // Both strips' top rows show their runs' spans where the shared axis of the dump puts them.
  auto bothStrips = [&](const Dump& d, const Png& png, const char* when) {
    INFO(when << ": axis " << d.r0 << " .. " << d.r1);
    const RowLine* rowA = d.row('A', sa.track, sa.depth);
    const RowLine* rowB = d.row('B', sb.track, sb.depth);
    REQUIRE(rowA);
    REQUIRE(rowB);
    const Sampled sA = sampleRow(png, d, *rowA, ra, d.origin_a);
    const Sampled sB = sampleRow(png, d, *rowB, rb, d.origin_b);
    INFO("A: " << sA.matched << "/" << sA.checked << " " << sA.firstMismatch << "; empty "
               << sA.emptyMatched << "/" << sA.emptyChecked << " " << sA.firstFilled);
    INFO("B: " << sB.matched << "/" << sB.checked << " " << sB.firstMismatch << "; empty "
               << sB.emptyMatched << "/" << sB.emptyChecked << " " << sB.firstFilled);
    CHECK(sA.checked > 30);
    CHECK(sB.checked > 30);
    CHECK(sA.matched == sA.checked);
    CHECK(sB.matched == sB.checked);
    CHECK(sA.emptyMatched == sA.emptyChecked);
    CHECK(sB.emptyMatched == sB.emptyChecked);
    return sA.emptyChecked + sB.emptyChecked;
  };
  {
    const Dump first = readDump(dumpFile);
    REQUIRE(!first.rows.empty());
    double top = 1e9;
    for (const RowLine& r : first.rows) top = std::min(top, r.y);
    rulerX = std::to_string(static_cast<int>(first.area_x + first.area_w / 2));
    rulerY = std::to_string(static_cast<int>(top - 10));
  }
  const auto [d0, png0] = settle(0);
  bothStrips(d0, png0, "at open");
  const RowLine* row = d0.row('A', sa.track, sa.depth);
  REQUIRE(row);
  const int y = static_cast<int>(row->y + row->h / 2);
  const double npp0 = (d0.r1 - d0.r0) / d0.area_w;

  // Drag strip A 240 px to the right: the axis moves 240 px earlier, for both strips.
  const int x0 = static_cast<int>(d0.area_x + d0.area_w * 0.4);
  size_t mark = view.out().size();
  xdo({"mousemove", std::to_string(x0), std::to_string(y)});
  xdo({"mousedown", "1"});
  for (int k = 1; k <= 6; ++k) xdo({"mousemove", std::to_string(x0 + 40 * k), std::to_string(y)});
  xdo({"mouseup", "1"});
  const auto [d1, png1] = settle(mark);
  CHECK(d0.r0 - d1.r0 == Approx(240 * npp0).margin(3 * npp0));
  CHECK(d1.r1 - d1.r0 == Approx(d0.r1 - d0.r0).margin(npp0));
  // The time before the aligned step is now on screen, empty in both strips.
  CHECK(bothStrips(d1, png1, "after the drag") > 100);

  // Two wheel notches up over strip B, over the middle of A's first step: both strips zoom in
  // about the pointer.
  const RowLine* rowB = d1.row('B', sb.track, sb.depth);
  REQUIRE(rowB);
  const int xw = static_cast<int>(d1.xOf(static_cast<double>(sa.dur_ns) / 2));
  mark = view.out().size();
  xdo({"mousemove", std::to_string(xw), std::to_string(static_cast<int>(rowB->y + rowB->h / 2))});
  xdo({"click", "4"});
  xdo({"click", "4"});
  const auto [d2, png2] = settle(mark);
  CHECK(d2.r1 - d2.r0 < 0.9 * (d1.r1 - d1.r0));
  // The time under the pointer stays under it.
  const double atPointer1 = d1.r0 + (xw - d1.area_x) * (d1.r1 - d1.r0) / d1.area_w;
  const double atPointer2 = d2.r0 + (xw - d2.area_x) * (d2.r1 - d2.r0) / d2.area_w;
  CHECK(atPointer2 == Approx(atPointer1).margin(2 * npp0));
  bothStrips(d2, png2, "after the zoom");
}

TEST_CASE("compare view: a --compare file that is not a trace is one line and a non-zero exit",
          "[viewer][compare]") {
  const std::string a = e2e::scratch().file("small.db");
  writeSmallTrace(a, 10);
  const std::string bad = e2e::scratch().file("not-a-trace.db");
  e2e::writeFile(bad, "hello");
  const auto r = runTraceviewXvfb(
      {a, "--compare", bad, "--view", "compare", "--screenshot", e2e::scratch().file("bad.png")},
      e2e::scratch().path());
  INFO(r.describe());
  CHECK(r.exit_code != 0);
  CHECK(r.errLines().size() == 1);
  const auto missing = runTraceviewXvfb({a, "--compare", e2e::scratch().file("absent.db"),
                                         "--screenshot", e2e::scratch().file("bad2.png")},
                                        e2e::scratch().path());
  INFO(missing.describe());
  CHECK(missing.exit_code != 0);
  REQUIRE(missing.errLines().size() == 1);
  CHECK(missing.errLines()[0].find("absent.db") != std::string::npos);
}

#endif
