// Helpers for traceview's tests under X: reading PNGs, the --dump-layout file, small traces
// written through the real writer, and a private Xvfb with background processes on it.
// Test-only; not part of the viewer.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "run_process.h"

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

}  // namespace tracerun::viewertest
