// traceview --view pipeline on real dry-run pipeline traces (gpttrain under tracerun, 4 stages):
// forward, backward and bubble colours at the pixels the recorded spans map to (positions from the
// trace's own spans and the chart geometry of --dump-view), the bubble fractions equal to
// `tracerun report --json`, the chunks of an interleaved schedule shaded apart, and the plan's
// order on each stage equal to the order the trainer ran.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>
#include <sstream>
#include <tuple>

#include "app/palette.h"
#include "e2e_common.h"
#include "temp_dir.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;
using nlohmann::json;

#ifdef GPTTRAIN_BIN

namespace {

// The --dump-view text of the pipeline view.
struct Dump {
  std::string schedule;
  double measured = -1, theory = -1, modeled = -1;
  std::map<int, double> stageBubble, stageTheory, stageModeled;
  int step = -1, replica = -1;
  double stepBubble = -1, stepModeled = -1;
  int64_t w0 = 0, w1 = 0;
  int64_t criticalLength = -1, criticalStep = -1;  // the step's critical path and its window
  double areaX = 0, areaY = 0, areaW = 0, barH = 0, laneH = 0, t0 = 0, t1 = 1;
  std::map<int, double> laneYOfRank;  // global rank -> lane top
  std::map<int, int> stageOfRank;
  std::map<int, std::vector<std::string>> planOrder;  // stage -> "F3" / "B3.1" in plan order
  struct PlanBar {
    int stage = 0, microbatch = 0, chunk = 0;
    bool backward = false;
    int64_t t0 = 0, t1 = 0;
  };
  std::vector<PlanBar> plan;           // in dump order (stage by stage, plan order)
  std::map<int, double> laneYOfStage;  // stage -> lane top
  double xOf(double t) const { return areaX + (t - t0) / (t1 - t0) * areaW; }
};

Dump readDump(const std::string& path) {
  std::istringstream in(e2e::readFile(path));
  Dump d;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string w, x;
    l >> w;
    if (w == "pipeline") {
      l >> d.schedule;
    } else if (w == "bubble") {
      l >> x >> d.measured >> x >> d.theory >> x >> d.modeled;
    } else if (w == "stage") {
      int s = 0;
      l >> s >> x >> d.stageBubble[s] >> x >> d.stageTheory[s] >> x >> d.stageModeled[s];
    } else if (w == "step") {
      l >> d.step >> x >> d.replica >> x >> d.stepBubble >> x >> d.stepModeled;
    } else if (w == "critical") {
      l >> x;
      if (x == "length") l >> d.criticalLength >> x >> d.criticalStep;
    } else if (w == "window") {
      l >> d.w0 >> d.w1;
    } else if (w == "area") {
      l >> d.areaX >> d.areaY >> d.areaW >> d.barH >> d.laneH >> d.t0 >> d.t1;
    } else if (w == "lane") {
      int s = 0, r = 0;
      double y = 0;
      l >> s >> x >> r >> x >> y;
      d.laneYOfRank[r] = y;
      d.stageOfRank[r] = s;
      d.laneYOfStage[s] = y;
    } else if (w == "plan") {
      int s = 0, mb = 0, c = 0;
      std::string kind;
      int64_t t0 = 0, t1 = 0;
      if (l >> s >> kind >> mb >> c) {
        d.planOrder[s].push_back(kind + std::to_string(mb) + "." + std::to_string(c));
        if (l >> t0 >> t1) d.plan.push_back({s, mb, c, kind == "B", t0, t1});
      }
    }
  }
  REQUIRE(d.areaW > 0);
  REQUIRE(d.t1 > d.t0);
  return d;
}

