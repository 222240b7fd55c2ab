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
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "commands.h"
#include "time_axis.h"
#include "view_switch_bench.h"
#include "tracerun/trace/reader.h"
#include "viewer_app.h"
#include "views.h"

namespace {

using tracerun::viewer::Viewer;
using tracerun::viewer::ViewerOptions;

struct Flags {
  std::string path, screenshot, size = "1600x900", range, go, dump_layout, view = "timeline",
                                dump_view, compare;
  std::vector<std::string> view_options;
  int64_t select = -1;
  bool log_actions = false;
  double timeout_s = 120;
  int bench_steps = 0, bench_views = 0;
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

std::optional<std::pair<int, int>> parseSize(const std::string& s) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(s.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') ||
      w < 64 || h < 64 || w > 16384 || h > 16384) {
    return std::nullopt;
  }
  return std::make_pair(w, h);
}

std::optional<std::pair<int64_t, int64_t>> parseRange(const std::string& r) {
  const auto colon = r.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto a = tracerun::viewer::parseTime(r.substr(0, colon));
  const auto b = tracerun::viewer::parseTime(r.substr(colon + 1));
  if (!a || !b || *b <= *a) return std::nullopt;
  return std::make_pair(*a, *b);
}

std::optional<std::pair<int, int64_t>> parseGoto(const std::string& g) {
  int rank = -1;
  long long id = -1;
  char extra = 0;
  if (std::sscanf(g.c_str(), "%d:%lld%c", &rank, &id, &extra) != 2 || rank < 0 || id < 0) {
    return std::nullopt;
  }
  return std::make_pair(rank, static_cast<int64_t>(id));
}

// A CLI11 check from a parser: a usage error (exit 2) with `what` when the parser says no.
template <typename Parse>
CLI::Validator checkWith(Parse parse, std::string what) {
  return CLI::Validator(
      [parse, what](std::string& v) {
        return parse(v) ? std::string() : what + ", not '" + v + "'";
      },
      "", "");
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
    std::copy_n(&pixels[static_cast<size_t>(h - 1 - y) * row], row,
                &flipped[static_cast<size_t>(y) * row]);
  return stbi_write_png(path.c_str(), w, h, 4, flipped.data(), static_cast<int>(row)) != 0;
}

// Writes `text` to `path` through a temporary file, so a reader never sees half of it.
void writeAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  if (std::FILE* out = std::fopen(tmp.c_str(), "w")) {
    std::fputs(text.c_str(), out);
    std::fclose(out);
    std::rename(tmp.c_str(), path.c_str());
  }
}

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
  std::chrono::steady_clock::time_point stepStart;
};

