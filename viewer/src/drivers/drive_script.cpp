// traceview --script FILE (drivers.h): the script's events (script.h) fed to ImGui frame by frame
// in a hidden window, in place of a user: the mouse, its buttons and wheel, keys and text, tab
// switches; screenshots and dumps at the frames named; holds at `settle` until the data arrived.
// Frame 0 is the first settled frame. Frames, not wall-clock time, order the events: the loop
// only idles 2 ms a frame while the data thread works, and gives up after --settle-timeout.
#include <imgui.h>

#include <array>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "drivers/drivers.h"
#include "drivers/script.h"
#include "tracerun/trace/error.h"

namespace tracerun::viewer {

namespace {

using Clock = std::chrono::steady_clock;
using Kind = ScriptEvent::Kind;
constexpr int kKeyShift = 340, kKeyCtrl = 341, kKeyAlt = 342;  // GLFW's left modifier keys
constexpr int kSettledFrames = 3;  // as --screenshot: the last answers applied and laid out

void writeText(const std::string& path, const std::string& text) {
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (out == nullptr) throw std::runtime_error(path + ": cannot write it (--script)");
  std::fputs(text.c_str(), out);
  std::fclose(out);
}

// The input state the script sets, applied to ImGuiIO before each ImGui::NewFrame (after GLFW's
// backend, which reads no mouse from a hidden window).
class ScriptInput {
 public:
  void event(const ScriptEvent& e) {
    switch (e.kind) {
      case Kind::kMove:
        x_ = e.x, y_ = e.y;
        break;
      case Kind::kPress:
      case Kind::kRelease:
        buttons_[static_cast<size_t>(e.button)] = e.kind == Kind::kPress;
        break;
      case Kind::kWheel:
        wheel_ += e.amount;
        break;
      case Kind::kKeyDown:
      case Kind::kKeyUp:
        keys_.push_back({e.key, e.kind == Kind::kKeyDown});
        break;
      case Kind::kType:
        text_ += e.text;
        break;
      default:
        break;
    }
  }
  void apply(ImGuiIO& io) {
    io.MousePos = ImVec2(x_, y_);
    for (size_t b = 0; b < buttons_.size(); ++b) io.MouseDown[b] = buttons_[b];
    io.MouseWheel += wheel_;
    wheel_ = 0;
    for (const auto& [key, down] : keys_)
      if (key >= 0 && key < static_cast<int>(IM_ARRAYSIZE(io.KeysDown))) io.KeysDown[key] = down;
    keys_.clear();
    io.KeyShift = io.KeysDown[kKeyShift];
    io.KeyCtrl = io.KeysDown[kKeyCtrl];
    io.KeyAlt = io.KeysDown[kKeyAlt];
    for (char c : text_) io.AddInputCharacter(static_cast<unsigned char>(c));
    text_.clear();
  }

 private:
  float x_ = -FLT_MAX, y_ = -FLT_MAX, wheel_ = 0;
  std::array<bool, 3> buttons_{};
  std::vector<std::pair<int, bool>> keys_;
  std::string text_;
};

// What happens after frame `e.frame` is drawn; true for quit.
bool output(const ScriptEvent& e, GlWindow& window, Viewer& viewer, const GlWindow::Frame& f) {
  switch (e.kind) {
    case Kind::kScreenshot:
      window.finishDrawing();
      if (!writeBackBufferPng(e.text, f.width, f.height))
        throw std::runtime_error(e.text + ": cannot write the PNG (--script)");
      viewer.log("saved screenshot " + e.text);
      return false;
    case Kind::kDumpLayout:
      writeText(e.text, viewer.layoutText());
      return false;
    case Kind::kDumpView:
      writeText(e.text, viewer.activeViewText());
      return false;
    case Kind::kQuit:
      return true;
    default:
      return false;
  }
}

}  // namespace

int driveScript(GlWindow& window, Viewer& viewer, const DriverFlags& f,
                const std::vector<ScriptEvent>& script) {
  const auto start = Clock::now();
  ScriptInput input;
  size_t next = 0;      // the first event not yet applied
  int64_t frame = -1;   // the script's frame; -1 until the view first settled
  bool holding = true;  // waiting for the view to settle (at start, and at `settle`)
  int settledFrames = 0;
  while (!window.shouldClose() && !viewer.wantsQuit()) {
    window.pollEvents();
    // Before the frame: the inputs and tab switches of this frame.
    size_t after = next;
    if (!holding) {
      for (; after < script.size() && script[after].frame == frame; ++after) {
        const ScriptEvent& e = script[after];
        input.event(e);
        if (e.kind == Kind::kTab && !viewer.showView(e.text))
          throw std::runtime_error(f.script + ":" + std::to_string(e.line) + ": no tab '" + e.text +
                                   "'");
        if (e.kind == Kind::kSettle) {
          ++after;
          break;  // the rest of this frame's events wait for the settle
        }
      }
    }
    const GlWindow::Frame drawn = window.render(viewer, [&](ImGuiIO& io) { input.apply(io); });
    const bool settled = viewer.settled();
    settledFrames = settled ? settledFrames + 1 : 0;
    if (!viewer.problem().empty() && settled) throw trace::TraceError(viewer.problem());
    if (std::chrono::duration<double>(Clock::now() - start).count() > f.timeout_s) {
      throw std::runtime_error(f.script + ": the script did not finish within " +
                               std::to_string(static_cast<int>(f.timeout_s)) +
                               " s (--settle-timeout); it stopped at frame " +
                               std::to_string(frame));
    }
    if (holding) {
      if (settledFrames >= kSettledFrames) {
        holding = false;
        if (frame < 0) frame = 0;
      }
      if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(2));
      window.swapBuffers();
      continue;
    }
    // After the frame: its screenshots, dumps, quit; a settle holds the next frames.
    for (; next < after; ++next) {
      const ScriptEvent& e = script[next];
      if (output(e, window, viewer, drawn)) return tools::kExitOk;
      if (e.kind == Kind::kSettle) {
        holding = true;
        settledFrames = 0;
      }
    }
    if (!holding && (next >= script.size() || script[next].frame > frame)) ++frame;
    if (next >= script.size()) return tools::kExitOk;  // the script's end: quit
    window.swapBuffers();
  }
  return tools::kExitOk;
}

}  // namespace tracerun::viewer