// A dry run: 4 stages, m microbatches of 1 sample, `costs` ms forward,backward, 2 steps.
std::string dryRun(const std::string& name, const std::string& schedule, int v, int m,
                   const std::string& costs) {
  const std::string db = e2e::scratch().file(name + ".db");
  std::vector<std::string> gpt = {"--pp", "4", "--schedule", schedule, "--vp", std::to_string(v)};
  for (const char* arg : {"--hidden", "32", "--heads", "4", "--seq-len", "16", "--micro-batch-size",
                          "1", "--steps", "2", "--quiet"}) {
    gpt.push_back(arg);
  }
  gpt.insert(gpt.end(), {"--layers", std::to_string(2 * 4 * v), "--global-batch", std::to_string(m),
                         "--dry-run-costs", costs});
  traceGpttrain(db, {"--nproc-per-node", "4"}, gpt);
  return db;
}

// The 1F1B trace (p 4, m 8), made once per test process.
const std::string& oneFOneB() {
  static const std::string db = dryRun("pipe-1f1b", "1f1b", 1, 8, "20,40");
  return db;
}

json reportPipeline(const std::string& db) {
  const json j = reportJson(db);
  REQUIRE(j["pipeline"].is_object());
  return j["pipeline"];
}

// The pipeline view's screenshot and dump of `db` (with `extra` flags).
Dump shoot(const std::string& db, const std::string& png,
           const std::vector<std::string>& extra = {}) {
  const std::string dump = png + ".txt";
  std::vector<std::string> args = {
      db, "--view", "pipeline", "--screenshot", png, "--size", "1600x900", "--dump-view", dump};
  args.insert(args.end(), extra.begin(), extra.end());
  runTraceviewOk(args, e2e::scratch().path());
  return readDump(dump);
}

// The view's numbers are the report's, to the last bit.
void checkNumbersAgainstReport(const Dump& d, const json& pl) {
  CHECK(d.schedule == pl["schedule"].get<std::string>());
  CHECK(d.measured == pl["bubble_measured"].get<double>());
  CHECK(d.theory == pl["bubble_theory"].get<double>());
  CHECK(d.modeled == pl["bubble_modeled"].get<double>());
  REQUIRE(d.stageBubble.size() == pl["per_stage"].size());
  for (const auto& s : pl["per_stage"]) {
    const int stage = s["stage"].get<int>();
    CHECK(d.stageBubble.at(stage) == s["bubble"].get<double>());
    CHECK(d.stageTheory.at(stage) == pl["bubble_theory"].get<double>());
    CHECK(d.stageModeled.at(stage) == s["bubble_modeled"].get<double>());
  }
  // The step shown is one the report measured, with its numbers; its bubble is the median.
  bool found = false;
  std::vector<double> bubbles;
  for (const auto& s : pl["per_step"]) {
    bubbles.push_back(s["bubble"].get<double>());
    if (s["step"].get<int>() != d.step || s["replica"].get<int>() != d.replica) continue;
    found = true;
    CHECK(d.stepBubble == s["bubble"].get<double>());
    CHECK(d.stepModeled == s["bubble_modeled"].get<double>());
    CHECK(d.w0 == s["start_ns"].get<int64_t>());
    CHECK(d.w1 == s["end_ns"].get<int64_t>());
  }
  CHECK(found);
  std::sort(bubbles.begin(), bubbles.end());
  CHECK(d.stepBubble == bubbles[(bubbles.size() - 1) / 2]);
}

struct Compute {
  int64_t id = 0;
  int rank = 0;
  bool backward = false;
  int microbatch = 0, chunk = 0;
  int64_t start = 0, end = 0;
};

// The forward and backward phase spans of every rank inside [w0, w1], read from the trace.
std::vector<Compute> computeSpans(const std::string& db, int64_t w0, int64_t w1) {
  const auto reader = trace::TraceReader::open(db);
  std::vector<Compute> out;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    for (const auto& sp : reader.spans(t.id, w0, w1)) {
      const std::string& name = reader.str(sp.name);
      if (sp.category != core::Category::kPhase ||
          (name != vocab::phase::kForward && name != vocab::phase::kBackward)) {
        continue;
      }
      if (sp.start_ns < w0 || sp.end_ns() > w1) continue;
      Compute c;
      c.id = sp.id;
      c.rank = t.rank;
      c.backward = name == vocab::phase::kBackward;
      c.start = sp.start_ns;
      c.end = sp.end_ns();
      for (const auto& a : reader.args(sp.id)) {
        if (reader.str(a.key) == vocab::arg::kMicrobatch) c.microbatch = static_cast<int>(a.value);
        if (reader.str(a.key) == vocab::arg::kChunk) c.chunk = static_cast<int>(a.value);
      }
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(), [](const Compute& a, const Compute& b) {
    return std::tie(a.rank, a.start) < std::tie(b.rank, b.start);
  });
  return out;
}

