// Pipeline analysis: from the recorded actions of a pipeline-parallel run (forward/backward phases
// with stage, chunk, microbatch; send/recv scopes with peer), each stage's time per step split into
// forward, backward, send, receive wait and idle; the measured bubble; the closed form for the
// recorded schedule; and a modeled bubble (the recorded dependency graph replayed with median
// durations). Reads the trace through TraceReader only; never guesses from a command line.
//
// What the trace must hold (what gpttrain's pipeline executor records, see docs/report.md):
// - phase spans "step" (arg step), "forward" / "backward" (args stage = virtual stage,
//   chunk, microbatch);
// - user scopes "recv_forward", "recv_backward", "send_forward", "send_backward" (args peer =
//   global rank of the other side, microbatch, chunk, bytes).
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/schedule/kind.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

// One pipeline rank (stage index 0..p-1), summed over the analysed steps and averaged over the
// replicas of that stage (data/tensor-parallel copies), all in nanoseconds per step.
struct PipelineStage {
  int stage = 0;           // pipeline rank: virtual stage modulo p
  std::vector<int> ranks;  // global ranks that ran this stage
  double window_ns = 0;    // the step's pipeline span: first action start to last action end
  double forward_ns = 0, backward_ns = 0;
  double send_ns = 0;       // inside send scopes (posting non-blocking sends)
  double recv_wait_ns = 0;  // inside receive scopes (waiting for and receiving data)
  double idle_ns = 0;       // window minus all of the above
  double bubble = 0;        // 1 - (forward + backward) / window
  // The same for this stage in the modeled replay of each step (its compute at the median costs
  // over the replayed step's length), averaged like the rest.
  double modeled_bubble = 0;
};

// One step of one pipeline replica.
struct PipelineStep {
  int step = 0;
  int replica = 0;  // index into PipelineAnalysis::replicas
  int64_t start_ns = 0, end_ns = 0;
  double bubble = 0;          // 1 - compute of all its ranks / (ranks x window)
  double modeled_bubble = 0;  // the same step replayed with median durations
};

struct PipelineAnalysis {
  bool present = false;  // false: the trace has no pipeline with more than one virtual stage
  // Inferred when present: gpipe, 1f1b or interleaved (action order), zb-h1 (B and W phases), 2bw
  // (weight versions) or chimera (one chunk of two per microbatch); `schedule` is its word.
  tracerun::schedule::ScheduleKind schedule_kind = tracerun::schedule::ScheduleKind::kOneFOneB;
  std::string schedule;
  int stages = 0;                          // p
  int microbatches = 0;                    // m
  int virtual_stages = 1;                  // v: model chunks per pipeline rank
  int steps = 0;                           // steps analysed
  std::vector<std::vector<int>> replicas;  // each pipeline's global ranks, by stage
  double bubble_measured = 0;  // median over steps of the per-step bubble (replicas averaged)
  // (p-1)/(m+p-1); interleaved ((p-1)/v)/(m+(p-1)/v); zb-h1 and 2bw: see bubble_formula
  double bubble_theory = 0;
  // The closed form used, in words. 2bw's is the fill once per drained run, (p-1)/(N+p-1) with N
  // the microbatches of the run (a 2bw "step" span covers the whole run).
  std::string bubble_formula;
  double bubble_modeled = 0;  // median over steps of the modeled bubble
  std::vector<PipelineStage> per_stage;
  std::vector<PipelineStep> per_step;
  int64_t unmatched_recvs = 0;     // receives whose send is not in the trace (model: no dependency)
  std::vector<std::string> notes;  // anything the analysis had to assume
};

// The closed-form bubble fraction for a schedule word (tracerun/schedule/closed_form.h's; zb-h1
// with F = B = W; a word that is no schedule reads as 1f1b).
double closedFormBubble(const std::string& schedule, int p, int m, int v);
// ZB-H1 (Qi et al. 2023) with forward, input-gradient and weight-gradient costs:
// (p-1)(f+b-w) / (m(f+b+w) + (p-1)(f+b-w)); exact for m >= p and w <= min(f, b) (the library's).
double zbH1Bubble(int p, int m, double f, double b, double w);
// The formula closedFormBubble (and analyzePipeline) uses for a schedule, as text.
std::string closedFormName(const std::string& schedule);

PipelineAnalysis analyzePipeline(const TraceReader& reader);

// One executed action of one step of one replica, for pictures of the schedule (tracedot
// pipeline, traceview): what analyzePipeline measures, action by action.
enum class PipelineActionKind {
  kForward,
  kBackward,
  kSendForward,
  kSendBackward,
  kRecvForward,
  kRecvBackward,
  kBackwardInput,  // zb-h1's B (gradient of the stage input)
  kBackwardWeight  // zb-h1's W (gradient of the weights)
};
struct PipelineAction {
  PipelineActionKind kind = PipelineActionKind::kForward;
  int rank = 0;            // global rank
  int stage = 0;           // its pipeline rank (0..p-1)
  int virtual_stage = -1;  // forward/backward: chunk x p + pipeline rank
  int chunk = 0, microbatch = 0;
  int peer = -1;  // messages: the global rank on the other side
  int64_t start_ns = 0, end_ns = 0;
  long match = -1;      // receives: index in `actions` of the send it received, -1 when not traced
  int64_t span_id = 0;  // the recorded span (for selecting it in a viewer)
};

struct PipelineStepActions {
  bool found = false;                   // the trace has a pipeline and this step of this replica
  std::vector<int> steps;               // every step number with pipeline actions (ascending)
  int replicas = 0;                     // pipelines (data-parallel copies) in the trace
  std::vector<int> ranks;               // the replica's global ranks, by pipeline rank
  std::vector<PipelineAction> actions;  // rank by rank (in `ranks` order), each in start order
};

// The actions of step `step` of replica `replica` (an index into PipelineAnalysis::replicas),
// messages matched as analyzePipeline matches them.
PipelineStepActions pipelineStepActions(const TraceReader& reader, int step, int replica = 0);

}  // namespace tracerun::trace::analysis
