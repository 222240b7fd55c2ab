// CounterTrack and MemoryTrack (track.h): a value per pixel column as min..max lines.
#include <imgui.h>

#include <algorithm>
#include <cstdio>

#include "app/palette.h"
#include "timeline/track.h"

namespace tracerun::viewer {

namespace {
constexpr float kCounterH = 44;
}  // namespace

float CounterTrack::height(int maxDepth, float rowH) const {
  (void)maxDepth;
  (void)rowH;
  return kCounterH;
}

uint32_t CounterTrack::colour() const {
  return palette::kCounterLine;
}

std::string CounterTrack::rangeText(const TrackWindow& w) const {
  char b[96];
  std::snprintf(b, sizeof b, "%.4g .. %.4g", w.lo, w.hi);
  return b;
}

uint32_t MemoryTrack::colour() const {
  return palette::kMemoryLine;
}

std::string MemoryTrack::rangeText(const TrackWindow& w) const {
  char b[96];
  std::snprintf(b, sizeof b, "max %.1f MiB", w.hi / (1024.0 * 1024.0));
  return b;
}

const DrawItem* CounterTrack::draw(TrackCanvas& c, const TrackInfo& t,
                                   const TrackWindow* tw) const {
  (void)t;
  if (tw == nullptr || tw->counter.empty()) return nullptr;
  const float x = c.axis.x, w = c.axis.w, y = c.y, h = c.h;
  const double lo = std::min(0.0, tw->lo), hi = tw->hi > lo ? tw->hi : lo + 1;
  auto yOf = [&](double v) {
    return y + h - 3 - static_cast<float>((v - lo) / (hi - lo)) * (h - 18);
  };
  const uint32_t line = colour();
  float px = -1, py = 0;
  for (const CounterColumn& col : tw->counter) {
    const double tc =
        static_cast<double>(tw->window.t0) + static_cast<double>(col.column) * tw->window.ns_per_px;
    const float cx = std::clamp(c.axis.xOf(tc), x, x + w);
    if (px >= 0) {
      c.dl->AddLine(ImVec2(px, py), ImVec2(cx, py), line);  // held value
      ++c.primitives;
    }
    c.dl->AddLine(ImVec2(cx, yOf(col.min)), ImVec2(cx, yOf(col.max) - 1), line);
    ++c.primitives;
    px = cx;
    py = yOf(col.last);
  }
  if (px >= 0 && px < x + w) {
    c.dl->AddLine(ImVec2(px, py), ImVec2(x + w, py), line);
    ++c.primitives;
  }
  c.dl->AddText(ImVec2(c.label_x, y + 3 + ImGui::GetFontSize()), palette::kTextDim,
                rangeText(*tw).c_str());
  return nullptr;
}

}  // namespace tracerun::viewer
