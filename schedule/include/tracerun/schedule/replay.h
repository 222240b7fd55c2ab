// The one replay of pipeline actions: lanes (pipeline ranks) each run their steps in order; a step
// starts when its lane is free and the step it waits for (a receive's send) has ended, and takes
// its cost. What the trace analysis' modeled bubble, the viewer's plan and the schedule tests'
// simulator all time with. Timing only: it checks nothing about what the actions mean.
#pragma once

#include <functional>
#include <vector>

#include "tracerun/schedule/action.h"

namespace tracerun::schedule {

// One step to replay (critical_path.h reads the same steps, cost as weight).
struct TimedStep {
  int lane = 0;     // 0..lanes-1; a lane runs its steps in the order of the list
  double cost = 0;  // how long it takes once started
  long after = -1;  // index in the list of the step whose end it waits for; -1: none
};

enum class OnDeadlock {
  kStop,   // steps that can never start stay unrun (ReplayTimes::complete false)
  kBreak,  // a recorded order with a cycle (a damaged trace): when no lane can move, the first
           // blocked lane (lowest index) starts its step without waiting
};

struct ReplayTimes {
  std::vector<double> start, end;  // per step; meaningful where `ran`
  std::vector<bool> ran;
  std::vector<double> lane_end;  // per lane: when its last run step ended (t0 when none ran)
  double end_time = 0;           // the latest lane_end (t0 with no lanes)
  bool complete = false;         // every step ran
};

// Lanes are visited in index order, each running as far as it can, until none moves. Steps whose
// lane is outside [0, lanes) never run. The times do not depend on the visiting order (only which
// step a cycle is broken at does).
ReplayTimes replay(const std::vector<TimedStep>& steps, int lanes, double t0 = 0,
                   OnDeadlock on_deadlock = OnDeadlock::kStop);

// Per-rank action lists (action_lists.h; rank = index in `lists`) replayed with `cost` per action:
// each receive waits for the send with the same (from, to, tag). Messages cost what `cost` says
// (0 is the executor's ideal: a send posts, a receive takes a posted message at once).
struct ScheduleTimes {
  std::vector<std::vector<double>> start, end;  // [rank][action]; meaningful where it ran
  std::vector<size_t> ran;                      // per rank: actions run (all of them if complete)
  std::vector<double> busy;                     // per rank: cost of its compute actions run
  double end_time = 0;                          // when the last rank finished
  bool complete = false;                        // no rank stuck (no deadlock)
};
ScheduleTimes replaySchedule(const std::vector<std::vector<Action>>& lists,
                             const std::function<double(int rank, const Action& action)>& cost,
                             double t0 = 0);

}  // namespace tracerun::schedule
