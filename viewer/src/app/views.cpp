// The tab set (see views.h). Adding a view: its factory line here, its file in viewer/CMakeLists.
#include "app/views.h"

#include "views/collectives_view.h"
#include "views/compare_view.h"
#include "views/gpu_view.h"
#include "views/memory_view.h"
#include "views/pipeline_view.h"
#include "views/stats_view.h"
#ifdef TRACEVIEW_WITH_GRAPHS
#include "graph/graph_view.h"
#endif

namespace tracerun::viewer {

std::vector<std::unique_ptr<View>> makeViews() {
  std::vector<std::unique_ptr<View>> views;
  // One line per view, in tab order, e.g. views.push_back(makePipelineView());
  views.push_back(makePipelineView());
  views.push_back(makeMemoryView());
  views.push_back(makeCollectivesView());
  views.push_back(makeGpuView());
#ifdef TRACEVIEW_WITH_GRAPHS
  appendGraphViews(views);  // callgraph, model (tracedot's pictures; need Graphviz)
#endif
  views.push_back(makeStatsView());
  views.push_back(makeCompareView());
  return views;
}

std::vector<std::string> viewWords() {
  std::vector<std::string> words{kTimelineWord};
  for (const auto& v : makeViews()) words.emplace_back(v->word());
  return words;
}

}  // namespace tracerun::viewer
