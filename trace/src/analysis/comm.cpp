// Communication analysis (see comm.h): one streamed pass per track collects comm spans, caller
// scopes, point-to-point scopes and leaf-op compute time; then collectives are grouped across
// ranks, receives paired with sends, and overlap measured per rank.
//
// Sections: names and bytes · collecting · groups · collectives · point-to-point · the
//           decorator's calls and NCCL's communicator ranks · entry point (the pass's consumer)
#include "tracerun/trace/analysis/comm.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <tuple>

#include "attempt_ranks.h"
#include "comm_groups.h"
#include "gpu_activity.h"
#include "nccl_groups.h"
#include "span_consumers.h"
#include "span_pass.h"
#include "span_select.h"
#include "tracerun/core/vocabulary.h"

namespace tracerun::trace::analysis {

// ---------------------------------------------------------------------------------------------
// names and bytes

std::string normalizeCommName(const std::string& name) {
  std::string base = name;
  const size_t colon = base.rfind(':');
  if (colon != std::string::npos) base = base.substr(colon + 1);
  std::string s;
  for (char c : base) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  static const std::vector<std::pair<const char*, const char*>> kPrefixes = {
      {"allreduce", "all_reduce"},
      {"allgather", "all_gather"},
      {"reducescatter", "reduce_scatter"},
      {"alltoall", "all_to_all"},
      {"broadcast", "broadcast"},
      {"barrier", "barrier"},
      {"reduce", "reduce"},
      {"gather", "gather"},
      {"scatter", "scatter"},
      {"send", "send"},
      {"recv", "recv"},
  };
  for (const auto& [prefix, op] : kPrefixes) {
    if (s.rfind(prefix, 0) == 0) return op;
  }
  return "";
}

double busBandwidthFactor(const std::string& op, int n) {
  if (n < 1) return 0;
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "all_gather" || op == "reduce_scatter" || op == "all_to_all" || op == "gather" ||
      op == "scatter") {
    return double(n - 1) / n;
  }
  if (op == "broadcast" || op == "reduce") return 1.0;
  return 0;
}

int64_t bytesOfShapes(const std::string& d) {
  constexpr int64_t kHuge = int64_t{1} << 56;  // more than any real tensor: the cap of a sum
  static const std::map<std::string, int64_t> kSize = {
      {"f32", 4}, {"f64", 8}, {"f16", 2}, {"bf16", 2}, {"i64", 8}, {"i32", 4},
      {"i16", 2}, {"i8", 1},  {"u8", 1},  {"bool", 1}, {"c64", 8}, {"c128", 16}};
  int64_t total = 0;
  for (size_t open = d.find('['); open != std::string::npos; open = d.find('[', open + 1)) {
    size_t b = open;
    while (b > 0 && std::isalnum(static_cast<unsigned char>(d[b - 1]))) --b;
    auto it = kSize.find(d.substr(b, open - b));
    const size_t close = d.find(']', open);
    if (it == kSize.end() || close == std::string::npos) continue;
    int64_t numel = 1, cur = 0;
    bool digits = false;
    for (size_t i = open + 1; i <= close; ++i) {
      if (std::isdigit(static_cast<unsigned char>(d[i]))) {
        cur = std::min<int64_t>(cur, kHuge) * 10 + (d[i] - '0');  // a damaged name: saturate
        digits = true;
      } else if (d[i] == ',' || d[i] == ']') {
        if (digits) numel = cur == 0 || numel <= kHuge / cur ? numel * cur : kHuge;
        cur = 0;
        digits = false;
      }
    }
    total = std::min(kHuge, total + std::min(numel, kHuge) * it->second);
  }
  return total;
}

