// The critical path of one measured pipeline step: which chain of actions (stage, microbatch,
// phase, and the messages between them) bounds the step, and its length against the step's time.
// Reads the step through the pipeline analysis (pipelineStepActions) and finds the longest path
// with the schedule library (schedule/critical_path.h); neither replays nor draws anything.
//
// The dependency graph: each action follows the previous action of its rank, and a receive
// follows the send it received. An action weighs its measured duration, except a receive, which
// weighs only the part after its send ended (the wait before that is the sender's time, already
// on the path). So the length is at most the step's window, and the gap is idle time no chain of
// dependencies explains.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/pipeline.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct CriticalPathLink {
  size_t action = 0;      // index into PipelineCriticalPath::actions
  int64_t weight_ns = 0;  // what it adds to the length
};

struct PipelineCriticalPath {
  bool found = false;  // the trace has a pipeline and the step asked for
  int step = -1, replica = 0;
  std::vector<PipelineAction> actions;  // the step's actions (pipelineStepActions' order)
  std::vector<bool> on_path;            // per action
  std::vector<long> via;                // per action: its predecessor on its longest path, -1
  std::vector<CriticalPathLink> chain;  // the path, first action to last
  int64_t length_ns = 0;                // summed weights of the chain
  int64_t step_ns = 0;                  // the step's window: first action start to last end

  double shareOfStep() const { return step_ns > 0 ? double(length_ns) / double(step_ns) : 0.0; }
};

// What each action weighs on a path (see above), per action of `actions`.
std::vector<int64_t> criticalPathWeights(const std::vector<PipelineAction>& actions);

// The longest path over a step's actions (as pipelineStepActions gives them).
PipelineCriticalPath criticalPathOfActions(std::vector<PipelineAction> actions);

// Step `step` of replica `replica`; step -1 picks the second recorded step when there are two or
// more (the first warms up), else the first. found is false when the trace has no pipeline or
// no such step.
PipelineCriticalPath pipelineCriticalPath(const TraceReader& reader, int step = -1,
                                          int replica = 0);

// One action as people read it: "F3 s1" (forward, microbatch 3, stage 1), "B0 s0 c1" (chunk 1 of
// an interleaved schedule), "W2 s3", "recv F0 s1", "send B2 s0".
std::string criticalPathActionName(const PipelineAction& action, bool chunks);

// The chain, "F0 s0 -> send F0 s0 -> recv F0 s1 -> F0 s1 -> ...", at most `max_links` links
// (the middle elided as "... (k more) ..." beyond that; 0: all).
std::string criticalPathChainText(const PipelineCriticalPath& path, size_t max_links = 0);

}  // namespace tracerun::trace::analysis
