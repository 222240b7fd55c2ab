// SpanTrack (track.h): the span rows the timeline and the compare strips both draw.
#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "app/palette.h"
#include "timeline/track.h"
#include "tracerun/trace/analysis/gpu.h"

namespace tracerun::viewer {

std::unique_ptr<Track> makeTrack(const TrackInfo& t) {
  if (t.queue_of) return std::make_unique<QueueTrack>();
  if (t.kind == core::TrackKind::kMemory) return std::make_unique<MemoryTrack>();
  if (t.kind == core::TrackKind::kCounter) return std::make_unique<CounterTrack>();
  if (trace::analysis::gpuStreamTrack(t.name)) return std::make_unique<GpuStreamTrack>();
  return std::make_unique<SpanTrack>();
}

LodWindow spanWindow(double t0, double t1, float areaW) {
  const double w = t1 - t0;
  LodWindow lw;
  lw.t0 = static_cast<int64_t>(std::floor(std::max(t0 - w, static_cast<double>(INT64_MIN / 4))));
  lw.t1 = static_cast<int64_t>(std::ceil(std::min(t1 + w, static_cast<double>(INT64_MAX / 4))));
  lw.ns_per_px = std::max(w / std::max(1.0f, areaW), 1e-3);
  lw.min_px = 3;
  return lw;
}

SpanTrack::BoxStyle SpanTrack::style(const DrawItem& item, const TrackCanvas& c) const {
  (void)c;
  if (item.prim.fold) return {palette::kFold, "fold"};
  return {palette::category(item.span.category), "span"};
}

SpanTrack::BoxStyle GpuStreamTrack::style(const DrawItem& item, const TrackCanvas& c) const {
  const auto cat = static_cast<core::Category>(item.span.category);
  if (cat != core::Category::kKernel && cat != core::Category::kMemcpy)
    return SpanTrack::style(item, c);
  const auto kind = trace::analysis::gpuKindOf(cat, c.name(item.span.name));
  if (item.prim.fold) return {palette::gpuKind(static_cast<int>(kind), true), "fold"};
  return {palette::gpuKind(static_cast<int>(kind), false), trace::analysis::gpuKindName(kind)};
}

float SpanTrack::height(int maxDepth, float rowH) const {
  return rowH * static_cast<float>(maxDepth + 1) + 4;
}

const DrawItem* SpanTrack::draw(TrackCanvas& c, const TrackInfo& t, const TrackWindow* w) const {
  if (w == nullptr) return nullptr;
  const TrackAxis& a = c.axis;
  const float rh = c.row_h;
  // Text sits 2 px below a row's top when the row has room for it (the timeline's rows).
  const float textDy = std::clamp(rh - ImGui::GetFontSize() - 4, 0.0f, 2.0f);
  const DrawItem* hit = nullptr;
  float lastX1 = -1e9f;
  int lastDepth = -1;
  for (const DrawItem& item : w->items) {
    const Primitive& p = item.prim;
    if (p.depth >= c.depths) continue;
    float x0 = a.xOf(static_cast<double>(p.start));
    float x1 = a.xOf(static_cast<double>(p.end));
    if (x1 < a.x || x0 > a.x + a.w) continue;
    x0 = std::max(x0, a.x - 1);
    x1 = std::min(std::max(x1, x0 + 1), a.x + a.w + 1);
    // Old primitives drawn at a new zoom can pile into one column: draw one per column and depth.
    if (p.depth == lastDepth && x1 <= lastX1 + 0.5f) continue;
    lastX1 = p.depth == lastDepth ? std::max(x1, lastX1) : x1;
    lastDepth = p.depth;
    const float y0 = c.y + rh * static_cast<float>(p.depth);
    const bool fold = p.fold;
    const BoxStyle st = style(item, c);
    c.dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y0 + std::max(1.0f, rh - 1)), st.fill);
    ++c.primitives;
    if (!fold && c.selected == item.span.id) {
      c.dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x1 + 1, y0 + rh), palette::kSelection, 0, 0, 2);
      ++c.primitives;
    }
    char buf[64];
    const char* text = nullptr;
    if (rh >= 12 && x1 - x0 > 28) {
      if (fold) {
        std::snprintf(buf, sizeof buf, "%" PRId64 " spans", p.count);
        text = buf;
      } else {
        text = c.name(item.span.name).c_str();
      }
      const float tx = std::max(x0, a.x) + 3;
      const ImVec4 clip(tx, y0, std::min(x1, a.x + a.w) - 2, y0 + rh);
      c.dl->AddText(nullptr, 0, ImVec2(tx, y0 + textDy), fold ? palette::kText : palette::kTextDark,
                    text, nullptr, 0, &clip);
      ++c.primitives;
    }
    if (c.boxes) {
      char line[160];
      std::snprintf(line, sizeof line, "box %lld %d %.2f %.2f %s ", static_cast<long long>(t.id),
                    p.depth, x0 - a.x, x1 - a.x, st.kind);
      *c.boxes += line;
      *c.boxes += text ? text : "-";
      *c.boxes += '\n';
    }
    if (c.mouse_here && c.mouse_x >= x0 && c.mouse_x < std::max(x1, x0 + 2) && c.mouse_y >= y0 &&
        c.mouse_y < y0 + rh)
      hit = &item;
  }
  return hit;
}

}  // namespace tracerun::viewer
