// One streamed pass over the spans of a list of tracks, shared by several consumers (the report's
// pipeline, communication and memory analyses read every span once between them): each track's
// spans are read once, in span order, and handed to every consumer that wants the track; each
// picks the spans it needs, and the arguments of the picked spans are read once per track, only
// around the picked ones. Computes nothing itself and keeps nothing beyond one track's picks.
// Threading: the reader's (one thread at a time).
#pragma once

#include <vector>

#include "span_select.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

class SpanConsumer {
 public:
  virtual ~SpanConsumer() = default;
  // Whether the consumer reads this track (asked once per track, before its spans).
  virtual bool wantsTrack(const TrackRow& track) = 0;
  // Each span of a wanted track, in span order. A non-zero result picks the span with that code.
  virtual int onSpan(const SpanRow& span) = 0;
  // After a wanted track's last span: the spans picked on it, in span order, arguments filled in
  // (PickedSpan::args in the order the trace stores them). The consumer may move from them.
  virtual void endTrack(const TrackRow& track, std::vector<PickedSpan>& picked) = 0;
};

// Runs the pass over `tracks` in the given order. Null consumers are skipped.
void runSpanPass(const TraceReader& reader, const std::vector<TrackRow>& tracks,
                 const std::vector<SpanConsumer*>& consumers);

}  // namespace tracerun::trace::analysis
