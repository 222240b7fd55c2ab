// One real traceview window on a private Xvfb, driven by xdotool like a user: open a trace, zoom
// with the wheel, click a span; the viewer logs that span selected (--log-actions) and an F12
// screenshot shows its outline and details panel.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>
#include <tuple>

#include "fixture_trace.h"
#include "temp_dir.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;

namespace {

std::string lastScreenshot(const std::string& out, size_t from) {
  static const std::regex re("saved screenshot (\\S+)");
  std::smatch m;
  const std::string tail = out.substr(from);
  std::string last;
  for (auto it = std::sregex_iterator(tail.begin(), tail.end(), re); it != std::sregex_iterator();
       ++it)
    last = (*it)[1];
  return last;
}

}  // namespace

TEST_CASE("a real window: wheel zoom, click a span, it is selected and detailed",
          "[viewer][window]") {
  testing::TempDir dir("traceview-window");
  const auto g = makeFixture(dir.file("fx"), 2, 2, 30);
  const auto reader = trace::TraceReader::open(g.merged);
  const std::string layoutFile = dir.file("layout.txt");

  const ViewerWindow view(dir.path.string(),
                          {g.merged, "--size", "1400x900", "--dump-layout", layoutFile});
  size_t at = view.opened();
  INFO(view.logs());

  // Zoom in twice with the wheel over the middle of rank 0's first thread.
  Layout l = readLayout(layoutFile);
  int64_t mainTrack = 0;
  for (const auto& t : reader.tracks())
    if (t.rank == 0 && t.kind == core::TrackKind::kThread && mainTrack == 0) mainTrack = t.id;
  REQUIRE(l.rows.count(mainTrack));
  const int mx = static_cast<int>(l.area_x + l.area_w * 0.3);
  const int my = static_cast<int>(l.rows[mainTrack].y + 4);
  view.xdotool({"mousemove", std::to_string(mx), std::to_string(my)});
  view.xdotool({"click", "4"});
  at = view.waitFor("wheel zoom in", 20, at);
  REQUIRE(at != std::string::npos);
  view.xdotool({"click", "4"});
  at = view.waitFor("wheel zoom in", 20, at);
  REQUIRE(at != std::string::npos);
  REQUIRE(view.waitFor("settled", 30, at) != std::string::npos);
  const Layout zoomed = readLayout(layoutFile);
  CHECK(zoomed.t1 - zoomed.t0 < 0.7 * (l.t1 - l.t0));  // two notches of 0.8
  // The time under the cursor stayed under the cursor.
  const double tBefore = l.t0 + (mx - l.area_x) / l.area_w * (l.t1 - l.t0);
  const double tAfter = zoomed.t0 + (mx - zoomed.area_x) / zoomed.area_w * (zoomed.t1 - zoomed.t0);
  CHECK(std::abs(tAfter - tBefore) < (zoomed.t1 - zoomed.t0) / zoomed.area_w * 2);

  // A screenshot before clicking (the pointer off the timeline, as for the one after: a hover
  // tooltip whose details arrive late could reach into the panel), then click the widest root
  // span of that track on screen.
  view.xdotool({"mousemove", "300", "895"});
  view.press("F12");
  const size_t shotAt = view.waitFor("saved screenshot", 20, at);
  REQUIRE(shotAt != std::string::npos);
  const std::string before = lastScreenshot(view.out(), at);
  trace::SpanRow pick;
  double bestW = 0;
  for (const auto& sp :
       reader.spans(mainTrack, static_cast<int64_t>(zoomed.t0), static_cast<int64_t>(zoomed.t1))) {
    const double x0 = std::max(zoomed.xOf(static_cast<double>(sp.start_ns)), zoomed.area_x);
    const double x1 =
        std::min(zoomed.xOf(static_cast<double>(sp.end_ns())), zoomed.area_x + zoomed.area_w);
    if (sp.depth == 0 && x1 - x0 > bestW) {
      bestW = x1 - x0;
      pick = sp;
    }
  }
  REQUIRE(bestW > 20);
  const double px0 = std::max(zoomed.xOf(static_cast<double>(pick.start_ns)), zoomed.area_x);
  const double px1 =
      std::min(zoomed.xOf(static_cast<double>(pick.end_ns())), zoomed.area_x + zoomed.area_w);
  const int cx = static_cast<int>((px0 + px1) / 2);
  const int cy = static_cast<int>(zoomed.rows.at(mainTrack).y + 2 + zoomed.row_h * 0.5);
  view.xdotool({"mousemove", std::to_string(cx), std::to_string(cy)});
  view.xdotool({"click", "1"});
  const std::string expect =
      "selected span " + std::to_string(pick.id) + " " + reader.str(pick.name);
  at = view.waitFor(expect, 20, shotAt);
  REQUIRE(at != std::string::npos);
  REQUIRE(view.waitFor("settled", 30, at) != std::string::npos);
  // Move the pointer off the timeline so no tooltip covers the panel, then take the screenshot.
  view.xdotool({"mousemove", "300", "895"});
  view.press("F12");
  const size_t shot2 = view.waitFor("saved screenshot", 20, at);
  REQUIRE(shot2 != std::string::npos);
  const std::string after = lastScreenshot(view.out(), at);
  REQUIRE(!before.empty());
  REQUIRE(!after.empty());
  const Png p0 = loadPng(dir.file(before));
  const Png p1 = loadPng(dir.file(after));
  // The outline left of the box, and the details panel full of text.
  if (zoomed.xOf(static_cast<double>(pick.start_ns)) > zoomed.area_x + 3) {
    const int ox = static_cast<int>(zoomed.xOf(static_cast<double>(pick.start_ns)));
    CHECK(p1.outlineAt(ox, cy));
    CHECK(!p0.outlineAt(ox, cy));
  }
  // The side panel's text: before the click it holds the three-line help, after it the details
  // (name, category, rank, times, shapes, parents, children...). Counted as bright pixels and as
  // pixel rows holding any: the rows do not depend on how long each line happens to be.
  auto textPixels = [&](const Png& p) {
    int n = 0;
    for (int yy = 60; yy < p.h - 40; ++yy)
      for (int xx = static_cast<int>(zoomed.area_x + zoomed.area_w + 30); xx < p.w; ++xx)
        if ((p.rgb(xx, yy) & 0xFF) > 180) ++n;
    return n;
  };
  auto textRows = [&](const Png& p) {
    int n = 0;
    for (int yy = 60; yy < p.h - 40; ++yy) {
      for (int xx = static_cast<int>(zoomed.area_x + zoomed.area_w + 30); xx < p.w; ++xx) {
        if ((p.rgb(xx, yy) & 0xFF) > 180) {
          ++n;
          break;
        }
      }
    }
    return n;
  };
  CHECK(textPixels(p1) > 2 * textPixels(p0));
  CHECK(textRows(p1) > 2 * textRows(p0));
  // Find (Ctrl+F): every match across ranks, counted by brute force over the reader's spans; Enter
  // again goes to the second match in time order.
  std::vector<trace::SpanRow> want;
  for (const auto& t : reader.tracks()) {
    for (const auto& sp : reader.spans(t.id, INT64_MIN / 4, INT64_MAX / 4))
      if (reader.str(sp.name).find("aten::mm") != std::string::npos) want.push_back(sp);
  }
  std::sort(want.begin(), want.end(), [](const trace::SpanRow& a, const trace::SpanRow& b) {
    return std::tie(a.start_ns, a.track, a.id) < std::tie(b.start_ns, b.track, b.id);
  });
  REQUIRE(want.size() >= 2);
  view.xdotool({"mousemove", "600", "400"});
  view.press("ctrl+f");
  const size_t opened = view.waitFor("find opened", 20, shot2);
  REQUIRE(opened != std::string::npos);
  // The box takes the focus in a later frame; characters typed before that would be dropped.
  REQUIRE(view.waitFor("find focused", 20, opened) != std::string::npos);
  view.xdotool({"type", "--delay", "30", "aten::mm"});
  const size_t typed = view.out().size();
  view.press("Return");
  at = view.waitFor("find 'aten::mm': " + std::to_string(want.size()) + " matches", 30, shot2);
  CHECK(at != std::string::npos);
  if (at != std::string::npos) {
    // Enter gives the box up and the box takes the keyboard back in a later frame: Enter again
    // once it has (a key that arrives before is not the box's).
    const bool refocused = view.waitFor("find focused", 20, typed) != std::string::npos;
    INFO("stdout after find:\n" << view.out());
    REQUIRE(refocused);
    view.press("Return");
    const std::string next = "selected span " + std::to_string(want[1].id) + " aten::mm";
    if (view.waitFor(next, 20, at) == std::string::npos) {
      FAIL_CHECK("no '" << next << "' after Enter again; stdout now:\n" << view.out());
    }
  }
  // Keep the pictures for a person to look at when the test fails.
  std::error_code ec;
  std::filesystem::copy_file(dir.file(after),
                             std::filesystem::temp_directory_path() / "traceview-window-test.png",
                             std::filesystem::copy_options::overwrite_existing, ec);
  CHECK(view.running());
}
