// The longest path through one step's dependency graph (see critical_path.h); no timing of its
// own: the steps' costs are given.
#include "tracerun/schedule/critical_path.h"

#include <map>

namespace tracerun::schedule {

CriticalPath criticalPath(const std::vector<TimedStep>& steps) {
  const size_t n = steps.size();
  std::vector<std::vector<size_t>> succs(n);
  std::vector<int> indeg(n, 0);
  auto dep = [&](size_t from, size_t to) {
    succs[from].push_back(to);
    ++indeg[to];
  };
  std::map<int, size_t> last_of_lane;
  for (size_t i = 0; i < n; ++i) {
    auto it = last_of_lane.find(steps[i].lane);
    if (it != last_of_lane.end()) dep(it->second, i);
    last_of_lane[steps[i].lane] = i;
  }
  for (size_t i = 0; i < n; ++i) {
    if (steps[i].after >= 0 && static_cast<size_t>(steps[i].after) < n) {
      dep(static_cast<size_t>(steps[i].after), i);
    }
  }
  // Kahn's order; a cycle leaves its steps at their own cost.
  std::vector<size_t> ready;
  for (size_t i = n; i-- > 0;) {
    if (indeg[i] == 0) ready.push_back(i);
  }
  CriticalPath cp;
  cp.on_path.assign(n, false);
  cp.via.assign(n, -1);
  std::vector<double> dist(n);
  for (size_t i = 0; i < n; ++i) dist[i] = steps[i].cost;
  while (!ready.empty()) {
    const size_t u = ready.back();
    ready.pop_back();
    for (size_t s : succs[u]) {
      const double d = dist[u] + steps[s].cost;
      if (d > dist[s] || (d == dist[s] && cp.via[s] < 0)) {
        dist[s] = d;
        cp.via[s] = long(u);
      }
      if (--indeg[s] == 0) ready.push_back(s);
    }
  }
  long end = -1;
  for (size_t i = 0; i < n; ++i) {
    if (end < 0 || dist[i] > dist[static_cast<size_t>(end)]) end = long(i);
  }
  if (end < 0) return cp;
  cp.length = dist[static_cast<size_t>(end)];
  for (long k = end; k >= 0; k = cp.via[static_cast<size_t>(k)]) {
    if (cp.on_path[static_cast<size_t>(k)]) break;
    cp.on_path[static_cast<size_t>(k)] = true;
  }
  return cp;
}

}  // namespace tracerun::schedule
