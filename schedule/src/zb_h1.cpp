// ZB-H1's action list (Qi et al., "Zero Bubble Pipeline Parallelism", 2023, Figure 3 / ZB-H1) (its
// closed form is closed_form.cpp's). The messages are added by action_lists.cpp's buildSchedule.
//
// Derivation (F = B = W = 1, p stages, m >= p microbatches): rank r starts its first forward at r
// and, after 1F1B's p-r-1 warm-up forwards and one more, waits p-1-r for the first gradient: p-1
// idle in all, as in 1F1B's start. B alone (not B + W) is on the critical path, so the last
// microbatch's B reaches rank 0 (p-1)W earlier than in 1F1B; rank r fills its share of that
// (r W's) with the W's it deferred. Deferring r W's on rank r keeps p-r+r = p microbatches
// forwarded and not yet W'd, 1F1B's peak on rank 0. Step: m(F+B+W) + (p-1)(F+B-W).
#include "tracerun/schedule/zb_h1.h"

#include <algorithm>

namespace tracerun::schedule {

std::vector<Action> zbH1ComputeOrder(const PipelineShape& s, int rank) {
  const int m = s.microbatches;
  const int warmup = std::min(s.stages - rank - 1, m);
  const int deferred = rank;  // W's held back behind their B
  std::vector<Action> out;
  auto add = [&](ActionKind kind, int mb) { out.push_back(Action{kind, mb, 0, -1, -1}); };
  auto backward = [&](int k) {
    add(ActionKind::kBackwardInput, k);
    if (k - deferred >= 0) add(ActionKind::kBackwardWeight, k - deferred);
  };
  for (int k = 0; k < warmup; ++k) add(ActionKind::kForward, k);
  for (int k = 0; k < m - warmup; ++k) {
    add(ActionKind::kForward, warmup + k);
    backward(k);
  }
  for (int k = m - warmup; k < m; ++k) backward(k);
  for (int k = std::max(0, m - deferred); k < m; ++k) add(ActionKind::kBackwardWeight, k);
  return out;
}

}  // namespace tracerun::schedule
