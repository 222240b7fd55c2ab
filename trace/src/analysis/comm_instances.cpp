// Collective instances across ranks (see comm_instances.h): one streamed pass per track picks the
// collective spans, then they are keyed by (group, sequence) and each instance's arrivals, waits
// and last arrival computed; stragglers counted from those. Groups without named members are
// matched as analyzeComm matches them (comm_groups.h).
#include "tracerun/trace/analysis/comm_instances.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "attempt_ranks.h"
#include "comm_groups.h"
#include "nccl_groups.h"
#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/analysis/comm.h"

namespace tracerun::trace::analysis {

const CollectiveInstance* CommInstances::instanceOfSpan(int64_t id) const {
  auto it = std::lower_bound(by_span.begin(), by_span.end(), std::make_pair(id, size_t{0}));
  if (it == by_span.end() || it->first != id) return nullptr;
  return &instances[it->second];
}

namespace {

struct Call {
  int rank = 0;
  int64_t id = 0, start = 0, end = 0, seq = -1;
  int group_size = 0;  // the span's arguments (comm_groups.h); 0 / -1: none
  int64_t group_rank = -1;
  int64_t group_id = -1;     // torch's name of the group (comm_groups.h GroupNames); -1: none
  std::string op, group;     // group: the decorator track's name, or the signature
  std::string attempt;       // " (attempt N)" of a restarted job's earlier attempt, else empty
  std::vector<int> members;  // from the track's name; empty when not a decorator track
  bool decorator = false;
};

}  // namespace

CommInstances analyzeCommInstances(const TraceReader& reader, const std::atomic<bool>* cancel) {
  const core::StringId kSeqKey = NameCodes::find(reader, vocab::arg::kSeq);
  const core::StringId kBytesKey = NameCodes::find(reader, vocab::arg::kBytes);
  const core::StringId kGroupSizeKey = NameCodes::find(reader, vocab::arg::kGroupSize);
  const core::StringId kGroupRankKey = NameCodes::find(reader, vocab::arg::kGroupRank);
  const core::StringId kGroupIdKey = NameCodes::find(reader, vocab::arg::kGroupId);
  const core::StringId kPeerKey = NameCodes::find(reader, vocab::arg::kPeer);
  const core::StringId kRootKey = NameCodes::find(reader, vocab::arg::kRoot);
  std::map<int, std::vector<Call>> byRank;
  // NCCL's groups, per rank: the markers and data calls the all-to-all rule reads (nccl_groups.h).
  std::map<int, std::vector<NcclGroupMarker>> markers;
  std::map<int, std::vector<NcclGroupedCall>> ncclCalls;
  // Restarts in one file (reader.h AttemptInfo): an earlier attempt's calls pair only among its
  // own ranks, under their group name with " (attempt N)".
  std::map<int, std::string> attemptTag;
  for (const RankInfo& k : reader.ranks()) {
    if (k.rank != k.attempt_rank)
      attemptTag[k.rank] = " (attempt " + std::to_string(k.attempt) + ")";
  }
  const AttemptRanks attempts(reader);
  for (const TrackRow& t : reader.tracks()) {
    if (cancel && cancel->load()) break;
    if (t.kind == core::TrackKind::kCounter || t.kind == core::TrackKind::kMemory) continue;
    std::vector<int> members;
    const bool decorator = decoratorTrack(t.name, &members);
    // The names list RANKs of the attempt that wrote the track: its trace ranks (as analyzeComm).
    members = attempts.traceRanks(t.rank, members);
    auto picked = pickSpans(
        reader, t, [](const SpanRow& s) { return s.category == core::Category::kComm ? 1 : 0; });
    int64_t ordinal = 0;
    for (const PickedSpan& p : picked) {
      const std::string& name = reader.str(p.span.name);
      const bool groupStart = name == vocab::nccl::kGroupStart;
      if (groupStart || name == vocab::nccl::kGroupEnd) {
        markers[t.rank].push_back({groupStart, p.span.start_ns, p.span.end_ns(), p.span.id});
      }
      if (vocab::nccl::isControlCall(name)) continue;  // set-up, not a collective (comm.h)
      std::string op = normalizeCommName(name);
      if (op.empty()) op = name;
      if (vocab::nccl::isDataCall(name)) {
        using Kind = NcclGroupedCall::Kind;
        const Kind kind = op == "send"   ? Kind::kSend
                          : op == "recv" ? Kind::kRecv
                                         : Kind::kCollective;
        ncclCalls[t.rank].push_back({kind, op, p.span.start_ns, p.span.end_ns(),
                                     p.arg(kPeerKey, -1), static_cast<int>(p.arg(kGroupSizeKey, 0)),
                                     p.arg(kGroupRankKey, -1), reader.str(p.span.detail),
                                     p.arg(kBytesKey, 0), p.span.id, p.arg(kRootKey, -1)});
      }
      if (op == "send" || op == "recv") continue;  // point-to-point: comm.h's p2p
      Call c;
      c.rank = t.rank;
      c.id = p.span.id;
      c.start = p.span.start_ns;
      c.end = std::max(p.span.start_ns, p.span.end_ns());  // damaged: end < start
      c.op = op;
      c.decorator = decorator;
      c.group_size = static_cast<int>(p.arg(kGroupSizeKey, 0));
      c.group_rank = p.arg(kGroupRankKey, -1);
      if (decorator) {
        c.group = t.name;
        c.members = members;
        c.seq = p.arg(kSeqKey, -1);
        if (c.seq < 0) c.seq = ordinal;
      } else {
        const std::string& detail = reader.str(p.span.detail);
        int64_t bytes = p.arg(kBytesKey, -1);
        if (bytes < 0) bytes = bytesOfShapes(detail);
        c.group = spanCallSignature(name, op, detail, bytes, c.group_size);
        c.group_id = p.arg(kGroupIdKey, -1);
      }
      if (const auto tag = attemptTag.find(t.rank); tag != attemptTag.end())
        c.attempt = tag->second;
      ++ordinal;
      byRank[t.rank].push_back(std::move(c));
    }
  }
  // NCCL's all-to-alls and coalesced collectives (as analyzeComm's foldNcclGroups): one call per
  // group, the GroupEnd's span its span to select, before the decorator's calls are compared with
  // them; a coalesced group's own calls leave.
  for (auto& [rank, list] : markers) {
    const std::vector<NcclGroupWindow> windows = ncclGroupWindows(std::move(list));
    std::vector<NcclGroupedCall>& grouped = ncclCalls[rank];
    {  // the calls a decorator span stands for (seenInsideDecorator) are not folded
      const std::vector<Call>& calls = byRank[rank];
      const std::vector<bool> inside = seenInsideDecoratorOf(calls);
      std::set<int64_t> ids;
      for (size_t k = 0; k < calls.size(); ++k) {
        if (inside[k]) ids.insert(calls[k].id);
      }
      for (NcclGroupedCall& g : grouped) g.decorated = ids.count(g.id) != 0;
    }
    const auto add = [&, rank = rank](const NcclGroupWindow& w, const std::string& op, int size,
                                      int64_t place, std::string group) {
      Call c;
      c.rank = rank;
      c.id = w.end_id;
      c.start = w.start;
      c.end = std::max(w.start, w.end);
      c.op = op;
      c.group_size = size;
      c.group_rank = place;
      c.group = std::move(group);
      if (const auto tag = attemptTag.find(rank); tag != attemptTag.end()) c.attempt = tag->second;
      byRank[rank].push_back(std::move(c));
    };
    const NcclGroupFolds groups = ncclGroupFolds(windows, grouped);
    for (const NcclAllToAll& a : groups.all_to_alls) {
      add(windows[a.window], "all_to_all", a.group_size, a.group_rank, ncclAllToAllSignature(a));
    }
    std::set<int64_t> folded;  // span ids
    for (const NcclCoalesced& a : groups.coalesced) {
      for (size_t m : a.members) folded.insert(grouped[m].id);
      add(windows[a.window], a.op, a.group_size, a.group_rank, ncclCoalescedSignature(a));
    }
    if (!folded.empty()) {
      auto& calls = byRank[rank];
      calls.erase(std::remove_if(calls.begin(), calls.end(),
                                 [&](const Call& c) { return folded.count(c.id) != 0; }),
                  calls.end());
    }
  }
  // The group's name joins the signature where every call of it has one (comm_groups.h); an
  // earlier attempt's calls pair only among its own ranks, under their group name with its tag.
  GroupNames names;
  for (const auto& [rank, calls] : byRank) {
    for (const Call& c : calls) {
      if (!c.decorator) names.note(c.group, attempts.attemptOf(rank), c.group_id);
    }
  }
  for (auto& [rank, calls] : byRank) {
    for (Call& c : calls) {
      if (!c.decorator) c.group = names.named(c.group, attempts.attemptOf(rank), c.group_id);
      c.group += c.attempt;
    }
  }
  // As analyzeComm (seenInsideDecorator): Gloo's own span of a call the decorator recorded is
  // not counted again; a group the decorator does not wrap keeps its calls.
  std::map<std::pair<std::string, std::vector<int>>, std::map<int64_t, std::vector<const Call*>>>
      keyed;           // (group name, members) -> seq -> calls
  GroupCalls unnamed;  // calls without named members, for matchGroups
  for (auto& [rank, calls] : byRank) {
    eraseSeenInsideDecorator(calls);
    std::sort(calls.begin(), calls.end(), [](const Call& a, const Call& b) {
      return std::tie(a.start, a.id) < std::tie(b.start, b.id);
    });
    std::map<std::string, int64_t> ordinals;
    for (Call& c : calls) {
      if (!c.decorator) {
        c.seq = ordinals[c.group]++;  // the k-th call of its signature on this rank
        unnamed[c.group][rank].push_back({c.start, c.end, c.group_size, c.group_rank});
      }
    }
  }
  // Unnamed calls: the ranks whose calls of the signature pair up in time (as analyzeComm). When
  // no group size was recorded, the ranks that paired with nobody (a trace cut short, a call
  // lost) form one group, so that their k-th calls still meet; with one, they stay alone (the
  // capture's places kept them apart).
  std::map<std::string, std::map<int, std::vector<int>>> groupOf;  // signature -> rank -> group
  std::set<std::string> sized;  // signatures whose calls recorded their group's size
  for (const auto& [sig, byRankCalls] : unnamed) {
    for (const auto& [rank, calls] : byRankCalls) {
      if (!calls.empty() && calls.front().group_size > 0) sized.insert(sig);
    }
  }
  for (const auto& [sig, groups] : matchGroups(std::move(unnamed))) {
    std::vector<int> alone;
    for (const auto& g : groups) {
      if (g.size() == 1 && sized.count(sig) == 0) alone.push_back(g.front());
      for (int r : g) groupOf[sig][r] = g;
    }
    std::sort(alone.begin(), alone.end());
    for (int r : alone) groupOf[sig][r] = alone;
  }
  for (auto& [rank, calls] : byRank) {
    for (Call& c : calls) {
      if (!c.decorator) c.members = groupOf[c.group][rank];
      if (c.members.empty()) c.members = {rank};
      keyed[{c.group, c.members}][c.seq].push_back(&c);
    }
  }

  CommInstances out;
  std::map<int, StragglerRow> stragglers;
  for (const auto& [key, bySeq] : keyed) {
    CollectiveGroup g;
    g.name = key.first;
    g.members = key.second;
    // A signature names no members, and two groups may share one (two groups in lockstep): the
    // name then says whose calls they are, as a decorator track's name does.
    std::vector<int> named;
    if (!decoratorTrack(key.first, &named)) {
      std::string list;
      for (int r : g.members) list += (list.empty() ? "" : ",") + std::to_string(r);
      g.name += " [" + list + "]";
    }
    const int gi = static_cast<int>(out.groups.size());
    for (const auto& [seq, calls] : bySeq) {
      CollectiveInstance in;
      in.group = gi;
      in.seq = seq;
      in.op = calls.front()->op;
      // One span per rank (a damaged trace may repeat a seq on a rank: the first one counts).
      std::map<int, const Call*> perRank;
      for (const Call* c : calls) perRank.emplace(c->rank, c);
      int64_t first = INT64_MAX, last = INT64_MIN;
      for (const auto& [r, c] : perRank) {
        first = std::min(first, c->start);
        if (c->start > last) {
          last = c->start;
          in.last_rank = r;  // ranks ascend: a tie keeps the lowest
        }
      }
      in.spread_ns = satSub(last, first);
      for (const auto& [r, c] : perRank) {
        InstanceRank x;
        x.rank = r;
        x.span_id = c->id;
        x.arrival_ns = c->start;
        x.end_ns = c->end;
        x.start_ns = std::clamp(last, c->start, c->end);
        x.wait_ns = satSub(x.start_ns, x.arrival_ns);
        x.lag_ns = satSub(c->start, first);
        in.ranks.push_back(x);
      }
      if (in.ranks.size() >= 2) {
        int64_t caused = 0;
        for (const InstanceRank& x : in.ranks) {
          StragglerRow& s = stragglers[x.rank];
          s.rank = x.rank;
          ++s.instances;
          if (x.rank != in.last_rank) caused = satAdd(caused, x.wait_ns);
        }
        StragglerRow& s = stragglers[in.last_rank];
        ++s.last;
        s.caused_wait_ns = satAdd(s.caused_wait_ns, caused);
      }
      const size_t idx = out.instances.size();
      for (const InstanceRank& x : in.ranks) out.by_span.emplace_back(x.span_id, idx);
      g.instances.push_back(idx);
      out.instances.push_back(std::move(in));
    }
    out.groups.push_back(std::move(g));
  }
  std::sort(out.by_span.begin(), out.by_span.end());
  for (const auto& [r, s] : stragglers) out.stragglers.push_back(s);
  std::stable_sort(out.stragglers.begin(), out.stragglers.end(),
                   [](const StragglerRow& a, const StragglerRow& b) { return a.last > b.last; });
  return out;
}

}  // namespace tracerun::trace::analysis
