// The GLFW window, its OpenGL 3.3 core context and Dear ImGui on it, for traceview's drivers: open
// it, render one frame of a Viewer, read the back buffer into a PNG. Knows nothing of flags, of
// traces or of when to stop (the drivers in drivers.h decide).
// Threading: the main thread only (GLFW's rule), but for wakeEventLoop.
#pragma once

#include <functional>
#include <string>

struct GLFWwindow;
struct ImGuiIO;

namespace tracerun::viewer {

class Viewer;

// Owns the window and the ImGui context; closes them in reverse order.
class GlWindow {
 public:
  // Throws std::runtime_error with one line (what to do included) when there is no display or
  // no OpenGL 3.3 core context. headless: invisible, no vsync.
  GlWindow(int width, int height, const std::string& title, bool headless);
  GlWindow(const GlWindow&) = delete;
  GlWindow& operator=(const GlWindow&) = delete;
  ~GlWindow();

  bool headless() const noexcept { return headless_; }
  bool shouldClose() const;
  // Waits for input (a window; at most 0.1 s) or only polls (headless).
  void pollEvents() const;
  void swapBuffers() const;
  // Waits until the GPU has drawn everything submitted (glFinish), before the pixels are read.
  void finishDrawing() const;

  // One ImGui frame of `viewer`, drawn into the back buffer. `input`, when set, runs after the
  // GLFW backend filled ImGuiIO and before ImGui::NewFrame (--script's input).
  struct Frame {
    int width = 0, height = 0;  // framebuffer pixels
    double cpu_ms = 0;          // ImGui build + draw submission
  };
  using InputHook = std::function<void(ImGuiIO&)>;
  Frame render(Viewer& viewer, const InputHook& input = {}) const;

 private:
  void openImGui();

  bool headless_ = false, initialised_ = false, imgui_ = false;
  GLFWwindow* window_ = nullptr;  // owned: destroyed by the destructor
};

// Wakes pollEvents from any thread (a data answer arrived): glfwPostEmptyEvent.
void wakeEventLoop();

// Writes the back buffer as a PNG (rows flipped: OpenGL's origin is bottom-left); false when the
// file cannot be written.
bool writeBackBufferPng(const std::string& path, int width, int height);

}  // namespace tracerun::viewer
