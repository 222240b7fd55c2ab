// The colours of tracedot's pictures, in one place so that traceview draws the same graph in the
// same colours: the temperature scale (cold blue -> hot red, gprof2dot's), the diff scale (blue =
// less, white = same, red = more) and the fixed colours. Pure functions; no state.
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
inline constexpr Rgb kOther{224, 224, 224};       // "other (k nodes, x%)"
inline constexpr Rgb kCollective{255, 236, 179};  // collectives and point-to-point messages
inline constexpr Rgb kCritical{204, 0, 0};        // the critical path
inline constexpr Rgb kLink{96, 96, 160};          // forward -> backward and other flows
inline constexpr Rgb kForward{198, 219, 239};     // forward actions (pipeline graph)
inline constexpr Rgb kBackward{253, 208, 162};    // backward actions (pipeline graph)
inline constexpr Rgb kMessage{150, 150, 150};     // send -> receive edges
inline constexpr Rgb kCluster{245, 245, 245};     // cluster background
inline constexpr Rgb kClusterBorder{170, 170, 170};

}  // namespace tracerun::dot::palette
