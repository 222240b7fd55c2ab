// traceview --screenshot under Xvfb: the PNG shows the trace's spans at the pixel columns their
// times map to (colours sampled at positions computed from the reader's spans), and bad input
// ends with one line on stderr and a non-zero exit, never a crash.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>

#include "app/palette.h"
#include "fixture_trace.h"
#include "temp_dir.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;

namespace {

struct Sampled {
  int checked = 0, matched = 0;
  std::string firstMismatch;
};

// For every span on screen that is drawn alone (at least 8 px wide, no other span of its depth
// starting within 4 px before it), the pixel just inside its left edge has its category colour.
Sampled sampleSpans(const Png& png, const Layout& l, const trace::TraceReader& reader) {
  Sampled s;
  const double statusTop = png.h - 40;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    auto row = l.rows.find(t.id);
    if (row == l.rows.end()) continue;
    const auto spans = reader.spans(t.id, static_cast<int64_t>(l.t0), static_cast<int64_t>(l.t1));
    std::map<int, double> lastStartX;
    for (const auto& sp : spans) {
      const double x0 = l.xOf(static_cast<double>(sp.start_ns));
      const double x1 = l.xOf(static_cast<double>(sp.end_ns()));
      const double prev = lastStartX.count(sp.depth) ? lastStartX[sp.depth] : -1e9;
      lastStartX[sp.depth] = std::max(prev, x1);
      const double y = row->second.y + 2 + l.row_h * (sp.depth + 0.5);
      if (x1 - x0 < 8 || x0 < l.area_x + 2 || x1 > l.area_x + l.area_w - 2) continue;
      if (x0 - prev < 4) continue;             // shares pixels with the previous box of its depth
      if (y < 100 || y > statusTop) continue;  // scrolled out of the tracks' view
      const uint32_t want =
          paletteRgb(viewer::palette::category(static_cast<uint8_t>(sp.category)));
      const uint32_t got = png.rgb(static_cast<int>(x0 + 1.5), static_cast<int>(y));
      ++s.checked;
      if (got == want) {
        ++s.matched;
      } else if (s.firstMismatch.empty()) {
        char b[200];
        std::snprintf(b, sizeof b, "span %lld at (%.1f, %.1f): %06x, want %06x",
                      static_cast<long long>(sp.id), x0 + 1.5, y, got, want);
        s.firstMismatch = b;
      }
    }
  }
  return s;
}

}  // namespace

TEST_CASE("a screenshot shows the spans at the columns their times map to",
          "[viewer][screenshot]") {
  testing::TempDir dir("traceview-shot");
  const auto g = makeFixture(dir.file("fx"), 2, 2, 40);
  const auto reader = trace::TraceReader::open(g.merged);
  const auto [a, b] = reader.timeRange();

  for (const char* rangeText : {"", "300000:900000"}) {
    const std::string range = rangeText;
    INFO("range '" << range << "'");
    std::vector<std::string> args = {g.merged,    "--screenshot",  dir.file("shot.png"),  "--size",
                                     "1400x1000", "--dump-layout", dir.file("layout.txt")};
    if (!range.empty()) args.insert(args.end(), {"--range", range});
    runTraceviewOk(args, dir.path.string());
    const Png png = loadPng(dir.file("shot.png"));
    CHECK(png.w == 1400);
    CHECK(png.h == 1000);
    CHECK(png.distinctColours() > 20);  // not blank
    const Layout l = readLayout(dir.file("layout.txt"));
    if (range.empty()) {
      // Fit: the whole run plus 1% on each side.
      CHECK(l.t0 <= static_cast<double>(a));
      CHECK(l.t1 >= static_cast<double>(b));
      CHECK(l.t1 - l.t0 <= 1.03 * static_cast<double>(b - a));
    } else {
      CHECK(l.t0 == Approx(static_cast<double>(a + 300000)));
      CHECK(l.t1 == Approx(static_cast<double>(a + 900000)));
    }
    const Sampled s = sampleSpans(png, l, reader);
    INFO(s.firstMismatch);
    CHECK(s.checked >= 10);
    CHECK(s.matched == s.checked);
  }
}

