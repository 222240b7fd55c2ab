// The schedule tests' one simulator: runs every pipeline rank's action list (action_lists.h)
// together with the executor's semantics and checks what all schedules share. Test-only; not the
// executor, no tensors or processes, and it knows nothing of any particular schedule. Its times
// are the schedule library's one replay (replaySchedule).
//
// Semantics: ranks take turns, each running its list as far as it can; a send posts its message
// and goes on, a receive blocks until its message was posted; in the replay a receive starts no
// earlier than its send and a compute takes its cost.
//
// Checked for every schedule, the first failure ending the run as one line in SimResult::error:
// - the spec itself: every (pipe, stage) held by exactly one (rank, chunk), stages 0..n-1;
// - each action names a chunk of the rank and a (chunk, microbatch) the rank is expected to run;
// - the peer of every send / receive holds the neighbouring stage of the same pipe (forward: to
//   stage + 1, from stage - 1; backward the other way), and what a receive gets is the message of
//   the same microbatch and direction from that stage; no (from, to, tag) is sent twice;
// - per (rank, chunk, microbatch) the order input received -> forward -> gradient received ->
//   backward (whole, or B then W); sends after their compute; stage 0 needs no input message and
//   the last stage no gradient message;
// - split backward (B, W) and weight updates only where the spec allows them;
// - at the end: no rank stuck (deadlock), every expected (chunk, microbatch) complete, every
//   message received.
#pragma once

#include "tracerun/schedule/action.h"
#include "tracerun/schedule/shape.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tracerun::schedule::testing {

// Cost of one action on one rank (the model chunk's share of the work, as the caller decides).
struct SimCosts {
  double forward = 1.0;
  double backward = 2.0;         // kBackward, the whole backward
  double backward_input = 1.0;   // kBackwardInput (B)
  double backward_weight = 1.0;  // kBackwardWeight (W)
};

struct SimSpec {
  int ranks = 1;
  int chunks = 1;        // Action::chunk lies in [0, chunks)
  int microbatches = 1;  // Action::microbatch lies in [0, microbatches) (kApplyUpdate's excepted)
  // Which pipeline a rank's chunk belongs to (0 but for Chimera's up pipeline) and which stage of
  // it the chunk is; stage 0 takes the input, the pipe's highest stage computes the loss.
  std::function<int(int rank, int chunk)> pipe_of = [](int, int) { return 0; };
  std::function<int(int rank, int chunk)> stage_of;
  // Which (chunk, microbatch) a rank must complete; nothing else may appear in its list.
  std::function<bool(int rank, int chunk, int microbatch)> expected = [](int, int, int) {
    return true;
  };
  SimCosts costs;
  bool allow_split_backward = false;  // kBackwardInput / kBackwardWeight
  bool allow_updates = false;         // kApplyUpdate (cost free; extra_check judges it)
  // Called once for each action as it runs, in each rank's order, after the checks above pass;
  // returns "" when fine, else the problem. May be empty.
  std::function<std::string(int rank, const Action& action)> extra_check;
};

// Megatron's layout (shape.h): `shape.stages` ranks, one pipe, chunk c of rank r is virtual
// stage c * p + r, so the last rank's chunk c feeds rank 0's chunk c + 1.
SimSpec virtualStageSpec(const PipelineShape& shape);

struct SimResult {
  std::string error;           // empty when everything held
  std::vector<int> in_flight;  // per rank: the most forwards run and not yet completed
                               // (by kBackward or kBackwardWeight) at one time
  std::vector<double> busy;    // per rank: compute time (of the actions the replay ran)
  double end = 0.0;            // when the last rank finished (in the replay)
  std::vector<std::map<ActionKind, int>> ran;  // per rank: how many actions of each kind ran
  int count(int rank, ActionKind kind) const;
};

// lists[r] is rank r's list; spec.ranks of them.
SimResult simulateSchedules(const std::vector<std::vector<Action>>& lists, const SimSpec& spec);

}  // namespace tracerun::schedule::testing
