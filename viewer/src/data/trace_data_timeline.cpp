// TraceData over trace::Timeline (see trace_data.h): what to draw comes from trace/'s level-of-
// detail draw list (at most a few items per pixel column, read from the summaries), folded once
// more to one box per column and depth by lod.h; spans by id, flows with span ids, name search and
// counter/memory series come from the Timeline too; a GPU stream's queue row from
// trace/analysis/gpu.h's gpuQueueLength. Queries only; no drawing, no threads.
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "data/trace_data.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/analysis/gpu.h"
#include "tracerun/trace/format.h"
#include "tracerun/trace/timeline.h"

namespace tracerun::viewer {

namespace {

SpanRef toRef(const trace::SpanRow& r) {
  return SpanRef{r.id, r.track, r.start_ns, r.end_ns(), r.depth, r.name};
}

constexpr int64_t kAllT0 = INT64_MIN / 4, kAllT1 = INT64_MAX / 4;

}  // namespace

struct TraceData::Impl {
  explicit Impl(trace::Timeline t) : timeline(std::move(t)) {}
  trace::Timeline timeline;
  std::map<int64_t, trace::MemoryDevice> memory;  // synthetic track id -> device
  // A queue row's series (synthetic track id -> points), read on its first window.
  std::map<int64_t, std::vector<CounterPoint>> queues;
  const std::vector<CounterPoint>& queue(const TrackInfo& row) {
    auto it = queues.find(row.id);
    if (it != queues.end()) return it->second;
    std::vector<CounterPoint> points;
    for (const auto& q : trace::analysis::gpuQueueLength(reader(), *row.queue_of))
      points.push_back({q.ts_ns, static_cast<double>(q.length)});
    return queues.emplace(row.id, std::move(points)).first->second;
  }
  const trace::TraceReader& reader() const { return timeline.reader(); }
};

TraceData::TraceData() = default;
TraceData::~TraceData() = default;
TraceData::TraceData(TraceData&&) noexcept = default;
TraceData& TraceData::operator=(TraceData&&) noexcept = default;

std::string categoryLabel(core::Category c) {
  return core::categoryName(c);
}

const std::string& TraceData::str(core::StringId id) const {
  return impl_->reader().str(id);
}
size_t TraceData::stringCount() const {
  return impl_->reader().stringCount();
}

TraceData TraceData::open(const std::string& path) {
  TraceData d;
  d.impl_ = std::make_unique<Impl>(trace::Timeline::open(path));
  d.path_ = path;
  const trace::TraceReader& reader = d.impl_->reader();
  d.ranks_ = reader.ranks();
  d.counts_ = d.impl_->timeline.summaryCounts();  // reader.counts() reads the memory table
  d.range_ = reader.timeRange();
  std::map<int64_t, int> depth;
  for (const auto& td : d.impl_->timeline.trackDepths())
    depth[td.track] = std::max(0, td.max_depth);
  // Ranks in time order: an earlier attempt's (restart, elastic round: numbered after the last
  // attempt's, trace/merge.h) first, each attempt's by its own rank; one attempt: by rank.
  std::map<int, std::pair<int, int>> attemptOf;
  for (const auto& r : d.ranks_) attemptOf[r.rank] = {r.attempt, r.attempt_rank};
  auto rankKey = [&](int rank) {
    const auto it = attemptOf.find(rank);
    const auto [attempt, inAttempt] = it == attemptOf.end() ? std::pair(0, rank) : it->second;
    return std::tuple(attempt, inAttempt, rank);
  };
  std::map<std::tuple<int, int, int>, std::vector<TrackInfo>> byRank;
  for (const auto& t : reader.tracks()) {
    if (t.kind == core::TrackKind::kMemory) continue;  // shown per device below
    byRank[rankKey(t.rank)].push_back(
        TrackInfo{t.id, t.rank, t.kind, t.name, t.event_count, depth[t.id], std::nullopt});
  }
  const auto devices = d.impl_->timeline.memoryDevices();
  int64_t next = -1;
  for (auto& [key, list] : byRank) {
    const int rank = std::get<2>(key);
    std::stable_sort(list.begin(), list.end(), [](const TrackInfo& a, const TrackInfo& b) {
      return a.kind != b.kind ? a.kind < b.kind : a.id < b.id;
    });
    for (const TrackInfo& t : list) {
      d.tracks_.push_back(t);
      if (!trace::analysis::gpuStreamTrack(t.name)) continue;
      // Right under its stream: shown, folded and hidden with it.
      d.tracks_.push_back(
          TrackInfo{next--, rank, core::TrackKind::kCounter, t.name + " queue", 0, 0, t.id});
    }
    for (const auto& dev : devices) {
      if (dev.rank != rank) continue;
      // "cpu", "cuda:0", and the offload devices ("nvme", "cpu-offload")
      const std::string name =
          "memory " + trace::deviceName(dev.device_type, dev.device_index) + " (live bytes)";
      d.tracks_.push_back(
          TrackInfo{next, rank, core::TrackKind::kMemory, name, 0, 0, std::nullopt});
      d.impl_->memory[next--] = dev;
    }
  }
  // An earlier attempt's counters end with it (its processes were gone after).
  const int lastAttempt =
      d.ranks_.empty() ? 0
                       : std::max_element(d.ranks_.begin(), d.ranks_.end(),
                                          [](const trace::RankInfo& a, const trace::RankInfo& b) {
                                            return a.attempt < b.attempt;
                                          })
                             ->attempt;
  for (TrackInfo& t : d.tracks_) {
    for (const auto& r : d.ranks_) {
      if (r.rank == t.rank && r.attempt != lastAttempt && t.counter()) t.held_until_ns = r.end_ns;
    }
  }
  return d;
}

std::vector<trace::analysis::RestartMark> TraceData::restarts() const {
  return trace::analysis::restartMarks(impl_->reader());
}

const TrackInfo* TraceData::track(int64_t id) const {
  for (const auto& t : tracks_)
    if (t.id == id) return &t;
  return nullptr;
}

TrackWindow TraceData::window(int64_t track, const LodWindow& w) const {
  TrackWindow out;
  out.track = track;
  out.window = w;
  const TrackInfo* info = this->track(track);
  if (info == nullptr) return out;
  const trace::Timeline& tl = impl_->timeline;
  if (info->counter()) {
    const int64_t bucket = std::max<int64_t>(1, static_cast<int64_t>(w.ns_per_px));
    if (info->queue_of) {
      // Every change of the queue, reduced straight to pixel columns.
      out.counter = reduceCounter(impl_->queue(*info), w);
    } else {
      trace::Series series;
      if (info->kind == core::TrackKind::kMemory) {
        series = tl.memorySeries(impl_->memory.at(track), w.t0, w.t1, bucket);
      } else {
        series = tl.counterSeries(track, w.t0, w.t1, bucket);
      }
      // Each bucket as its min, max and last value at its start: reduceCounter keeps per column
      // the range and the value it leaves with.
      std::vector<CounterPoint> points;
      if (series.has_before) points.push_back({w.t0 - 1, series.before});
      for (const auto& b : series.buckets) {
        points.push_back({b.start_ns, b.min});
        points.push_back({b.start_ns, b.max});
        points.push_back({b.start_ns, b.last});
      }
      out.counter = reduceCounter(points, w);
    }
    bool first = true;
    for (const auto& c : out.counter) {
      out.lo = first ? c.min : std::min(out.lo, c.min);
      out.hi = first ? c.max : std::max(out.hi, c.max);
      first = false;
    }
    return out;
  }
  trace::DrawRequest rq;
  rq.track = track;
  rq.t0 = w.t0;
  rq.t1 = w.t1;
  rq.ns_per_px = w.ns_per_px;
  const trace::DrawList list = tl.draw(rq);
  std::vector<LodSpan> items, dominant;
  items.reserve(list.items.size());
  for (const auto& it : list.items) {
    const uint8_t cat = static_cast<uint8_t>(it.category);
    items.push_back({it.span_id, it.start_ns, it.end_ns, it.depth, it.name, cat, it.count,
                     it.kind == trace::DrawItem::Kind::kFold});
    dominant.push_back({it.span_id, it.span_start_ns, it.span_start_ns + it.span_dur_ns, it.depth,
                        it.name, cat, 1, false});
    out.max_depth = std::max(out.max_depth, it.depth);
  }
  for (const Primitive& p : foldSpans(items, w)) out.items.push_back({p, dominant[p.dominant]});
  return out;
}

std::optional<SpanRef> TraceData::spanById(int64_t id, int rank, const std::atomic<bool>&) const {
  const auto d = impl_->timeline.span(id, 0);
  if (!d) return std::nullopt;
  const TrackInfo* t = track(d->span.track);
  if (rank >= 0 && (t == nullptr || t->rank != rank)) return std::nullopt;
  return toRef(d->span);
}

SpanDetails TraceData::details(const SpanRef& ref) const {
  const trace::Timeline& tl = impl_->timeline;
  const trace::TraceReader& reader = impl_->reader();
  SpanDetails d;
  const TrackInfo* info = track(ref.track);
  d.rank = info ? info->rank : 0;
  d.track_name = info ? info->name : "";
  const auto sd = tl.span(ref.id, 100000);
  if (!sd) {
    d.span.id = ref.id;
    d.span.track = ref.track;
    d.span.start_ns = ref.start;
    d.span.dur_ns = ref.end - ref.start;
    d.span.depth = ref.depth;
    d.span.name = ref.name;
    d.name = reader.str(ref.name);
    return d;
  }
  d.span = sd->span;
  d.name = reader.str(d.span.name);
  d.detail = reader.str(d.span.detail);
  d.category = categoryLabel(d.span.category);
  for (const auto& a : sd->args) {
    const std::string& key = reader.str(a.key);
    d.args.push_back({key, vocab::arg::isStringValued(key)
                               ? reader.str(static_cast<core::StringId>(a.value))
                               : std::to_string(a.value)});
  }
  // The chain of parents, outermost first.
  for (auto p = sd->parent; p;) {
    d.parents.insert(d.parents.begin(), *p);
    const auto up = tl.span(p->id, 0);
    p = up ? up->parent : std::nullopt;
  }
  for (const auto& p : d.parents) d.parent_names.push_back(reader.str(p.name));
  std::map<core::StringId, ChildStat> kids;
  for (const auto& c : sd->children) {
    d.children_ns += c.dur_ns;
    ChildStat& k = kids[c.name];
    k.name = reader.str(c.name);
    ++k.count;
    k.total_ns += c.dur_ns;
  }
  d.children = sd->child_count;
  d.self_ns = d.span.dur_ns - d.children_ns;
  for (auto& kv : kids) d.child_stats.push_back(kv.second);
  std::sort(d.child_stats.begin(), d.child_stats.end(),
            [](const ChildStat& a, const ChildStat& b) { return a.total_ns > b.total_ns; });
  for (const auto& f : tl.flows(d.span.start_ns, d.span.start_ns)) {
    const bool out = f.src_span == ref.id, in = f.dst_span == ref.id;
    if (!out && !in) continue;
    const int64_t otherId = out ? f.dst_span : f.src_span;
    if (otherId == 0) continue;
    const auto other = tl.span(otherId, 0);
    if (!other) continue;
    d.flows.push_back({f.flow.kind, out, toRef(other->span), reader.str(other->span.name)});
  }
  if (trace::analysis::gpuStreamTrack(d.track_name))
    d.launch = trace::analysis::gpuLaunchOf(reader, d.span);
  return d;
}

std::vector<SpanRef> TraceData::find(const std::string& needle, size_t limit,
                                     const std::atomic<bool>&) const {
  std::vector<SpanRef> out;
  if (needle.empty()) return out;
  const trace::Timeline& tl = impl_->timeline;
  const auto names = tl.namesMatching(needle);
  if (names.empty()) return out;
  for (const auto& r : tl.matches(names, kAllT0, kAllT1, limit)) out.push_back(toRef(r));
  return out;
}

std::vector<Step> TraceData::steps(const std::atomic<bool>& cancel) const {
  std::vector<Step> out;
  const trace::Timeline& tl = impl_->timeline;
  std::vector<core::StringId> names;
  for (core::StringId id : tl.namesMatching("step"))
    if (impl_->reader().str(id) == "step") names.push_back(id);
  if (names.empty()) return out;
  // Depth by depth over every span track (steps sit at depth 0 above dense ops), until every span
  // named "step" (matchCount, from the name buckets) has been seen: reads the steps' depths only,
  // not every span sharing a name bucket with a step.
  const int64_t total = tl.matchCount(names);
  int64_t seen = 0;
  int maxDepth = 0;
  for (const auto& t : tracks_) maxDepth = std::max(maxDepth, t.max_depth);
  const auto holding = tl.matchTracks(names);
  for (int d = 0; d <= maxDepth && seen < total; ++d) {
    for (const auto& t : tracks_) {
      if (t.counter() || t.max_depth < d ||
          !std::binary_search(holding.begin(), holding.end(), t.id))
        continue;
      if (cancel.load()) throw Cancelled{};
      for (const auto& r : tl.spansAtDepth(t.id, d, kAllT0, kAllT1)) {
        if (std::find(names.begin(), names.end(), r.name) == names.end()) continue;
        ++seen;
        if (r.category == core::Category::kPhase && t.kind == core::TrackKind::kThread)
          out.push_back({t.rank, r.start_ns, r.end_ns(), -1});
      }
    }
  }
  std::sort(out.begin(), out.end(), [](const Step& a, const Step& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
  });
  int rank = -1;
  int64_t n = 0;
  for (auto& s : out) {
    if (s.rank != rank) n = 0;
    rank = s.rank;
    s.number = n++;
  }
  return out;
}

}  // namespace tracerun::viewer
