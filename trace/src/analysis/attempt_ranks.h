// Attempt-local rank numbers -> trace ranks, for the analyses that read rank-valued arguments
// (peer), a decorator track's member list ("c10d pp [0,1]") or an NCCL communicator's ranks.
// Those numbers are the RANK of the attempt that wrote them, while the merged file renumbers an
// earlier attempt's ranks after the last attempt's (trace-format.md, "Attempts"); read as trace
// ranks they would pair a rank with one of another attempt. Not the attempts' bookkeeping (the
// reader's attempts() and ranks() are that): a lookup built from it.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

class AttemptRanks {
 public:
  explicit AttemptRanks(const TraceReader& reader);
  // The trace rank of RANK `local` in the attempt that trace rank `of` belongs to: `local` itself
  // in a file of one attempt (or for a rank the file does not list); -1 when that attempt has no
  // such rank.
  int traceRank(int of, int local) const;
  // traceRank of each of `local` (a decorator track's members), those found, ascending.
  std::vector<int> traceRanks(int of, const std::vector<int>& local) const;
  // The attempt trace rank `rank` belongs to (0 for a rank the file does not list).
  int attemptOf(int rank) const;
  bool several() const { return several_; }

 private:
  bool several_ = false;
  std::map<int, int> attempt_;                  // trace rank -> attempt
  std::map<std::pair<int, int>, int> byLocal_;  // (attempt, RANK in it) -> trace rank
};

}  // namespace tracerun::trace::analysis
