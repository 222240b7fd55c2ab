// The closed-form idle (bubble) fraction of every schedule, as numbers and as the words the report
// prints. Formulas only; tests/schedule checks each against a replay of the action lists.
#pragma once

#include <string>

#include "tracerun/schedule/kind.h"
#include "tracerun/schedule/shape.h"

namespace tracerun::schedule {

// Every stage's idle fraction with forward and backward of equal cost per chunk (zb-h1: F = B = W):
// gpipe, 1f1b and 2bw (p-1)/(m+p-1); interleaved ((p-1)/v)/(m+(p-1)/v); zb-h1 (p-1)/(3m+p-1);
// chimera (p-2)/(2m+p-2) (paper, Table 1; exact when F == B). shape.chunks counts for interleaved
// only. 0 for an empty shape.
double idealBubbleFraction(ScheduleKind kind, const PipelineShape& shape);

// The formula idealBubbleFraction uses (zb-h1: zbH1BubbleFraction's, with F B W), as text.
std::string closedFormName(ScheduleKind kind);

// ZB-H1's idle fraction with forward, input-gradient and weight-gradient costs f, b, w per
// microbatch: (p-1)(f+b-w) / (m(f+b+w) + (p-1)(f+b-w)). Exact for zbH1ComputeOrder when m >= p
// and w <= min(f, b); otherwise a lower bound. Never negative; 0 for an empty shape.
double zbH1BubbleFraction(const PipelineShape& shape, double f, double b, double w);

// The idle fraction of every stage over a 2bw run of `batches` batches: the fill and drain,
// (p - 1)(F + B), once per run, against batches * m * (F + B) of work: (p - 1) / (batches*m + p -
// 1).
double twoBwFillFraction(const PipelineShape& shape, int batches);

}  // namespace tracerun::schedule
