// FilePicker (file_picker.h): one folder's directories and *.db files, a path field, recent files.
#include "app/file_picker.h"

#include <imgui.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace tracerun::viewer {

namespace fs = std::filesystem;

FilePicker::FilePicker(std::string dir) : dir_(std::move(dir)) {
  if (dir_.empty()) {
    std::error_code ec;
    dir_ = fs::current_path(ec).string();
  }
}

std::optional<std::string> FilePicker::draw(const std::vector<std::string>& recent,
                                            float listHeight) {
  std::optional<std::string> chosen;
  if (!recent.empty()) {
    ImGui::TextDisabled("Recent");
    for (const auto& p : recent) {
      if (ImGui::Selectable(p.c_str())) chosen = p;
    }
    ImGui::Separator();
  }
  ImGui::SetNextItemWidth(-80);
  if (ImGui::InputText("##path", path_, sizeof path_, ImGuiInputTextFlags_EnterReturnsTrue) ||
      (ImGui::SameLine(), ImGui::Button("Open"))) {
    if (path_[0] != '\0') chosen = path_;
  }
  ImGui::TextDisabled("%s", dir_.c_str());
  ImGui::BeginChild("entries", ImVec2(0, listHeight), true);
  std::error_code ec;
  std::vector<fs::directory_entry> dirs, files;
  for (fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& e = *it;
    const std::string n = e.path().filename().string();
    if (n.empty() || n[0] == '.') continue;
    std::error_code e2;
    if (e.is_directory(e2)) {
      dirs.push_back(e);
    } else if (e.path().extension() == ".db") {
      files.push_back(e);
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::sort(files.begin(), files.end());
  if (ImGui::Selectable("../", false, ImGuiSelectableFlags_AllowDoubleClick) &&
      ImGui::IsMouseDoubleClicked(0)) {
    dir_ = fs::absolute(dir_, ec).parent_path().string();
  }
  for (const auto& d : dirs) {
    const std::string label = d.path().filename().string() + "/";
    if (ImGui::Selectable(label.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick) &&
        ImGui::IsMouseDoubleClicked(0)) {
      dir_ = d.path().string();
    }
  }
  for (const auto& f : files) {
    const std::string label = f.path().filename().string();
    if (ImGui::Selectable(label.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick)) {
      std::snprintf(path_, sizeof path_, "%s", f.path().string().c_str());
      if (ImGui::IsMouseDoubleClicked(0)) chosen = f.path().string();
    }
  }
  ImGui::EndChild();
  return chosen;
}

}  // namespace tracerun::viewer
