// Viewer: traceview's shell: one window with a menu, the tab bar over the views (the timeline
// first, views.h), the file picker, the status line, and the routing of the data thread's answers
// to the session and the timeline. Draws no tab itself (timeline_view.cpp and the other views do)
// and knows nothing of GLFW windows or OpenGL (gl_window.cpp owns those). All trace data arrives
// from the DataWorker; no frame waits on SQLite.
//
// Sections of viewer_app.cpp: options · opening and answers · the shell's queries · the frame
// (menu, tabs, picker, status).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/file_picker.h"
#include "app/recent_files.h"
#include "app/session.h"
#include "app/view.h"

namespace tracerun::viewer {

class TimelineView;

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
  bool record_boxes = false;              // --dump-layout/--dump-view: dumps list span boxes
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
  const std::string& problem() const { return session_.problem; }
  // Primitives (boxes, lines, labels) the timeline submitted in the last frame.
  int64_t primitivesLastFrame() const;
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
  void showRange(double t0, double t1);
  std::pair<int64_t, int64_t> traceRange() const {
    return session_.info ? session_.info->range : std::pair<int64_t, int64_t>{0, 0};
  }
  float timeAreaWidth() const;
  void log(const std::string& line) const override { session_.log(line); }
  // The tab in front: its --view word, and what it shows as text (View::dumpText; for the
  // timeline, layoutText()).
  std::string activeViewWord() const;
  // Brings the tab of `word` (views.h) to the front in the next frame; false when there is no
  // such tab. settled() then waits for it.
  bool showView(const std::string& word);
  std::string activeViewText() const;

 private:
  // ViewHost: what the tabs may ask (view.h).
  const std::string& tracePath() const override { return session_.path; }
  const OpenResult& trace() const override { return *session_.info; }
  const std::string& name(core::StringId id) const override { return session_.name(id); }
  void selectSpan(int64_t id, bool centre) override;
  std::optional<int64_t> selectedSpan() const override;
  std::pair<double, double> timelineRange() const override;
  void showTimeRange(double t0, double t1) override;
  void showTimeline() override { requestTab_ = kTimelineTab; }
  std::function<void()> waker() const override { return wake_; }
  const RangeSelection* rangeSelection() const override;
  const std::string& comparePath() const override { return options_.compare; }
  bool recordBoxes() const override { return options_.record_boxes; }
  bool viewOption(const std::string& word) const override {
    for (const auto& w : options_.view_options)
      if (w == word) return true;
    return false;
  }

  void open(const std::string& path);
  void applyResults();
  void applyOpened(OpenResult opened);
  void drawMenu();
  void drawTabs(float width, float height);
  void drawPicker(bool inlinePanel);
  void drawStatus();
  void drawMessage(const std::string& text, uint32_t colour);

  ViewerOptions options_;
  std::function<void()> wake_;
  RecentFiles recent_;
  FilePicker picker_;
  bool pickerOpen_ = false;
  Session session_;

  // The tabs, in order (views.h): the timeline is views_[0], also reachable as timeline_.
  static constexpr int kTimelineTab = 0, kNoRequest = -2;
  std::vector<std::unique_ptr<View>> views_;
  TimelineView* timeline_ = nullptr;
  int activeTab_ = kTimelineTab;
  int requestTab_ = kNoRequest;   // applied in the next frame (ImGui shows it one frame later)
  int wantedTab_ = kTimelineTab;  // --view: settled() waits until it is in front
  int drawnTab_ = kNoRequest;     // the tab drawn in the last frame
  struct TabRect {
    const char* word = nullptr;
    float x = 0, y = 0, w = 0, h = 0;
  };
  std::vector<TabRect> tabRects_;  // last frame's tab buttons (--dump-layout)

  bool quit_ = false;
  bool screenshotKey_ = false;
};

}  // namespace tracerun::viewer
