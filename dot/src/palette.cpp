// The palette's scales (see palette.h): HSL interpolation as gprof2dot's Theme does it.
#include "tracerun/dot/palette.h"

#include <algorithm>
#include <cmath>

namespace tracerun::dot::palette {

namespace {

double clamp01(double x) {
  return std::isnan(x) ? 0.0 : std::min(1.0, std::max(0.0, x));
}

uint8_t byte(double x) {
  return static_cast<uint8_t>(std::lround(clamp01(x) * 255.0));
}

double hueChannel(double m1, double m2, double h) {
  if (h < 0) h += 1;
  if (h > 1) h -= 1;
  if (h * 6 < 1) return m1 + (m2 - m1) * h * 6;
  if (h * 2 < 1) return m2;
  if (h * 3 < 2) return m1 + (m2 - m1) * (2.0 / 3.0 - h) * 6;
  return m1;
}

Rgb hsl(double h, double s, double l) {
  const double m2 = l <= 0.5 ? l * (s + 1) : l + s - l * s;
  const double m1 = l * 2 - m2;
  return {byte(hueChannel(m1, m2, h + 1.0 / 3.0)), byte(hueChannel(m1, m2, h)),
          byte(hueChannel(m1, m2, h - 1.0 / 3.0))};
}

}  // namespace

Rgb temperature(double t, double gamma) {
  const double w = std::pow(clamp01(t), gamma > 0 ? gamma : 1.0);
  // gprof2dot's TEMPERATURE_COLORMAP: from (2/3, 0.80, 0.25) dark blue to (0, 1, 0.5) red.
  const double h = 2.0 / 3.0 + w * (0.0 - 2.0 / 3.0);
  const double s = 0.80 + w * (1.0 - 0.80);
  const double l = 0.25 + w * (0.5 - 0.25);
  return hsl(h, s, l);
}

Rgb diverging(double change) {
  const double c = std::isnan(change) ? 0.0 : std::min(1.0, std::max(-1.0, change));
  const double a = std::fabs(c);
  // White at 0, towards (33, 102, 172) blue or (178, 24, 43) red.
  const Rgb end = c < 0 ? Rgb{33, 102, 172} : Rgb{178, 24, 43};
  auto mix = [a](uint8_t to) { return byte((255.0 + (to - 255.0) * a) / 255.0); };
  return {mix(end.r), mix(end.g), mix(end.b)};
}

Rgb textOn(Rgb fill) {
  const double luma = 0.299 * fill.r + 0.587 * fill.g + 0.114 * fill.b;
  return luma < 140 ? kWhite : kBlack;
}

}  // namespace tracerun::dot::palette
