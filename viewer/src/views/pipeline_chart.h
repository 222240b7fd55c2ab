// The pipeline view's data (no ImGui): one step of one pipeline replica as bars per stage (the
// measured forwards and backwards), the planned schedule timed with the measured mean costs, and
// the report's pipeline numbers (trace/analysis/pipeline.h, unchanged) and the step's critical
// path (trace/analysis/critical_path.h). Built off the UI thread.
// Not drawing (pipeline_view.cpp) and not an analysis of its own: every number is the report's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/analysis/critical_path.h"
#include "tracerun/trace/analysis/pipeline.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {

// One forward or backward of one microbatch on one model chunk of one stage.
struct PipelineBar {
  int lane = 0;  // pipeline rank (the chart's row)
  int64_t t0 = 0, t1 = 0;
  bool backward = false;  // a backward, whole or split
  bool weight = false;    // zb-h1's W (backward too); zb-h1's B is a backward that is not W
  int microbatch = 0, chunk = 0;
  int64_t span_id = 0;    // the recorded span; 0 for a planned bar
  bool critical = false;  // on the step's critical path (measured bars only)
};

struct PipelineLane {
  int stage = 0;  // pipeline rank
  int rank = 0;   // global rank
};

struct PipelineChartData {
  trace::analysis::PipelineAnalysis analysis;  // the report's numbers
  std::vector<int> steps;                      // steps with pipeline actions
  int replicas = 0;
  int step = -1, replica = 0;  // what the bars show
  int64_t t0 = 0, t1 = 0;      // the step's window: first action start to last action end
  std::vector<PipelineLane> lanes;
  std::vector<PipelineBar> bars;  // measured, lane by lane, each lane in start order
  std::vector<PipelineBar> plan;  // planned (starting at t0), lane by lane in plan order
  std::string plan_note;          // why there is no plan, when `plan` is empty
  trace::analysis::PipelineCriticalPath critical;  // of this step and replica (the report's)
  const trace::analysis::PipelineStep* stepNumbers() const;  // analysis.per_step of this step
};

// The step the view opens on: the step whose measured bubble (replicas averaged, as the report
// does) is the median over steps, i.e. the step behind the report's measured bubble (the lower
// middle one for an even count); -1 when there are no steps.
int steadyStep(const trace::analysis::PipelineAnalysis& a);

// The planned bars of the schedule named `word` (tracerun/schedule/kind.h) on p stages, v chunks
// and m microbatches: each stage's own action list with its messages (buildSchedule), replayed
// (replaySchedule) so that a receive waits for its send and every compute action costs
// the mean of the measured bars of its stage, chunk and kind (forward, backward, B, W). 2bw is
// replayed as the 1F1B it runs over all the step span's microbatches. Starts at `t0`. Empty with
// `note` set when the schedule or shape is not one the trainer runs.
std::vector<PipelineBar> plannedBars(const std::string& word, int p, int v, int m,
                                     const std::vector<PipelineBar>& measured, int64_t t0,
                                     std::string* note);

// Reads everything the view shows for `step` (-1: steadyStep) of `replica`. When `known` is
// non-null the analysis is taken from it instead of recomputed (changing steps).
PipelineChartData loadPipelineChart(const trace::TraceReader& reader, int step, int replica,
                                    const PipelineChartData* known = nullptr);

}  // namespace tracerun::viewer
