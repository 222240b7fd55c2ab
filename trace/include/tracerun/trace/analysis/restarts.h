// Elastic restarts (docs/launcher.md "Elastic jobs"): the "restart" instants a restarted rank
// records where its run began (value = the round), with the world sizes of that round and the one
// before from the attempts table (every round in one file), else the stats rows
// elastic_round_V_world when the trace has them. For the viewer's
// timeline marker and its tooltip; not the launcher's bookkeeping and no other instant kinds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct RestartMark {
  int rank = 0;
  int64_t track = 0, ts_ns = 0;
  int64_t round = 0;
  int64_t world = -1, prev_world = -1;  // -1: no elastic_round_V_world row
  // "restart: round 1, world 1 (was 2)" (the world parts left out when unknown).
  std::string label;
};

// Every "restart" instant of the trace, in time order (then rank).
std::vector<RestartMark> restartMarks(const TraceReader& reader);

}  // namespace tracerun::trace::analysis
