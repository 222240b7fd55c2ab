// NCCL's group windows and the all-to-alls and coalesced collectives they hold (nccl_groups.h).
#include "nccl_groups.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "comm_groups.h"

namespace tracerun::trace::analysis {

std::vector<NcclGroupWindow> ncclGroupWindows(std::vector<NcclGroupMarker> markers, int* unclosed) {
  std::sort(markers.begin(), markers.end(), [](const NcclGroupMarker& a, const NcclGroupMarker& b) {
    return std::make_tuple(a.start, !a.group_start, a.end) <
           std::make_tuple(b.start, !b.group_start, b.end);
  });
  std::vector<NcclGroupWindow> out;
  int depth = 0;
  NcclGroupWindow w;
  for (const NcclGroupMarker& m : markers) {
    if (m.group_start) {
      if (depth++ == 0) w.start = m.start;
    } else if (depth > 0 && --depth == 0) {
      w.end_call_start = m.start;
      w.end = m.end;
      w.end_id = m.id;
      out.push_back(w);
    }
  }
  if (unclosed != nullptr) *unclosed = depth > 0 ? 1 : 0;
  return out;
}

namespace {

// The calls each window holds (NcclGroupWindow::holds), in the calls' order: one sort of the
// calls by start and a search per window (the windows are outermost, so disjoint), not a scan of
// every call per window. A damaged call (end before start) is tried against every window, as
// the rule itself would.
std::vector<std::vector<size_t>> callsHeld(const std::vector<NcclGroupWindow>& windows,
                                           const std::vector<NcclGroupedCall>& calls) {
  std::vector<size_t> byStart, damaged;
  for (size_t i = 0; i < calls.size(); ++i) {
    (calls[i].end < calls[i].start ? damaged : byStart).push_back(i);
  }
  std::sort(byStart.begin(), byStart.end(), [&](size_t x, size_t y) {
    return std::tie(calls[x].start, x) < std::tie(calls[y].start, y);
  });
  std::vector<std::vector<size_t>> out(windows.size());
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const NcclGroupWindow& w = windows[wi];
    auto it = std::lower_bound(byStart.begin(), byStart.end(), w.start,
                               [&](size_t i, int64_t t) { return calls[i].start < t; });
    std::vector<size_t>& held = out[wi];
    for (; it != byStart.end() && calls[*it].start <= w.end_call_start; ++it) {
      if (w.holds(calls[*it].start, calls[*it].end)) held.push_back(*it);
    }
    for (size_t i : damaged) {
      if (w.holds(calls[i].start, calls[i].end)) held.push_back(i);
    }
    std::sort(held.begin(), held.end());
  }
  return out;
}

// The all_to_all rule (nccl_groups.h) on one window's calls; false when they are none.
bool allToAllOf(size_t wi, std::vector<size_t> members, const std::vector<NcclGroupedCall>& calls,
                NcclAllToAll* a) {
  using Kind = NcclGroupedCall::Kind;
  const bool collective = std::any_of(members.begin(), members.end(),
                                      [&](size_t i) { return calls[i].kind == Kind::kCollective; });
  if (collective || members.empty()) return false;
  const NcclGroupedCall& first = calls[members.front()];
  const int n = first.group_size;
  std::set<int64_t> sentTo, receivedFrom;
  int64_t bytes = 0;
  bool fits = n > 0;
  for (size_t i : members) {
    const NcclGroupedCall& c = calls[i];
    fits = fits && c.communicator == first.communicator && c.group_size == n &&
           c.group_rank == first.group_rank && c.peer >= 0 && c.peer < n;
    auto& peers = c.kind == Kind::kSend ? sentTo : receivedFrom;
    fits = fits && peers.insert(c.peer).second;
    if (c.kind == Kind::kSend) bytes += std::max<int64_t>(0, c.bytes);
  }
  const bool toItself = sentTo.count(first.group_rank) > 0;
  const bool everyPeer =
      sentTo.size() == static_cast<size_t>(n) && receivedFrom.size() == static_cast<size_t>(n);
  if (!fits || !(toItself || everyPeer)) return false;
  a->window = wi;
  a->bytes = bytes;
  a->group_size = n;
  a->group_rank = first.group_rank;
  a->communicator = first.communicator;
  a->members = std::move(members);
  return true;
}

// The coalescing rule (nccl_groups.h) on one window's calls; false when they are none.
bool coalescedOf(size_t wi, std::vector<size_t> members, const std::vector<NcclGroupedCall>& calls,
                 NcclCoalesced* c) {
  using Kind = NcclGroupedCall::Kind;
  if (members.size() < 2) return false;
  const NcclGroupedCall& first = calls[members.front()];
  for (size_t i : members) {
    const NcclGroupedCall& x = calls[i];
    if (x.kind != Kind::kCollective || x.decorated || x.op.empty() || x.op != first.op ||
        x.communicator != first.communicator || x.group_size != first.group_size ||
        x.group_rank != first.group_rank)
      return false;
  }
  c->window = wi;
  c->op = first.op;
  if ((c->op == "broadcast" || c->op == "reduce") && first.group_size > 0 &&
      members.size() == static_cast<size_t>(first.group_size)) {
    std::set<int64_t> roots;
    for (size_t i : members) {
      if (calls[i].root >= 0 && calls[i].root < first.group_size) roots.insert(calls[i].root);
    }
    if (roots.size() == members.size())
      c->op = c->op == "broadcast" ? "all_gather" : "reduce_scatter";
  }
  c->group_size = first.group_size;
  c->group_rank = first.group_rank;
  c->communicator = first.communicator;
  for (size_t i : members) c->bytes += std::max<int64_t>(0, calls[i].bytes);
  // An all_gather's bytes are a rank's part (the report's row multiplies by the group's size,
  // as for NCCL's own AllGather): the parts' mean.
  if (c->op == "all_gather" && first.op == "broadcast") {
    c->bytes = (c->bytes + c->group_size / 2) / c->group_size;
  }
  c->members = std::move(members);
  return true;
}

}  // namespace

NcclGroupFolds ncclGroupFolds(const std::vector<NcclGroupWindow>& windows,
                              const std::vector<NcclGroupedCall>& calls) {
  NcclGroupFolds out;
  std::vector<std::vector<size_t>> held = callsHeld(windows, calls);
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    // One window is one of the two at most: an all_to_all holds no collective, a coalesced group
    // nothing else.
    NcclAllToAll a;
    NcclCoalesced c;
    if (allToAllOf(wi, held[wi], calls, &a)) {
      out.all_to_alls.push_back(std::move(a));
    } else if (coalescedOf(wi, std::move(held[wi]), calls, &c)) {
      out.coalesced.push_back(std::move(c));
    }
  }
  return out;
}

std::string ncclAllToAllSignature(const NcclAllToAll& a) {
  return callSignature("all_to_all", a.communicator, 0, a.group_size);
}

std::string ncclCoalescedSignature(const NcclCoalesced& c) {
  return callSignature(c.op, c.communicator, c.bytes, c.group_size) + "|coalesced " +
         std::to_string(c.members.size());
}

}  // namespace tracerun::trace::analysis
