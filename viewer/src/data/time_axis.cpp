// Ruler ticks, time labels and time parsing (see time_axis.h).
#include "data/time_axis.h"

#include "tracerun/trace/format.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tracerun::viewer {

int64_t majorStep(double ns_per_px, double min_major_px) {
  const double want = std::max(1.0, ns_per_px * min_major_px);
  int64_t step = 1;
  for (;;) {
    for (int m : {1, 2, 5}) {
      if (static_cast<double>(step) * m >= want) return step * m;
    }
    if (step > INT64_MAX / 100) return step * 10;
    step *= 10;
  }
}

std::vector<Tick> rulerTicks(int64_t t0, int64_t t1, double width_px, double min_major_px,
                             int64_t origin) {
  std::vector<Tick> out;
  if (t1 <= t0 || width_px <= 0) return out;
  const double nsPerPx = static_cast<double>(t1 - t0) / width_px;
  const int64_t major = majorStep(nsPerPx, min_major_px);
  const int64_t minor = major % 5 == 0 ? major / 5 : major / 2 > 0 ? major / 2 : major;
  const int64_t rel0 = t0 - origin;
  int64_t k = rel0 >= 0 ? rel0 / minor : -((-rel0 + minor - 1) / minor);
  for (int guard = 0; guard < 10000; ++guard, ++k) {
    const int64_t rel = k * minor;
    const int64_t t = rel + origin;
    if (t > t1) break;
    if (t < t0) continue;
    Tick tick;
    tick.t = t;
    tick.major = rel % major == 0;
    if (tick.major) tick.label = timeLabel(rel, major);
    out.push_back(tick);
  }
  return out;
}

std::string timeLabel(int64_t t, int64_t step) {
  if (t == 0) return "0";
  const double a = std::fabs(static_cast<double>(t));
  const char* unit = "ns";
  double scale = 1;
  if (a >= 1e9) {
    unit = "s", scale = 1e9;
  } else if (a >= 1e6) {
    unit = "ms", scale = 1e6;
  } else if (a >= 1e3) {
    unit = "us", scale = 1e3;
  }
  // Enough decimals to tell two ticks apart.
  int decimals = 0;
  for (double s = static_cast<double>(step) / scale; s < 1 && decimals < 9; s *= 10) ++decimals;
  char b[64];
  std::snprintf(b, sizeof b, "%.*f %s", decimals, static_cast<double>(t) / scale, unit);
  return b;
}

std::string durationText(int64_t ns) {
  return trace::formatDuration(static_cast<double>(ns));
}

std::optional<int64_t> parseTime(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str()) return std::nullopt;
  const std::string unit(end);
  double scale = 0;
  if (unit.empty() || unit == "ns")
    scale = 1;
  else if (unit == "us")
    scale = 1e3;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "s")
    scale = 1e9;
  else
    return std::nullopt;
  const double ns = v * scale;
  if (!std::isfinite(ns) || std::fabs(ns) > 9e18) return std::nullopt;
  return static_cast<int64_t>(std::llround(ns));
}

}  // namespace tracerun::viewer
