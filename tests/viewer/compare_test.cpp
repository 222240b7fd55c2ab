// The compare view (traceview A --compare B --view compare) on real traced gpttrain runs: a run
// against itself shows no differences; against the same config with a wider model (slower ops) the
// slower ops come first with positive differences equal to the difference of the two runs'
// `tracerun report --json` ops totals; the screenshot shows both strips, each run's step box
// where its own step times put it on the shared axis (positions computed from the traces); two
// unmodified Python ResNet-18 runs aligned by the step spans their optimizer steps made.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
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

#include "app/palette.h"
#include "e2e_common.h"
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
// A box a strip drew (the dump's "A|B box TRACK DEPTH X0 X1 KIND LABEL", x from the area's left).
struct StripBox {
  char run = 'A';
  int64_t track = 0;
  int depth = 0;
  double x0 = 0, x1 = 0;
  std::string kind, label;
};
struct Dump {
  std::vector<StripBox> boxes;
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
    if (line.size() > 6 && (line[0] == 'A' || line[0] == 'B') && line.compare(1, 5, " box ") == 0) {
      std::istringstream in(line.substr(6));
      StripBox b;
      b.run = line[0];
      in >> b.track >> b.depth >> b.x0 >> b.x1 >> b.kind;
      std::getline(in >> std::ws, b.label);
      d.boxes.push_back(b);
    } else if (f[0] == "name") {
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
// label (8 px per character) and the strip's mark, the pixel has the span's category colour; where
// the strip drew a fold there instead (its box in the dump), the fold's grey, as the timeline.
// Where a strip box's label ends: boxes label from their left edge (or the strip's, for a box that
// starts left of it), 3 px in, 8 px a character.
double labelEnd(const Dump& d, double x0, size_t chars) {
  return std::max(x0, d.area_x) + 3 + 8.0 * static_cast<double>(chars);
}

// The box a strip drew on `row` over screen column x (the dump's boxes), or null.
const StripBox* boxAt(const Dump& d, const RowLine& row, double x) {
  for (const StripBox& b : d.boxes)
    if (b.run == row.run && b.track == row.track && b.depth == row.depth && d.area_x + b.x0 <= x &&
        d.area_x + b.x1 >= x)
      return &b;
  return nullptr;
}

// Where a drawn box's own label ends on screen: a span's name, or a fold's "N spans" (a step can
// be folded with the tiny ops that start in its first pixel column; its label is then the fold's).
double drawnLabelEnd(const Dump& d, const StripBox& b) {
  return b.label == "-" ? d.area_x + b.x0 : labelEnd(d, d.area_x + b.x0, b.label.size());
}

// Whether some box on `row` leaves 12 px past its label: room for sampleRow's columns there.
bool roomyBox(const Dump& d, const RowLine& row) {
  for (const StripBox& b : d.boxes)
    if (b.run == row.run && b.track == row.track && b.depth == row.depth &&
        d.area_x + b.x1 - drawnLabelEnd(d, b) >= 12)
      return true;
  return false;
}

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
    const double label = labelEnd(d, x0, reader.str(s.name).size());
    boxes.push_back({x0, x1, label, s.category});
  });
  std::vector<Box> folds;  // the folds the strip drew on this row, past their "N spans" labels
  for (const StripBox& b : d.boxes) {
    if (b.run != row.run || b.track != row.track || b.depth != row.depth || b.kind != "fold")
      continue;
    const double x0 = d.area_x + b.x0, x1 = d.area_x + b.x1;
    const double label = b.label == "-" ? x0 : labelEnd(d, x0, b.label.size());
    folds.push_back({x0, x1, label, core::Category::kOp});
  }
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
    bool inFold = false, nearFold = false;
    for (const Box& f : folds) {
      if (f.x1 < x - 3 || f.x0 > x + 3) continue;
      if (f.x0 <= x - 3 && f.x1 >= x + 3 && x > f.text) {
        inFold = true;
      } else {
        nearFold = true;
      }
    }
    if (nearFold || (!inFold && (!cover || near))) continue;
    const uint32_t want =
        inFold ? paletteRgb(viewer::palette::kFold)
               : paletteRgb(viewer::palette::category(static_cast<uint8_t>(cover->category)));
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

  // Sorted by the absolute total difference, largest first; the first is slower in B. (Only the
  // first: the rows' signs are the reports', checked above, and under load a narrow run's op
  // descheduled for a few ms could outweigh B's third-largest increase.)
  REQUIRE(d.names.size() >= 3);
  for (size_t i = 1; i < d.names.size(); ++i) {
    INFO("row " << i << " " << d.names[i].name);
    CHECK(std::llabs(d.names[i - 1].total_diff) >= std::llabs(d.names[i].total_diff));
  }
  INFO("row 0 " << d.names[0].name << " diff " << d.names[0].total_diff);
  CHECK(d.names[0].total_diff > 0);

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
  // The colour of the box drawn over column x: the step's, or the fold's grey where the strip
  // folded the step with its tiny neighbours into one box (the timeline's span track does the
  // same; the dump lists every box with its label).
  const auto want = [&](const StripBox& b) {
    return b.kind == "fold" ? paletteRgb(viewer::palette::kFold) : phase;
  };
  // A's step on the shared axis is as wide as the two runs' step-time ratio allows, which the
  // machine's load sets (about 6x when quiet; 23x and 37x in loaded ctest -j2 runs, where A's step
  // 1 was a few pixels): A's row is checked when its step 1's middle lies past the label of the box
  // drawn there, B's row always.
  const StripBox* atA = boxAt(d, *rowA, inBoth);
  const bool aSampled = atA && inBoth > drawnLabelEnd(d, *atA) + 3;
  if (aSampled) CHECK(png.rgb(inBoth, yA) == want(*atA));
  // On B's row past the label of the box drawn there too (as sampleRow keeps away from labels):
  // when the load makes A's step short beside B's (21x in a loaded run), A's middle falls in that
  // label's text, which is "step", or "7 spans" where B's step was folded (loop run 16: 18x).
  const StripBox* atB = boxAt(d, *rowB, inBoth);
  REQUIRE(atB);
  const int inB = std::max(inBoth, static_cast<int>(std::ceil(drawnLabelEnd(d, *atB) + 2)));
  INFO("B's box at " << inBoth << ": " << atB->kind << " '" << atB->label << "' " << atB->x0 << ".."
                     << atB->x1 << "; checked at " << inB);
  const StripBox* pastLabel = boxAt(d, *rowB, inB);
  REQUIRE(pastLabel);
  CHECK(png.rgb(inB, yB) == want(*pastLabel));
  const StripBox* atOnlyB = boxAt(d, *rowB, onlyB);
  REQUIRE(atOnlyB);
  CHECK(onlyB > drawnLabelEnd(d, *atOnlyB) + 2);
  CHECK(png.rgb(onlyB, yB) == want(*atOnlyB));
  // Along both strips' top rows, every column well inside a wide span of that run's row (away
  // from its label) has the span's category colour: each strip shows its own run.
  const Sampled sA = sampleRow(png, d, *rowA, ra, d.origin_a);
  const Sampled sB = sampleRow(png, d, *rowB, rb, d.origin_b);
  INFO("A: " << sA.matched << "/" << sA.checked << " " << sA.firstMismatch);
  INFO("B: " << sB.matched << "/" << sB.checked << " " << sB.firstMismatch);
  // (137 columns of A sampled when quiet; 9 and 0 in those loaded runs.)
  if (aSampled) CHECK(sA.checked > 0);
  CHECK(sB.checked > 30);
  CHECK(sA.matched == sA.checked);
  CHECK(sB.matched == sB.checked);
}

