// Building PipeDream-2BW's action lists (see two_bw.h): 1F1B over all microbatches of
// several batches, each batch's update inserted after its last backward on the stage. Not the
// weight versions (trainer/pipeline/weight_versions.h).
#include "tracerun/schedule/two_bw.h"

#include "tracerun/schedule/action_lists.h"

namespace tracerun::schedule {

std::vector<Action> buildTwoBwSchedule(const PipelineShape& s, int rank, int first_batch,
                                       int batches) {
  const int m = s.microbatches;
  const PipelineShape run{s.stages, 1, m * batches};
  const std::vector<Action> flat = buildSchedule(ScheduleKind::kOneFOneB, run, rank);
  const bool first_stage = rank == 0;
  std::vector<Action> out;
  out.reserve(flat.size() + batches);
  for (size_t i = 0; i < flat.size(); ++i) {
    Action a = flat[i];
    const int local = a.microbatch;
    a.microbatch += first_batch * m;
    out.push_back(a);
    // The update follows the batch's last backward, after that backward's send when it has one.
    const bool closes =
        (a.kind == ActionKind::kBackward && first_stage) || a.kind == ActionKind::kSendBackward;
    if (closes && local % m == m - 1) {
      out.push_back(Action{ActionKind::kApplyUpdate, first_batch + local / m, 0, -1, -1});
    }
  }
  return out;
}

std::string twoBwShapeError(const PipelineShape& s) {
  if (s.chunks != 1) return "--schedule 2bw runs one chunk per rank: drop --vp";
  if (s.microbatches < s.stages) {
    return "--schedule 2bw needs at least as many microbatches per step (" +
           std::to_string(s.microbatches) + ") as --pp " + std::to_string(s.stages) +
           " (two weight versions suffice only then): raise --global-batch";
  }
  return "";
}

int twoBwTiedTag(const PipelineShape& s, int batches, int local_batch, bool weights) {
  // Activation tags of the list are below 2 * p * (m * batches) (action_lists.cpp's messageTag).
  const int base = 2 * s.stages * s.microbatches * batches;
  return base + 2 * local_batch + (weights ? 1 : 0);
}

}  // namespace tracerun::schedule
