// Folding spans and reducing counters per pixel column (see lod.h). Pure; no ImGui, no reader.
#include "data/lod.h"

#include <algorithm>
#include <cmath>

namespace tracerun::viewer {

int64_t columnOf(int64_t t, const LodWindow& w) {
  return static_cast<int64_t>(std::floor(static_cast<double>(t - w.t0) / w.ns_per_px));
}

namespace {

struct Open {
  bool has = false;
  Primitive p;
  int64_t col = 0;        // start column of p
  double x0 = 0, x1 = 0;  // pixel extent of p (clipped)
  int64_t dominantDur = 0;
};

}  // namespace

std::vector<Primitive> foldSpans(const std::vector<LodSpan>& spans, const LodWindow& w) {
  std::vector<std::vector<Primitive>> byDepth;
  std::vector<Open> open;
  auto flush = [&](int d) {
    Open& o = open[static_cast<size_t>(d)];
    if (o.has) byDepth[static_cast<size_t>(d)].push_back(o.p);
    o.has = false;
  };
  for (size_t i = 0; i < spans.size(); ++i) {
    const LodSpan& s = spans[i];
    if (s.end < w.t0 || s.start > w.t1 || s.depth < 0) continue;
    const size_t d = static_cast<size_t>(s.depth);
    if (d >= open.size()) {
      open.resize(d + 1);
      byDepth.resize(d + 1);
    }
    const int64_t cs = std::max(s.start, w.t0), ce = std::min(s.end, w.t1);
    const double x0 = static_cast<double>(cs - w.t0) / w.ns_per_px;
    const double x1 = static_cast<double>(ce - w.t0) / w.ns_per_px;
    const int64_t col = columnOf(cs, w);
    const bool small = x1 - x0 < w.min_px;
    Open& o = open[d];
    if (o.has) {
      const bool openSmall = o.p.fold || o.x1 - o.x0 < w.min_px;
      if (col <= o.col || (small && openSmall && x0 - o.x1 < w.min_px)) {
        o.p.end = std::max(o.p.end, s.end);
        o.x1 = std::max(o.x1, x1);
        o.p.count += s.count;
        o.p.fold = true;
        if (s.end - s.start > o.dominantDur) {
          o.dominantDur = s.end - s.start;
          o.p.dominant = i;
        }
        continue;
      }
      flush(static_cast<int>(d));
    }
    o.has = true;
    o.p = Primitive{s.start, s.end, s.depth, s.count, i, s.fold};
    o.col = col;
    o.x0 = x0;
    o.x1 = x1;
    o.dominantDur = s.end - s.start;
  }
  std::vector<Primitive> out;
  for (size_t d = 0; d < open.size(); ++d) {
    flush(static_cast<int>(d));
    out.insert(out.end(), byDepth[d].begin(), byDepth[d].end());
  }
  return out;
}

std::vector<CounterColumn> reduceCounter(const std::vector<CounterPoint>& points,
                                         const LodWindow& w) {
  std::vector<CounterColumn> out;
  const auto first = std::lower_bound(points.begin(), points.end(), w.t0,
                                      [](const CounterPoint& p, int64_t t) { return p.ts < t; });
  if (first != points.begin()) {
    const double v = std::prev(first)->value;
    out.push_back({0, v, v, v, v});
  }
  for (auto it = first; it != points.end() && it->ts <= w.t1; ++it) {
    const int64_t col = columnOf(it->ts, w);
    if (!out.empty() && out.back().column == col) {
      CounterColumn& c = out.back();
      c.min = std::min(c.min, it->value);
      c.max = std::max(c.max, it->value);
      c.last = it->value;
      continue;
    }
    const double entry = out.empty() ? it->value : out.back().last;
    out.push_back({col, entry, std::min(entry, it->value), std::max(entry, it->value), it->value});
  }
  return out;
}

}  // namespace tracerun::viewer
