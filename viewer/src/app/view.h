// A view: one tab of the window (the timeline, pipeline, memory, collectives, graphs, statistics,
// comparison). The contract between the shell (viewer_app.cpp, the ViewHost) and each view.
// Not a data layer: a view reads the trace through trace/ on its own thread (background_query.h)
// or the session's data thread (the timeline), never on the UI thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/data_worker.h"

namespace tracerun::viewer {

// A Shift+drag on the timeline: a time range (ns on the trace axis) over the ranks whose rows the
// drag crossed (every rank when it crossed none). `generation` grows with each new selection.
struct RangeSelection {
  double t0 = 0, t1 = 0;
  std::vector<int> ranks;
  uint64_t generation = 0;
};

// What a view may ask of the window. Every view shares one selection with the timeline.
class ViewHost {
 public:
  virtual ~ViewHost() = default;
  // The open trace (always ok while a view is drawn) and its file.
  virtual const std::string& tracePath() const = 0;
  virtual const OpenResult& trace() const = 0;
  virtual const std::string& name(core::StringId id) const = 0;
  // Selects span `id` (ids are unique in a trace) and, with `centre`, centres the timeline on it
  // in the next frame; the timeline tab is not forced to the front.
  virtual void selectSpan(int64_t id, bool centre) = 0;
  virtual std::optional<int64_t> selectedSpan() const = 0;
  // The timeline's window, ns on the trace axis; setting it moves the timeline.
  virtual std::pair<double, double> timelineRange() const = 0;
  virtual void showTimeRange(double t0, double t1) = 0;
  // Brings the timeline tab to the front in the next frame.
  virtual void showTimeline() = 0;
  // --log-actions: one line on stdout (no-op otherwise).
  virtual void log(const std::string& line) const = 0;
  // Wakes the frame loop from another thread (a background query finished).
  virtual std::function<void()> waker() const = 0;
  // The timeline's range selection (Shift+drag), null when none; drawn there as a shaded band.
  // Valid until the next frame.
  virtual const RangeSelection* rangeSelection() const { return nullptr; }
  // --compare FILE: the trace the compare view opens beside this one at start ("" when none).
  virtual const std::string& comparePath() const {
    static const std::string kNone;
    return kNone;
  }
  // --dump-layout/--dump-view: views that draw span tracks list their boxes (track.h) in dumps.
  virtual bool recordBoxes() const { return false; }
  // --view-option WORD: true when WORD was given (a word one of the views' options() names).
  virtual bool viewOption(const std::string& word) const {
    (void)word;
    return false;
  }
};

class View {
 public:
  virtual ~View() = default;
  // The word of `--view WORD` (lower case, one word) and the tab's title.
  virtual const char* word() const = 0;
  virtual const char* title() const = 0;
  // Draws the tab's content into the current ImGui window region (width x height pixels). Called
  // only while the tab is in front; the first call may start the view's background queries.
  virtual void draw(ViewHost& host, float width, float height) = 0;
  // True when everything the view shows has arrived (what --screenshot waits for). A view that
  // was never drawn is settled.
  virtual bool settled() const = 0;
  // The numbers the view shows, as text (--dump-view FILE writes it when the view settles), so
  // tests can hold them equal to `tracerun report --json`. "" when the view has none.
  virtual std::string dumpText() const { return {}; }
  // The words `--view-option WORD` accepts for this view, each with one line of help for
  // `traceview --help` (e.g. the pipeline's "plan"); the view asks ViewHost::viewOption.
  virtual std::vector<std::pair<std::string, std::string>> options() const { return {}; }
};

}  // namespace tracerun::viewer
