// The critical path of one replayed or recorded step: the longest path through its dependency
// graph, where a step follows the previous step of its lane and the step it waits for
// (TimedStep::after), each weighing its cost. Not the replay (replay.h) and not the drawing.
#pragma once

#include <vector>

#include "tracerun/schedule/replay.h"

namespace tracerun::schedule {

struct CriticalPath {
  std::vector<bool> on_path;  // per step
  std::vector<long> via;      // per step: its predecessor on its longest path; -1 for none
  double length = 0;          // the longest path's summed cost
};

// Longest path (a Kahn order; ties keep the first predecessor found, order edges before waits).
// A cycle (a damaged trace) leaves its steps at their own cost.
CriticalPath criticalPath(const std::vector<TimedStep>& steps);

}  // namespace tracerun::schedule
