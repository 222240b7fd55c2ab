// Writes the fixture trace through the real capture path (Session buffers -> ShardWriter -> merge).
// Times are synthetic (a fixed pattern after "now") so tests know every value exactly; no sleeping.
#include "fixture_trace.h"

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "tracerun/core/clock.h"
#include "tracerun/core/records.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/shard_writer.h"

namespace tracerun::fixture {

namespace {

using core::EventId;
using core::Record;

const std::vector<std::string> kDetails = {"", "[[4, 8], [8, 16]]", "[[128]]"};

// Waits until `count` threads arrived.
class Barrier {
 public:
  explicit Barrier(int count) : left_(count) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--left_ == 0) {
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return left_ == 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int left_;
};

void genTree(std::mt19937_64& rng, const Options& o, Span s, long parent, int64_t start,
             int64_t end, std::vector<Span>& out) {
  const auto& names = spanNames();
  s.name = names[rng() % names.size()];
  s.detail = kDetails[rng() % kDetails.size()];
  s.category = static_cast<int>(rng() % 4);  // op, backward, user, module
  s.start = start;
  s.end = end;
  s.parent = parent;
  s.seq = rng() % 3 == 0 ? static_cast<int64_t>(rng() % 50) : -1;
  s.args.clear();
  if (rng() % 3 == 0) s.args.push_back({"microbatch", static_cast<int64_t>(rng() % 8)});
  if (rng() % 5 == 0) s.args.push_back({"stage", static_cast<int64_t>(s.rank)});
  if (rng() % 7 == 0) s.args.push_back({"bytes", -static_cast<int64_t>(rng() % 100000)});
  const long self = static_cast<long>(out.size());
  out.push_back(s);
  if (s.depth >= o.max_depth) return;
  const int children = static_cast<int>(rng() % 4);
  int64_t cursor = start + 1;
  for (int i = 0; i < children; ++i) {
    const int64_t room = (end - 1 - cursor) / (children - i);
    if (room < 8) break;
    const int64_t cs = cursor + static_cast<int64_t>(rng() % static_cast<uint64_t>(room / 4));
    const int64_t ce = cs + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(room / 2));
    Span child = s;
    child.depth = s.depth + 1;
    genTree(rng, o, child, self, cs, ce, out);
    cursor = ce + 1;
  }
}

std::string threadName(int t) {
  return t == 0 ? "main" : "worker " + std::to_string(t);
}

// Pushes r (and its args) into buf, waiting for the writer when the ring is full; the ring is
// sized so that never happens, which the dropped_events stat confirms.
void push(core::ThreadBuffer& buf, const Record& r) {
  if (!buf.ring.tryPush(r)) throw std::runtime_error("fixture: ring full");
}
void pushPair(core::ThreadBuffer& buf, const Record& a, const Record& b) {
  if (!buf.ring.tryPushPair(a, b)) throw std::runtime_error("fixture: ring full");
}

struct RankPlan {
  int rank = 0;
  int64_t offset = 0;
  size_t first_span = 0, end_span = 0;  // [first, end) in Generated::spans
  size_t first_flow = 0, end_flow = 0;
};

void writeRank(const Options& o, const RankPlan& plan, Generated& g, const std::string& path) {
  const size_t records = 2 * (plan.end_span - plan.first_span) + 1024;
  core::Session session(std::max<size_t>(size_t{1} << 12, records));
  trace::ShardOptions so;
  so.path = path;
  so.rank = plan.rank;
  so.world_size = o.ranks;
  so.host = "fixture-host";
  so.pid = 1000 + plan.rank;
  so.clock_offset_ns = plan.offset;
  so.command = "tracerun-fixture --ranks " + std::to_string(o.ranks);
  so.chunk_rows = 64;  // many chunks per track, so range queries cross chunk boundaries
  trace::ShardWriter writer(session, so);
  writer.start();

  auto& strings = session.strings();
  std::map<std::string, core::StringId> ids;
  auto sid = [&](const std::string& s) {
    auto it = ids.find(s);
    if (it == ids.end()) it = ids.emplace(s, strings.intern(s)).first;
    return it->second;
  };
  for (size_t i = plan.first_span; i < plan.end_span; ++i) {
    sid(g.spans[i].name);
    sid(g.spans[i].detail);
    for (const auto& a : g.spans[i].args) sid(a.first);
  }
  for (const char* s : {"loss", "tokens/s", "step marker"}) sid(s);
  const core::TrackId asyncLane =
      session.tracks().findOrAdd(core::TrackKind::kAsync, 0, "gloo lane");

  const int64_t off = plan.offset;
  std::vector<core::TrackId> trackOf(static_cast<size_t>(o.threads), 0);
  Barrier registered(o.threads);
  auto producer = [&](int t) {
    core::ThreadBuffer& buf = session.threadBuffer(threadName(t).c_str());
    trackOf[static_cast<size_t>(t)] = buf.track;
    registered.arriveAndWait();
    const std::string mine = threadName(t);
    // Ids in start order (as capture assigns them), records in end order (as capture emits them).
    std::vector<size_t> spans;
    for (size_t i = plan.first_span; i < plan.end_span; ++i) {
      const auto& s = g.spans[i];
      if (s.track == mine || (t == 0 && s.track == "gloo lane")) spans.push_back(i);
    }
    std::map<size_t, EventId> eventId;
    for (size_t i : spans) eventId[i] = buf.nextId();
    std::stable_sort(spans.begin(), spans.end(), [&](size_t a, size_t b) {
      const auto& x = g.spans[a];
      const auto& y = g.spans[b];
      return x.end != y.end ? x.end < y.end : x.depth > y.depth;
    });
    for (size_t i : spans) {
      const Span& s = g.spans[i];
      core::SpanRecord r;
      r.category = static_cast<core::Category>(s.category);
      r.depth = static_cast<uint16_t>(s.depth);
      r.name = sid(s.name);
      r.start_ns = s.start + off;
      r.end_ns = s.end + off;
      r.id = eventId[i];
      r.parent = s.parent >= 0 ? eventId.at(static_cast<size_t>(s.parent)) : 0;
      r.seq = s.seq;
      r.detail = sid(s.detail);
      r.track = s.track == "gloo lane" ? asyncLane : 0;
      if (s.args.empty()) {
        push(buf, Record::from(r));
        continue;
      }
      core::ArgsRecord a;
      a.count = static_cast<uint8_t>(s.args.size());
      a.owner = r.id;
      for (size_t k = 0; k < s.args.size(); ++k) {
        a.args[k].key = sid(s.args[k].first);
        a.args[k].value = s.args[k].second;
      }
      pushPair(buf, Record::from(r), Record::from(a));
    }
    if (t == 0) {
      for (const auto& c : g.counters) {
        if (c.rank != plan.rank) continue;
        core::CounterRecord r;
        r.name = sid(c.name);
        r.ts_ns = c.ts + off;
        r.value = c.value;
        push(buf, Record::from(r));
      }
      for (size_t i = plan.first_flow; i < plan.end_flow; ++i) {
        const Flow& f = g.flows[i];
        core::FlowRecord r;
        r.flow = static_cast<core::FlowKind>(f.kind);
        r.src_track = trackOf[0];
        r.dst_track = trackOf[o.threads > 1 ? 1 : 0];
        r.src_ts_ns = f.src_ts + off;
        r.dst_ts_ns = f.dst_ts + off;
        push(buf, Record::from(r));
      }
    }
    if (t == std::min(1, o.threads - 1)) {
      for (const auto& m : g.memory) {
        if (m.rank != plan.rank) continue;
        core::MemoryRecord r;
        r.category = static_cast<core::MemoryCategory>(m.ts % 7);
        r.device_type = static_cast<int8_t>(m.device_type);
        r.device_index = static_cast<int8_t>(m.device_index);
        r.ts_ns = m.ts + off;
        r.ptr = 0x7f0000000000ull + static_cast<uint64_t>(m.ts % 100000) * 64;
        r.bytes = m.bytes;
        r.total = m.total;
        push(buf, Record::from(r));
      }
    }
    if (t == o.threads - 1) {
      for (const auto& i : g.instants) {
        if (i.rank != plan.rank) continue;
        core::InstantRecord r;
        r.name = sid(i.name);
        r.ts_ns = i.ts + off;
        r.value = i.value;
        push(buf, Record::from(r));
      }
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < o.threads; ++t) threads.emplace_back(producer, t);
  for (auto& th : threads) th.join();
  writer.close();
  if (session.dropped() != 0) throw std::runtime_error("fixture: records were dropped");
}

}  // namespace

const std::vector<std::string>& spanNames() {
  static const std::vector<std::string> kNames = {
      "aten::mm",
      "aten::add",
      "aten::relu",
      "aten::addmm",
      "forward",
      "backward",
      "optimizer.step",
      "weird \"quoted\"\tname \xC3\xBC \\ end",
      "bad utf8 \xFF\xFE end",
      "control\x01"
      "char",
  };
  return kNames;
}

Generated writeFixture(const Options& o) {
  if (o.threads < 1 || o.ranks < 1) throw std::invalid_argument("fixture: ranks, threads >= 1");
  Generated g;
  std::filesystem::create_directories(o.dir);
  // All ranks share one global time line starting a little after now.
  const int64_t base = core::nowNs() + 1'000'000;
  std::vector<RankPlan> plans;
  for (int r = 0; r < o.ranks; ++r) {
    std::mt19937_64 rng(o.seed * 7919 + static_cast<uint64_t>(r));
    RankPlan p;
    p.rank = r;
    p.offset = r < static_cast<int>(o.clock_offsets_ns.size()) ? o.clock_offsets_ns[r] : 0;
    p.first_span = g.spans.size();
    for (int t = 0; t < o.threads; ++t) {
      int64_t at = base + static_cast<int64_t>(rng() % 1000);
      for (int root = 0; root < o.roots_per_thread; ++root) {
        const int64_t dur = 2000 + static_cast<int64_t>(rng() % 200000);
        Span s;
        s.rank = r;
        s.track = threadName(t);
        genTree(rng, o, s, -1, at, at + dur, g.spans);
        at += dur + 1 + static_cast<int64_t>(rng() % 3000);
      }
    }
    for (int i = 0; i < 12; ++i) {  // collectives on an async lane: they overlap
      Span s;
      s.rank = r;
      s.track = "gloo lane";
      s.name = "gloo:all_reduce";
      s.category = static_cast<int>(core::Category::kComm);
      s.start = base + i * 30000;
      s.end = s.start + 50000 + static_cast<int64_t>(rng() % 1000);
      s.args = {{"bytes", int64_t{1} << (10 + i)}};
      g.spans.push_back(s);
    }
    p.end_span = g.spans.size();

    std::vector<size_t> mainRoots, workerSpans;
    const std::string dst = threadName(o.threads > 1 ? 1 : 0);
    for (size_t i = p.first_span; i < p.end_span; ++i) {
      if (g.spans[i].track == "main" && g.spans[i].depth == 0) mainRoots.push_back(i);
      if (g.spans[i].track == dst) workerSpans.push_back(i);
    }
    p.first_flow = g.flows.size();
    for (int i = 0; i < 10; ++i) {
      const Span& a = g.spans[mainRoots[rng() % mainRoots.size()]];
      const Span& b = g.spans[workerSpans[rng() % workerSpans.size()]];
      g.flows.push_back({r, i % 2, "main", dst, a.start, b.start});
    }
    p.end_flow = g.flows.size();
    for (int i = 0; i < 20; ++i) g.counters.push_back({r, "loss", base + i * 9973, 2.5 - 0.1 * i});
    for (int i = 0; i < 10; ++i) {
      g.counters.push_back({r, "tokens/s", base + i * 20011, 1000.0 * (i + 1) + r});
    }
    int64_t live[2] = {0, 0};
    for (int i = 0; i < 30; ++i) {
      Memory m;
      m.rank = r;
      m.ts = base + i * 7001;
      m.device_type = i % 5 == 4 ? 1 : 0;
      m.device_index = m.device_type == 1 ? 0 : -1;
      m.bytes = i % 3 == 2 ? -4096 : 8192 * (i + 1);
      live[m.device_type] += m.bytes;
      m.total = live[m.device_type];
      g.memory.push_back(m);
    }
    for (int i = 0; i < 8; ++i) {
      g.instants.push_back({r, threadName(o.threads - 1), "step marker", base + i * 25013, i});
    }
    plans.push_back(p);
  }

  std::vector<trace::MergeInput> inputs;
  for (const auto& p : plans) {
    const std::string path =
        (std::filesystem::path(o.dir) / ("rank" + std::to_string(p.rank) + ".db")).string();
    writeRank(o, p, g, path);
    g.shards.push_back(path);
    g.offsets.push_back(p.offset);
    inputs.push_back({path});
  }
  if (!o.merged.empty()) {
    g.merged = (std::filesystem::path(o.dir) / o.merged).string();
    trace::mergeShards(inputs, trace::MergeOptions{g.merged, {}});
  }
  return g;
}

}  // namespace tracerun::fixture
