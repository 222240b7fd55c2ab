// GlWindow (gl_window.h): GLFW, the OpenGL 3.3 core context, ImGui's GLFW and OpenGL3 back ends and
// the font; one frame's render; the PNG of the back buffer. No frame loop and no flags here.
#include "drivers/gl_window.h"

#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_impl_glfw.h>
#include <imgui_impl_opengl3.h>
#include <stb/stb_image_write.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "app/viewer_app.h"

namespace tracerun::viewer {

GlWindow::GlWindow(int width, int height, const std::string& title, bool headless)
    : headless_(headless) {
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
  initialised_ = true;
  glfwWindowHint(GLFW_CONTEXT_VERSION_MAJOR, 3);
  glfwWindowHint(GLFW_CONTEXT_VERSION_MINOR, 3);
  glfwWindowHint(GLFW_OPENGL_PROFILE, GLFW_OPENGL_CORE_PROFILE);
  glfwWindowHint(GLFW_OPENGL_FORWARD_COMPAT, GLFW_TRUE);
  if (headless) glfwWindowHint(GLFW_VISIBLE, GLFW_FALSE);
  window_ = glfwCreateWindow(width, height, title.c_str(), nullptr, nullptr);
  if (window_ == nullptr) {
    glfwTerminate();
    throw std::runtime_error("cannot create an OpenGL 3.3 core window on this display");
  }
  glfwMakeContextCurrent(window_);
  glfwSwapInterval(headless ? 0 : 1);
  openImGui();
}

void GlWindow::openImGui() {
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  ImGuiIO& io = ImGui::GetIO();
  io.IniFilename = nullptr;  // no imgui.ini: recent files live in ~/.local/state/tracerun
  io.LogFilename = nullptr;
  io.ConfigFlags |= ImGuiConfigFlags_NavEnableKeyboard;
  ImGui::StyleColorsDark();
  float scale = 1;
  glfwGetWindowContentScale(window_, &scale, nullptr);
  scale = std::clamp(scale, 1.0f, 4.0f);
  const char* kFont = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";
  if (std::filesystem::exists(kFont)) io.Fonts->AddFontFromFileTTF(kFont, 15.0f * scale);
  ImGui::GetStyle().ScaleAllSizes(scale);
  ImGui_ImplGlfw_InitForOpenGL(window_, true);
  ImGui_ImplOpenGL3_Init("#version 330 core");
  imgui_ = true;
}

GlWindow::~GlWindow() {
  if (imgui_) {
    ImGui_ImplOpenGL3_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
  }
  if (window_ != nullptr) glfwDestroyWindow(window_);
  if (initialised_) glfwTerminate();
}

bool GlWindow::shouldClose() const {
  return glfwWindowShouldClose(window_);
}

void GlWindow::pollEvents() const {
  if (headless_) {
    glfwPollEvents();
  } else {
    glfwWaitEventsTimeout(0.1);
  }
}

void GlWindow::swapBuffers() const {
  glfwSwapBuffers(window_);
}

void GlWindow::finishDrawing() const {
  glFinish();
}

void wakeEventLoop() {
  glfwPostEmptyEvent();
}

GlWindow::Frame GlWindow::render(Viewer& viewer, const InputHook& input) const {
  const auto frameStart = std::chrono::steady_clock::now();
  ImGui_ImplOpenGL3_NewFrame();
  ImGui_ImplGlfw_NewFrame();
  if (input) input(ImGui::GetIO());
  ImGui::NewFrame();
  viewer.frame();
  ImGui::Render();
  Frame f;
  glfwGetFramebufferSize(window_, &f.width, &f.height);
  glViewport(0, 0, f.width, f.height);
  glClearColor(0.11f, 0.11f, 0.13f, 1);
  glClear(GL_COLOR_BUFFER_BIT);
  ImGui_ImplOpenGL3_RenderDrawData(ImGui::GetDrawData());
  f.cpu_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - frameStart)
          .count();
  return f;
}

bool writeBackBufferPng(const std::string& path, int w, int h) {
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

}  // namespace tracerun::viewer
