// The list of views, in tab order: the one owner of the tab set and of the words `--view` accepts.
// The timeline (timeline_view.h) is always the first tab; the shell puts it there because it
// shares the shell's session. Each view lives in its own file (pipeline_view.cpp, ...).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "app/view.h"

namespace tracerun::viewer {

// The word of the timeline tab (TimelineView, the first tab).
inline constexpr const char* kTimelineWord = "timeline";

// One fresh instance of every view after the timeline, in tab order (each time a trace opens).
std::vector<std::unique_ptr<View>> makeViews();
// "timeline" then every view's word, in tab order (for --view's check and its help).
std::vector<std::string> viewWords();

}  // namespace tracerun::viewer
