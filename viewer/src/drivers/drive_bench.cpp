// The benchmark drivers (drivers.h): --bench-sweep zooms from the whole run to 1 us/px in a fixed
// number of steps and prints frame times, primitives and memory; --bench-views switches through
// every tab (view_switch_bench.h) and prints how long each takes. Headless, no vsync. Not tests:
// bench/viewer_bench.sh runs them and docs/performance.md keeps the figures.
#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <vector>

#include "app/views.h"
#include "commands.h"
#include "drivers/drivers.h"
#include "drivers/view_switch_bench.h"

namespace tracerun::viewer {

namespace {

using Clock = std::chrono::steady_clock;

// Resident memory of this process in kB: (VmRSS, VmHWM) from /proc/self/status.
std::pair<long, long> residentKb() {
  long rss = 0, hwm = 0;
  if (std::FILE* in = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, in)) {
      std::sscanf(line, "VmRSS: %ld", &rss);
      std::sscanf(line, "VmHWM: %ld", &hwm);
    }
    std::fclose(in);
  }
  return {rss, hwm};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

// The scripted sweep of --bench-sweep: per step, every frame until the view settled plus two.
struct BenchState {
  int steps = 0;
  int step = -1;  // -1: waiting for the first complete frame
  int afterSettle = 0;
  double firstCompleteMs = 0;
  std::vector<double> cpuMs;  // ImGui build + draw submission, every frame of the sweep
  std::vector<double> settleMs;
  int64_t maxPrims = 0, maxVerts = 0;
  Clock::time_point stepStart;
};

// One frame of the sweep; true when it is over.
bool benchStep(BenchState& b, Viewer& viewer, bool settled, double cpuMs, Clock::time_point start) {
  const auto now = Clock::now();
  const int64_t prims = viewer.primitivesLastFrame();
  const ImDrawData* dd = ImGui::GetDrawData();
  if (b.step >= 0) {
    b.cpuMs.push_back(cpuMs);
    b.maxPrims = std::max(b.maxPrims, prims);
    b.maxVerts = std::max<int64_t>(b.maxVerts, dd ? dd->TotalVtxCount : 0);
  }
  if (!settled) {
    b.afterSettle = 0;
    return false;
  }
  if (b.step < 0) {
    b.firstCompleteMs = std::chrono::duration<double, std::milli>(now - start).count();
  } else if (++b.afterSettle < 3) {
    return false;
  } else {
    b.settleMs.push_back(std::chrono::duration<double, std::milli>(now - b.stepStart).count());
  }
  if (++b.step > b.steps) return true;
  // Step k shows ns/px = whole * (1 us / whole)^(k / steps), centred on the middle of the run.
  const auto [a, z] = viewer.traceRange();
  const double whole = static_cast<double>(z - a);
  const double w = viewer.timeAreaWidth();
  const double fullNpp = whole / w, endNpp = std::min(1000.0, fullNpp);
  const double npp = fullNpp * std::pow(endNpp / fullNpp, static_cast<double>(b.step) / b.steps);
  const double c = static_cast<double>(a) + whole * 0.37;  // off the middle: not a step boundary
  viewer.showRange(c - npp * w / 2, c + npp * w / 2);
  b.stepStart = now;
  b.afterSettle = 0;
  return false;
}

void printBench(const BenchState& b, const DriverFlags& f) {
  const auto [rss, hwm] = residentKb();
  std::printf("traceview bench: %s, %d zoom steps to 1 us/px, window %s\n", f.path.c_str(), b.steps,
              f.size.c_str());
  std::printf("first_complete_frame_ms %.1f\n", b.firstCompleteMs);
  std::printf("frames %zu\n", b.cpuMs.size());
  std::printf("cpu_frame_ms_p50 %.2f\n", percentile(b.cpuMs, 0.5));
  std::printf("cpu_frame_ms_p99 %.2f\n", percentile(b.cpuMs, 0.99));
  std::printf("cpu_frame_ms_max %.2f\n", percentile(b.cpuMs, 1.0));
  std::printf("settle_ms_p50 %.1f\n", percentile(b.settleMs, 0.5));
  std::printf("settle_ms_max %.1f\n", percentile(b.settleMs, 1.0));
  std::printf("primitives_max %lld\n", static_cast<long long>(b.maxPrims));
  std::printf("vertices_max %lld\n", static_cast<long long>(b.maxVerts));
  std::printf("rss_kb %ld\nrss_peak_kb %ld\n", rss, hwm);
}

}  // namespace

int driveBenchSweep(GlWindow& window, Viewer& viewer, const DriverFlags& f) {
  const auto start = Clock::now();
  BenchState bench;
  bench.steps = f.bench_steps;
  while (!window.shouldClose() && !viewer.wantsQuit()) {
    window.pollEvents();
    const GlWindow::Frame frame = window.render(viewer);
    if (benchStep(bench, viewer, viewer.settled(), frame.cpu_ms, start)) {
      printBench(bench, f);
      return tools::kExitOk;
    }
    window.swapBuffers();
  }
  return tools::kExitOk;
}

int driveBenchViews(GlWindow& window, Viewer& viewer, const DriverFlags& f) {
  ViewSwitchBench bench(f.bench_views, viewWords());
  while (!window.shouldClose() && !viewer.wantsQuit()) {
    window.pollEvents();
    const GlWindow::Frame frame = window.render(viewer);
    if (bench.frame(viewer, viewer.settled(), frame.cpu_ms)) {
      std::printf("traceview view switches: %s, %d rounds, window %s\n%s", f.path.c_str(),
                  f.bench_views, f.size.c_str(), bench.text().c_str());
      return tools::kExitOk;
    }
    window.swapBuffers();
  }
  return tools::kExitOk;
}

}  // namespace tracerun::viewer
