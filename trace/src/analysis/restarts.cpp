// restartMarks (analysis/restarts.h): the "restart" instants of every track, labelled with the
// elastic_round_V_world stats of their round and the round before.
#include "tracerun/trace/analysis/restarts.h"

#include <algorithm>
#include <map>

namespace tracerun::trace::analysis {

std::vector<RestartMark> restartMarks(const TraceReader& reader) {
  std::map<int64_t, int64_t> worlds;  // round -> world size
  // Every round in one file: the attempts table has their sizes.
  if (const auto attempts = reader.attempts(); attempts.size() > 1) {
    for (const auto& a : attempts) worlds[a.attempt] = a.world_size;
  }
  const std::string prefix = "elastic_round_", suffix = "_world";
  for (const auto& s : reader.stats()) {
    const std::string& n = s.name;
    if (n.size() <= prefix.size() + suffix.size() || n.compare(0, prefix.size(), prefix) != 0 ||
        n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string digits = n.substr(prefix.size(), n.size() - prefix.size() - suffix.size());
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    if (digits.size() > 9) continue;
    worlds.emplace(std::stoll(digits), s.value);  // the attempts table first
  }
  std::vector<RestartMark> out;
  for (const auto& t : reader.tracks()) {
    for (const auto& i : reader.instants(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
      if (reader.str(i.name) != "restart") continue;
      RestartMark m;
      m.rank = t.rank;
      m.track = t.id;
      m.ts_ns = i.ts_ns;
      m.round = i.value;
      if (const auto it = worlds.find(m.round); it != worlds.end()) m.world = it->second;
      if (const auto it = worlds.find(m.round - 1); it != worlds.end()) m.prev_world = it->second;
      m.label = "restart: round " + std::to_string(m.round);
      if (m.world >= 0) m.label += ", world " + std::to_string(m.world);
      if (m.prev_world >= 0) m.label += " (was " + std::to_string(m.prev_world) + ")";
      out.push_back(std::move(m));
    }
  }
  std::sort(out.begin(), out.end(), [](const RestartMark& a, const RestartMark& b) {
    return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.rank < b.rank;
  });
  return out;
}

}  // namespace tracerun::trace::analysis