struct Samples {
  int checked = 0, matched = 0;
  std::string firstMismatch;
  void check(const Png& png, double x, double y, uint32_t want, const std::string& what) {
    const uint32_t got = png.rgb(static_cast<int>(x), static_cast<int>(y));
    ++checked;
    if (got == want) {
      ++matched;
    } else if (firstMismatch.empty()) {
      char b[240];
      std::snprintf(b, sizeof b, "%s at (%.1f, %.1f): %06x, want %06x", what.c_str(), x, y, got,
                    want);
      firstMismatch = b;
    }
  }
  // A bar 4 px below its top: within 4 px of its centre (8 px: one period of the stripes), its
  // fill; and the stripes' colour when it is a backward (hatched), none when a forward.
  void checkBar(const Png& png, double x, double y, uint32_t fill, uint32_t stripe, bool hatched,
                const std::string& what) {
    bool sawFill = false, sawStripe = false;
    for (int dx = -4; dx < 4; ++dx) {
      const uint32_t got = png.rgb(static_cast<int>(x) + dx, static_cast<int>(y));
      sawFill = sawFill || got == fill;
      sawStripe = sawStripe || got == stripe;
    }
    ++checked;
    if (sawFill && sawStripe == hatched) {
      ++matched;
    } else if (firstMismatch.empty()) {
      char b[240];
      std::snprintf(b, sizeof b, "%s at (%.1f, %.1f): fill %06x %s, stripes %06x %s", what.c_str(),
                    x, y, fill, sawFill ? "seen" : "missing", stripe,
                    sawStripe ? "seen" : "not seen");
      firstMismatch = b;
    }
  }
};

// The samples of one screenshot: each bar's colour (and a backward's stripes) 4 px below its top
// around its centre (labels sit in the middle), and the bubble colour in the middle of every gap
// between bars (and at the window's ends) wider than 8 px, counted by rank.
struct Chart {
  Samples bars, bubble;
  std::map<int, int> bubblesOfRank;
};
Chart sampleChart(const Png& png, const Dump& d, const std::vector<Compute>& spans, int chunks) {
  Chart out;
  std::map<int, int64_t> lastEnd;
  auto gap = [&](int rank, int64_t a, int64_t b) {
    const double x0 = d.xOf(double(a)), x1 = d.xOf(double(b));
    if (x1 - x0 < 8) return;
    out.bubble.check(png, (x0 + x1) / 2, d.laneYOfRank.at(rank) + 4,
                     paletteRgb(viewer::palette::kPipelineBubble),
                     "bubble on rank " + std::to_string(rank));
    ++out.bubblesOfRank[rank];
  };
  for (const Compute& c : spans) {
    REQUIRE(d.laneYOfRank.count(c.rank));
    const double x0 = d.xOf(double(c.start)), x1 = d.xOf(double(c.end));
    if (x1 - x0 >= 12) {
      const uint32_t fill = viewer::palette::pipelineBar(c.microbatch, c.backward, c.chunk, chunks);
      out.bars.checkBar(png, (x0 + x1) / 2, d.laneYOfRank.at(c.rank) + 4, paletteRgb(fill),
                        paletteRgb(viewer::palette::pipelineHatch(fill)), c.backward,
                        std::string(c.backward ? "B" : "F") + std::to_string(c.microbatch) + "." +
                            std::to_string(c.chunk) + " on rank " + std::to_string(c.rank));
    }
    gap(c.rank, lastEnd.count(c.rank) ? lastEnd[c.rank] : d.w0, c.start);
    lastEnd[c.rank] = c.end;
  }
  for (const auto& [rank, end] : lastEnd) gap(rank, end, d.w1);
  return out;
}

