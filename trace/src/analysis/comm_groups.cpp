// The group matching of comm_groups.h: a union of ranks whose calls pair up, then the cut of a
// component larger than its recorded group size.
#include "comm_groups.h"

#include <algorithm>

#include "span_select.h"  // satAdd
#include "tracerun/core/vocabulary.h"

namespace tracerun::trace::analysis {
namespace {

// Calls of one group overlap in time (no member finishes before all started); the slack absorbs
// the clock alignment error between hosts.
constexpr int64_t kOverlapSlackNs = 10'000;

bool sameCalls(const std::vector<GroupCall>& a, const std::vector<GroupCall>& b) {
  if (a.size() != b.size()) return false;
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].start > satAdd(b[k].end, kOverlapSlackNs) ||
        b[k].start > satAdd(a[k].end, kOverlapSlackNs))
      return false;
  }
  return true;
}

// A rank's place in the group its calls of one signature went to: the same on every call, or -1.
int64_t placeOf(const std::vector<GroupCall>& calls, int n) {
  int64_t place = -1;
  for (const GroupCall& c : calls) {
    if (c.group_rank < 0 || c.group_rank >= n || (place >= 0 && c.group_rank != place)) return -1;
    place = c.group_rank;
  }
  return place;
}

// The component's ranks (ascending) as groups of the recorded size n, by their places (a place
// is -1 when unknown or not the same on every call). With every place known:
// - at most n ranks: one group when their places differ; else no group (each rank alone: two
//   ranks with one place are in different groups, whose other members lost calls);
// - more: torch.distributed's new_group numbers a group's ranks in ascending order, so a group is
//   the lowest rank left with place 0, then the lowest rank left above it with place 1, and so
//   on: {0,1},{2,3} (places 0,1,0,1) and {0,2},{1,3} (places 0,0,1,1) come out right; a layout
//   such as {0,3},{1,2} would not (docs/report.md). Ranks left over stand alone. The component
//   stays whole when no group forms or a group's calls do not pair up.
// Without n or a place: the component, whole.
std::vector<std::vector<int>> cutByPlace(const std::vector<int>& component,
                                         const std::map<int, std::vector<GroupCall>>& byRank,
                                         int n) {
  const size_t m = component.size();
  std::vector<int64_t> place(m);
  for (size_t i = 0; i < m; ++i) {
    place[i] = n >= 2 ? placeOf(byRank.at(component[i]), n) : -1;
    if (place[i] < 0) return {component};
  }
  auto alone = [&] {
    std::vector<std::vector<int>> out;
    for (int r : component) out.push_back({r});
    return out;
  };
  if (m <= static_cast<size_t>(n)) {
    std::vector<int64_t> sorted = place;
    std::sort(sorted.begin(), sorted.end());
    return std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end()
               ? std::vector<std::vector<int>>{component}
               : alone();
  }
  std::vector<bool> used(m, false);
  std::vector<std::vector<int>> parts;
  for (size_t first = 0; first < m; ++first) {
    if (used[first] || place[first] != 0) continue;
    std::vector<size_t> part{first};
    for (int64_t want = 1; want < n && !part.empty(); ++want) {
      size_t next = part.back() + 1;
      while (next < m && (used[next] || place[next] != want)) ++next;
      if (next == m) {
        part.clear();  // no complete group from here: `first` stands alone
      } else {
        part.push_back(next);
      }
    }
    if (part.empty()) continue;
    std::vector<int> ranks;
    for (size_t i : part) {
      used[i] = true;
      ranks.push_back(component[i]);
    }
    parts.push_back(std::move(ranks));
  }
  if (parts.empty()) return {component};
  for (const auto& ranks : parts) {
    for (size_t i = 0; i < ranks.size(); ++i) {
      for (size_t j = i + 1; j < ranks.size(); ++j) {
        if (!sameCalls(byRank.at(ranks[i]), byRank.at(ranks[j]))) return {component};
      }
    }
  }
  for (size_t i = 0; i < m; ++i) {
    if (!used[i]) parts.push_back({component[i]});
  }
  return parts;
}

}  // namespace

std::string callSignature(const std::string& op, const std::string& detail, int64_t bytes,
                          int group_size) {
  std::string s = op + "|" + detail + "|" + std::to_string(bytes);
  if (group_size > 0) s += "|" + std::to_string(group_size) + " ranks";
  return s;
}

std::string spanCallSignature(const std::string& span, const std::string& op,
                              const std::string& detail, int64_t bytes, int group_size) {
  if (op == "scatter" && !vocab::nccl::isDataCall(span)) {
    return callSignature(op, "", -1, group_size);
  }
  return callSignature(op, detail, bytes, group_size);
}

void GroupNames::note(const std::string& signature, int attempt, int64_t group_id) {
  if (group_id < 0) unnamed_.insert({signature, attempt});
}

std::string GroupNames::named(const std::string& signature, int attempt, int64_t group_id) const {
  if (group_id < 0 || unnamed_.count({signature, attempt}) != 0) return signature;
  return signature + "|group " + std::to_string(group_id);
}

std::map<std::string, std::vector<std::vector<int>>> matchGroups(GroupCalls calls) {
  std::map<std::string, std::vector<std::vector<int>>> out;
  for (auto& [sig, byRank] : calls) {
    std::vector<int> ranks;
    int size = 0;  // the recorded group size, when every call of the signature has the same
    bool sizeKnown = true;
    for (auto& [r, list] : byRank) {
      std::sort(list.begin(), list.end(),
                [](const GroupCall& a, const GroupCall& b) { return a.start < b.start; });
      ranks.push_back(r);
      for (const GroupCall& c : list) {
        if (c.group_size <= 0 || (size > 0 && c.group_size != size)) sizeKnown = false;
        size = std::max(size, c.group_size);
      }
    }
    // Union-find over rank indices; a pair already joined is not compared again (a data-parallel
    // world of N ranks in one group costs N-1 comparisons, not N^2/2).
    std::vector<size_t> parent(ranks.size());
    for (size_t i = 0; i < parent.size(); ++i) parent[i] = i;
    auto root = [&](size_t x) {
      while (parent[x] != x) x = parent[x] = parent[parent[x]];
      return x;
    };
    for (size_t i = 0; i < ranks.size(); ++i) {
      for (size_t j = i + 1; j < ranks.size(); ++j) {
        if (root(i) == root(j)) continue;
        if (sameCalls(byRank[ranks[i]], byRank[ranks[j]])) parent[root(j)] = root(i);
      }
    }
    std::map<size_t, std::vector<int>> groups;
    for (size_t i = 0; i < ranks.size(); ++i) groups[root(i)].push_back(ranks[i]);
    for (auto& [k, g] : groups) {
      for (auto& p : cutByPlace(g, byRank, sizeKnown ? size : 0)) out[sig].push_back(std::move(p));
    }
  }
  return out;
}

}  // namespace tracerun::trace::analysis
