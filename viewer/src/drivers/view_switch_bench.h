// --bench-views: how long each tab takes to show its data after a switch (the issue's "views switch
// in <= 100 ms"), and the CPU time of the frames meanwhile. Drives a Viewer; prints medians. Not a
// test: bench/viewer_bench.sh runs it and docs/performance.md keeps the figures.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "app/viewer_app.h"

namespace tracerun::viewer {

class ViewSwitchBench {
 public:
  ViewSwitchBench(int rounds, std::vector<std::string> words);
  // Call after every frame; true when the benchmark is over.
  bool frame(Viewer& viewer, bool settled, double cpuMs);
  // One line per view: first switch (data computed) and later switches (data kept), medians.
  std::string text() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct PerView {
    std::vector<double> first_ms, again_ms, frame_ms;
  };
  int rounds_ = 0, round_ = 0;
  size_t next_ = 0;
  int afterSettle_ = 0;
  bool started_ = false;
  std::vector<std::string> words_;
  std::string current_;
  Clock::time_point switchedAt_;
  std::map<std::string, PerView> stats_;
};

}  // namespace tracerun::viewer