namespace {

// ---------------------------------------------------------------------------------------------
// collecting

enum Code : int { kNone = 0, kComm, kUserScope };

struct CommSpan {
  int rank = 0;
  std::string op;
  std::string signature;  // op and shapes: what must match across a group
  int64_t group_id = -1;  // torch's name of the group (vocab::arg::kGroupId); -1: none
  int64_t start = 0, end = 0, bytes = 0;
  int group_size = 0;        // from an argument, 0 when none
  std::vector<int> members;  // from the decorator's track name, empty when unknown
  bool decorator = false;    // recorded by tracerun's c10d decorator (traced_group.h)
  bool hostCall = false;     // NCCL's host call (CollectiveStats::host_call_time)
  int64_t peer = -1, tag = -1;
  int64_t root = -1;  // a broadcast's or reduce's root (NCCL's calls: a rank of the communicator)
  int64_t coalesced = 0;  // a folded coalesced group: the calls it holds
  // NCCL's send/recv: peer is a rank of the communicator (detail), group_rank this rank's in it.
  bool communicatorPeer = false;
  int64_t commPeer = -1;  // NCCL's send/recv: the peer as NCCL names it (peer becomes a trace rank)
  std::string communicator;
  int64_t group_rank = -1;
  std::string via;
  // NCCL's host call: the one communication kernel it launched, when the trace says which
  // (timeHostCallsByKernels; never set on other calls).
  bool kernel = false;
  int64_t kernelStart = 0, kernelEnd = 0;
  int64_t dur() const { return satSub(end, start); }
};

struct Scope {
  core::StringId name = 0;
  int64_t start = 0, end = 0;
};

struct P2P {
  int rank = 0, peer = -1;
  bool send = false;
  std::string kind;
  int64_t microbatch = -1, chunk = -1, bytes = 0;
  int64_t start = 0, end = 0;
};

struct ControlCall {
  std::string name;
  int64_t dur = 0;
  int64_t start = 0, end = 0;
};

struct RankData {
  std::vector<ControlCall> control;     // vocab::nccl::isControlCall: no data moved
  std::vector<CommSpan> comm;           // collectives
  std::vector<CommSpan> p2pComm;        // comm spans that are sends / receives
  std::vector<Scope> scopes;            // user scopes on thread tracks
  std::vector<P2P> p2p;                 // pipeline-style scopes with a peer
  std::vector<NcclGroupWindow> groups;  // NCCL's groups (nccl_groups.h)
  Intervals compute, commTime;
  // Whether the rank made NCCL data calls (decorated ones included), and then its GPU kernels
  // per device: communication, other (timeHostCallsByKernels).
  bool ncclCaller = false;
  std::map<int, std::pair<Intervals, Intervals>> kernels;
};

struct Keys {
  core::StringId bytes, groupSize, peer, microbatch, chunk, tag, groupRank, root, groupId;
};

// Leaf op spans of a track: an op span with no child span on the track.
class LeafTracker {
 public:
  void add(const SpanRow& s) {
    const size_t depth = static_cast<size_t>(std::max(0, s.depth));
    while (stack_.size() > depth) pop();
    if (!stack_.empty()) stack_.back().has_child = true;
    const bool op = s.category == core::Category::kOp || s.category == core::Category::kBackward ||
                    s.category == core::Category::kKernel;
    stack_.push_back({s.start_ns, s.end_ns(), op, false});
  }
  // After the track's last span: its leaf intervals (merged where they touch); starts afresh.
  Intervals finish() {
    while (!stack_.empty()) pop();
    Intervals out;
    out.swap(out_);
    return out;
  }