TEST_CASE("a script: dragging and wheeling the compare strips moves both together",
          "[viewer][compare][script]") {
  const std::string a = gptRun("narrow", 32);
  const std::string b = gptRun("wide", 384);
  const std::string dir = e2e::scratch().path();
  const std::vector<std::string> args{a, "--compare", b, "--view", "compare", "--size", "1600x900"};
  const auto file = [&](const std::string& name) { return e2e::scratch().file(name); };
  const auto ra = trace::TraceReader::open(a);
  const auto rb = trace::TraceReader::open(b);
  const trace::SpanRow sa = firstStep(ra), sb = firstStep(rb);
  // Both strips' top rows show their runs' spans where the shared axis of the dump puts them.
  // `aRoomy`: the state is one where A's step must leave room for columns to sample.
  auto bothStrips = [&](const Dump& d, const Png& png, const char* when, bool aRoomy) {
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
    // Enough columns sampled. How many fall on A's step depends on the two runs' timings: under
    // load the wide model's step was 37x the narrow one's, A's step 1 then 38 px wide at open,
    // no column past its label. So A's row is sampled wherever a box the strip drew there leaves
    // room past its label, and the zoom below is chosen to make A's step 1 that wide.
    if (aRoomy) REQUIRE(roomyBox(d, *rowA));
    if (roomyBox(d, *rowA)) CHECK(sA.checked > 0);
    CHECK(sB.checked > 0);
    CHECK(sA.checked + sB.checked > 60);
    CHECK(sA.matched == sA.checked);
    CHECK(sB.matched == sB.checked);
    CHECK(sA.emptyMatched == sA.emptyChecked);
    CHECK(sB.emptyMatched == sB.emptyChecked);
    return sA.emptyChecked + sB.emptyChecked;
  };
  // Where things are at open (a settled frame's dump): the strips' rows and the ruler above them.
  std::vector<std::string> shot = args;
  shot.insert(shot.end(), {"--screenshot", file("cmp-open.png"), "--dump-view", file("cmp-0.txt")});
  runTraceviewOk(shot, dir);
  const Dump d0 = readDump(file("cmp-0.txt"));
  REQUIRE(!d0.rows.empty());
  double top = 1e9;
  for (const RowLine& r : d0.rows) top = std::min(top, r.y);
  const auto xy = [](double x, double y) {
    return std::to_string(static_cast<int>(x)) + " " + std::to_string(static_cast<int>(y));
  };
  // Off the strips between the steps (no hover tooltip over them) when a state is taken.
  const std::string ruler = xy(d0.area_x + d0.area_w / 2, top - 10);
  const RowLine* row = d0.row('A', sa.track, sa.depth);
  REQUIRE(row);
  const RowLine* rowB0 = d0.row('B', sb.track, sb.depth);
  REQUIRE(rowB0);
  const int y = static_cast<int>(row->y + row->h / 2);
  const double npp0 = (d0.r1 - d0.r0) / d0.area_w;
  // Drag strip A 240 px to the right, then wheel notches over strip B at the middle of A's first
  // step (240 px right of where it was at open), each state settled and taken. A notch zooms
  // 1.25x (compare_view.cpp): two at least, more until A's step 1 is 100 px or wider.
  const int x0 = static_cast<int>(d0.area_x + d0.area_w * 0.4);
  const int xw = static_cast<int>(d0.xOf(static_cast<double>(sa.dur_ns) / 2)) + 240;
  const double stepA = d0.xOf(static_cast<double>(sa.dur_ns)) - d0.xOf(0);
  const int notches = std::clamp(
      static_cast<int>(std::ceil(std::log(100 / std::max(stepA, 0.5)) / std::log(1.25))), 2, 30);
  INFO("A's step 1 " << stepA << " px wide at open; " << notches << " wheel notches");
  const auto take = [&](int i) {
    return std::vector<std::string>{"+1 move " + ruler, "+1 settle",
                                    "+0 screenshot " + file("cmp-" + std::to_string(i) + ".png"),
                                    "+0 dump-view " + file("cmp-" + std::to_string(i) + ".txt")};
  };
  std::vector<std::string> lines{"0 move " + ruler};
  for (const auto& l : take(0)) lines.push_back(l);
  lines.push_back("+1 drag " + xy(x0, y) + " " + xy(x0 + 240, y) + " 6");
  for (const auto& l : take(1)) lines.push_back(l);
  lines.push_back("+1 move " + xy(xw, rowB0->y + rowB0->h / 2));
  for (int i = 0; i < notches; ++i) lines.push_back("+1 wheel 1");
  for (const auto& l : take(2)) lines.push_back(l);
  const auto r = runScript(args, lines, dir, "cmp-script.txt");
  INFO(r.out);
  const auto state = [&](int i) {
    return std::make_pair(readDump(file("cmp-" + std::to_string(i) + ".txt")),
                          loadPng(file("cmp-" + std::to_string(i) + ".png")));
  };
  const auto [s0, png0] = state(0);
  bothStrips(s0, png0, "at open", false);

  // The drag: the axis moves 240 px earlier, for both strips.
  const auto [d1, png1] = state(1);
  CHECK(s0.r0 - d1.r0 == Approx(240 * npp0).margin(3 * npp0));
  CHECK(d1.r1 - d1.r0 == Approx(s0.r1 - s0.r0).margin(npp0));
  // The time before the aligned step is now on screen, empty in both strips.
  CHECK(bothStrips(d1, png1, "after the drag", false) > 100);

  // The wheel: both strips zoom in about the pointer.
  const auto [d2, png2] = state(2);
  CHECK(d2.r1 - d2.r0 < 0.9 * (d1.r1 - d1.r0));
  // The time under the pointer stays under it.
  const double atPointer1 = d1.r0 + (xw - d1.area_x) * (d1.r1 - d1.r0) / d1.area_w;
  const double atPointer2 = d2.r0 + (xw - d2.area_x) * (d2.r1 - d2.r0) / d2.area_w;
  CHECK(atPointer2 == Approx(atPointer1).margin(2 * npp0));
  bothStrips(d2, png2, "after the zoom", true);
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

#ifdef GPTTRAIN_BIN
namespace {

// One span box a view drew (track.h's "box TRACK DEPTH X0 X1 KIND LABEL", x from the area's left).
struct Box {
  int64_t track = 0;
  int depth = 0;
  double x0 = 0, x1 = 0;
  std::string kind, label;
};

// The box lines of a dump; `prefix` "A " keeps run A's lines of the compare dump.
std::vector<Box> readBoxes(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  REQUIRE(in);
  std::vector<Box> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, prefix.size() + 4, prefix + "box ") != 0) continue;
    std::istringstream s(line.substr(prefix.size() + 4));
    Box b;
    s >> b.track >> b.depth >> b.x0 >> b.x1 >> b.kind;
    std::getline(s >> std::ws, b.label);
    out.push_back(b);
  }
  return out;
}

}  // namespace