// Each stage's actions ("F3.0", "B3.1") in the order the trainer ran them; `chunks`: with each
// span's chunk, else chunk 0 for all.
std::map<int, std::vector<std::string>> ranOrder(const std::vector<Compute>& spans, const Dump& d,
                                                 bool chunks) {
  std::map<int, std::vector<std::string>> ran;
  for (const Compute& c : spans) {
    ran[d.stageOfRank.at(c.rank)].push_back((c.backward ? "B" : "F") +
                                            std::to_string(c.microbatch) + "." +
                                            std::to_string(chunks ? c.chunk : 0));
  }
  return ran;
}

}  // namespace

TEST_CASE(
    "pipeline view: a dry-run 1F1B trace shows forward, backward and bubble where its "
    "schedule puts them",
    "[viewer][pipeline][screenshot]") {
  const std::string& db = oneFOneB();
  const json pl = reportPipeline(db);
  const std::string png = e2e::scratch().file("pipe-1f1b.png");
  const Dump d = shoot(db, png);
  checkNumbersAgainstReport(d, pl);

  const auto spans = computeSpans(db, d.w0, d.w1);
  REQUIRE(spans.size() == 4 * 8 * 2);  // 4 stages x 8 microbatches x (forward, backward)
  const Png img = loadPng(png);
  const Chart chart = sampleChart(img, d, spans, 1);
  INFO(chart.bars.firstMismatch);
  INFO(chart.bubble.firstMismatch);
  CHECK(chart.bars.checked == 64);
  CHECK(chart.bars.matched == chart.bars.checked);
  // 1F1B idles every stage but the last while the first backward comes back, and the last while
  // the first forward reaches it: bubble on every stage.
  CHECK(chart.bubblesOfRank.size() == 4);
  CHECK(chart.bubble.checked >= 4);
  CHECK(chart.bubble.matched == chart.bubble.checked);
  // Forward and backward of a microbatch are told apart.
  CHECK(viewer::palette::pipelineBar(3, false, 0, 1) !=
        viewer::palette::pipelineBar(3, true, 0, 1));

  // The plan is the order the trainer ran on each stage.
  CHECK(d.planOrder == ranOrder(spans, d, false));

  // The step's critical path: within the step's window, and the report's on the same step.
  CHECK(d.criticalLength > 0);
  CHECK(d.criticalStep == d.w1 - d.w0);
  CHECK(d.criticalLength <= d.criticalStep);
  const json& cp = pl["critical_path"];
  REQUIRE(cp.is_object());
  if (cp["step"].get<int>() == d.step) {
    CHECK(d.criticalLength == cp["length_ns"].get<int64_t>());
  }
}

// The plan, timed from the trace alone: each stage runs its actions in the order it ran them, an
// action starting when its stage is free and its input is there (a forward after the previous
// stage's forward of that microbatch, a backward after the next stage's backward), each costing
// the mean measured duration of its stage and direction (truncated to whole ns, as the plan is
// defined). Solved by relaxing start times until nothing moves, not by replaying the schedule.
std::map<std::tuple<int, bool, int>, std::pair<int64_t, int64_t>> planFromTrace(
    const std::vector<Compute>& spans, const std::map<int, int>& stageOfRank, int64_t w0) {
  std::map<std::pair<int, bool>, std::pair<double, int>> sum;
  std::map<int, std::vector<const Compute*>> order;  // stage -> its actions in start order
  for (const Compute& c : spans) {
    const int stage = stageOfRank.at(c.rank);
    auto& x = sum[{stage, c.backward}];
    x.first += double(c.end - c.start);
    ++x.second;
    order[stage].push_back(&c);
  }
  const int last = static_cast<int>(order.size()) - 1;
  std::map<std::tuple<int, bool, int>, std::pair<int64_t, int64_t>> t;  // (stage, bwd, mb)
  for (const auto& [stage, list] : order) {
    for (const Compute* c : list) t[{stage, c->backward, c->microbatch}] = {w0, w0};
  }
  for (bool moved = true; moved;) {
    moved = false;
    for (const auto& [stage, list] : order) {
      int64_t free = w0;
      for (const Compute* c : list) {
        const auto& m = sum.at({stage, c->backward});
        const auto cost = static_cast<int64_t>(m.first / m.second);
        int64_t ready = free;
        if (!c->backward && stage > 0)
          ready = std::max(ready, t[{stage - 1, false, c->microbatch}].second);
        if (c->backward && stage < last)
          ready = std::max(ready, t[{stage + 1, true, c->microbatch}].second);
        auto& mine = t[{stage, c->backward, c->microbatch}];
        if (mine != std::make_pair(ready, ready + cost)) {
          mine = {ready, ready + cost};
          moved = true;
        }
        free = mine.second;
      }
    }
  }
  return t;
}