 private:
  struct Open {
    int64_t start, end;
    bool op, has_child;
  };
  void pop() {
    const Open o = stack_.back();
    stack_.pop_back();
    if (!o.op || o.has_child) return;
    if (!out_.empty() && o.start <= out_.back().second) {
      out_.back().second = std::max(out_.back().second, o.end);
    } else {
      out_.emplace_back(o.start, o.end);
    }
  }
  Intervals out_;
  std::vector<Open> stack_;
};

// What one track's picked spans add to its rank: user scopes, pipeline messages, comm spans.
void addPicked(const TraceReader& reader, const TrackRow& t, const Keys& keys,
               const NameCodes& p2pNames, const AttemptRanks& attempts, bool decorator,
               const std::vector<int>& members, const std::vector<PickedSpan>& picked,
               RankData& d) {
  for (const PickedSpan& p : picked) {
    const SpanRow& s = p.span;
    if (p.code == kUserScope) {
      d.scopes.push_back({s.name, s.start_ns, s.end_ns()});
      const int code = p2pNames(s.name);
      const int64_t peer = attempts.traceRank(t.rank, static_cast<int>(p.arg(keys.peer, -1)));
      if (code != 0 && peer >= 0) {
        P2P m;
        m.rank = t.rank;
        m.peer = static_cast<int>(peer);
        m.send = code <= 2;
        m.kind = (code == 1 || code == 3) ? "forward" : "backward";
        m.microbatch = p.arg(keys.microbatch, -1);
        m.chunk = p.arg(keys.chunk, -1);
        m.bytes = p.arg(keys.bytes, 0);
        m.start = s.start_ns;
        m.end = s.end_ns();
        d.p2p.push_back(m);
      }
      continue;
    }
    const std::string& name = reader.str(s.name);
    if (vocab::nccl::isControlCall(name)) {
      d.control.push_back(
          {name, std::max<int64_t>(0, satSub(s.end_ns(), s.start_ns)), s.start_ns, s.end_ns()});
      continue;
    }
    CommSpan c;
    c.rank = t.rank;
    c.op = normalizeCommName(name);
    if (c.op.empty()) c.op = name;
    const std::string& detail = reader.str(s.detail);
    c.start = s.start_ns;
    c.end = s.end_ns();
    c.bytes = p.arg(keys.bytes, -1);
    if (c.bytes < 0) c.bytes = bytesOfShapes(detail);
    c.group_size = static_cast<int>(p.arg(keys.groupSize, 0));
    c.signature = spanCallSignature(name, c.op, detail, c.bytes, c.group_size);
    c.group_id = p.arg(keys.groupId, -1);
    c.members = members;
    c.decorator = decorator;
    c.peer = p.arg(keys.peer, -1);
    c.tag = p.arg(keys.tag, -1);
    c.group_rank = p.arg(keys.groupRank, -1);
    c.root = p.arg(keys.root, -1);
    c.communicator = detail;
    c.communicatorPeer = name == vocab::nccl::kSend || name == vocab::nccl::kRecv;
    if (c.communicatorPeer) c.commPeer = c.peer;
    c.hostCall = vocab::nccl::isDataCall(name);
    if (!c.communicatorPeer && c.peer >= 0) {
      c.peer = attempts.traceRank(t.rank, static_cast<int>(c.peer));
    }
    if (c.op == "recv" && c.peer < 0 && decorator) c.peer = -2;  // any source: not pairable
    // A posted send's span lasts until the receiver took the data: its length is the peer's
    // delay, not communication work, so sends stay out of the overlap measure.
    if (c.op != "send") d.commTime.emplace_back(c.start, c.end);
    (c.op == "send" || c.op == "recv" ? d.p2pComm : d.comm).push_back(std::move(c));
  }
}

// The innermost user scope containing t (the latest-starting one that contains it).
std::string viaOf(const TraceReader& reader, const std::vector<Scope>& scopes, int64_t t) {
  const Scope* best = nullptr;
  auto it = std::upper_bound(scopes.begin(), scopes.end(), t,
                             [](int64_t x, const Scope& s) { return x < s.start; });
  // Scopes nest on a thread, so walking back from the last one starting at or before t finds
  // the innermost container quickly; stop after a bounded number of candidates.
  int budget = 64;
  while (it != scopes.begin() && budget-- > 0) {
    --it;
    if (it->end >= t) {
      best = &*it;
      break;
    }
  }
  return best ? reader.str(best->name) : std::string();
}

// ---------------------------------------------------------------------------------------------
// groups: ranks whose calls of one signature pair up in time (comm_groups.h)

std::map<std::string, std::vector<std::vector<int>>> matchCommGroups(
    const std::map<int, RankData>& data) {
  GroupCalls calls;
  for (const auto& [rank, d] : data) {
    for (const CommSpan& c : d.comm) {
      calls[c.signature][rank].push_back({c.start, c.end, c.group_size, c.group_rank});
    }
  }
  return matchGroups(std::move(calls));
}

// ---------------------------------------------------------------------------------------------
// NCCL's groups

// The rank's NCCL group windows, from its GroupStart / GroupEnd control calls.
std::vector<NcclGroupWindow> ncclGroupWindowsOf(const std::vector<ControlCall>& control) {
  std::vector<NcclGroupMarker> markers;
  for (const ControlCall& c : control) {
    const bool start = c.name == vocab::nccl::kGroupStart;
    if (start || c.name == vocab::nccl::kGroupEnd) markers.push_back({start, c.start, c.end, 0});
  }
  return ncclGroupWindows(std::move(markers));
}

// Each of the rank's NCCL groups that is an all_to_all (nccl_groups.h) becomes one all_to_all
// call spanning the group (bytes: what it sends; its signature without them), so it is a
// collective with its group, its kernel (the GroupEnd's launch: timeHostCallsByKernels) and its
// bus bandwidth, not 2n messages whose spans are enqueues. Its sends and receives leave the
// messages; the group's span joins the rank's communication time. Each group of coalesced
// collectives (nccl_groups.h) becomes one call of their op the same way (bytes: theirs summed),
// timed by the one kernel its GroupEnd launches instead of left untimed.
void foldNcclGroups(RankData& d) {
  using Kind = NcclGroupedCall::Kind;
  std::vector<NcclGroupedCall> calls;
  // Per call: its index in comm (collective) or p2pComm (send, receive).
  std::vector<std::pair<bool, size_t>> origin;
  const std::vector<bool> decorated = seenInsideDecoratorOf(d.comm);
  for (size_t i = 0; i < d.comm.size(); ++i) {
    const CommSpan& c = d.comm[i];
    if (!c.hostCall) continue;
    calls.push_back({Kind::kCollective, c.op, c.start, c.end, -1, c.group_size, c.group_rank,
                     c.communicator, std::max<int64_t>(0, c.bytes), 0, c.root, decorated[i]});
    origin.emplace_back(true, i);
  }
  for (size_t i = 0; i < d.p2pComm.size(); ++i) {
    const CommSpan& c = d.p2pComm[i];
    if (!c.communicatorPeer) continue;
    calls.push_back({c.op == "send" ? Kind::kSend : Kind::kRecv, c.op, c.start, c.end, c.commPeer,
                     c.group_size, c.group_rank, c.communicator, c.bytes});
    origin.emplace_back(false, i);
  }
  std::vector<bool> foldedComm(d.comm.size(), false), foldedP2p(d.p2pComm.size(), false);
  const auto fold = [&](const NcclGroupWindow& w, const std::string& op,
                        const std::vector<size_t>& members, int64_t bytes, int groupSize,
                        int64_t groupRank, const std::string& communicator, std::string signature,
                        bool coalesced) {
    CommSpan a;
    const auto [collective, first] = origin[members.front()];
    a.rank = (collective ? d.comm[first] : d.p2pComm[first]).rank;
    a.op = op;
    a.start = w.start;
    a.end = std::max(w.start, w.end);  // a damaged GroupEnd
    a.bytes = bytes;
    a.group_size = groupSize;
    a.group_rank = groupRank;
    a.communicator = communicator;
    a.signature = std::move(signature);
    a.hostCall = true;
    a.coalesced = coalesced ? static_cast<int64_t>(members.size()) : 0;
    for (size_t m : members) {
      const auto [inComm, k] = origin[m];
      (inComm ? foldedComm : foldedP2p)[k] = true;
    }
    d.commTime.emplace_back(a.start, a.end);
    return a;
  };
  std::vector<CommSpan> folded;
  const NcclGroupFolds groups = ncclGroupFolds(d.groups, calls);
  for (const NcclAllToAll& found : groups.all_to_alls) {
    folded.push_back(fold(d.groups[found.window], "all_to_all", found.members, found.bytes,
                          found.group_size, found.group_rank, found.communicator,
                          ncclAllToAllSignature(found), false));
  }
  for (const NcclCoalesced& found : groups.coalesced) {
    folded.push_back(fold(d.groups[found.window], found.op, found.members, found.bytes,
                          found.group_size, found.group_rank, found.communicator,
                          ncclCoalescedSignature(found), true));
  }
  const auto keep = [](std::vector<CommSpan>& list, const std::vector<bool>& gone) {
    size_t kept = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      if (gone[i]) continue;
      if (kept != i) list[kept] = std::move(list[i]);  // never onto itself
      ++kept;
    }
    list.resize(kept);
  };
  keep(d.comm, foldedComm);
  keep(d.p2pComm, foldedP2p);
  for (CommSpan& a : folded) d.comm.push_back(std::move(a));
}

