// Viewer: the traceview window's state and its per-frame ImGui code (timeline with rank groups,
// ruler, step strip, details, find, file picker). Knows nothing of GLFW windows or OpenGL: main.cpp
// owns those. All trace data arrives from the DataWorker; no frame waits on SQLite.
//
// Sections of viewer_app.cpp: options and logging · opening and worker results · view arithmetic
// and data requests · input · the timeline (step strip, ruler, rank groups, tracks, flows,
// highlights) · the side panel (details, find) · the file picker · the status line.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "data_worker.h"
#include "recent_files.h"
#include "view.h"

struct ImDrawList;

namespace tracerun::viewer {

struct ViewerOptions {
  std::string path;                                  // "" = start with the file picker
  std::optional<std::pair<int64_t, int64_t>> range;  // --range, ns from the trace's start
  std::optional<int64_t> select;                     // --select SPAN_ID
  std::optional<std::pair<int, int64_t>> go;         // --goto RANK:SPAN_ID
  bool log_actions = false;
  bool headless = false;                  // --screenshot: settle, then stop
  std::string view = "timeline";          // --view: the tab in front at open (views.h's words)
  std::string compare;                    // --compare: the second trace of the compare view
  std::vector<std::string> view_options;  // --view-option: words of the views' options()
  std::string recent_file = RecentFiles::location();
};

class Viewer : private ViewHost {
 public:
  // `wake` is called from the data thread when results are ready (glfwPostEmptyEvent).
  Viewer(ViewerOptions options, std::function<void()> wake);
  ~Viewer() override;

  // Builds one ImGui frame covering the whole display. Call between NewFrame and Render.
  void frame();
  // True once the trace is open, every requested query has been answered and applied, and the
  // command-line selection/goto is resolved: what a screenshot waits for.
  bool settled() const;
  // The problem that keeps the trace from being shown ("" when none): not a trace, no events.
  const std::string& problem() const { return problem_; }
  // Primitives (boxes, lines, labels) the timeline submitted in the last frame.
  int64_t primitivesLastFrame() const { return primitives_; }
  bool wantsQuit() const { return quit_; }
  // F12 asks for a screenshot of the window; main takes it after rendering. Resets the request.
  bool takeScreenshotRequest() {
    const bool r = screenshotKey_;
    screenshotKey_ = false;
    return r;
  }
  // The last frame's geometry, for tests and scripts (--dump-layout): "area X W T0 T1 ROWH ORIGIN"
  // (screen pixels; ns on the trace axis; ORIGIN is the trace's first time), one
  // "track ID RANK Y H" line per track row on screen and one "tab WORD X Y W H" per tab button.
  std::string layoutText() const;
  // Shows [t0, t1] (ns on the trace axis): the benchmark's scripted sweep.
  void showRange(double t0, double t1) { setView(t0, t1, nullptr); }
  std::pair<int64_t, int64_t> traceRange() const {
    return info_ ? info_->range : std::pair<int64_t, int64_t>{0, 0};
  }
  float timeAreaWidth() const { return lastAreaW_; }
  void log(const std::string& line) const override;
  // The tab in front: its --view word, and what it shows as text (View::dumpText; for the
  // timeline, layoutText()).
  std::string activeViewWord() const;
  // Brings the tab of `word` (views.h) to the front in the next frame; false when there is no
  // such tab. settled() then waits for it.
  bool showView(const std::string& word);
  std::string activeViewText() const;

 private:
  // ViewHost: what the tabs beside the timeline may ask (view.h).
  const std::string& tracePath() const override { return path_; }
  const OpenResult& trace() const override { return *info_; }
  const std::string& name(core::StringId id) const override;
  void selectSpan(int64_t id, bool centre) override;
  std::optional<int64_t> selectedSpan() const override;
  std::pair<double, double> timelineRange() const override { return {viewT0_, viewT1_}; }
  void showTimeRange(double t0, double t1) override { setView(t0, t1, "view"); }
  void showTimeline() override { requestTab_ = kTimelineTab; }
  std::function<void()> waker() const override { return wake_; }
  const RangeSelection* rangeSelection() const override {
    return rangeSel_ ? &*rangeSel_ : nullptr;
  }
  const std::string& comparePath() const override { return options_.compare; }
  bool viewOption(const std::string& word) const override {
    for (const auto& w : options_.view_options)
      if (w == word) return true;
    return false;
  }