// Near white: the plan's outline (palette::kPipelinePlan, antialiased over a bar); no bar, stripe,
// bubble or label colour of this chart comes close.
bool whitish(uint32_t c) {
  return (c >> 16) >= 200 && ((c >> 8) & 0xff) >= 200 && (c & 0xff) >= 200 && c != 0xFFFFFFFFu &&
         c != paletteRgb(viewer::palette::kText);
}

// Whether the plan bar's outline shows at its left edge (just inside it, above the label) and on
// its top edge (3 px below the lane's top, at its centre).
std::pair<bool, bool> outlineOf(const Png& png, const Dump& d, const Dump::PlanBar& p) {
  const double x0 = d.xOf(double(p.t0)), x1 = d.xOf(double(p.t1));
  const double y = d.laneYOfStage.at(p.stage);
  bool left = false, top = false;
  for (int x = static_cast<int>(x0); x <= static_cast<int>(x0) + 3; ++x)
    left = left || whitish(png.rgb(x, static_cast<int>(y + 7)));
  for (int yy = static_cast<int>(y + 2); yy <= static_cast<int>(y + 5); ++yy)
    top = top || whitish(png.rgb(static_cast<int>((x0 + x1) / 2), yy));
  return {left, top};
}

TEST_CASE("pipeline view: --view-option plan outlines the planned schedule where the plan puts it",
          "[viewer][pipeline][screenshot]") {
  const std::string& db = oneFOneB();
  const std::string png = e2e::scratch().file("pipe-plan.png");
  const Dump d = shoot(db, png, {"--view-option", "plan"});
  const auto spans = computeSpans(db, d.w0, d.w1);
  REQUIRE(spans.size() == 64);
  // The dumped plan is the plan computed from the trace.
  const auto want = planFromTrace(spans, d.stageOfRank, d.w0);
  REQUIRE(d.plan.size() == want.size());
  for (const auto& p : d.plan) {
    INFO("stage " << p.stage << (p.backward ? " B" : " F") << p.microbatch);
    const auto& w = want.at({p.stage, p.backward, p.microbatch});
    CHECK(std::llabs(p.t0 - w.first) <= 4);
    CHECK(std::llabs(p.t1 - w.second) <= 4);
  }
  // On screen: each planned action's outline at its left and top edges with the option, and
  // nothing white there without it.
  const Png with = loadPng(png);
  const std::string plain = e2e::scratch().file("pipe-noplan.png");
  const Dump d0 = shoot(db, plain);
  REQUIRE(d0.xOf(1e6) == Approx(d.xOf(1e6)));  // the same chart geometry
  const Png without = loadPng(plain);
  int shown = 0, absent = 0, wide = 0;
  for (const auto& p : d.plan) {
    if (d.xOf(double(p.t1)) - d.xOf(double(p.t0)) < 12) continue;
    ++wide;
    const auto [l, t] = outlineOf(with, d, p);
    shown += l && t;
    INFO("plan stage " << p.stage << (p.backward ? " B" : " F") << p.microbatch << " x "
                       << d.xOf(double(p.t0)) << ".." << d.xOf(double(p.t1)) << ", chart to "
                       << d.areaX + d.areaW << ": left " << l << ", top " << t);
    CHECK((l && t));
    const auto [l0, t0] = outlineOf(without, d, p);
    absent += !l0 && !t0;
  }
  CHECK(wide == 64);
  CHECK(shown == wide);
  CHECK(absent == wide);
}