// ---------------------------------------------------------------------------------------------
// NCCL's host calls timed by their kernels

// Gives each NCCL collective call the communication kernel it launched: the one kernel (HTA's
// pattern) whose launch API record (CUPTI's, joined by correlation: gpu_activity.h) lies inside
// the call, when no other NCCL call of the rank (a send or receive included) holds that launch.
// A call holding no launch (inside ncclGroupStart/End the kernel is launched by GroupEnd: a
// collective alone in its group takes that one, and a folded all_to_all or coalesced call spans
// its GroupEnd), or two (a nonblocking communicator launches a call's kernel after it returned,
// inside the next call), or sharing its launch with a call of another thread, gets none: which
// kernel is its own is then unknown; so do groups of collectives of different ops. Reads
// the stream tracks (once, every rank's) only when some rank made NCCL calls (ncclCaller); such a
// rank also gets its kernels' intervals per device (RankData::kernels).
void timeHostCallsByKernels(const TraceReader& reader, std::map<int, RankData>& data) {
  if (std::none_of(data.begin(), data.end(), [](const auto& rd) { return rd.second.ncclCaller; }))
    return;
  struct Kernel {
    int64_t launch, start, end;
  };
  std::map<int, std::vector<Kernel>> kernels;  // per rank, by launch
  for (const gpu::StreamActivities& s : gpu::readActivities(reader)) {
    const auto d = data.find(s.rank);
    const bool caller = d != data.end() && d->second.ncclCaller;
    for (const gpu::Activity& a : s.items) {
      if (!a.kernel) continue;
      if (caller) {
        auto& [comm, other] = d->second.kernels[s.device];
        (a.kind == GpuKind::kComm ? comm : other).emplace_back(a.start, a.end);
      }
      if (a.kind == GpuKind::kComm && a.launch_record)
        kernels[s.rank].push_back({a.launch, a.start, a.end});
    }
  }
  for (auto& [rank, list] : kernels) {
    std::sort(list.begin(), list.end(),
              [](const Kernel& a, const Kernel& b) { return a.launch < b.launch; });
    const auto d = data.find(rank);
    if (d == data.end()) continue;
    // The indices [first, last) of the kernels launched within [from, to].
    const auto launchedIn = [&list = list](int64_t from, int64_t to) {
      const auto first = std::lower_bound(list.begin(), list.end(), from,
                                          [](const Kernel& k, int64_t t) { return k.launch < t; });
      auto last = first;
      while (last != list.end() && last->launch <= to) ++last;
      return std::make_pair(static_cast<size_t>(first - list.begin()),
                            static_cast<size_t>(last - list.begin()));
    };
    const auto give = [&list = list](CommSpan& c, size_t k) {
      c.kernel = true;
      c.kernelStart = list[k].start;
      c.kernelEnd = list[k].end;
    };
    std::vector<size_t> holders(list.size(), 0);       // host calls whose window holds the launch
    std::vector<std::pair<CommSpan*, size_t>> single;  // collectives holding exactly one launch
    for (auto* calls : {&d->second.comm, &d->second.p2pComm}) {  // sends and receives hold too
      for (CommSpan& c : *calls) {
        if (!c.hostCall) continue;
        const auto [first, last] = launchedIn(c.start, c.end);
        for (size_t k = first; k < last; ++k) ++holders[k];
        if (calls == &d->second.comm && last - first == 1) single.emplace_back(&c, first);
      }
    }
    for (const auto& [c, k] : single) {
      if (holders[k] == 1) give(*c, k);
    }
    // A collective alone in an NCCL group launches nothing itself: ncclGroupEnd launches its
    // kernel. It gets the one communication kernel launched inside that GroupEnd, when no host
    // call holds that launch and nothing else (no send or receive) was grouped with it.
    for (const NcclGroupWindow& w : d->second.groups) {
      CommSpan* lone = nullptr;
      size_t grouped = 0;
      for (auto* calls : {&d->second.comm, &d->second.p2pComm}) {
        for (CommSpan& c : *calls) {
          if (!c.hostCall || !w.holds(c.start, c.end)) continue;
          ++grouped;
          if (calls == &d->second.comm) lone = &c;
        }
      }
      if (grouped != 1 || lone == nullptr || lone->kernel) continue;
      const auto [first, last] = launchedIn(w.end_call_start, w.end);
      if (last - first == 1 && holders[first] == 0) give(*lone, first);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// collectives

void collectives(const TraceReader& reader, const AttemptRanks& attempts,
                 std::map<int, RankData>& data, CommAnalysis& out) {
  // The group's name joins the signature where every call of it has one (comm_groups.h), as the
  // viewer's instances do.
  GroupNames names;
  for (const auto& [rank, d] : data) {
    for (const CommSpan& c : d.comm) {
      if (!c.decorator) names.note(c.signature, attempts.attemptOf(rank), c.group_id);
    }
  }
  for (auto& [rank, d] : data) {
    for (CommSpan& c : d.comm) {
      if (!c.decorator)
        c.signature = names.named(c.signature, attempts.attemptOf(rank), c.group_id);
    }
  }
  const auto groups = matchCommGroups(data);
  struct Acc {
    int64_t spans = 0, bytes = 0, time = 0;
    int64_t kernelTime = 0;  // of the host calls timed by their kernels
    int64_t coalesced = 0;   // calls held by folded coalesced groups
    int size = 0;
    std::string source;
    std::set<int> contributors;        // members present in the trace
    std::map<int, int64_t> rankBytes;  // scatter: each member's bytes (the root's are the call's)
    bool hostCall = false;             // a host call without kernels: no bandwidth for the row
    bool kernels = false;              // a host call timed by its kernels
  };
  // (op, group, via) -> sums over member spans
  std::map<std::tuple<std::string, std::vector<int>, std::string>, Acc> acc;
  for (auto& [rank, d] : data) {
    std::sort(d.scopes.begin(), d.scopes.end(),
              [](const Scope& a, const Scope& b) { return a.start < b.start; });
    for (CommSpan& c : d.comm) {
      c.via = viaOf(reader, d.scopes, c.start);
      std::vector<int> members{rank};
      std::string source = "unknown";
      int size = 0;
      if (!c.members.empty()) {
        members = c.members;
        size = c.group_size > 0 ? c.group_size : static_cast<int>(c.members.size());
        source = "annotated";
      } else if (c.group_size > 0) {
        size = c.group_size;
        source = "annotated";
      }
      auto it = groups.find(c.signature);
      if (c.members.empty() && it != groups.end()) {
        for (const auto& g : it->second) {
          if (std::find(g.begin(), g.end(), rank) == g.end() || g.size() < 2) continue;
          members = g;
          if (size == 0) {
            size = static_cast<int>(g.size());
            source = "matched";
          }
        }
      }
      Acc& a = acc[{c.op, members, c.via}];
      ++a.spans;
      a.bytes = satAdd(a.bytes, c.bytes);
      if (c.op == "scatter") a.rankBytes[rank] = satAdd(a.rankBytes[rank], c.bytes);
      a.time = satAdd(a.time, c.dur());
      if (c.kernel) a.kernelTime = satAdd(a.kernelTime, satSub(c.kernelEnd, c.kernelStart));
      a.coalesced = satAdd(a.coalesced, c.coalesced);
      a.size = size;
      a.source = source;
      a.contributors.insert(rank);
      a.hostCall = a.hostCall || (c.hostCall && !c.kernel);
      a.kernels = a.kernels || c.kernel;
    }
  }
  for (const auto& [key, a] : acc) {
    CollectiveStats s;
    s.op = std::get<0>(key);
    s.ranks = std::get<1>(key);
    s.via = std::get<2>(key);
    s.group_size = a.size;
    s.group_source = a.source;
    // Each call appears once per member present in the trace.
    const auto members = std::max<int64_t>(1, static_cast<int64_t>(a.contributors.size()));
    s.calls = a.spans / members;
    s.coalesced_calls = a.coalesced / members;
    const int64_t perCallBytes = a.bytes / members;
    int64_t gathered = 0;
    if (__builtin_mul_overflow(perCallBytes, int64_t{s.group_size}, &gathered)) {
      gathered = perCallBytes > 0 ? INT64_MAX : INT64_MIN;
    }
    if ((s.op == "all_gather" || s.op == "gather") && s.group_size > 0) {
      s.bytes = gathered;  // the gathered output: n x each rank's input
    } else if (s.op == "scatter") {
      s.bytes = 0;  // the root's send buffer (n pieces); 0 when the root was not traced
      for (const auto& [r, b] : a.rankBytes) s.bytes = std::max(s.bytes, b);
    } else {
      s.bytes = perCallBytes;
    }
    // The kernels' time when every call of the row has its kernel; else the spans' (a row never
    // adds the two kinds of time).
    s.kernel_time = a.kernels && !a.hostCall;
    s.time_ns = (s.kernel_time ? a.kernelTime : a.time) / members;
    s.host_call_time = a.hostCall;
    s.algbw_gbps = s.time_ns > 0 && !a.hostCall ? double(s.bytes) / double(s.time_ns) : 0;  // GB/s
    s.busbw_gbps = s.algbw_gbps * busBandwidthFactor(s.op, s.group_size);
    out.collectives.push_back(s);
  }
}

// ---------------------------------------------------------------------------------------------
// point-to-point

void pointToPoint(std::map<int, RankData>& data, CommAnalysis& out) {
  std::map<std::tuple<int, int, std::string>, PointToPointStats> stats;
  // Paired in order per (src, dst, kind, microbatch). Not by chunk: a message from the last stage
  // of one model chunk reaches the first stage of the next chunk.
  using Key = std::tuple<int, int, std::string, int64_t>;
  std::map<Key, std::vector<const P2P*>> sends, recvs;
  bool anyScopes = false;
  for (auto& [rank, d] : data) {
    for (const P2P& m : d.p2p) {
      anyScopes = true;
      const int src = m.send ? m.rank : m.peer, dst = m.send ? m.peer : m.rank;
      (m.send ? sends : recvs)[{src, dst, m.kind, m.microbatch}].push_back(&m);
      PointToPointStats& s = stats[{src, dst, m.kind}];
      s.src = src;
      s.dst = dst;
      s.kind = m.kind;
      if (m.send) {
        ++s.messages;
        s.bytes = satAdd(s.bytes, m.bytes);
      } else {
        s.recv_ns = satAdd(s.recv_ns, satSub(m.end, m.start));
      }
    }
  }
  std::map<int, RankCommStats*> byRank;
  for (auto& r : out.ranks) byRank[r.rank] = &r;
  for (auto& [key, list] : recvs) {
    auto byStart = [](const P2P* a, const P2P* b) { return a->start < b->start; };
    std::sort(list.begin(), list.end(), byStart);
    auto it = sends.find(key);
    std::vector<const P2P*> matched;
    if (it != sends.end()) {
      matched = it->second;
      std::sort(matched.begin(), matched.end(), byStart);
    }
    PointToPointStats& s = stats[{std::get<0>(key), std::get<1>(key), std::get<2>(key)}];
    RankCommStats* rs = byRank.count(std::get<1>(key)) ? byRank[std::get<1>(key)] : nullptr;
    for (size_t k = 0; k < list.size(); ++k) {
      const P2P& r = *list[k];
      const int64_t dur = std::max<int64_t>(0, satSub(r.end, r.start));  // damaged: end < start
      if (rs) rs->recv_ns = satAdd(rs->recv_ns, dur);
      if (k >= matched.size()) {
        if (rs) ++rs->unmatched_recvs;
        continue;
      }
      const int64_t wait = std::clamp<int64_t>(satSub(matched[k]->start, r.start), 0, dur);
      s.wait_ns = satAdd(s.wait_ns, wait);
      s.transfer_ns = satAdd(s.transfer_ns, dur - wait);
      ++s.matched;
      if (rs) {
        rs->recv_wait_ns = satAdd(rs->recv_wait_ns, wait);
        rs->recv_transfer_ns = satAdd(rs->recv_transfer_ns, dur - wait);
      }
    }
  }
  if (!anyScopes) {
    // No pipeline scopes: the comm spans of sends and receives, paired by (src, dst, tag) when
    // they name their peer (the c10d decorator), else counted per rank.
    std::map<std::tuple<int, int, int64_t>, std::vector<const CommSpan*>> cs, cr;
    for (auto& [rank, d] : data) {
      for (const CommSpan& c : d.p2pComm) {
        const bool send = c.op == "send";
        const int peer = static_cast<int>(c.peer);
        const int src = send ? rank : (peer >= 0 ? peer : -1);
        const int dst = send ? (peer >= 0 ? peer : -1) : rank;
        PointToPointStats& s = stats[{src, dst, "p2p"}];
        s.src = src;
        s.dst = dst;
        s.kind = "p2p";
        if (send) {
          ++s.messages;
          s.bytes = satAdd(s.bytes, c.bytes);
          if (peer >= 0) cs[{src, dst, c.tag}].push_back(&c);
        } else {
          s.recv_ns = satAdd(s.recv_ns, c.dur());
          if (byRank.count(rank)) byRank[rank]->recv_ns = satAdd(byRank[rank]->recv_ns, c.dur());
          if (peer >= 0) cr[{src, dst, c.tag}].push_back(&c);
        }
      }
    }
    for (auto& [key, list] : cr) {
      auto byStart = [](const CommSpan* a, const CommSpan* b) { return a->start < b->start; };
      std::sort(list.begin(), list.end(), byStart);
      std::vector<const CommSpan*> sent;
      if (auto it = cs.find(key); it != cs.end()) sent = it->second;
      std::sort(sent.begin(), sent.end(), byStart);
      PointToPointStats& s = stats[{std::get<0>(key), std::get<1>(key), "p2p"}];
      RankCommStats* rs = byRank.count(std::get<1>(key)) ? byRank[std::get<1>(key)] : nullptr;
      for (size_t k = 0; k < list.size(); ++k) {
        const int64_t dur = std::max<int64_t>(0, list[k]->dur());  // damaged: end < start
        if (k >= sent.size()) {
          if (rs) ++rs->unmatched_recvs;
          continue;
        }
        const int64_t wait = std::clamp<int64_t>(satSub(sent[k]->start, list[k]->start), 0, dur);
        s.wait_ns = satAdd(s.wait_ns, wait);
        s.transfer_ns = satAdd(s.transfer_ns, dur - wait);
        ++s.matched;
        if (rs) {
          rs->recv_wait_ns = satAdd(rs->recv_wait_ns, wait);
          rs->recv_transfer_ns = satAdd(rs->recv_transfer_ns, dur - wait);
        }
      }
    }
  }
  for (auto& [key, s] : stats) out.p2p.push_back(s);
}

}  // namespace

bool decoratorTrack(const std::string& track_name, std::vector<int>* members) {
  const std::string& name = track_name;
  if (name.rfind("c10d ", 0) != 0) return false;
  const size_t open = name.rfind('['), close = name.rfind(']');
  if (open == std::string::npos || close == std::string::npos || close < open) return true;
  int cur = 0;
  bool digits = false;
  for (size_t i = open + 1; i <= close; ++i) {
    if (std::isdigit(static_cast<unsigned char>(name[i]))) {
      cur = std::min(cur, 100'000'000) * 10 + (name[i] - '0');  // a damaged name: saturate
      digits = true;
    } else {
      if (digits) members->push_back(cur);
      cur = 0;
      digits = false;
    }
  }
  std::sort(members->begin(), members->end());
  members->erase(std::unique(members->begin(), members->end()), members->end());
  return true;
}

// ---------------------------------------------------------------------------------------------
// the decorator's calls and NCCL's communicator ranks

std::vector<bool> seenInsideDecorator(const std::vector<CommCallView>& calls) {
  constexpr int64_t kSlackNs = 10'000;  // clock reads on two threads around one call
  // Per op, the decorator spans by start, and the latest end among the first i of them.
  struct Wrapped {
    std::vector<std::pair<int64_t, int64_t>> spans;
    std::vector<int64_t> latestEnd;
  };
  std::map<std::string, Wrapped> wrapped;
  for (const CommCallView& c : calls) {
    if (c.decorator) wrapped[c.op].spans.emplace_back(c.start, c.end);
  }
  for (auto& [op, w] : wrapped) {
    std::sort(w.spans.begin(), w.spans.end());
    for (size_t i = 0; i < w.spans.size(); ++i) {
      w.latestEnd.push_back(std::max(i == 0 ? INT64_MIN : w.latestEnd[i - 1], w.spans[i].second));
    }
  }
  std::vector<bool> out(calls.size(), false);
  for (size_t k = 0; k < calls.size(); ++k) {
    const CommCallView& c = calls[k];
    const auto it = wrapped.find(c.op);
    if (c.decorator || it == wrapped.end()) continue;
    const Wrapped& w = it->second;
    // The decorator spans starting early enough; c started inside one of them if the one of
    // them ending last ends after c's start.
    const auto n = std::upper_bound(w.spans.begin(), w.spans.end(),
                                    std::make_pair(satAdd(c.start, kSlackNs), INT64_MAX)) -
                   w.spans.begin();
    out[k] = n > 0 && w.latestEnd[static_cast<size_t>(n - 1)] >= satSub(c.start, kSlackNs);
  }
  return out;
}

namespace {

// NCCL's send/recv name their peer by its rank in the communicator: every span on a communicator
// says which rank of it its own rank is (group_rank), so the peer's trace rank is looked up there;
// -1 when the peer made no traced call on that communicator.
void mapCommunicatorPeers(std::map<int, RankData>& data) {
  std::map<std::pair<std::string, int64_t>, int> rankOf;  // (communicator, its rank) -> trace rank
  for (const auto& [rank, d] : data) {
    for (const auto* list : {&d.comm, &d.p2pComm}) {
      for (const CommSpan& c : *list) {
        // NCCL's calls only: a Gloo span's group_rank comes with shapes, not a communicator.
        if (c.group_rank >= 0 && !c.communicator.empty() && (c.hostCall || c.communicatorPeer)) {
          rankOf[{c.communicator, c.group_rank}] = rank;
        }
      }
    }
  }
  for (auto& [rank, d] : data) {
    for (CommSpan& c : d.p2pComm) {
      if (!c.communicatorPeer || c.peer < 0) continue;
      const auto it = rankOf.find({c.communicator, c.peer});
      c.peer = it == rankOf.end() ? -1 : it->second;
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// entry point

// ---------------------------------------------------------------------------------------------
// the pass's consumer

namespace {

// 1 send_forward, 2 send_backward, 3 recv_forward, 4 recv_backward
int p2pCode(const std::string& s) {
  if (s == vocab::scope::kSendForward) return 1;
  if (s == vocab::scope::kSendBackward) return 2;
  if (s == vocab::scope::kRecvForward) return 3;
  if (s == vocab::scope::kRecvBackward) return 4;
  return 0;
}

}  // namespace

struct CommSpans::State {
  explicit State(const TraceReader& r)
      : reader(r),
        keys{
            NameCodes::find(r, vocab::arg::kBytes),     NameCodes::find(r, vocab::arg::kGroupSize),
            NameCodes::find(r, vocab::arg::kPeer),      NameCodes::find(r, vocab::arg::kMicrobatch),
            NameCodes::find(r, vocab::arg::kChunk),     NameCodes::find(r, vocab::arg::kTag),
            NameCodes::find(r, vocab::arg::kGroupRank), NameCodes::find(r, vocab::arg::kRoot),
            NameCodes::find(r, vocab::arg::kGroupId)},
        p2pNames(r, p2pCode),
        attempts(r) {}
  const TraceReader& reader;
  Keys keys;
  NameCodes p2pNames;
  AttemptRanks attempts;
  std::map<int, RankData> data;
  // The track being read.
  bool thread = false, decorator = false;
  std::vector<int> members;
  LeafTracker leaf;
};

CommSpans::CommSpans(const TraceReader& reader) : s_(std::make_unique<State>(reader)) {}
CommSpans::~CommSpans() = default;

bool CommSpans::wantsTrack(const TrackRow& t) {
  if (t.kind == core::TrackKind::kCounter || t.kind == core::TrackKind::kMemory) return false;
  s_->thread = t.kind == core::TrackKind::kThread;
  s_->members.clear();
  s_->decorator = decoratorTrack(t.name, &s_->members);
  // The names list RANKs of the attempt that wrote the track: its trace ranks.
  s_->members = s_->attempts.traceRanks(t.rank, s_->members);
  return true;
}

int CommSpans::onSpan(const SpanRow& s) {
  if (s_->thread) s_->leaf.add(s);
  if (s.category == core::Category::kComm) return kComm;
  if (s_->thread && s.category == core::Category::kUser) return kUserScope;
  return kNone;
}

void CommSpans::endTrack(const TrackRow& t, std::vector<PickedSpan>& picked) {
  RankData& d = s_->data[t.rank];
  addPicked(s_->reader, t, s_->keys, s_->p2pNames, s_->attempts, s_->decorator, s_->members, picked,
            d);
  const Intervals leaves = s_->leaf.finish();
  d.compute.insert(d.compute.end(), leaves.begin(), leaves.end());
}

CommAnalysis analyzeComm(const TraceReader& reader) {
  CommSpans pass(reader);
  runSpanPass(reader, reader.tracks(), {&pass});
  return pass.analysis();
}

CommAnalysis CommSpans::analysis() {
  const TraceReader& reader = s_->reader;
  std::map<int, RankData>& data = s_->data;
  CommAnalysis out;
  mapCommunicatorPeers(data);
  std::map<std::string, std::pair<std::set<int>, CommControlStats>> control;
  for (auto& [rank, d] : data) {
    // Where tracerun's c10d decorator recorded a call (with its group), the same call seen from
    // below (Gloo's own scope) is not counted again; a group it does not wrap keeps its calls.
    // NCCL's groups first: inside a decorator's all_to_all span the folded call is then
    // dropped as its calls' own spans are.
    d.groups = ncclGroupWindowsOf(d.control);
    for (const auto* calls : {&d.comm, &d.p2pComm}) {  // before the decorator's calls replace them
      d.ncclCaller = d.ncclCaller || std::any_of(calls->begin(), calls->end(),
                                                 [](const CommSpan& c) { return c.hostCall; });
    }
    foldNcclGroups(d);
    for (auto* list : {&d.comm, &d.p2pComm}) eraseSeenInsideDecorator(*list);
    for (const ControlCall& c : d.control) {
      auto& [ranks, st] = control[c.name];
      ranks.insert(rank);
      st.name = c.name;
      ++st.calls;
      st.total_ns = satAdd(st.total_ns, c.dur);
      st.longest_ns = std::max(st.longest_ns, c.dur);
    }
  }
  for (auto& [name, v] : control) {
    v.second.ranks = static_cast<int>(v.first.size());
    out.control.push_back(v.second);
  }
  timeHostCallsByKernels(reader, data);
  for (auto& [rank, d] : data) {
    // NCCL's host spans are enqueues (microseconds, on the CPU): where the rank's communication
    // kernels were recorded, its communication and its overlap are the GPU's, summed over its
    // devices (one device's kernels never overlap another's).
    RankCommStats r;
    r.rank = rank;
    r.gpu_kernels = std::any_of(d.kernels.begin(), d.kernels.end(),
                                [](const auto& k) { return !k.second.first.empty(); });
    if (r.gpu_kernels) {
      for (auto& [device, k] : d.kernels) {
        auto& [comm, other] = k;
        normalize(comm);
        normalize(other);
        r.comm_ns = satAdd(r.comm_ns, totalLength(comm));
        r.compute_ns = satAdd(r.compute_ns, totalLength(other));
        r.overlap_ns = satAdd(r.overlap_ns, overlapLength(comm, other));
      }
    } else {
      normalize(d.commTime);
      normalize(d.compute);
      r.comm_ns = totalLength(d.commTime);
      r.compute_ns = totalLength(d.compute);
      r.overlap_ns = overlapLength(d.commTime, d.compute);
    }
    out.ranks.push_back(r);
  }
  collectives(reader, s_->attempts, data, out);
  pointToPoint(data, out);
  return out;
}

}  // namespace tracerun::trace::analysis
