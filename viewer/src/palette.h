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
constexpr uint32_t kStep = rgba(60, 120, 110);
constexpr uint32_t kStepAlt = rgba(75, 140, 128);
constexpr uint32_t kHistogram = rgba(90, 150, 220);
constexpr uint32_t kError = rgba(240, 110, 100);

// The compare view: run A and run B (strip accents), a slower and a faster difference, the aligned
// step's start and end lines.
constexpr uint32_t kCompareA = rgba(90, 170, 240);
constexpr uint32_t kCompareB = rgba(240, 170, 70);
constexpr uint32_t kCompareSlower = rgba(240, 120, 110);
constexpr uint32_t kCompareFaster = rgba(120, 210, 120);
constexpr uint32_t kCompareAlign = rgba(255, 255, 255, 160);

inline uint32_t category(uint8_t c) {
  return kCategory[c < 9 ? c : 8];
}

}  // namespace tracerun::viewer::palette
