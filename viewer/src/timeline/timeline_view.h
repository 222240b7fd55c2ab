// TimelineView: the first tab, a View like the others: the step strip, the ruler, the rank groups
// with their track rows, flows, find highlights and the range selection, with the Details and
// Find side panels beside it; mouse and keys for zoom, pan and selection. It owns the visible
// window and asks the session's data thread for what that window shows. Not the shell (tabs,
// menu, file picker, status: viewer_app.cpp) and not the selection (the session's).
//
// Sections of timeline_view.cpp: opening and answers · view arithmetic and data requests · the
// frame (step strip, ruler, tracks, flows and highlights) · input · the side panel.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "app/session.h"
#include "app/view.h"
#include "app/views.h"
#include "timeline/find_panel.h"
#include "timeline/track.h"

struct ImDrawList;

namespace tracerun::viewer {

class TimelineView final : public View {
 public:
  explicit TimelineView(Session& session) : s_(session) {}

  const char* word() const override { return kTimelineWord; }
  const char* title() const override { return "Timeline"; }
  void draw(ViewHost& host, float width, float height) override;
  // The timeline's part of settling: its window read, the steps read, no find running.
  bool settled() const override;
  // "area X W T0 T1 ROWH ORIGIN", one "track ID RANK Y H" line per row on screen and, when the
  // session records them, the span boxes and counter columns drawn (track.h's "box" and "column"
  // lines) and elastic restart markers (restart_overlay.h's "instant restart" lines), then
  // "hover TRACK VALUE" when the mouse is over a counter (its tooltip's value) and
  // "restart-hover RANK ROUND" when it is over a restart marker (its tooltip shown).
  std::string dumpText() const override;

  // The trace opened: shows `range` (ns from the trace's start) or the whole run, asks for steps.
  void opened(const std::optional<std::pair<int64_t, int64_t>>& range);
  // Takes this view's parts of the data thread's answer (windows, steps, hover details, find).
  void apply(WorkerOutput& out);
  // Once per frame, after every tab drew: asks for the window on screen when it is not read yet.
  void ensureData();
  // Called at the start of each frame: the primitive count restarts.
  void beginFrame() { primitives_ = 0; }

  void showRange(double t0, double t1, const char* why) { setView(t0, t1, why); }
  void fit(const char* why);
  void gotoSpan(const SpanRef& s);
  void openFind();
  void expandAll() { collapsed_.clear(); }
  void collapseAll();
  std::pair<double, double> range() const { return {viewT0_, viewT1_}; }
  float areaWidth() const { return lastAreaW_; }
  int64_t primitives() const { return primitives_; }
  bool loading() const { return doneGen_ < requestedGen_; }
  double nsPerPx() const;
  const RangeSelection* rangeSelection() const { return rangeSel_ ? &*rangeSel_ : nullptr; }

 private:
  struct RowLayout {
    int64_t track = 0;
    float y = 0, h = 0;
  };

  void setView(double t0, double t1, const char* why);
  void zoomAt(double t, double factor, const char* why);
  std::vector<int64_t> visibleTracks() const;
  float xOf(double t, float areaX, float areaW) const;
  void drawTimeline(float width, float height);
  void drawStepStrip(ImDrawList* dl, float x, float y, float w, float h);
  void drawRuler(ImDrawList* dl, float x, float y, float w, float h);
  void drawTracks(float areaX, float areaW);
  void hoverSpan(const DrawItem& item, const TrackInfo& t);
  void drawFlowsAndHighlights(ImDrawList* dl, float x, float w);
  void handleMouse(float areaX, float areaW, bool hovered);
  void handleKeys();
  void drawSidePanel(float width, float height);

  Session& s_;
  FindPanel find_;
  std::vector<std::unique_ptr<Track>> tracks_;  // one per session track, in the same order
  std::map<int64_t, TrackWindow> windows_;
  std::map<int64_t, int> maxDepth_;  // per span track: the deepest depth seen
  std::set<int> collapsed_;
  std::vector<Step> steps_;     // by rank, then start
  std::map<int, int> stepRow_;  // rank -> its row in the step strip
  bool stepsDone_ = false;

  // the window (ns on the trace axis)
  double viewT0_ = 0, viewT1_ = 1;
  float lastAreaW_ = 1000, areaX_ = 0;
  uint64_t requestedGen_ = 0, doneGen_ = 0;
  LodWindow fetched_;
  std::vector<int64_t> fetchedTracks_;
  bool haveFetched_ = false;
  int64_t primitives_ = 0;

  // hover, drag and the range selection
  std::optional<SpanRef> hovered_;
  std::optional<SpanDetails> hoverDetails_;
  std::vector<RowLayout> rows_;  // last frame's track rows (screen y), for flows and highlights
  std::string boxes_;            // last frame's span boxes (track.h), when the session records them
  std::string hoverValue_;       // last frame's "hover TRACK VALUE" of a counter under the mouse
  float dragStartX_ = 0;
  double dragStartT0_ = 0;
  bool dragging_ = false;
  // Shift+drag: a range selection (view.h), its start (time, screen y) while dragging.
  std::optional<RangeSelection> rangeSel_;
  std::optional<std::pair<double, float>> rangeFrom_;

  int sideTab_ = 0;              // 0 details, 1 find, -1 the user's choice
  uint64_t seenSelections_ = 0;  // the session's selection count last shown
};

}  // namespace tracerun::viewer
