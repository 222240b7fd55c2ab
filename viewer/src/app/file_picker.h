// FilePicker: the viewer's one way to choose a trace file (the start screen, File > Open's popup
// and the compare tab's Browse...): recent files, a path field, and the directories and *.db files
// of one folder (double-click enters a folder or opens a file). Opens nothing itself: draw()
// returns the chosen path and the caller decides what opening means.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tracerun::viewer {

class FilePicker {
 public:
  // Starts in `dir` (the working directory when "").
  explicit FilePicker(std::string dir = {});
  void setDir(std::string dir) { dir_ = std::move(dir); }
  // Draws into the current ImGui region; `recent` first when not empty. `listHeight`: the entry
  // list's height as ImGui::BeginChild takes it (0 fills the region, negative leaves room below).
  // Returns the path chosen this frame.
  std::optional<std::string> draw(const std::vector<std::string>& recent, float listHeight);

 private:
  std::string dir_;
  char path_[1024] = {};
};

}  // namespace tracerun::viewer
