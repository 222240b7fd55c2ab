// AttemptRanks (attempt_ranks.h): one pass over the reader's ranks.
#include "attempt_ranks.h"

#include <algorithm>

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

std::vector<int> AttemptRanks::traceRanks(int of, const std::vector<int>& local) const {
  std::vector<int> out;
  for (const int m : local) {
    const int r = traceRank(of, m);
    if (r >= 0) out.push_back(r);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int AttemptRanks::attemptOf(int rank) const {
  const auto it = attempt_.find(rank);
  return it == attempt_.end() ? 0 : it->second;
}

}  // namespace tracerun::trace::analysis
