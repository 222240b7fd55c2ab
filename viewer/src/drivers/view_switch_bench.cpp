// --bench-views (see view_switch_bench.h).
#include "drivers/view_switch_bench.h"

#include <algorithm>
#include <cstdio>

namespace tracerun::viewer {

namespace {
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
double maxOf(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}
}  // namespace

ViewSwitchBench::ViewSwitchBench(int rounds, std::vector<std::string> words)
    : rounds_(rounds), words_(std::move(words)) {}

bool ViewSwitchBench::frame(Viewer& viewer, bool settled, double cpuMs) {
  if (!current_.empty()) stats_[current_].frame_ms.push_back(cpuMs);
  if (!settled) {
    afterSettle_ = 0;
    return false;
  }
  if (started_) {
    // Settled: the switch is complete once the tab drew its data; two more frames keep the
    // figure honest about layout that grows after the data arrives.
    if (++afterSettle_ < 2) return false;
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - switchedAt_).count();
    PerView& p = stats_[current_];
    (round_ == 0 ? p.first_ms : p.again_ms).push_back(ms);
  }
  started_ = true;
  if (next_ == words_.size()) {
    next_ = 0;
    if (++round_ > rounds_) return true;
  }
  current_ = words_[next_++];
  viewer.showView(current_);
  switchedAt_ = Clock::now();
  afterSettle_ = 0;
  return false;
}

std::string ViewSwitchBench::text() const {
  std::string out = "view first_switch_ms later_switch_ms_p50 frame_cpu_ms_p50 frame_cpu_ms_max\n";
  for (const auto& w : words_) {
    const auto it = stats_.find(w);
    if (it == stats_.end()) continue;
    char b[200];
    std::snprintf(b, sizeof b, "%s %.1f %.1f %.2f %.2f\n", w.c_str(), median(it->second.first_ms),
                  median(it->second.again_ms), median(it->second.frame_ms),
                  maxOf(it->second.frame_ms));
    out += b;
  }
  return out;
}

}  // namespace tracerun::viewer
