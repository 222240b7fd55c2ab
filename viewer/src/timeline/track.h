// Track: one row kind of the timeline (Tracy's timeline items): a thread's or stream's spans, a
// counter, a rank's memory, a GPU stream's queue length. Each kind is one class behind this
// interface, made by makeTrack(); adding a kind (a GPU stream track, say) is one class and one line
// there. A track draws one frame's window of its data (TrackWindow, from the data thread) into the
// rectangle it is given and reports the span under the mouse; what a click or a tooltip does is its
// caller's (timeline_view.cpp, compare_view.cpp). Reads no trace and keeps no state between frames.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "data/data_worker.h"

struct ImDrawList;

namespace tracerun::viewer {

// The time axis of a track's rectangle: ns on the trace axis [t0, t1] across [x, x + w] pixels.
struct TrackAxis {
  double t0 = 0, t1 = 1;
  float x = 0, w = 1;
  float xOf(double t) const { return x + static_cast<float>((t - t0) / (t1 - t0) * w); }
};

// What a track draws with in one frame.
struct TrackCanvas {
  ImDrawList* dl = nullptr;
  TrackAxis axis;
  float y = 0, h = 0;    // the row's rectangle (y down); span depth d is at y + row_h * d
  float row_h = 0;       // one span depth's height
  int depths = 1 << 30;  // span depths drawn (deeper ones are left out)
  float label_x = 0;     // where a counter writes its value range (the label gutter)
  std::function<const std::string&(core::StringId)> name;
  int64_t selected = -1;  // the selected span's id, outlined (-1: none)
  float mouse_x = -1e9f, mouse_y = -1e9f;
  bool mouse_here = false;  // the mouse is over this row's window
  int64_t primitives = 0;   // grows with every box, line and label drawn
  // When set, one line per span box drawn: "box TRACK DEPTH X0 X1 KIND LABEL" (x from axis.x,
  // KIND span|fold, on a GPU stream track compute|comm|memory for a kernel, copy or set; LABEL
  // the text drawn or "-"): what the timeline and the compare strips dump so that tests can
  // hold them equal. A counter adds one line per pixel column it draws: "column TRACK X FIRST
  // MIN MAX LAST" (X from axis.x, the values it enters with, spans and leaves with).
  std::string* boxes = nullptr;
  // Set by a counter when the mouse is over its row: its value there, for the caller's tooltip.
  std::string hover;
};

class Track {
 public:
  virtual ~Track() = default;
  // The row's height in pixels for a track whose deepest span depth is `maxDepth`.
  virtual float height(int maxDepth, float rowH) const = 0;
  // Draws `w` (may be null: nothing read yet) into the canvas. Returns the item under the mouse
  // (span tracks) or null.
  virtual const DrawItem* draw(TrackCanvas& c, const TrackInfo& t, const TrackWindow* w) const = 0;
};

// What to ask the data thread for to draw [t0, t1] (ns) across `areaW` pixels: one screen of
// margin on each side (a pan shows data at once while the next answer comes), folds under 3 px.
// The timeline and the compare strips ask alike, so the same window gets the same boxes.
LodWindow spanWindow(double t0, double t1, float areaW);

// The track for `t`'s kind: a GPU stream's queue, counter, memory, a GPU stream, or spans
// (threads, async tracks, other streams).
std::unique_ptr<Track> makeTrack(const TrackInfo& t);

// A thread's (or stream's) spans: one box per primitive at its depth, a fold drawn in the fold
// colour and labelled "N spans", the selection outlined, names where they fit.
class SpanTrack : public Track {
 public:
  float height(int maxDepth, float rowH) const override;
  const DrawItem* draw(TrackCanvas& c, const TrackInfo& t, const TrackWindow* w) const override;

 protected:
  // A box's colour and its KIND word in the box dump: by category; folds in the fold colour.
  struct BoxStyle {
    uint32_t fill = 0;
    const char* kind = "span";
  };
  virtual BoxStyle style(const DrawItem& item, const TrackCanvas& c) const;
};

// A GPU stream ("cuda:D stream S", trace/analysis/gpu.h's gpuStreamTrack): kernels, copies and
// sets coloured by HTA's kind (compute, NCCL communication, memory, gpuKindOf), folds in a darker
// shade of their longest activity's kind (so a zoomed-out stream still says what kept it busy);
// other spans on it (synchronisations) by category.
class GpuStreamTrack final : public SpanTrack {
 protected:
  BoxStyle style(const DrawItem& item, const TrackCanvas& c) const override;
};

// A counter: per pixel column a min..max line and the held last value, its range in the gutter;
// under the mouse, the value held there (and the range its pixel column spans) in c.hover.
class CounterTrack : public Track {
 public:
  float height(int maxDepth, float rowH) const override;
  const DrawItem* draw(TrackCanvas& c, const TrackInfo& t, const TrackWindow* w) const override;

 protected:
  virtual uint32_t colour() const;
  virtual std::string rangeText(const TrackWindow& w) const;
  virtual std::string valueText(double v) const;

 private:
  std::string hoverText(const TrackCanvas& c, const TrackWindow& w) const;
};

// A rank's memory in use: a counter in the memory colour, its maximum in MiB.
class MemoryTrack final : public CounterTrack {
 protected:
  uint32_t colour() const override;
  std::string rangeText(const TrackWindow& w) const override;
  std::string valueText(double v) const override;
};

// A GPU stream's queue length (TrackInfo::queue_of, gpuQueueLength): activities launched and not
// yet started, a step line in the queue colour, its maximum in the window in the gutter.
class QueueTrack final : public CounterTrack {
 protected:
  uint32_t colour() const override;
  std::string rangeText(const TrackWindow& w) const override;
  std::string valueText(double v) const override;
};

}  // namespace tracerun::viewer