TEST_CASE("pipeline view: the chunks of an interleaved schedule are shaded apart",
          "[viewer][pipeline][screenshot]") {
  const std::string db = dryRun("pipe-inter", "interleaved", 2, 8, "20,40");
  const json pl = reportPipeline(db);
  REQUIRE(pl["virtual"] == 2);
  const std::string png = e2e::scratch().file("pipe-inter.png");
  const Dump d = shoot(db, png);
  checkNumbersAgainstReport(d, pl);

  const auto spans = computeSpans(db, d.w0, d.w1);
  REQUIRE(spans.size() == 4 * 8 * 2 * 2);
  const Png img = loadPng(png);
  const Chart chart = sampleChart(img, d, spans, 2);
  INFO(chart.bars.firstMismatch);
  INFO(chart.bubble.firstMismatch);
  CHECK(chart.bars.checked == 128);
  CHECK(chart.bars.matched == chart.bars.checked);
  CHECK(chart.bubble.matched == chart.bubble.checked);
  // The same microbatch and direction on chunk 0 and chunk 1: two colours on screen.
  std::map<std::tuple<int, bool, int>, uint32_t> seen;  // (microbatch, backward, chunk) -> pixel
  for (const Compute& c : spans) {
    const double x = (d.xOf(double(c.start)) + d.xOf(double(c.end))) / 2;
    seen[{c.microbatch, c.backward, c.chunk}] =
        img.rgb(static_cast<int>(x), static_cast<int>(d.laneYOfRank.at(c.rank) + 4));
  }
  int pairs = 0;
  for (const auto& [key, colour] : seen) {
    const auto [mb, bwd, chunk] = key;
    if (chunk != 0 || !seen.count({mb, bwd, 1})) continue;
    ++pairs;
    CHECK(colour != seen.at({mb, bwd, 1}));
  }
  CHECK(pairs == 16);
  // The plan is the order the trainer ran on each stage, chunks included.
  CHECK(d.planOrder == ranOrder(spans, d, true));
}

TEST_CASE("pipeline view: clicking a bar selects its span in the timeline",
          "[viewer][pipeline][script]") {
  const std::string& db = oneFOneB();
  const std::string dump = e2e::scratch().file("pipe-click.txt");
  const std::vector<std::string> args{db, "--view", "pipeline", "--size", "1600x900"};
  std::vector<std::string> shot = args;
  shot.insert(shot.end(),
              {"--screenshot", e2e::scratch().file("pipe-click.png"), "--dump-view", dump});
  runTraceviewOk(shot, e2e::scratch().path());
  const Dump d = readDump(dump);
  // The widest backward of stage 1's rank, from the trace.
  Compute pick;
  for (const Compute& c : computeSpans(db, d.w0, d.w1)) {
    if (c.backward && d.stageOfRank.at(c.rank) == 1 && c.end - c.start > pick.end - pick.start) {
      pick = c;
    }
  }
  REQUIRE(pick.id > 0);
  const int cx = static_cast<int>((d.xOf(double(pick.start)) + d.xOf(double(pick.end))) / 2);
  const int cy = static_cast<int>(d.laneYOfRank.at(pick.rank) + 6);
  // The same window, clicked there by a script (--script): the bar selects its span.
  const auto r = runScript(
      args, {"0 move " + std::to_string(cx) + " " + std::to_string(cy), "+1 click", "+1 settle"},
      e2e::scratch().path(), "pipe-click-script.txt");
  INFO(r.out);
  CHECK(r.out.find("selected span " + std::to_string(pick.id) + " backward") != std::string::npos);
}

#endif
