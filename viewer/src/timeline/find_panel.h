// FindPanel: the timeline's Find side tab: a name search across every rank (on the data thread),
// the matches' duration histogram (a click on a bar highlights those spans on the timeline) and
// the virtualised match list; N / P / F3 step through the matches. Draws no timeline: it says
// what to highlight (highlight()) and where to go (the GoTo callback).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>

#include "app/session.h"

namespace tracerun::viewer {

class FindPanel {
 public:
  // Moves the timeline to a match and selects it.
  using GoTo = std::function<void(const SpanRef&)>;

  // Ctrl+F: the side panel shows this tab and the text field takes the keyboard.
  void open() { focus_ = true; }
  // The data thread's answer (WorkerOutput::find).
  void apply(FindResult result, const Session& s);
  void draw(Session& s, const GoTo& go);
  // Goes to match `i` (modulo the count); `step` moves from the current one (-1: previous).
  void gotoMatch(size_t i, Session& s, const GoTo& go);
  void step(int delta, Session& s, const GoTo& go);

  bool pending() const { return pending_; }
  const FindResult* result() const { return result_ ? &*result_ : nullptr; }
  // The durations (ns, inclusive) of the highlighted histogram bar, when one is.
  std::optional<std::pair<int64_t, int64_t>> highlight() const {
    if (!result_ || bin_ < 0) return std::nullopt;
    return std::make_pair(lo_, hi_);
  }

 private:
  void drawHistogram(Session& s, int64_t lo, int64_t hi);

  bool focus_ = false;
  char text_[256] = {};
  std::optional<FindResult> result_;
  bool pending_ = false;
  size_t index_ = 0;
  int bin_ = -1;
  int64_t lo_ = 0, hi_ = 0;
};

}  // namespace tracerun::viewer
