// Recent files (see recent_files.h).
#include "app/recent_files.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace tracerun::viewer {

namespace fs = std::filesystem;

std::string RecentFiles::location() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return std::string(state) + "/tracerun/recent";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0')
    return std::string(home) + "/.local/state/tracerun/recent";
  return "";
}

RecentFiles::RecentFiles(std::string file) : file_(std::move(file)) {
  if (file_.empty()) return;
  std::ifstream in(file_);
  std::string line;
  while (paths_.size() < kMax && std::getline(in, line)) {
    if (!line.empty() && std::find(paths_.begin(), paths_.end(), line) == paths_.end())
      paths_.push_back(line);
  }
}

void RecentFiles::add(const std::string& path) {
  std::error_code ec;
  std::string abs = fs::absolute(path, ec).lexically_normal().string();
  if (ec) abs = path;
  paths_.erase(std::remove(paths_.begin(), paths_.end(), abs), paths_.end());
  paths_.insert(paths_.begin(), abs);
  if (paths_.size() > kMax) paths_.resize(kMax);
  if (file_.empty()) return;
  fs::create_directories(fs::path(file_).parent_path(), ec);
  const std::string tmp = file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& p : paths_) out << p << '\n';
    if (!out) return;
  }
  fs::rename(tmp, file_, ec);
}

}  // namespace tracerun::viewer
