// The interactive window and --screenshot drivers (drivers.h): the same frame loop, one waiting for
// input until the window closes, the other headless until three settled frames and a PNG. Both
// write --dump-layout/--dump-view at each settle, save the user's screenshots and log the first
// complete frame. No benchmarks here (drive_bench.cpp).
#include <chrono>
#include <cstdio>
#include <ctime>
#include <stdexcept>
#include <string>
#include <thread>

#include "commands.h"
#include "drivers/drivers.h"
#include "tracerun/trace/error.h"

namespace tracerun::viewer {

namespace {

using Clock = std::chrono::steady_clock;

// Writes `text` to `path` through a temporary file, so a reader never sees half of it.
void writeAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  if (std::FILE* out = std::fopen(tmp.c_str(), "w")) {
    std::fputs(text.c_str(), out);
    std::fclose(out);
    std::rename(tmp.c_str(), path.c_str());
  }
}

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// What both drivers do after each frame is drawn: the dumps when the view settles, the screenshots
// the user asked for (a timestamped PNG in the working directory), the first complete frame's line.
class FrameHooks {
 public:
  explicit FrameHooks(const DriverFlags& f) : f_(f), start_(Clock::now()) {}

  Clock::time_point start() const noexcept { return start_; }

  // --dump-layout and --dump-view of the frame just drawn.
  void writeDumps(Viewer& viewer) const {
    if (!f_.dump_layout.empty()) writeAtomically(f_.dump_layout, viewer.layoutText());
    if (!f_.dump_view.empty()) writeAtomically(f_.dump_view, viewer.activeViewText());
  }

  void afterFrame(Viewer& viewer, bool settled, const GlWindow::Frame& frame) {
    if (settled && !wasSettled_) {
      writeDumps(viewer);
      if (firstCompleteLogged_) viewer.log("settled");
    }
    wasSettled_ = settled;
    if (viewer.takeScreenshotRequest()) saveScreenshot(viewer, frame);
    if (settled && !firstCompleteLogged_) {
      firstCompleteLogged_ = true;
      if (f_.log_actions) {
        std::printf("first complete frame %.1f ms (%lld primitives)\n", msSince(start_),
                    static_cast<long long>(viewer.primitivesLastFrame()));
        std::fflush(stdout);
      }
    }
  }

 private:
  void saveScreenshot(Viewer& viewer, const GlWindow::Frame& frame) {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    char name[64];
    std::strftime(name, sizeof name, "traceview-%Y%m%d-%H%M%S", std::localtime(&now));
    std::string file = std::string(name) + "-" + std::to_string(++shots_) + ".png";
    if (writeBackBufferPng(file, frame.width, frame.height)) {
      viewer.log("saved screenshot " + file);
    } else {
      std::fprintf(stderr, "traceview: %s: cannot write the PNG\n", file.c_str());
    }
  }

  const DriverFlags& f_;
  Clock::time_point start_;
  bool wasSettled_ = false, firstCompleteLogged_ = false;
  int shots_ = 0;
};

}  // namespace

int driveWindow(GlWindow& window, Viewer& viewer, const DriverFlags& f) {
  FrameHooks hooks(f);
  while (!window.shouldClose() && !viewer.wantsQuit()) {
    window.pollEvents();
    const GlWindow::Frame frame = window.render(viewer);
    hooks.afterFrame(viewer, viewer.settled(), frame);
    window.swapBuffers();
  }
  return tools::kExitOk;
}

int driveScreenshot(GlWindow& window, Viewer& viewer, const DriverFlags& f) {
  FrameHooks hooks(f);
  int settledFrames = 0;
  while (!window.shouldClose() && !viewer.wantsQuit()) {
    window.pollEvents();
    const GlWindow::Frame frame = window.render(viewer);
    const bool settled = viewer.settled();
    hooks.afterFrame(viewer, settled, frame);
    settledFrames = settled ? settledFrames + 1 : 0;
    const double waited = msSince(hooks.start()) / 1000;
    // Three settled frames: the last answers are applied and laid out (track heights grow with
    // the depths read) before the pixels are taken.
    if (settledFrames >= 3 || waited > f.timeout_s) {
      // The dumps again, of the frame the PNG holds: those of the first settled frame may
      // describe another geometry (tests read the picture through them).
      hooks.writeDumps(viewer);
      window.finishDrawing();
      if (!writeBackBufferPng(f.screenshot, frame.width, frame.height)) {
        throw std::runtime_error(f.screenshot + ": cannot write the PNG");
      }
      if (waited > f.timeout_s) {
        throw std::runtime_error("the view did not settle within " +
                                 std::to_string(static_cast<int>(f.timeout_s)) +
                                 " s; wrote what was drawn to " + f.screenshot);
      }
      if (!viewer.problem().empty()) throw trace::TraceError(viewer.problem());
      return tools::kExitOk;
    }
    if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    window.swapBuffers();
  }
  return tools::kExitOk;
}

}  // namespace tracerun::viewer
