// The timeline's elastic-restart markers: each "restart" instant (trace/analysis/restarts.h, read
// on the data thread when the trace opens) as a vertical line across the track rows at its time,
// labelled "restart: round R, world W (was P)" once per round, with a tooltip when hovered. Draws
// what it is given and allocates nothing unless a dump is asked for; not other instants.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "timeline/track.h"
#include "tracerun/trace/analysis/restarts.h"

namespace tracerun::viewer {

struct RestartCanvas {
  ImDrawList* dl = nullptr;
  TrackAxis axis;
  float top = 0, bottom = 0;  // the rows' extent on screen (y down)
  float mouse_x = -1e9f, mouse_y = -1e9f;
  bool mouse_here = false;  // the mouse is over the tracks' window
  int64_t primitives = 0;   // grows with every line, label and label box drawn
  // When set, one line per marker drawn: "instant restart RANK X ROUND WORLD PREV" (X from
  // axis.x; WORLD and PREV -1 when the trace has no elastic_round_V_world rows).
  std::string* dump = nullptr;
};

// Draws the marks (time order) that fall in the axis' window; returns the one under the mouse
// (within 3 px of its line), else null.
const trace::analysis::RestartMark* drawRestartMarks(
    RestartCanvas& c, const std::vector<trace::analysis::RestartMark>& marks);

// The tooltip of a hovered mark: its label, rank, time from `origin` (ns) and track.
void restartTooltip(const trace::analysis::RestartMark& m, int64_t origin);

}  // namespace tracerun::viewer
