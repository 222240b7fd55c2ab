// The viewer's colours, all in one place (ImGui's packed ABGR, IM_COL32 order). No logic.
#pragma once

#include <cstdint>

namespace tracerun::viewer::palette {

constexpr uint32_t rgba(uint8_t r, uint8_t g, uint8_t b, uint8_t a = 255) {
  return static_cast<uint32_t>(r) | static_cast<uint32_t>(g) << 8 | static_cast<uint32_t>(b) << 16 |
         static_cast<uint32_t>(a) << 24;
}

// By core::Category: op, backward, user, module, comm, phase, kernel, memcpy, other.
constexpr uint32_t kCategory[] = {
    rgba(78, 140, 210),  rgba(214, 120, 60),  rgba(120, 170, 90),
    rgba(150, 110, 190), rgba(210, 80, 90),   rgba(60, 170, 170),
    rgba(200, 170, 50),  rgba(170, 130, 100), rgba(140, 140, 140),
};
constexpr uint32_t kFold = rgba(110, 110, 125);
constexpr uint32_t kBackground = rgba(28, 29, 33);
constexpr uint32_t kTrackAlt = rgba(34, 35, 40);
constexpr uint32_t kRankHeader = rgba(48, 52, 62);
constexpr uint32_t kText = rgba(230, 230, 235);
constexpr uint32_t kTextDark = rgba(15, 15, 20);
constexpr uint32_t kTextDim = rgba(150, 150, 160);
constexpr uint32_t kRuler = rgba(40, 42, 48);
constexpr uint32_t kTickMajor = rgba(170, 170, 180);
constexpr uint32_t kTickMinor = rgba(90, 90, 100);
constexpr uint32_t kGrid = rgba(60, 62, 70, 120);
constexpr uint32_t kSelection = rgba(255, 255, 255);
constexpr uint32_t kHighlight = rgba(255, 220, 0);
constexpr uint32_t kFlow = rgba(255, 150, 40);
constexpr uint32_t kCounterLine = rgba(120, 200, 120);
constexpr uint32_t kCounterFill = rgba(120, 200, 120, 70);
constexpr uint32_t kMemoryLine = rgba(200, 140, 230);
constexpr uint32_t kQueueLine = rgba(100, 180, 255);  // a GPU stream's queue length
constexpr uint32_t kStep = rgba(60, 120, 110);
constexpr uint32_t kStepAlt = rgba(75, 140, 128);
constexpr uint32_t kHistogram = rgba(90, 150, 220);
constexpr uint32_t kError = rgba(240, 110, 100);
// An elastic restart marker (timeline/restart_overlay.h) and its label's box.
constexpr uint32_t kRestart = rgba(255, 70, 200);
constexpr uint32_t kRestartLabel = rgba(110, 30, 90, 230);

// Pipeline view (pipeline_view.cpp): bars coloured by microbatch (forward full, backward darker
// and hatched, later chunks of an interleaved schedule lighter), idle time as bubble, the plan as
// an outline.
constexpr uint32_t kPipelineMicrobatch[] = {
    rgba(86, 150, 230),  rgba(236, 152, 60), rgba(110, 196, 100), rgba(220, 96, 120),
    rgba(166, 130, 224), rgba(80, 200, 200), rgba(224, 200, 80),  rgba(200, 140, 110),
};
constexpr uint32_t kPipelineBubble = rgba(96, 36, 44);
constexpr uint32_t kPipelinePlan = rgba(255, 255, 255);
constexpr uint32_t kPipelineSelection = rgba(255, 220, 0);
// The step's critical path: a strip in the gap under each bar on it, and its text.
constexpr uint32_t kPipelineCritical = rgba(255, 84, 84);

constexpr uint32_t pipelineBar(int microbatch, bool backward, int chunk, int chunks) {
  const uint32_t c = kPipelineMicrobatch[(microbatch < 0 ? 0 : microbatch) % 8];
  double r = c & 0xff, g = (c >> 8) & 0xff, b = (c >> 16) & 0xff;
  if (chunks > 1 && chunk > 0) {  // lighter toward white, the last chunk 45 % of the way
    const double t = 0.45 * chunk / (chunks - 1);
    r += (255 - r) * t;
    g += (255 - g) * t;
    b += (255 - b) * t;
  }
  const double k = backward ? 0.55 : 1.0;
  return rgba(static_cast<uint8_t>(r * k), static_cast<uint8_t>(g * k),
              static_cast<uint8_t>(b * k));
}
// The stripes over a backward bar of `fill` (pipelineBar(..., true, ...)): the forward colour's
// 30 %, darker than the bar, so forward and backward differ in pattern as well as shade.
constexpr uint32_t pipelineHatch(uint32_t fill) {
  const auto part = [](uint32_t c, int shift) {
    return static_cast<uint8_t>(((c >> shift) & 0xff) * 30 / 55);
  };
  return rgba(part(fill, 0), part(fill, 8), part(fill, 16));
}

// The collectives view: arrival lag from none to the group's scale (dark blue, teal, yellow), the
// mark of the last rank to arrive (a red no lag colour takes), a member absent from the trace.
constexpr uint32_t kCollLagRamp[] = {rgba(40, 60, 120), rgba(40, 160, 150), rgba(245, 220, 80)};
constexpr uint32_t kCollLast = rgba(240, 50, 60);
constexpr uint32_t kCollAbsent = rgba(70, 70, 78);
// Point-to-point receive time: waiting for the send, transferring.
constexpr uint32_t kCollWait = rgba(200, 120, 60);
constexpr uint32_t kCollTransfer = rgba(90, 170, 110);
// The statistics view (stats_view.cpp) and its range selection band on the timeline.
constexpr uint32_t kRangeBand = rgba(90, 150, 220, 60);
constexpr uint32_t kStatsRangeNote = rgba(120, 180, 240);
// The call graph and model tabs (graph_view.cpp): the graph's own colours are the dark theme in
// graph_palette.h (paper, roles, captions); here the hover ring.
constexpr uint32_t kGraphHover = rgba(40, 120, 255);
// The graph tabs' overview: its paper (lighter than the theme's, so its boxes show), border and
// the shown part.
constexpr uint32_t kGraphOverviewPaper = rgba(58, 60, 70);
constexpr uint32_t kGraphOverviewBorder = rgba(150, 150, 162);
constexpr uint32_t kGraphOverviewView = rgba(210, 0, 210);
constexpr uint32_t kGraphOverviewViewFill = rgba(210, 0, 210, 36);
// Memory view: the stacked categories in kStackOrder (parameter, gradient, optimizer state,
// activation, temporary, input, other), the peak marker, the closed-form lines, the chosen time.
constexpr uint32_t kMemoryCategory[] = {
    rgba(86, 132, 214), rgba(226, 140, 60), rgba(150, 96, 200),  rgba(96, 180, 110),
    rgba(214, 86, 96),  rgba(222, 200, 90), rgba(140, 140, 150),
};
constexpr uint32_t kMemoryPeak = rgba(255, 230, 40);
constexpr uint32_t kMemoryClosedForm = rgba(80, 230, 235);
constexpr uint32_t kMemoryLow = rgba(20, 20, 24, 200);
constexpr uint32_t kMemoryCursor = rgba(255, 255, 255);
constexpr uint32_t kMemoryPlot = rgba(36, 38, 44);
// The compare view: run A and run B (strip accents), a slower and a faster difference, the aligned
// step's start and end lines.
constexpr uint32_t kCompareA = rgba(90, 170, 240);
constexpr uint32_t kCompareB = rgba(240, 170, 70);
constexpr uint32_t kCompareSlower = rgba(240, 120, 110);
constexpr uint32_t kCompareFaster = rgba(120, 210, 120);
constexpr uint32_t kCompareAlign = rgba(255, 255, 255, 160);

// GPU activity by HTA's kind (trace/analysis/gpu.h): compute kernels, NCCL communication,
// copies and sets; a GPU stream track's folds in a darker shade of their longest activity's kind.
// The GPU tab's idle parts: host wait, kernel wait, other; idle as a whole.
constexpr uint32_t kGpuKind[] = {rgba(80, 190, 110), rgba(225, 85, 95), rgba(230, 180, 60)};
constexpr uint32_t kGpuKindFold[] = {rgba(45, 120, 70), rgba(150, 55, 62), rgba(150, 115, 35)};
constexpr uint32_t kGpuIdle = rgba(70, 70, 78);
constexpr uint32_t kGpuIdlePart[] = {rgba(90, 140, 220), rgba(150, 120, 200), rgba(95, 95, 105)};
inline uint32_t gpuKind(int k, bool fold) {
  const int i = k >= 0 && k < 3 ? k : 0;
  return fold ? kGpuKindFold[i] : kGpuKind[i];
}

inline uint32_t category(uint8_t c) {
  return kCategory[c < 9 ? c : 8];
}

}  // namespace tracerun::viewer::palette
