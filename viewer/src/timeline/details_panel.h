// The timeline's Details side tab: the selected span's numbers (duration, self time, shapes,
// arguments), its parents, children and flows, each clickable. Holds no state of its own: it
// draws the session's selection and selects through it. Not the hover tooltip (span_track.cpp).
#pragma once

#include <functional>

#include "app/session.h"

namespace tracerun::viewer {

// `zoomTo` moves the timeline to a span (the "Zoom to span" button).
void drawDetailsPanel(Session& s, const std::function<void(const SpanRef&)>& zoomTo);

}  // namespace tracerun::viewer
