// TraceData over the plain trace::TraceReader (see trace_data.h): folds every span of the window
// itself. Used while trace/ has no Timeline implementation. Queries only; no drawing, no threads.
#include "trace_data.h"

#include <algorithm>
#include <map>
#include <unordered_set>

namespace tracerun::viewer {

namespace {

LodSpan toLod(const trace::SpanRow& r) {
  return LodSpan{r.id, r.start_ns, r.end_ns(), r.depth, r.name, static_cast<uint8_t>(r.category)};
}

SpanRef toRef(const trace::SpanRow& r) {
  return SpanRef{r.id, r.track, r.start_ns, r.end_ns(), r.depth, r.name};
}

// The memory row of a rank: a synthetic id below zero.
int64_t memoryTrackId(int rank) {
  return -1 - static_cast<int64_t>(rank);
}

}  // namespace

std::string categoryLabel(core::Category c) {
  return core::categoryName(c);
}

struct TraceData::Impl {
  explicit Impl(trace::TraceReader r) : reader(std::move(r)) {}
  trace::TraceReader reader;
  std::vector<trace::FlowRow> flows;
  std::optional<SpanRef> spanAt(int64_t track, int64_t start, int depth) const;
};

TraceData::TraceData() = default;
TraceData::~TraceData() = default;
TraceData::TraceData(TraceData&&) noexcept = default;
TraceData& TraceData::operator=(TraceData&&) noexcept = default;

const std::string& TraceData::str(core::StringId id) const {
  return impl_->reader.str(id);
}
size_t TraceData::stringCount() const {
  return impl_->reader.stringCount();
}

TraceData TraceData::open(const std::string& path) {
  TraceData d;
  d.impl_ = std::make_unique<Impl>(trace::TraceReader::open(path));
  d.path_ = path;
  const trace::TraceReader& reader = d.impl_->reader;
  d.ranks_ = reader.ranks();
  d.counts_ = reader.counts();
  d.range_ = reader.timeRange();
  std::map<int, std::vector<TrackInfo>> byRank;
  for (const auto& t : reader.tracks()) {
    if (t.kind == core::TrackKind::kMemory) continue;  // shown as the rank's memory row below
    byRank[t.rank].push_back(TrackInfo{t.id, t.rank, t.kind, t.name, t.event_count, 0});
  }
  for (auto& [rank, list] : byRank) {
    // Threads first, then async lanes, streams, counters; by id within a kind (creation order).
    std::stable_sort(list.begin(), list.end(), [](const TrackInfo& a, const TrackInfo& b) {
      return a.kind != b.kind ? a.kind < b.kind : a.id < b.id;
    });
    d.tracks_.insert(d.tracks_.end(), list.begin(), list.end());
    if (d.counts_.memory > 0) {
      d.tracks_.push_back(TrackInfo{memoryTrackId(rank), rank, core::TrackKind::kMemory,
                                    "memory (live bytes)", 0, 0});
    }
  }
  d.impl_->flows = reader.flows();
  return d;
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
  if (info->counter()) {
    std::vector<CounterPoint> points;
    const int64_t lookback = std::max<int64_t>(w.t1 - w.t0, 1);
    if (info->kind == core::TrackKind::kMemory) {
      std::map<std::pair<int, int>, int64_t> live;  // per device: the last total
      impl_->reader.forEachMemory(info->rank, w.t0 - lookback, w.t1,
                                  [&](const trace::MemoryRow& m) {
                                    live[{m.device_type, m.device_index}] = m.total;
                                    int64_t sum = 0;
                                    for (const auto& kv : live) sum += kv.second;
                                    points.push_back({m.ts_ns, static_cast<double>(sum)});
                                  });
    } else {
      for (const auto& c : impl_->reader.counters(track, w.t0 - lookback, w.t1))
        points.push_back({c.ts_ns, c.value});
    }
    out.counter = reduceCounter(points, w);
    bool first = true;
    for (const auto& c : out.counter) {
      out.lo = first ? c.min : std::min(out.lo, c.min);
      out.hi = first ? c.max : std::max(out.hi, c.max);
      first = false;
    }
    return out;
  }
  std::vector<LodSpan> spans;
  for (const auto& r : impl_->reader.spans(track, w.t0, w.t1)) {
    spans.push_back(toLod(r));
    out.max_depth = std::max(out.max_depth, r.depth);
  }
  for (const Primitive& p : foldSpans(spans, w)) out.items.push_back({p, spans[p.dominant]});
  return out;
}

std::optional<SpanRef> TraceData::Impl::spanAt(int64_t track, int64_t start, int depth) const {
  std::optional<SpanRef> best;
  for (const auto& r : reader.spans(track, start, start)) {
    if (r.start_ns != start) continue;
    if (r.depth == depth) return toRef(r);
    if (!best || r.depth < best->depth) best = toRef(r);
  }
  return best;
}

std::optional<SpanRef> TraceData::spanById(int64_t id, int rank,
                                           const std::atomic<bool>& cancel) const {
  // The reader has no lookup by id yet (trace/'s timeline API will): scan the rank's tracks.
  std::optional<SpanRef> found;
  for (const auto& t : tracks_) {
    if (t.counter() || (rank >= 0 && t.rank != rank)) continue;
    try {
      impl_->reader.forEachSpan(t.id, [&](const trace::SpanRow& r) {
        if (cancel.load()) throw Cancelled{};
        if (r.id == id) {
          found = toRef(r);
          throw Cancelled{};  // stop the scan
        }
      });
    } catch (const Cancelled&) {
      if (found) return found;
      throw;
    }
  }
  return found;
}

SpanDetails TraceData::details(const SpanRef& ref) const {
  SpanDetails d;
  const TrackInfo* info = track(ref.track);
  d.rank = info ? info->rank : 0;
  d.track_name = info ? info->name : "";
  int64_t childNs = 0;
  std::map<core::StringId, ChildStat> kids;
  bool found = false;
  for (const auto& r : impl_->reader.spans(ref.track, ref.start, ref.end)) {
    if (r.id == ref.id) {
      d.span = r;
      found = true;
    } else if (r.start_ns <= ref.start && r.end_ns() >= ref.end && r.depth < ref.depth) {
      d.parents.push_back(r);
    } else if (r.depth == ref.depth + 1 && r.start_ns >= ref.start && r.end_ns() <= ref.end) {
      childNs += r.dur_ns;
      ++d.children;
      ChildStat& c = kids[r.name];
      c.name = impl_->reader.str(r.name);
      ++c.count;
      c.total_ns += r.dur_ns;
    }
  }
  if (!found) {
    d.span.id = ref.id;
    d.span.track = ref.track;
    d.span.start_ns = ref.start;
    d.span.dur_ns = ref.end - ref.start;
    d.span.depth = ref.depth;
    d.span.name = ref.name;
  }
  std::sort(d.parents.begin(), d.parents.end(),
            [](const trace::SpanRow& a, const trace::SpanRow& b) { return a.depth < b.depth; });
  for (const auto& p : d.parents) d.parent_names.push_back(impl_->reader.str(p.name));
  d.children_ns = childNs;
  d.self_ns = d.span.dur_ns - childNs;
  for (auto& kv : kids) d.child_stats.push_back(kv.second);
  std::sort(d.child_stats.begin(), d.child_stats.end(),
            [](const ChildStat& a, const ChildStat& b) { return a.total_ns > b.total_ns; });
  d.name = impl_->reader.str(d.span.name);
  d.detail = impl_->reader.str(d.span.detail);
  d.category = categoryLabel(d.span.category);
  for (const auto& a : impl_->reader.args(ref.id))
    d.args.push_back({impl_->reader.str(a.key), a.value});
  for (const auto& f : impl_->flows) {
    const bool out = f.src_track == ref.track && f.src_ts_ns == ref.start;
    const bool in = f.dst_track == ref.track && f.dst_ts_ns == ref.start;
    if (!out && !in) continue;
    const auto other = out ? impl_->spanAt(f.dst_track, f.dst_ts_ns, 0)
                           : impl_->spanAt(f.src_track, f.src_ts_ns, 0);
    if (!other) continue;
    d.flows.push_back({f.kind, out, *other, impl_->reader.str(other->name)});
  }
  return d;
}

std::vector<SpanRef> TraceData::find(const std::string& needle, size_t limit,
                                     const std::atomic<bool>& cancel) const {
  std::vector<SpanRef> out;
  if (needle.empty()) return out;
  std::unordered_set<core::StringId> names;
  for (size_t i = 1; i < impl_->reader.stringCount(); ++i) {
    if (impl_->reader.str(static_cast<core::StringId>(i)).find(needle) != std::string::npos)
      names.insert(static_cast<core::StringId>(i));
  }
  if (names.empty()) return out;
  for (const auto& t : tracks_) {
    if (t.counter()) continue;
    impl_->reader.forEachSpan(t.id, [&](const trace::SpanRow& r) {
      if (cancel.load()) throw Cancelled{};
      if (out.size() < limit && names.count(r.name)) out.push_back(toRef(r));
    });
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SpanRef& a, const SpanRef& b) { return a.start < b.start; });
  return out;
}

std::vector<Step> TraceData::steps(const std::atomic<bool>& cancel) const {
  // "step" phase spans (the trainer's and tracerun::step's), one list per rank.
  std::vector<Step> out;
  core::StringId stepName = 0;
  for (size_t i = 1; i < impl_->reader.stringCount(); ++i) {
    const std::string& s = impl_->reader.str(static_cast<core::StringId>(i));
    if (s == "step") stepName = static_cast<core::StringId>(i);
  }
  if (stepName == 0) return out;
  for (const auto& t : tracks_) {
    if (t.kind != core::TrackKind::kThread) continue;
    impl_->reader.forEachSpan(t.id, [&](const trace::SpanRow& r) {
      if (cancel.load()) throw Cancelled{};
      if (r.name == stepName && r.category == core::Category::kPhase)
        out.push_back({t.rank, r.start_ns, r.end_ns(), -1});
    });
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
