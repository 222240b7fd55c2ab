// Helpers for traceview's tests under X: reading PNGs, the --dump-layout file, small traces
// written through the real writer (and the fixture's, gpttrain's), the report's JSON, scripted
// input (--script), a private Xvfb with background processes on it and a real window driven by
// xdotool, and a brute-force replay of memory events. Test-only; not part of the viewer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixture_trace.h"
#include "run_process.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewertest {

struct Png {
  int w = 0, h = 0;
  std::vector<unsigned char> rgba;
  // 0xRRGGBB of pixel (x, y), or 0xFFFFFFFF outside.
  uint32_t rgb(int x, int y) const;
  size_t distinctColours() const;
  // A near-white pixel (every channel >= 200) in columns [x - 3, x + 1] of row y: the selection's
  // outline (antialiased, so not always pure white) at a box's left edge x.
  bool outlineAt(int x, int y) const;
};
Png loadPng(const std::string& path);  // REQUIREs success

// --dump-layout: the time area and each track row (screen pixels).
struct Layout {
  double area_x = 0, area_w = 0, t0 = 0, t1 = 0, row_h = 0;
  int64_t origin = 0;
  struct Row {
    int rank = 0;
    double y = 0, h = 0;
  };
  std::map<int64_t, Row> rows;
  struct Tab {
    double x = 0, y = 0, w = 0, h = 0;
  };
  std::map<std::string, Tab> tabs;  // by --view word: the tab buttons
  double xOf(double t) const { return area_x + (t - t0) / (t1 - t0) * area_w; }
};
Layout readLayout(const std::string& path);  // REQUIREs success

uint32_t paletteRgb(uint32_t imguiColour);  // palette's ABGR → 0xRRGGBB

// traceview ARGS on a private Xvfb of its own (screen 1920x1080x24).
e2e::ProcessResult runTraceviewXvfb(const std::vector<std::string>& args, const std::string& dir);
// The same, REQUIREd to exit 0 (the run described when it does not).
e2e::ProcessResult runTraceviewOk(const std::vector<std::string>& args, const std::string& dir);

// traceview ARGS --log-actions --script FILE: the script's lines (viewer/src/drivers/script.h, one
// event a line) written to FILE in `dir`, replayed in a hidden window on a private Xvfb, REQUIREd
// to exit 0. No xdotool and no sleeps: for the GUI tests where timing is not the point.
e2e::ProcessResult runScript(const std::vector<std::string>& args,
                             const std::vector<std::string>& lines, const std::string& dir,
                             const std::string& file = "script.txt");

// `tracerun report --json EXTRA... DB`, REQUIREd to succeed, parsed.
nlohmann::json reportJson(const std::string& db, const std::vector<std::string>& extra = {});

// The fixture trace (fixture_trace.h) written in DIR: `ranks` ranks of `threads` threads with
// `roots` root spans each (the other options their defaults), merged.
fixture::Generated makeFixture(const std::string& dir, int ranks, int threads, int roots);

#ifdef GPTTRAIN_BIN
// `tracerun LAUNCHER --status off -o DB -- gpttrain GPT` (e2e::runGpttrain), REQUIREd to succeed.
e2e::ProcessResult traceGpttrain(const std::string& db, const std::vector<std::string>& launcher,
                                 const std::vector<std::string>& gpt);
// The same into e2e::scratch()'s NAME.db, run once per test process (a later call finds the file).
std::string scratchGpttrain(const std::string& name, const std::vector<std::string>& launcher,
                            const std::vector<std::string>& gpt);
#endif

// A trace with `spans` root spans on one thread of one rank (no memory, no counters, no flows);
// 0 spans: an empty (but valid) trace.
void writeSmallTrace(const std::string& path, int spans);

// A private X server (Xvfb :N) for a test; killed at the end.
class XServer {
 public:
  XServer();
  ~XServer();
  XServer(const XServer&) = delete;
  XServer& operator=(const XServer&) = delete;
  std::string display() const { return ":" + std::to_string(number_); }

 private:
  int number_ = 0;
  pid_t pid_ = -1;
};

// A program running in the background with DISPLAY set, cwd `dir`, stdout/stderr in files.
class Background {
 public:
  Background(const std::string& display, const std::string& dir,
             const std::vector<std::string>& argv);
  ~Background();  // SIGTERM, then waits
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;
  std::string out() const;
  std::string err() const;
  // Waits up to `seconds` for stdout to contain `text` (after `from` characters); returns the
  // position just past it, or npos.
  size_t waitFor(const std::string& text, double seconds, size_t from = 0) const;
  bool running() const;

 private:
  pid_t pid_ = -1;
  std::string outPath_, errPath_;
};

// traceview ARGS --log-actions in a real window on a private Xvfb, cwd `dir`, driven by xdotool.
// The constructor waits (60 s at most) for its first complete frame and REQUIREs it.
class ViewerWindow {
 public:
  ViewerWindow(const std::string& dir, const std::vector<std::string>& args);
  ViewerWindow(const ViewerWindow&) = delete;
  ViewerWindow& operator=(const ViewerWindow&) = delete;
  size_t opened() const { return opened_; }  // stdout's position past "first complete frame"
  size_t waitFor(const std::string& text, double seconds, size_t from = 0) const {
    return view_.waitFor(text, seconds, from);
  }
  std::string out() const { return view_.out(); }
  std::string logs() const;  // its stdout and stderr so far, for test messages
  bool running() const { return view_.running(); }
  void xdotool(const std::vector<std::string>& args) const;  // REQUIREs exit 0
  // A key (or chord, "ctrl+f") held until the viewer logs that a frame saw it go down, then
  // released until one saw it go up: ImGui 1.86 reads keys as held-down state once per frame, so a
  // press and release inside one frame (xdotool key) can go unseen, and so can a release and the
  // next press.
  void press(const std::string& key) const;

 private:
  std::string dir_;
  XServer x_;
  Background view_;
  size_t opened_ = 0;
};

// The levels (memory_live.h) after each event of one device, replayed straight from
// TraceReader::memory with the given categories (a rank's, in allocation order), without
// memory_live's code: (ts, levels) in event order, the ends and starts applied in trace order.
struct MemoryStep {
  int64_t ts;
  trace::analysis::Levels levels;
};
std::vector<MemoryStep> replayLevels(const trace::TraceReader& reader, int rank, int type,
                                     int index, const std::vector<core::MemoryCategory>& cats);
// The series' W columns over [t0, t1] against the steps: each column's min/max levels over
// [c0, c1), from the state carried in and the states after the column's events.
void checkMemoryColumns(const trace::analysis::MemorySeries& s,
                        const std::vector<MemoryStep>& steps, double t0, double t1, size_t w);

}  // namespace tracerun::viewertest