TEST_CASE("select: outlines the span and fills the details panel", "[viewer][screenshot]") {
  testing::TempDir dir("traceview-select");
  const auto g = makeFixture(dir.file("fx"), 1, 1, 10);
  const auto reader = trace::TraceReader::open(g.merged);
  // The longest root span: easy to see, and its id comes from the reader, not the viewer.
  trace::SpanRow pick;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    for (const auto& sp : reader.spans(t.id, INT64_MIN / 4, INT64_MAX / 4))
      if (sp.depth == 0 && sp.dur_ns > pick.dur_ns) pick = sp;
  }
  REQUIRE(pick.id > 0);
  runTraceviewOk({g.merged, "--screenshot", dir.file("plain.png"), "--size", "1200x800"},
                 dir.path.string());
  const auto r = runTraceviewOk(
      {g.merged, "--screenshot", dir.file("sel.png"), "--size", "1200x800", "--select",
       std::to_string(pick.id), "--dump-layout", dir.file("layout.txt"), "--log-actions"},
      dir.path.string());
  INFO(r.describe());
  CHECK(r.out.find("selected span " + std::to_string(pick.id) + " " + reader.str(pick.name)) !=
        std::string::npos);
  const Png p0 = loadPng(dir.file("plain.png"));
  const Png p1 = loadPng(dir.file("sel.png"));
  const Layout l = readLayout(dir.file("layout.txt"));
  // The outline: white just left of the box.
  const auto row = l.rows.at(pick.track);
  const int y = static_cast<int>(row.y + 2 + l.row_h * 0.5);
  const int x = static_cast<int>(l.xOf(static_cast<double>(pick.start_ns)));
  CHECK(p1.outlineAt(x, y));
  CHECK(!p0.outlineAt(x, y));
  // The details panel (right of the time area) holds much more text than the hint it replaces.
  auto textPixels = [&](const Png& p) {
    int n = 0;
    for (int yy = 60; yy < p.h - 40; ++yy)
      for (int xx = static_cast<int>(l.area_x + l.area_w + 30); xx < p.w; ++xx)
        if ((p.rgb(xx, yy) & 0xFF) > 180) ++n;
    return n;
  };
  CHECK(textPixels(p1) > 3 * textPixels(p0));
}

TEST_CASE("goto: opens zoomed to the span of that rank, selected", "[viewer][screenshot]") {
  testing::TempDir dir("traceview-goto");
  const auto g = makeFixture(dir.file("fx"), 2, 1, 20);
  const auto reader = trace::TraceReader::open(g.merged);
  trace::SpanRow pick;  // a depth-1 span of rank 1 (from the reader)
  for (const auto& t : reader.tracks()) {
    if (t.rank != 1 || t.kind != core::TrackKind::kThread) continue;
    for (const auto& sp : reader.spans(t.id, INT64_MIN / 4, INT64_MAX / 4))
      if (sp.depth == 1 && pick.id == 0) pick = sp;
  }
  REQUIRE(pick.id > 0);
  const auto r = runTraceviewOk(
      {g.merged, "--screenshot", dir.file("goto.png"), "--goto", "1:" + std::to_string(pick.id),
       "--dump-layout", dir.file("layout.txt"), "--log-actions"},
      dir.path.string());
  INFO(r.describe());
  CHECK(r.out.find("selected span " + std::to_string(pick.id)) != std::string::npos);
  const Layout l = readLayout(dir.file("layout.txt"));
  // The span fills the middle third of the view.
  CHECK(l.t0 < static_cast<double>(pick.start_ns));
  CHECK(l.t1 > static_cast<double>(pick.end_ns()));
  CHECK(l.t1 - l.t0 <= 3.0 * std::max<double>(static_cast<double>(pick.dur_ns), 1000) + 20);
  const Png png = loadPng(dir.file("goto.png"));
  const int y = static_cast<int>(l.rows.at(pick.track).y + 2 + l.row_h * 1.5);
  CHECK(png.outlineAt(static_cast<int>(l.xOf(static_cast<double>(pick.start_ns))), y));
  // The same id asked of the wrong rank is not found.
  const auto wrong = runTraceviewXvfb(
      {g.merged, "--screenshot", dir.file("goto.png"), "--goto", "0:" + std::to_string(pick.id)},
      dir.path.string());
  CHECK(wrong.exit_code == 1);
  CHECK(wrong.err.find("no span with id") != std::string::npos);
}

