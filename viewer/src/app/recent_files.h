// The list of recently opened traces, kept in $XDG_STATE_HOME/tracerun/recent (or
// ~/.local/state/tracerun/recent): one absolute path a line, newest first. Not imgui.ini.
#pragma once

#include <string>
#include <vector>

namespace tracerun::viewer {

class RecentFiles {
 public:
  static constexpr size_t kMax = 12;
  // The file the list lives in ("" when neither XDG_STATE_HOME nor HOME is set).
  static std::string location();
  explicit RecentFiles(std::string file = location());
  const std::vector<std::string>& paths() const { return paths_; }
  // Moves `path` (made absolute) to the front and saves; failures to save are ignored (the list
  // is a convenience, never a reason to fail opening a trace).
  void add(const std::string& path);

 private:
  std::string file_;
  std::vector<std::string> paths_;
};

}  // namespace tracerun::viewer
