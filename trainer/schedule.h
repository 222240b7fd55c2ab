// Pipeline schedules as data: for one pipeline rank, the ordered list of actions one training step
// runs (forward / backward of a microbatch on a model chunk, and the sends and receives around
// them). Pure integers: no tensors, no communication, no clocks (see pipeline_executor.h).
//
// Conventions (Megatron's): p pipeline ranks, v model chunks per rank, m microbatches per step.
// Chunk c on rank r is virtual stage c * p + r; virtual stage s feeds s + 1, so the last rank's
// chunk c feeds rank 0's chunk c + 1. Without interleaving v == 1 and virtual stage == rank.
#pragma once

#include <string>
#include <vector>

namespace gpttrain {

enum class ScheduleKind {
  kGpipe,        // all forwards, then all backwards
  kOneFOneB,     // PipeDream-Flush: warm-up forwards, then one forward / one backward, cool-down
  kInterleaved,  // Megatron's virtual pipeline: 1F1B over v chunks per rank (m a multiple of p)
  kZbH1,     // zero bubble ZB-H1 (Qi et al. 2023): backward split into B and W (schedule_zbh1.cpp)
  kTwoBw,    // PipeDream-2BW: 1F1B without flushes over many steps (schedule_2bw.h)
  kChimera,  // Li & Hoefler: a down and an up pipeline over the same ranks (schedule_chimera.cpp)
};
// "gpipe", "1f1b", "interleaved", "zb-h1", "2bw", "chimera"; throws std::invalid_argument on
// anything else.
ScheduleKind parseScheduleKind(const std::string& name);
const char* scheduleName(ScheduleKind kind);

struct PipelineShape {
  int stages = 1;        // p
  int chunks = 1;        // v (1 unless interleaved)
  int microbatches = 1;  // m
  int virtualStages() const { return stages * chunks; }
};

enum class ActionKind {
  kRecvForward,   // receive the activation this forward consumes from the previous virtual stage
  kForward,       // run the chunk's forward of the microbatch
  kSendForward,   // send its output activation to the next virtual stage (non-blocking)
  kRecvBackward,  // receive the gradient of that output from the next virtual stage
  kBackward,      // run the chunk's backward of the microbatch
  kSendBackward,  // send the gradient of its input to the previous virtual stage (non-blocking)
  // Split backward (zb-h1): B, the gradient of the input only (received gradient in, sent on at
  // once, like kBackward), and later W, the gradient of the weights (no messages).
  kBackwardInput,
  kBackwardWeight,
  kApplyUpdate,  // 2bw: form the next weight version from batch `microbatch`'s gradient
};
const char* actionName(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this rank
  int peer = -1;  // pipeline rank sent to / received from; -1 for compute
  int tag = -1;   // message tag, equal on sender and receiver; -1 for compute
  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk && peer == o.peer &&
           tag == o.tag;
  }
};

// Empty when `shape` can run `kind`; else one line naming the problem (interleaved needs m a
// multiple of p; v > 1 only with interleaved).
std::string scheduleError(ScheduleKind kind, const PipelineShape& shape);

// Forwards this rank runs before its first backward (the warm-up), capped at m * v.
int warmUpForwards(ScheduleKind kind, const PipelineShape& shape, int rank);

// The most microbatch-chunks whose forward has run and whose backward has not, as the schedule
// promises it (GPipe m; 1F1B min(p - rank, m); interleaved warm-up + 1, capped at m * v).
int inFlightBound(ScheduleKind kind, const PipelineShape& shape, int rank);

// Only forward and backward actions, in this rank's order: warm-up, steady state, cool-down.
std::vector<Action> computeOrder(ScheduleKind kind, const PipelineShape& shape, int rank);

// computeOrder with communication: each forward preceded by its receive and followed by its send,
// each backward likewise, wherever the neighbouring virtual stage exists.
std::vector<Action> buildSchedule(ScheduleKind kind, const PipelineShape& shape, int rank);

// Forwards only (evaluation): microbatch by microbatch, chunk by chunk, with their messages.
std::vector<Action> buildForwardOnlySchedule(const PipelineShape& shape, int rank);

// The closed-form idle fraction of every stage: (p-1)/(m+p-1), interleaved ((p-1)/v)/(m+(p-1)/v),
// zb-h1 (F = B = W) (p-1)/(3m+p-1).
double idealBubbleFraction(ScheduleKind kind, const PipelineShape& shape);

// --- ZB-H1 (schedule_zbh1.cpp)

// Rank r's compute order: 1F1B's warm-up of p-r-1 forwards, then F, B pairs with each B followed
// by the W of the microbatch r earlier (r W's deferred), cool-down B's likewise, the last r W's at
// the end. At most min(p, m) microbatches forwarded and not yet W'd on every rank.
std::vector<Action> zbH1ComputeOrder(const PipelineShape& shape, int rank);

// ZB-H1's idle fraction with forward, input-gradient and weight-gradient costs f, b, w per
// microbatch: (p-1)(f+b-w) / (m(f+b+w) + (p-1)(f+b-w)). Exact for the list above when m >= p and
// w <= min(f, b) (checked by tests/trainer/test_schedule_zbh1.cpp's simulator); otherwise a
// lower bound.
double zbH1BubbleFraction(const PipelineShape& shape, double f, double b, double w);

// --- Chimera (schedule_chimera.cpp). Two pipelines of p stages in opposite directions: rank r
// holds chunk 0 = stage r of the down pipeline and chunk 1 = stage p-1-r of the up pipeline (so
// ranks r and p-1-r hold the same layers). Per unit of p microbatches the first p/2 go down, the
// rest up; the per-rank order is the authors' (Shigangli/Chimera), units directly concatenated. p
// even, m a multiple of p. Closed form (paper, Table 1): (p-2)/(2m+p-2), exact when F == B.
int chimeraStage(int stages, int rank, int chunk);  // the pipeline stage of that chunk
int chimeraChunk(int stages, int microbatch);       // 0: down pipeline, 1: up
int chimeraRank(int stages, int chunk, int stage);  // the rank holding (chunk, stage)
std::vector<Action> chimeraComputeOrder(const PipelineShape& shape, int rank);
std::vector<Action> buildChimeraSchedule(const PipelineShape& shape, int rank);
std::vector<Action> buildChimeraForwardOnlySchedule(const PipelineShape& shape, int rank);

}  // namespace gpttrain