TEST_CASE("bad input: one line on stderr and a non-zero exit, never a crash",
          "[viewer][badinput]") {
  testing::TempDir dir("traceview-bad");
  const std::string png = dir.file("out.png");
  // traceview on FILE ARGS... exits 1 with one line on stderr that holds `text`.
  const auto refused = [&](const std::string& file, const std::vector<std::string>& args,
                           const std::string& text) {
    std::vector<std::string> all = {dir.file(file), "--screenshot", png};
    all.insert(all.end(), args.begin(), args.end());
    const auto r = runTraceviewXvfb(all, dir.path.string());
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    REQUIRE(r.errLines().size() == 1);
    CHECK(r.errLines()[0].find(text) != std::string::npos);
    return r;
  };
  {
    std::ofstream(dir.file("notes.txt")) << "not a trace\n";
    const auto r = refused("notes.txt", {}, "notes.txt");
    INFO(r.describe());
    CHECK(r.exited);
    CHECK(r.errLines()[0].rfind("traceview: ", 0) == 0);
  }
  refused("missing.db", {}, "no such file");
  writeSmallTrace(dir.file("empty.db"), 0);
  refused("empty.db", {}, "no events");
  {
    // One rank, no memory, no counters, no flows, no steps: shown, exit 0, nothing on stderr.
    writeSmallTrace(dir.file("small.db"), 5);
    const auto r = runTraceviewXvfb({dir.file("small.db"), "--screenshot", png}, dir.path.string());
    INFO(r.describe());
    CHECK(r.exit_code == 0);
    CHECK(r.errLines().empty());
    CHECK(loadPng(png).distinctColours() > 10);
  }
  refused("small.db", {"--select", "999999"}, "no span with id 999999");
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"--size", "12"},
                                              {"--range", "5:1"},
                                              {"--goto", "x"},
                                              {"--bogus"}}) {
    std::vector<std::string> args = {dir.file("small.db"), "--screenshot", png};
    args.insert(args.end(), bad.begin(), bad.end());
    const auto r = runTraceviewXvfb(args, dir.path.string());
    INFO(r.describe());
    CHECK(r.exit_code == 2);
    CHECK(r.errLines().size() == 1);
  }
  {
    // A malformed --script line: one line naming the file and the line, exit 1, before a window.
    std::ofstream(dir.file("input.txt")) << "# zoom in\n0 move 100 100\n+1 wheel\n";
    const auto r = runTraceviewXvfb({dir.file("small.db"), "--script", dir.file("input.txt")},
                                    dir.path.string());
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    REQUIRE(r.errLines().size() == 1);
    CHECK(r.errLines()[0] == "traceview: " + dir.file("input.txt") + ":3: expected wheel AMOUNT");
    const auto missing = runTraceviewXvfb({dir.file("small.db"), "--script", dir.file("none.txt")},
                                          dir.path.string());
    CHECK(missing.exit_code == 1);
    REQUIRE(missing.errLines().size() == 1);
    CHECK(missing.errLines()[0].find("none.txt: cannot read the script") != std::string::npos);
  }
  {
    // No display at all.
    const auto r = e2e::runProcess("/usr/bin/env",
                                   {"-u", "DISPLAY", "-u", "WAYLAND_DISPLAY", TRACEVIEW_BIN,
                                    dir.file("small.db"), "--screenshot", png},
                                   dir.path.string());
    INFO(r.describe());
    CHECK(r.exit_code == 1);
    REQUIRE(r.errLines().size() == 1);
    CHECK(r.errLines()[0].find("no display") != std::string::npos);
  }
}
