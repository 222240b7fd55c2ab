// The list of views beside the timeline, in tab order: the one owner of the tab set and of the
// words `--view` accepts. Each view lives in its own file (pipeline_view.cpp, ...).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "view.h"

namespace tracerun::viewer {

// The word of the timeline tab (it is drawn by the Viewer, not a View).
inline constexpr const char* kTimelineWord = "timeline";

// One fresh instance of every view, in tab order (called each time a trace opens).
std::vector<std::unique_ptr<View>> makeViews();
// "timeline" then every view's word, in tab order (for --view's check and its help).
std::vector<std::string> viewWords();

}  // namespace tracerun::viewer
