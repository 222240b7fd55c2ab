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

std::vector<NcclAllToAll> ncclAllToAlls(const std::vector<NcclGroupWindow>& windows,
                                        const std::vector<NcclGroupedCall>& calls) {
  using Kind = NcclGroupedCall::Kind;
  std::vector<NcclAllToAll> out;
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const NcclGroupWindow& w = windows[wi];
    std::vector<size_t> members;
    bool collective = false;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (!w.holds(calls[i].start, calls[i].end)) continue;
      collective = collective || calls[i].kind == Kind::kCollective;
      members.push_back(i);
    }
    if (collective || members.empty()) continue;
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
    if (!fits || !(toItself || everyPeer)) continue;
    NcclAllToAll a;
    a.window = wi;
    a.members = std::move(members);
    a.bytes = bytes;
    a.group_size = n;
    a.group_rank = first.group_rank;
    a.communicator = first.communicator;
    out.push_back(std::move(a));
  }
  return out;
}

std::string ncclAllToAllSignature(const NcclAllToAll& a) {
  return callSignature("all_to_all", a.communicator, 0, a.group_size);
}

std::vector<NcclCoalesced> ncclCoalesced(const std::vector<NcclGroupWindow>& windows,
                                         const std::vector<NcclGroupedCall>& calls) {
  using Kind = NcclGroupedCall::Kind;
  std::vector<NcclCoalesced> out;
  for (size_t wi = 0; wi < windows.size(); ++wi) {
    const NcclGroupWindow& w = windows[wi];
    std::vector<size_t> members;
    bool fits = true;
    for (size_t i = 0; i < calls.size() && fits; ++i) {
      if (!w.holds(calls[i].start, calls[i].end)) continue;
      const NcclGroupedCall& c = calls[i];
      const NcclGroupedCall& first = members.empty() ? c : calls[members.front()];
      fits = c.kind == Kind::kCollective && !c.decorated && !c.op.empty() && c.op == first.op &&
             c.communicator == first.communicator && c.group_size == first.group_size &&
             c.group_rank == first.group_rank;
      members.push_back(i);
    }
    if (!fits || members.size() < 2) continue;
    const NcclGroupedCall& first = calls[members.front()];
    NcclCoalesced c;
    c.window = wi;
    c.op = first.op;
    if ((c.op == "broadcast" || c.op == "reduce") && first.group_size > 0 &&
        members.size() == static_cast<size_t>(first.group_size)) {
      std::set<int64_t> roots;
      for (size_t i : members) {
        if (calls[i].root >= 0 && calls[i].root < first.group_size) roots.insert(calls[i].root);
      }
      if (roots.size() == members.size())
        c.op = c.op == "broadcast" ? "all_gather" : "reduce_scatter";
    }
    c.group_size = first.group_size;
    c.group_rank = first.group_rank;
    c.communicator = first.communicator;
    for (size_t i : members) c.bytes += std::max<int64_t>(0, calls[i].bytes);
    // An all_gather's bytes are a rank's part (the report's row multiplies by the group's size,
    // as for NCCL's own AllGather): the parts' mean.
    if (c.op == "all_gather" && first.op == "broadcast") {
      c.bytes = (c.bytes + c.group_size / 2) / c.group_size;
    }
    c.members = std::move(members);
    out.push_back(std::move(c));
  }
  return out;
}

std::string ncclCoalescedSignature(const NcclCoalesced& c) {
  return callSignature(c.op, c.communicator, c.bytes, c.group_size) + "|coalesced " +
         std::to_string(c.members.size());
}

}  // namespace tracerun::trace::analysis
