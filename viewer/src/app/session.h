// Session: the open trace that the viewer's shell, its timeline and the timeline's panels share:
// the file, its data thread, what opening it said, and the one span selection every tab sees.
// Owns no drawing and no view state (the timeline's window, folds and rows are timeline_view's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/data_worker.h"

namespace tracerun::viewer {

class Session {
 public:
  // Tags of the details requests: the selection's and the hovered span's.
  static constexpr uint64_t kTagSelect = 1, kTagHover = 2;

  Session(bool logActions, bool recordBoxes) : recordBoxes(recordBoxes), logActions_(logActions) {}

  // --log-actions: one line on stdout (no-op otherwise).
  void log(const std::string& line) const;
  bool logsActions() const { return logActions_; }
  const std::string& name(core::StringId id) const;

  // The open trace: null worker before the first file; info empty until the data thread opened it.
  std::string path;
  std::unique_ptr<DataWorker> worker;
  std::optional<OpenResult> info;
  std::string problem;  // keeps the trace from being shown ("" when none)
  std::string notice;   // one rank, no memory data, the last error...

  // The selection: the span, its details once the data thread answered, and a count that grows
  // with every select() (the side panel shows its details tab when it moves).
  std::optional<SpanRef> selected;
  std::optional<SpanDetails> details;
  uint64_t selections = 0;
  bool pendingById = false;  // --select/--goto or a view's selectSpan, until the answer comes

  // --dump-layout/--dump-view: the span tracks list the boxes they draw (track.h) in the dumps.
  const bool recordBoxes;

  // Selects `s` and asks the data thread for its details.
  void select(const SpanRef& s);
  void clearSelection();

 private:
  bool logActions_ = false;
};

}  // namespace tracerun::viewer