TEST_CASE("compare view: a strip draws a span track as the timeline draws it with its folds",
          "[viewer][compare]") {
  const std::string a = gptRun("narrow", 32);
  const Shown s = showCompare(a, a, "boxes");
  const Dump d = readDump(s.dump);
  const std::vector<Box> strip = readBoxes(s.dump, "A ");
  REQUIRE(!strip.empty());
  // The timeline on the same window (ns from the trace's start) at the same pixels per ns: its
  // time area made as wide as the strips' (its side panel and labels take other widths).
  const auto timeline = [&](int width, const std::string& range, const std::string& tag) {
    const std::string layout = e2e::scratch().file(tag + ".txt");
    std::vector<std::string> args{a,
                                  "--size",
                                  std::to_string(width) + "x900",
                                  "--screenshot",
                                  e2e::scratch().file(tag + ".png"),
                                  "--dump-layout",
                                  layout};
    if (!range.empty()) args.insert(args.end(), {"--range", range});
    runTraceviewOk(args, e2e::scratch().path());
    return layout;
  };
  const Layout first = readLayout(timeline(1600, "", "boxes-tl0"));
  const int width = 1600 + static_cast<int>(std::lround(d.area_w - first.area_w));
  const auto rel = [&](double r) {
    return std::to_string(std::llround(d.origin_a + r - static_cast<double>(first.origin)));
  };
  const std::string layout = timeline(width, rel(d.r0) + ":" + rel(d.r1), "boxes-tl");
  const Layout l = readLayout(layout);
  REQUIRE(l.area_w == Approx(d.area_w).margin(0.01));
  const std::vector<Box> drawn = readBoxes(layout, "");

  // Every box of strip A at a depth the strip shows is the timeline's box, and back.
  std::map<std::pair<int64_t, int>, double> rowH;  // (track, depth) -> the strip's row height
  for (const RowLine& r : d.rows)
    if (r.run == 'A') rowH[{r.track, r.depth}] = r.h;
  const auto same = [](const Box& x, const Box& y, bool labels) {
    return x.track == y.track && x.depth == y.depth && std::fabs(x.x0 - y.x0) < 0.05 &&
           std::fabs(x.x1 - y.x1) < 0.05 && x.kind == y.kind && (!labels || x.label == y.label);
  };
  size_t folds = 0, labelled = 0, compared = 0;
  for (const Box& b : strip) {
    INFO("strip box " << b.track << " " << b.depth << " " << b.x0 << ".." << b.x1 << " " << b.kind
                      << " " << b.label);
    if (!l.rows.count(b.track)) continue;  // a row off the timeline's screen
    const bool labels = rowH[{b.track, b.depth}] >= 12;
    bool found = false;
    for (const Box& t : drawn) found = found || same(b, t, labels);
    CHECK(found);
    ++compared;
    folds += b.kind == "fold";
    labelled += b.label != "-" && b.kind == "fold";
  }
  for (const Box& t : drawn) {
    if (!rowH.count({t.track, t.depth})) continue;  // a depth the strip leaves out
    INFO("timeline box " << t.track << " " << t.depth << " " << t.x0 << ".." << t.x1 << " "
                         << t.kind);
    bool found = false;
    for (const Box& b : strip) found = found || same(b, t, false);
    CHECK(found);
  }
  CHECK(compared > 20);
  CHECK(folds > 0);  // the fold is what they drew differently
  INFO("folds " << folds << ", labelled folds " << labelled);
}
#endif

