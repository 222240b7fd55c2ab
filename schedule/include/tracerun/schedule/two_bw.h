// PipeDream-2BW (Narayanan et al. 2021) as data: one rank's action list over several consecutive
// batches (steps) without a flush between them. Pure integers; the weight versions themselves and
// the flags 2bw cannot combine with are the trainer's.
//
// The list is 1F1B over the N = batches * m microbatches of the whole run (or of the part up to
// the next checkpoint or evaluation, where it drains), microbatch index k = batch * m + j, with an
// kApplyUpdate action for batch b right after the stage's last backward of b (and its send). With
// m >= p, batch b + 2's first forward on a stage comes after that update, so two weight versions
// per stage suffice: batch b runs on V_b; update b forms V_{b+2} = V_{b+1} - update(grad f(V_b)).
#pragma once

#include <string>
#include <vector>

#include "tracerun/schedule/action.h"
#include "tracerun/schedule/shape.h"

namespace tracerun::schedule {

// Rank `rank`'s list for batches [first_batch, first_batch + batches): forwards, backwards and
// messages as 1F1B over batches * m microbatches (message tags unique within the list), an
// update after each batch's last backward. Action::microbatch is the global index
// batch * m + j; for kApplyUpdate it is the batch.
std::vector<Action> buildTwoBwSchedule(const PipelineShape& shape, int rank, int first_batch,
                                       int batches);

// Empty when 2bw can run `shape`; else one line (m >= p, no virtual chunks).
std::string twoBwShapeError(const PipelineShape& shape);

// Tags of the tied embedding's messages between the first and last stage for batch b's update
// (the last stage's gradient to stage 0, stage 0's new weights back); above every activation tag
// of a list of `batches` batches.
int twoBwTiedTag(const PipelineShape& shape, int batches, int local_batch, bool weights);

}  // namespace tracerun::schedule
