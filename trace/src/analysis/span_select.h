// Private helpers shared by the analyses: picking a track's spans by name (with a per-string-id
// cache, so a 10M-span pass compares no text), fetching the chosen spans' arguments, and merging
// intervals. Reads only through TraceReader; holds nothing of a trace beyond what is asked for.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

// Maps each string id to a small code (0 = not interesting) by calling classify(text) once per id.
class NameCodes {
 public:
  NameCodes(const TraceReader& reader, std::function<int(const std::string&)> classify);
  int operator()(core::StringId id) const;
  // The id of `text` if the trace holds it, else 0 (linear scan: call once, not per span).
  static core::StringId find(const TraceReader& reader, const std::string& text);

 private:
  const TraceReader& reader_;
  std::function<int(const std::string&)> classify_;
  mutable std::vector<int8_t> codes_;  // -1 = not yet classified
};

// A chosen span with the rank and kind of its track and its arguments.
struct PickedSpan {
  SpanRow span;
  int rank = 0;
  int code = 0;  // what NameCodes said about its name
  std::vector<std::pair<core::StringId, int64_t>> args;
  // The value of the argument named by `key` (an id from NameCodes::find), or `fallback`.
  int64_t arg(core::StringId key, int64_t fallback = -1) const;
};

// Streams the track's spans, keeps those for which keep(span) returns a non-zero code, and fills
// in their arguments (one query for the track). Result in start order.
std::vector<PickedSpan> pickSpans(const TraceReader& reader, const TrackRow& track,
                                  const std::function<int(const SpanRow&)>& keep);

// Sorted, disjoint [start, end) intervals.
using Intervals = std::vector<std::pair<int64_t, int64_t>>;
// Sorts and merges overlapping or touching intervals in place.
void normalize(Intervals& v);
// Total length of normalized intervals.
int64_t totalLength(const Intervals& v);
// Length of the intersection of two normalized interval lists.
int64_t overlapLength(const Intervals& a, const Intervals& b);
// Whether t lies in [start, end] of one of the normalized intervals.
bool contains(const Intervals& v, int64_t t);

// a + b and a - b saturated at the int64 limits: sums and differences of a damaged file's values
// (times near INT64_MIN/MAX, huge byte counts) stay defined.
inline int64_t satAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}
inline int64_t satSub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

// Medians; 0 when empty. Integers: the lower of the middle two for an even count (a value that
// was measured); doubles: their mean.
int64_t median(std::vector<int64_t> values);
double median(std::vector<double> values);

}  // namespace tracerun::trace::analysis
