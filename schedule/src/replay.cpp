// The one replay (see replay.h): lanes in turn, each as far as it can go, until none moves. It
// checks nothing about what the steps mean (the tests' simulator does).
#include "tracerun/schedule/replay.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace tracerun::schedule {

ReplayTimes replay(const std::vector<TimedStep>& steps, int lanes, double t0,
                   OnDeadlock on_deadlock) {
  ReplayTimes out;
  const size_t n = steps.size();
  out.start.assign(n, t0);
  out.end.assign(n, t0);
  out.ran.assign(n, false);
  const size_t lane_count = static_cast<size_t>(std::max(0, lanes));
  out.lane_end.assign(lane_count, t0);
  std::vector<std::vector<size_t>> order(lane_count);
  for (size_t i = 0; i < n; ++i) {
    if (steps[i].lane >= 0 && steps[i].lane < lanes) {
      order[static_cast<size_t>(steps[i].lane)].push_back(i);
    }
  }
  std::vector<size_t> next(lane_count, 0);
  bool forced = false;  // OnDeadlock::kBreak: the next blocked step starts without waiting
  while (true) {
    bool moved = false;
    for (size_t l = 0; l < lane_count; ++l) {
      for (; next[l] < order[l].size(); ++next[l]) {
        const size_t i = order[l][next[l]];
        double ready = out.lane_end[l];
        const long dep = steps[i].after;
        if (dep >= 0 && static_cast<size_t>(dep) < n) {
          const size_t d = static_cast<size_t>(dep);
          if (!out.ran[d] && !forced) break;  // blocks until the step it waits for ran
          if (out.ran[d]) ready = std::max(ready, out.end[d]);
        }
        forced = false;
        out.start[i] = ready;
        out.end[i] = ready + steps[i].cost;
        out.ran[i] = true;
        out.lane_end[l] = out.end[i];
        moved = true;
      }
    }
    bool done = true;
    for (size_t l = 0; l < lane_count; ++l) done = done && next[l] >= order[l].size();
    if (done) break;
    if (moved) continue;
    if (on_deadlock == OnDeadlock::kStop) break;
    forced = true;
  }
  out.complete = std::all_of(out.ran.begin(), out.ran.end(), [](bool r) { return r; });
  out.end_time = t0;
  for (double e : out.lane_end) out.end_time = std::max(out.end_time, e);
  return out;
}

ScheduleTimes replaySchedule(const std::vector<std::vector<Action>>& lists,
                             const std::function<double(int rank, const Action& action)>& cost,
                             double t0) {
  std::vector<TimedStep> steps;
  std::vector<size_t> first(lists.size() + 1, 0);
  std::map<std::tuple<int, int, int>, long> sends;  // (from, to, tag) -> step index
  for (size_t r = 0; r < lists.size(); ++r) {
    first[r] = steps.size();
    for (const Action& a : lists[r]) {
      const int rank = static_cast<int>(r);
      if (isSend(a.kind)) sends.emplace(std::make_tuple(rank, a.peer, a.tag), long(steps.size()));
      steps.push_back(TimedStep{rank, cost(rank, a), -1});
    }
  }
  first[lists.size()] = steps.size();
  // A receive whose send no list holds waits on a step that never runs (its lane is no lane).
  const long never = long(steps.size());
  steps.push_back(TimedStep{-1, 0, -1});
  for (size_t r = 0; r < lists.size(); ++r) {
    for (size_t k = 0; k < lists[r].size(); ++k) {
      const Action& a = lists[r][k];
      if (!isReceive(a.kind)) continue;
      const auto it = sends.find({a.peer, static_cast<int>(r), a.tag});
      steps[first[r] + k].after = it == sends.end() ? never : it->second;
    }
  }
  const ReplayTimes times = replay(steps, static_cast<int>(lists.size()), t0, OnDeadlock::kStop);
  ScheduleTimes out;
  out.start.resize(lists.size());
  out.end.resize(lists.size());
  out.ran.assign(lists.size(), 0);
  out.busy.assign(lists.size(), 0.0);
  for (size_t r = 0; r < lists.size(); ++r) {
    for (size_t k = 0; k < lists[r].size(); ++k) {
      const size_t i = first[r] + k;
      out.start[r].push_back(times.start[i]);
      out.end[r].push_back(times.end[i]);
      if (!times.ran[i]) continue;
      ++out.ran[r];
      if (isCompute(lists[r][k].kind)) out.busy[r] += steps[i].cost;
    }
  }
  out.end_time = times.end_time;
  out.complete = true;
  for (size_t r = 0; r < lists.size(); ++r)
    out.complete = out.complete && out.ran[r] == lists[r].size();
  return out;
}

}  // namespace tracerun::schedule
