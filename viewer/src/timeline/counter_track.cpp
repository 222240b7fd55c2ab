// CounterTrack, MemoryTrack and QueueTrack (track.h): a value per pixel column as min..max lines
// and the value held between columns, and the value under the mouse. Not where the values come
// from (the data thread's TrackWindow) and not the tooltip (the caller's).
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

std::string CounterTrack::valueText(double v) const {
  char b[64];
  std::snprintf(b, sizeof b, "%.6g", v);
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

std::string MemoryTrack::valueText(double v) const {
  char b[64];
  std::snprintf(b, sizeof b, "%.3f MiB", v / (1024.0 * 1024.0));
  return b;
}

uint32_t QueueTrack::colour() const {
  return palette::kQueueLine;
}

std::string QueueTrack::rangeText(const TrackWindow& w) const {
  char b[96];
  std::snprintf(b, sizeof b, "queue, max %.0f", w.hi);
  return b;
}

std::string QueueTrack::valueText(double v) const {
  char b[64];
  std::snprintf(b, sizeof b, "%.0f queued", v);
  return b;
}

// The value held at the mouse: the last value of the last column at or left of it; when the
// mouse's own pixel column holds changes, the range they span too.
std::string CounterTrack::hoverText(const TrackCanvas& c, const TrackWindow& w) const {
  const CounterColumn* at = nullptr;
  float atX = 0;
  for (const CounterColumn& col : w.counter) {
    const double tc =
        static_cast<double>(w.window.t0) + static_cast<double>(col.column) * w.window.ns_per_px;
    const float cx = c.axis.xOf(tc);
    if (cx > c.mouse_x) break;
    at = &col;
    atX = cx;
  }
  if (at == nullptr) return {};
  std::string s = valueText(at->last);
  if (c.mouse_x - atX < 1 && at->min != at->max)
    s += " (" + valueText(at->min) + " .. " + valueText(at->max) + " in this pixel)";
  return s;
}

const DrawItem* CounterTrack::draw(TrackCanvas& c, const TrackInfo& t,
                                   const TrackWindow* tw) const {
  if (tw == nullptr || tw->counter.empty()) return nullptr;
  const float x = c.axis.x, w = c.axis.w, y = c.y, h = c.h;
  const double lo = std::min(0.0, tw->lo), hi = tw->hi > lo ? tw->hi : lo + 1;
  auto yOf = [&](double v) {
    return y + h - 3 - static_cast<float>((v - lo) / (hi - lo)) * (h - 18);
  };
  const uint32_t line = colour();
  float px = -1, py = 0;
  char b[192];
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
    if (c.boxes != nullptr && c.axis.xOf(tc) >= x && c.axis.xOf(tc) <= x + w) {
      std::snprintf(b, sizeof b, "column %lld %.2f %.17g %.17g %.17g %.17g\n",
                    static_cast<long long>(t.id), cx - x, col.first, col.min, col.max, col.last);
      *c.boxes += b;
    }
  }
  // The last value is held to the right edge, or to its rank's end when a later attempt followed.
  const float end = t.held_until_ns == INT64_MAX
                        ? x + w
                        : std::clamp(c.axis.xOf(static_cast<double>(t.held_until_ns)), x, x + w);
  if (px >= 0 && px < end) {
    c.dl->AddLine(ImVec2(px, py), ImVec2(end, py), line);
    ++c.primitives;
  }
  c.dl->AddText(ImVec2(c.label_x, y + 3 + ImGui::GetFontSize()), palette::kTextDim,
                rangeText(*tw).c_str());
  if (c.mouse_here && c.mouse_y >= y && c.mouse_y < y + h) c.hover = hoverText(c, *tw);
  return nullptr;
}

}  // namespace tracerun::viewer
