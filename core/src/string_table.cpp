// StringTable: a mutex-protected map from text to dense ids.
#include "tracerun/core/string_table.h"

namespace tracerun::core {

StringTable::StringTable() {
  strings_.emplace_back();
  ids_.emplace(std::string_view(strings_.back()), 0);
}

StringId StringTable::intern(std::string_view s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = ids_.find(s); it != ids_.end()) return it->second;
  const auto id = static_cast<StringId>(strings_.size());
  strings_.emplace_back(s);
  ids_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::string StringTable::get(StringId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < strings_.size() ? strings_[id] : std::string();
}

size_t StringTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return strings_.size();
}

std::vector<std::string> StringTable::since(size_t first) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (size_t i = first; i < strings_.size(); ++i) out.push_back(strings_[i]);
  return out;
}

}  // namespace tracerun::core