  struct SpanTrackState {
    int max_depth = 0;
  };
  struct RowLayout {
    int64_t track = 0;
    float y = 0, h = 0;
  };

  // opening and results
  void open(const std::string& path);
  void applyResults();
  // view arithmetic and data requests
  double nsPerPx() const;
  void setView(double t0, double t1, const char* why);
  void fit(const char* why);
  void zoomAt(double t, double factor, const char* why);
  void ensureData();
  std::vector<int64_t> visibleTracks() const;
  // selection
  void select(const SpanRef& s, const char* how);
  void gotoSpan(const SpanRef& s);
  void gotoMatch(size_t i);
  // drawing
  void drawMenu();
  void drawTimeline(float width, float height);
  void drawStepStrip(ImDrawList* dl, float x, float y, float w, float h);
  void drawRuler(ImDrawList* dl, float x, float y, float w, float h);
  void drawTracks(float areaX, float areaW);
  void drawSpanTrack(ImDrawList* dl, const TrackInfo& t, float x, float y, float w);
  void drawCounterTrack(ImDrawList* dl, const TrackInfo& t, float x, float y, float w, float h);
  void drawFlowsAndHighlights(ImDrawList* dl, float x, float w);
  void handleTimelineInput(float areaX, float areaW, bool hovered);
  void drawSidePanel(float width, float height);
  void drawDetails();
  void drawFind();
  void drawPicker(bool inlinePanel);
  void drawStatus();
  void drawMessage(const std::string& text, uint32_t colour);
  void drawTabs(float width, float height);
  float xOf(double t, float areaX, float areaW) const;

  ViewerOptions options_;
  std::function<void()> wake_;
  RecentFiles recent_;
  std::unique_ptr<DataWorker> worker_;

  // the open trace
  std::string path_;
  std::optional<OpenResult> info_;
  std::string problem_;
  std::string notice_;  // one rank, no memory data...
  std::map<int64_t, TrackWindow> windows_;
  std::map<int64_t, SpanTrackState> trackState_;
  std::set<int> collapsed_;
  std::vector<Step> steps_;     // by rank, then start
  std::map<int, int> stepRow_;  // rank -> its row in the step strip
  bool stepsDone_ = false;

  // the view (ns on the trace axis)
  double viewT0_ = 0, viewT1_ = 1;
  float lastAreaW_ = 1000;
  uint64_t requestedGen_ = 0, doneGen_ = 0;
  LodWindow fetched_;
  std::vector<int64_t> fetchedTracks_;
  bool haveFetched_ = false;
  int64_t primitives_ = 0;

  // selection and hover
  std::optional<SpanRef> selected_;
  std::optional<SpanDetails> details_;
  std::optional<SpanRef> hovered_;
  std::optional<SpanDetails> hoverDetails_;
  bool pendingById_ = false;
  std::vector<RowLayout> rows_;  // last frame's track rows (screen y), for flows and highlights
  float dragStartX_ = 0;
  double dragStartT0_ = 0;
  bool dragging_ = false;
  // Shift+drag: a range selection (view.h), its start (time, screen y) while dragging.
  std::optional<RangeSelection> rangeSel_;
  std::optional<std::pair<double, float>> rangeFrom_;

  // find
  bool findOpen_ = false, focusFind_ = false;
  char findText_[256] = {};
  std::optional<FindResult> find_;
  bool findPending_ = false;
  size_t findIndex_ = 0;
  int highlightBin_ = -1;
  int64_t highlightLo_ = 0, highlightHi_ = 0;
  int sideTab_ = 0;  // 0 details, 1 find

  // file picker
  bool pickerOpen_ = false;
  std::string pickerDir_;
  char pickerPath_[1024] = {};

  // the tabs beside the timeline (views.h); index -1 is the timeline
  static constexpr int kTimelineTab = -1, kNoRequest = -2;
  std::vector<std::unique_ptr<View>> views_;
  int activeTab_ = kTimelineTab;
  int requestTab_ = kNoRequest;   // applied in the next frame (ImGui shows it one frame later)
  int wantedTab_ = kTimelineTab;  // --view: settled() waits until it is in front
  struct TabRect {
    const char* word = nullptr;
    float x = 0, y = 0, w = 0, h = 0;
  };
  std::vector<TabRect> tabRects_;  // last frame's tab buttons (--dump-layout)

  bool quit_ = false;
  bool screenshotKey_ = false;
  float areaX_ = 0;
  int frames_ = 0;
};

}  // namespace tracerun::viewer
