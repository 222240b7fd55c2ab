// traceview: the desktop viewer's entry point. Parses flags (the suite's runTool plumbing), opens
// the GLFW window and OpenGL 3.3 context, runs the frame loop and, with --screenshot, renders one
// settled frame into a PNG. The UI itself is in viewer_app.cpp; nothing here reads a trace.
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "commands.h"
#include "time_axis.h"
#include "viewer_app.h"

namespace {

using tracerun::viewer::Viewer;
using tracerun::viewer::ViewerOptions;

struct Flags {
  std::string path, screenshot, size = "1600x900", range, go;
  int64_t select = -1;
  bool log_actions = false;
  double timeout_s = 120;
};

struct GlfwSession {
  GlfwSession() = default;
  GlfwSession(const GlfwSession&) = delete;
  GlfwSession& operator=(const GlfwSession&) = delete;
  ~GlfwSession() {
    if (imgui) {
      ImGui_ImplOpenGL3_Shutdown();
      ImGui_ImplGlfw_Shutdown();
      ImGui::DestroyContext();
    }
    if (window != nullptr) glfwDestroyWindow(window);
    if (initialised) glfwTerminate();
  }
  bool initialised = false, imgui = false;
  GLFWwindow* window = nullptr;  // owned: destroyed above
};

void usageError(const std::string& what) { throw CLI::ValidationError(what); }

std::pair<int, int> parseSize(const std::string& s) {
  int w = 0, h = 0;
  char x = 0;
  if (std::sscanf(s.c_str(), "%d%c%d", &w, &x, &h) != 3 || (x != 'x' && x != 'X') || w < 64 ||
      h < 64 || w > 16384 || h > 16384) {
    usageError("--size: expected WIDTHxHEIGHT between 64 and 16384, not '" + s + "'");
  }
  return {w, h};
}

// Writes the back buffer as a PNG (rows flipped: OpenGL's origin is bottom-left).
bool writePng(const std::string& path, int w, int h) {
  std::vector<unsigned char> pixels(static_cast<size_t>(w) * h * 4);
  glPixelStorei(GL_PACK_ALIGNMENT, 1);
  glReadBuffer(GL_BACK);
  glReadPixels(0, 0, w, h, GL_RGBA, GL_UNSIGNED_BYTE, pixels.data());
  std::vector<unsigned char> flipped(pixels.size());
  const size_t row = static_cast<size_t>(w) * 4;
  for (int y = 0; y < h; ++y)
    std::copy_n(&pixels[static_cast<size_t>(h - 1 - y) * row], row, &flipped[static_cast<size_t>(y) * row]);
  return stbi_write_png(path.c_str(), w, h, 4, flipped.data(), static_cast<int>(row)) != 0;
}

int runViewer(const Flags& f) {
  ViewerOptions o;
  o.path = f.path;
  o.log_actions = f.log_actions;
  o.headless = !f.screenshot.empty();
  if (!f.range.empty()) {
    const auto colon = f.range.find(':');
    const auto a = colon == std::string::npos ? std::nullopt : tracerun::viewer::parseTime(f.range.substr(0, colon));
    const auto b = colon == std::string::npos ? std::nullopt : tracerun::viewer::parseTime(f.range.substr(colon + 1));
    if (!a || !b || *b <= *a) {
      usageError("--range: expected T0:T1 with T0 < T1 (ns, or with a unit: 1.5ms:3ms), not '" + f.range + "'");
    }
    o.range = std::make_pair(*a, *b);
  }
  if (f.select >= 0) o.select = f.select;
  if (!f.go.empty()) {
    int rank = -1;
    long long id = -1;
    char extra = 0;
    if (std::sscanf(f.go.c_str(), "%d:%lld%c", &rank, &id, &extra) != 2 || rank < 0 || id < 0) {
      usageError("--goto: expected RANK:SPAN_ID (two whole numbers), not '" + f.go + "'");
    }
    o.go = std::make_pair(rank, static_cast<int64_t>(id));
  }
  if (!f.path.empty() && !std::filesystem::exists(f.path)) {
    throw tracerun::trace::TraceError(f.path + ": no such file");
  }
  if (o.headless && f.path.empty()) usageError("--screenshot needs a trace: traceview run.db --screenshot out.png");
  const auto [width, height] = parseSize(f.size);

  GlfwSession s;
  glfwSetErrorCallback([](int, const char*) {});
  const char* display = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  if (!glfwInit()) {
    throw std::runtime_error(
        std::string("cannot open a window: no display") +
        ((display == nullptr || !*display) && (wayland == nullptr || !*wayland)
             ? " (DISPLAY is not set)"
             : std::string(" (DISPLAY=") + (display ? display : "") + " cannot be opened)") +
        "; for --screenshot run it under xvfb-run -a");
  }
  s.initialised = true;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (o.headless) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  const std::string title = f.path.empty() ? "traceview" : "traceview - " + f.path;
  s.window = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (s.window == nullptr) {
    throw std::runtime_error("cannot create an OpenGL 3.3 core window on this display");
  }
  glfwMakeContextCurrent(s.window);
  glfwSwapInterval(o.headless ? 0 : 1);

  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // no imgui.ini: recent files live in ~/.local/state/tracerun
  io.LogFilename = nullptr;
  io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
  ImGui::StyleColorsDark();
  float scale = 1;
  glfwGetWindowContentScale(s.window, &scale, nullptr);
  scale = std::clamp(scale, 1.0f, 4.0f);
  const char* kFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  if (std::filesystem::exists(kFont)) io.Fonts->AddFontFromFileTTF(kFont, 15.0f * scale);
  ImGui::GetStyle().ScaleAllSizes(scale);
  ImGui_ImplGlfw_InitForOpenGL(s.window, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  s.imgui = true;

  Viewer viewer(o, [] { glfwPostEmptyEvent(); });
  const auto start = std::chrono::steady_clock::now();
  int settledFrames = 0;
  bool firstCompleteLogged = false;
  while (!glfwWindowShouldClose(s.window) && !viewer.wantsQuit()) {
    if (o.headless) {
      glfwPollEvents();
    } else {
      glfwWaitEventsTimeout(0.1);
    }
    ImGui_ImplOpenGL3_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    viewer.frame();
    ImGui::Render();
    int fw = 0, fh = 0;
    glfwGetFramebufferSize(s.window, &fw, &fh);
    glViewport(0, 0, fw, fh);
    glClearColor(0.11f, 0.11f, 0.13f, 1);
    glClear(GL_COLOR_BUFFER_BIT);
    ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
    const bool settled = viewer.settled();
    if (settled && !firstCompleteLogged) {
      firstCompleteLogged = true;
      if (f.log_actions) {
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
        std::printf("first complete frame %.1f ms (%lld primitives)\n", ms,
                    static_cast<long long>(viewer.primitivesLastFrame()));
        std::fflush(stdout);
      }
    }
    if (o.headless) {
      settledFrames = settled ? settledFrames + 1 : 0;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Three settled frames: the last answers are applied and laid out (track heights grow with
      // the depths read) before the pixels are taken.
      if (settledFrames >= 3 || waited > f.timeout_s) {
        glFinish();
        if (!writePng(f.screenshot, fw, fh)) {
          throw std::runtime_error(f.screenshot + ": cannot write the PNG");
        }
        if (waited > f.timeout_s) {
          throw std::runtime_error("the view did not settle within " + std::to_string(static_cast<int>(f.timeout_s)) +
                                   " s; wrote what was drawn to " + f.screenshot);
        }
        if (!viewer.problem().empty()) throw tracerun::trace::TraceError(viewer.problem());
        return tracerun::tools::kExitOk;
      }
      if (!settled) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    glfwSwapBuffers(s.window);
  }
  return tracerun::tools::kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  return tracerun::tools::runTool(
      argc, argv, "traceview", "traceview: the desktop viewer of tracerun traces",
      [&](CLI::App& app) {
        app.add_option("trace", flags.path, "trace to open (run.db); none: start with the file picker");
        app.add_option("--screenshot", flags.screenshot,
                       "render one settled frame to this PNG and exit (needs a display: xvfb-run -a)");
        app.add_option("--size", flags.size, "window size WIDTHxHEIGHT (default 1600x900)");
        app.add_option("--range", flags.range,
                       "time window T0:T1 from the trace's start (ns, or 1.5ms:3ms; units ns us ms s)");
        app.add_option("--select", flags.select, "select the span with this id")->check(tracerun::tools::atLeast(0));
        app.add_option("--goto", flags.go, "open at span SPAN_ID of rank RANK (RANK:SPAN_ID)");
        app.add_flag("--log-actions", flags.log_actions, "print one line on stdout per user action");
        app.add_option("--settle-timeout", flags.timeout_s,
                       "--screenshot: seconds to wait for the data before giving up (default 120)");
        return std::vector<tracerun::tools::Command>{
            {&app, [&] {
               if (flags.path.empty()) return runViewer(flags);
               return tracerun::tools::withPath(flags.path, [&] { return runViewer(flags); });
             }}};
      });
}
