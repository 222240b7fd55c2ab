// ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2023): one rank's compute order with the
// backward split into B (input gradient) and W (weight gradient). Its closed form is in
// closed_form.h; its messages are added by action_lists.h's buildSchedule.
#pragma once

#include <vector>

#include "tracerun/schedule/action.h"
#include "tracerun/schedule/shape.h"

namespace tracerun::schedule {

// Rank r's compute order: 1F1B's warm-up of p-r-1 forwards, then F, B pairs with each B followed
// by the W of the microbatch r earlier (r W's deferred), cool-down B's likewise, the last r W's at
// the end. At most min(p, m) microbatches forwarded and not yet W'd on every rank.
std::vector<Action> zbH1ComputeOrder(const PipelineShape& shape, int rank);

}  // namespace tracerun::schedule
