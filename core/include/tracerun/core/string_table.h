// Interned strings: every name in the trace is a StringId. Thread-safe (a mutex): intern once, off
// the hot path, and keep the id. Id 0 is the empty string. Ids are dense and never reused.
#pragma once

#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tracerun/core/records.h"

namespace tracerun::core {

class StringTable {
 public:
  StringTable();
  StringId intern(std::string_view s);
  // The string of an id; an unknown id gives "".
  std::string get(StringId id) const;
  size_t size() const;
  // Copies out strings [first, size()) so a writer can persist what is new since last time.
  std::vector<std::string> since(size_t first) const;

 private:
  mutable std::mutex mu_;
  std::deque<std::string> strings_;  // deque: references stay valid as it grows
  std::unordered_map<std::string_view, StringId> ids_;
};

}  // namespace tracerun::core
