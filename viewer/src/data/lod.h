// The timeline's visible-range → primitives step: spans of one track folded so that a frame draws
// O(pixel columns) primitives, and counters reduced to one min/max column per pixel. Pure
// functions: no ImGui, no reader, no I/O, so they are unit-tested without a window
// (tests/viewer/lod_test.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tracerun::viewer {

// One span as the fold step needs it (times in ns on the trace's axis).
struct LodSpan {
  int64_t id = 0;
  int64_t start = 0, end = 0;
  int depth = 0;
  uint32_t name = 0;     // interned name id
  uint8_t category = 0;  // core::Category
  int64_t count = 1;     // spans it stands for (an item of trace/'s draw list may stand for many)
  bool fold = false;     // already a fold ("N spans") when it comes in
};

// A drawn box: one span (count == 1) or "N spans" folded together (count > 1). For a fold, start
// and end cover every member and `dominant` is the index (into the input) of the longest member.
struct Primitive {
  int64_t start = 0, end = 0;
  int depth = 0;
  int64_t count = 1;
  size_t dominant = 0;
  bool fold = false;  // drawn as "N spans": several inputs merged, or an input that was a fold
};

struct LodWindow {
  int64_t t0 = 0, t1 = 0;  // the window drawn (inclusive overlap test)
  double ns_per_px = 1;    // > 0
  double min_px = 3;       // spans narrower than this fold with their small neighbours
};

// Pixel column of time t in the window (columns may be negative or past the width for clipped
// spans; the primitive's start is clipped to t0 first).
int64_t columnOf(int64_t t, const LodWindow& w);

// Folds `spans` (any depth mix, sorted by start) over the window. Spans that do not overlap
// [t0, t1] are skipped. Guarantees, per depth:
//  - every overlapping input belongs to exactly one primitive (their counts add up);
//  - the start columns (of max(start, t0)) of the primitives strictly increase, so at most one
//    primitive starts in each pixel column: a track draws at most (columns + 1) × depths boxes;
//  - a span at least min_px wide (after clipping) is drawn alone (count == 1) unless another span
//    of its depth starts in the same pixel column; narrower spans fold with the narrow spans that
//    follow them within min_px.
// Output is ordered by depth, then start.
std::vector<Primitive> foldSpans(const std::vector<LodSpan>& spans, const LodWindow& w);

struct CounterPoint {
  int64_t ts = 0;
  double value = 0;
};

// One pixel column of a counter: the value it enters with, the range it takes and the value it
// leaves with (a counter is a step function: it holds its last value until the next point).
struct CounterColumn {
  int64_t column = 0;
  double first = 0, min = 0, max = 0, last = 0;
};

// Reduces points (sorted by ts) to at most one column per pixel column that holds a point, plus
// the column 0 entry value carried in from the last point before t0 (when there is one).
std::vector<CounterColumn> reduceCounter(const std::vector<CounterPoint>& points,
                                         const LodWindow& w);

}  // namespace tracerun::viewer
