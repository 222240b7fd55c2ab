// The colour scales of tracedot's pictures: the temperature scale (cold blue -> hot red,
// gprof2dot's), the diff scale (blue = less, white = same, red = more) and the ink that reads on a
// fill. The fixed colours per role are a Theme's (theme.h). Pure functions; no state.
#pragma once

#include "tracerun/dot/graph.h"

namespace tracerun::dot::palette {

// t in [0, 1] (clamped): 0 dark blue, 0.5 green-yellow, 1 saturated red. gamma < 1 lifts small
// shares so that a 2% node is not as dark as a 0% one.
Rgb temperature(double t, double gamma = 0.5);
// change in [-1, 1] (clamped), relative: -1 blue, 0 white, +1 red.
Rgb diverging(double change);
// Black or white, whichever reads better on `fill`.
Rgb textOn(Rgb fill);

inline constexpr Rgb kBlack{0, 0, 0};
inline constexpr Rgb kWhite{255, 255, 255};

}  // namespace tracerun::dot::palette
