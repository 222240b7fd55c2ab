// AttemptRanks (attempt_ranks.h): one pass over the reader's ranks.
#include "attempt_ranks.h"

namespace tracerun::trace::analysis {

AttemptRanks::AttemptRanks(const TraceReader& reader) {
  for (const RankInfo& r : reader.ranks()) {
    attempt_[r.rank] = r.attempt;
    byLocal_[{r.attempt, r.attempt_rank}] = r.rank;
    several_ = several_ || r.attempt != 0 || r.attempt_rank != r.rank;
  }
}

int AttemptRanks::traceRank(int of, int local) const {
  if (!several_ || local < 0) return local;
  const auto a = attempt_.find(of);
  if (a == attempt_.end()) return local;
  const auto it = byLocal_.find({a->second, local});
  return it == byLocal_.end() ? -1 : it->second;
}

int AttemptRanks::attemptOf(int rank) const {
  const auto it = attempt_.find(rank);
  return it == attempt_.end() ? 0 : it->second;
}

}  // namespace tracerun::trace::analysis
