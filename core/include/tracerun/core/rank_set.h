// The ranks to trace (`--ranks`, TRACERUN_RANKS): a list such as "0,8-15", parsed and printed here
// only, and the process's own rank as RANK gives it. Not which ranks exist (that is WORLD_SIZE)
// nor how they are started (the launcher).
//
// The launcher validates `--ranks` with RankSet::parse (a malformed list is a usage error) and
// passes RankSet::text() on; libtracerun reads TRACERUN_RANKS and does not start in a process whose
// rankFromEnvironment() is not in the set, so the others run as without tracerun. The shard's meta
// `traced_ranks` is text(); the merge joins the shards' lists (join()). Header-only, standard
// library only: the launcher links no capture code.
#pragma once

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tracerun::core {

class RankSet {
 public:
  // "0,8-15,3": ranks and inclusive ranges of ranks >= 0, comma-separated, in any order, overlaps
  // allowed. On a malformed list: an empty set and *problem says what is wrong.
  static RankSet parse(std::string_view text, std::string* problem) {
    RankSet s;
    auto fail = [&](const std::string& why) {
      if (problem) *problem = why;
      return RankSet{};
    };
    if (text.empty()) return fail("an empty list (write ranks such as 0,8-15)");
    size_t at = 0;
    while (at <= text.size()) {
      const size_t comma = std::min(text.find(',', at), text.size());
      const std::string_view item = text.substr(at, comma - at);
      const size_t dash = item.find('-');
      int64_t first = 0, last = 0;
      if (!number(item.substr(0, dash), &first) ||
          (dash != std::string_view::npos && !number(item.substr(dash + 1), &last))) {
        return fail("'" + std::string(item) + "' is not a rank or a range such as 8-15");
      }
      if (dash == std::string_view::npos) last = first;
      if (last < first) {
        return fail("'" + std::string(item) + "' is a range that ends before it starts");
      }
      s.ranges_.emplace_back(first, last);
      at = comma + 1;
    }
    s.normalize();
    return s;
  }

  // Every rank of either set.
  RankSet join(const RankSet& other) const {
    RankSet s = *this;
    s.ranges_.insert(s.ranges_.end(), other.ranges_.begin(), other.ranges_.end());
    s.normalize();
    return s;
  }
  bool operator==(const RankSet& o) const { return ranges_ == o.ranges_; }
  bool operator!=(const RankSet& o) const { return !(*this == o); }

  bool empty() const { return ranges_.empty(); }
  bool contains(int64_t rank) const {
    for (const auto& [first, last] : ranges_) {
      if (rank >= first && rank <= last) return true;
    }
    return false;
  }
  int64_t highest() const { return ranges_.empty() ? -1 : ranges_.back().second; }
  // The canonical list: sorted, overlaps joined, "0,8-15".
  std::string text() const {
    std::string out;
    for (const auto& [first, last] : ranges_) {
      if (!out.empty()) out += ',';
      out += std::to_string(first);
      if (last > first) out += (last == first + 1 ? "," : "-") + std::to_string(last);
    }
    return out;
  }

 private:
  void normalize() {
    std::sort(ranges_.begin(), ranges_.end());
    std::vector<std::pair<int64_t, int64_t>> merged;
    for (const auto& r : ranges_) {
      if (!merged.empty() && r.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    ranges_ = std::move(merged);
  }

  static bool number(std::string_view digits, int64_t* out) {
    if (digits.empty() || digits.size() > 9) return false;  // ranks fit easily in 9 digits
    int64_t v = 0;
    for (char c : digits) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return false;
      v = v * 10 + (c - '0');
    }
    *out = v;
    return true;
  }

  std::vector<std::pair<int64_t, int64_t>> ranges_;  // inclusive, sorted, disjoint, not adjacent
};

// This process's rank as libtracerun reads it: RANK when it is a whole number 0..INT_MAX, else 0
// (unset, or not a number: a single process is rank 0). The launcher checks `--ranks` with it.
inline int rankFromEnvironment() {
  const char* v = std::getenv("RANK");
  if (v == nullptr) return 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return end != v && *end == '\0' && x >= 0 && x <= INT_MAX ? static_cast<int>(x) : 0;
}

}  // namespace tracerun::core