// One frame of the sweep; true when it is over.
bool benchStep(BenchState& b, Viewer& viewer, bool settled, double cpuMs,
               std::chrono::steady_clock::time_point start) {
  const auto now = std::chrono::steady_clock::now();
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

void printBench(const BenchState& b, const Flags& f) {
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

int runViewer(const Flags& f) {
  ViewerOptions o;
  o.path = f.path;
  o.log_actions = f.log_actions;
  o.headless = !f.screenshot.empty() || f.bench_steps > 0 || f.bench_views > 0;
  o.view = f.view;
  o.compare = f.compare;
  o.view_options = f.view_options;
  if (!f.range.empty()) o.range = parseRange(f.range);
  if (f.select >= 0) o.select = f.select;
  if (!f.go.empty()) o.go = parseGoto(f.go);
  if (!f.path.empty() && !std::filesystem::exists(f.path)) {
    throw tracerun::trace::TraceError(f.path + ": no such file");
  }
  if (!f.compare.empty()) {
    if (!std::filesystem::exists(f.compare)) {
      throw tracerun::trace::TraceError(f.compare + ": no such file (--compare)");
    }
    tracerun::trace::TraceReader::open(f.compare);  // one line naming the problem when not a trace
  }
  const auto [width, height] = *parseSize(f.size);

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
  BenchState bench;
  bench.steps = f.bench_steps;
  tracerun::viewer::ViewSwitchBench viewBench(f.bench_views, tracerun::viewer::viewWords());
  int settledFrames = 0, shots = 0;
  bool wasSettled = false;
  bool firstCompleteLogged = false;
  while (!glfwWindowShouldClose(s.window) && !viewer.wantsQuit()) {
    if (o.headless) {
      glfwPollEvents();
    } else {
      glfwWaitEventsTimeout(0.1);
    }
    const auto frameStart = std::chrono::steady_clock::now();
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
    const double cpuMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frameStart)
            .count();
    const bool settled = viewer.settled();
    if (f.bench_views > 0) {
      if (viewBench.frame(viewer, settled, cpuMs)) {
        std::printf("traceview view switches: %s, %d rounds, window %s\n%s", f.path.c_str(),
                    f.bench_views, f.size.c_str(), viewBench.text().c_str());
        return tracerun::tools::kExitOk;
      }
      glfwSwapBuffers(s.window);
      continue;
    }
    if (f.bench_steps > 0) {
      if (benchStep(bench, viewer, settled, cpuMs, start)) {
        printBench(bench, f);
        return tracerun::tools::kExitOk;
      }
      glfwSwapBuffers(s.window);
      continue;
    }
    if (settled && !wasSettled) {
      if (!f.dump_layout.empty()) {
        writeAtomically(f.dump_layout, viewer.layoutText());
      }
      if (!f.dump_view.empty()) writeAtomically(f.dump_view, viewer.activeViewText());
      if (firstCompleteLogged) viewer.log("settled");
    }
    wasSettled = settled;
    if (viewer.takeScreenshotRequest()) {
      const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
      char name[64];
      std::strftime(name, sizeof name, "traceview-%Y%m%d-%H%M%S", std::localtime(&now));
      std::string file = std::string(name) + "-" + std::to_string(++shots) + ".png";
      if (writePng(file, fw, fh)) {
        viewer.log("saved screenshot " + file);
      } else {
        std::fprintf(stderr, "traceview: %s: cannot write the PNG\n", file.c_str());
      }
    }
    if (settled && !firstCompleteLogged) {
      firstCompleteLogged = true;
      if (f.log_actions) {
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                .count();
        std::printf("first complete frame %.1f ms (%lld primitives)\n", ms,
                    static_cast<long long>(viewer.primitivesLastFrame()));
        std::fflush(stdout);
      }
    }
    if (o.headless) {
      settledFrames = settled ? settledFrames + 1 : 0;
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      // Three settled frames: the last answers are applied and laid out (track heights grow with
      // the depths read) before the pixels are taken.
      if (settledFrames >= 3 || waited > f.timeout_s) {
        glFinish();
        if (!writePng(f.screenshot, fw, fh)) {
          throw std::runtime_error(f.screenshot + ": cannot write the PNG");
        }
        if (waited > f.timeout_s) {
          throw std::runtime_error("the view did not settle within " +
                                   std::to_string(static_cast<int>(f.timeout_s)) +
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
        app.add_option("trace", flags.path,
                       "trace to open (run.db); none: start with the file picker");
        app.add_option(
            "--screenshot", flags.screenshot,
            "render one settled frame to this PNG and exit (needs a display: xvfb-run -a)");
        app.add_option("--size", flags.size, "window size WIDTHxHEIGHT (default 1600x900)")
            ->check(checkWith(parseSize, "--size: expected WIDTHxHEIGHT between 64 and 16384"));
        app.add_option(
               "--range", flags.range,
               "time window T0:T1 from the trace's start (ns, or 1.5ms:3ms; units ns us ms s)")
            ->check(
                checkWith(parseRange, "--range: expected T0:T1 with T0 < T1 (ns, or 1.5ms:3ms)"));
        app.add_option("--select", flags.select, "select the span with this id")
            ->check(tracerun::tools::atLeast(0));
        app.add_option("--goto", flags.go, "open at span SPAN_ID of rank RANK (RANK:SPAN_ID)")
            ->check(checkWith(parseGoto, "--goto: expected RANK:SPAN_ID (two whole numbers)"));
        app.add_flag("--log-actions", flags.log_actions,
                     "print one line on stdout per user action");
        app.add_option(
            "--dump-layout", flags.dump_layout,
            "write the timeline's geometry to this file each time the view settles (tests)");
        std::string words;
        for (const auto& w : tracerun::viewer::viewWords()) words += (words.empty() ? "" : "|") + w;
        app.add_option("--view", flags.view, "the tab in front at open: " + words)
            ->check(CLI::IsMember(tracerun::viewer::viewWords()));
        app.add_option("--dump-view", flags.dump_view,
                       "write the numbers the tab in front shows to this file each time the view "
                       "settles (tests; the timeline writes its geometry)");
        app.add_option("--compare", flags.compare,
                       "a second trace to compare with the first (the compare tab: steps aligned, "
                       "per-name differences, both timelines)");
        std::vector<std::string> optionWords;
        std::string optionHelp;
        for (const auto& v : tracerun::viewer::makeViews()) {
          for (const auto& [word, help] : v->options()) {
            optionWords.push_back(word);
            optionHelp += "; " + word + " (" + v->word() + "): " + help;
          }
        }
        app.add_option("--view-option", flags.view_options,
                       "a tab's option at open, repeatable" + optionHelp)
            ->check(CLI::IsMember(optionWords));
        app.add_option("--bench-sweep", flags.bench_steps,
                       "benchmark: zoom in STEPS steps from the whole run to 1 us/px, print frame "
                       "times, primitives and memory, exit (bench/viewer_bench.sh)")
            ->check(tracerun::tools::atLeast(1));
        app.add_option("--bench-views", flags.bench_views,
                       "benchmark: switch through every tab ROUNDS times, print how long each "
                       "takes to show its data and the frame times, exit")
            ->check(tracerun::tools::atLeast(1));
        app.add_option("--settle-timeout", flags.timeout_s,
                       "--screenshot: seconds to wait for the data before giving up (default 120)");
        return std::vector<tracerun::tools::Command>{
            {&app, [&] {
               if (!flags.screenshot.empty() && flags.path.empty()) {
                 throw CLI::ValidationError(
                     "--screenshot needs a trace: traceview run.db --screenshot out.png");
               }
               if (!flags.compare.empty() && flags.path.empty()) {
                 throw CLI::ValidationError(
                     "--compare needs a trace first: traceview a.db --compare b.db");
               }
               return runViewer(flags);
             }}};
      });
}
