// The analyses as consumers of the shared span pass (span_pass.h): the pipeline's actions, the
// communication spans and the memory analysis' span context each collect what they need from a
// pass they may share, then compute their results afterwards. analyzePipeline, analyzeComm and
// analyzeMemory run them over a pass of their own; buildReport runs them together over one pass.
// Each is implemented beside its analysis (pipeline.cpp, comm.cpp, memory.cpp); this header only
// declares them. Not public: dot/ and viewer/ call the analyses' functions.
#pragma once

#include <memory>
#include <vector>

#include "span_pass.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/pipeline.h"

namespace tracerun::trace::analysis {

// The pipeline's step, phase and send/receive spans of every thread track (pipeline.cpp).
class PipelineSpans : public SpanConsumer {
 public:
  explicit PipelineSpans(const TraceReader& reader);
  ~PipelineSpans() override;
  bool wantsTrack(const TrackRow& track) override;
  int onSpan(const SpanRow& span) override;
  void endTrack(const TrackRow& track, std::vector<PickedSpan>& picked) override;

  // After the pass (either, any number of times): what analyzePipeline and pipelineStepActions
  // return for the tracks the pass read.
  PipelineAnalysis analysis();
  PipelineStepActions stepActions(int step, int replica);

 private:
  void finish();
  struct State;
  std::unique_ptr<State> s_;
};

// The communication spans, caller scopes, point-to-point scopes and leaf-op compute time of every
// track but counters and memory pools (comm.cpp).
class CommSpans : public SpanConsumer {
 public:
  explicit CommSpans(const TraceReader& reader);
  ~CommSpans() override;
  bool wantsTrack(const TrackRow& track) override;
  int onSpan(const SpanRow& span) override;
  void endTrack(const TrackRow& track, std::vector<PickedSpan>& picked) override;

  // After the pass, once: what analyzeComm returns for the tracks the pass read.
  CommAnalysis analysis();

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// One rank's memory analysis (memory.cpp): the span context (outermost ops, forward, backward and
// optimizer phases) from the rank's thread tracks during the pass, then the rank's memory events
// after it. Picks no span.
class MemorySpans : public SpanConsumer {
 public:
  MemorySpans(const TraceReader& reader, int rank);
  ~MemorySpans() override;
  bool wantsTrack(const TrackRow& track) override;
  int onSpan(const SpanRow& span) override;
  void endTrack(const TrackRow& track, std::vector<PickedSpan>& picked) override;

  // After the pass, once: streams the rank's memory events and appends its devices (and, with
  // keep_categories, its categories) to `out`, as analyzeMemory does for this rank.
  void analyze(const MemoryOptions& options, MemoryAnalysis& out);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tracerun::trace::analysis