#if defined(GPTTRAIN_BIN) && defined(RESNET18_STEP_PY)
namespace {

// torchvision's ResNet-18 trained 3 steps by an ordinary script (no tracerun code in it, batch 4),
// traced by tracerun: the Python hooks mark one "step" phase span per optimizer.step().
std::string pythonResnetRun(const std::string& name) {
  const std::string db = e2e::scratch().file(name + ".db");
  const e2e::ProcessResult r = e2e::runTracerun(
      {"--status", "off", "-o", db, "--", "/usr/bin/python3", RESNET18_STEP_PY, "4", "3"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return db;
}

// Each "step" phase span's length, in start order (one rank).
std::vector<int64_t> stepLengths(const std::string& db) {
  const auto reader = trace::TraceReader::open(db);
  std::vector<std::pair<int64_t, int64_t>> steps;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (s.category == core::Category::kPhase && reader.str(s.name) == "step")
        steps.emplace_back(s.start_ns, s.dur_ns);
    });
  }
  std::sort(steps.begin(), steps.end());
  std::vector<int64_t> out;
  for (const auto& s : steps) out.push_back(s.second);
  return out;
}

}  // namespace

// Issue 33 point 6: an unmodified program's optimizer steps are steps, so the compare tab aligns
// two runs step by step as it does gpttrain's (no "no steps: the runs are aligned at their
// starts").
TEST_CASE("compare view: two unmodified Python ResNet-18 runs are aligned by their optimizer steps",
          "[viewer][compare][python]") {
  const std::string a = pythonResnetRun("resnet18_py_a");
  const std::string b = pythonResnetRun("resnet18_py_b");
  const std::vector<int64_t> la = stepLengths(a), lb = stepLengths(b);
  REQUIRE(la.size() == 3);  // the script's 3 optimizer.step() calls
  REQUIRE(lb.size() == 3);
  const Shown s = showCompare(a, b, "python");
  const Dump d = readDump(s.dump);
  REQUIRE(d.steps.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    const StepLine& st = d.steps[i];
    INFO("step " << st.number);
    CHECK(st.number == static_cast<int>(i) + 1);
    REQUIRE(st.a);
    REQUIRE(st.b);
    CHECK(*st.a == la[i]);
    CHECK(*st.b == lb[i]);
  }
  REQUIRE(d.aligned == 1);
  const auto ra = trace::TraceReader::open(a);
  const auto rb = trace::TraceReader::open(b);
  CHECK(d.origin_a == Approx(static_cast<double>(firstStep(ra).start_ns)));
  CHECK(d.origin_b == Approx(static_cast<double>(firstStep(rb).start_ns)));
  CHECK(!d.names.empty());
}
#endif
