// Memory analysis (see memory.h). Per rank: the context (outermost op intervals, forward and
// backward time) from the rank's thread tracks, collected during a span pass (span_pass.h; the
// report shares it with its other analyses), then two streamed passes over the memory events:
// classify each allocation when it is freed (a record of 0 bytes re-tags a live block) and find
// each device's peak (the total of live bytes does not depend on the categories); replay live
// bytes by category for the timeline and the bytes at the peak, keeping the live allocations up
// to the last peak for the largest ones.
//
// Sections: span context · classification pass · replay pass · entry point · the pass's consumer
#include "tracerun/trace/analysis/memory.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "span_consumers.h"
#include "span_pass.h"
#include "span_select.h"
#include "tracerun/core/memory_dtype.h"
#include "tracerun/core/vocabulary.h"

namespace tracerun::trace::analysis {

namespace {

using core::MemoryCategory;

// ---------------------------------------------------------------------------------------------
// span context

struct Context {
  std::vector<Intervals> outermost_ops;  // per thread track: outermost op / autograd-node spans
  Intervals forward, backward;           // forward phases; backward phases and autograd nodes
  Intervals optimizer;                   // optimizer phases (an unmodified Python program's too)
  Intervals backward_phases;             // backward phases only (not autograd nodes)
  bool has_forward_phases = false;

  // End of the outermost op running at t on some thread (the earliest such end), or -1.
  int64_t opEndAt(int64_t t) const {
    int64_t best = -1;
    for (const Intervals& ops : outermost_ops) {
      auto it = std::upper_bound(ops.begin(), ops.end(), std::make_pair(t, INT64_MAX));
      if (it == ops.begin()) continue;
      --it;
      if (t >= it->first && t <= it->second && (best < 0 || it->second < best)) best = it->second;
    }
    return best;
  }
  bool inForward(int64_t t) const {
    return has_forward_phases ? contains(forward, t) : !contains(backward, t);
  }
  bool inBackward(int64_t t) const { return contains(backward, t); }
  // Whether a backward (phase or autograd node) starts in (from, to].
  bool backwardStartsIn(int64_t from, int64_t to) const {
    auto it = std::upper_bound(backward.begin(), backward.end(), std::make_pair(from, INT64_MAX));
    return it != backward.end() && it->first <= to;
  }
  // End of the (merged) interval of v running at t, or -1.
  static int64_t endAt(const Intervals& v, int64_t t) {
    auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(t, INT64_MAX));
    if (it == v.begin()) return -1;
    --it;
    return t >= it->first && t <= it->second ? it->second : -1;
  }
};

enum ContextCode { kOther = 1, kForwardPhase, kBackwardPhase, kOptimizerPhase };

int contextCode(const std::string& s) {
  // Recomputation re-runs a forward inside backward: its outputs are activations too.
  if (s == vocab::phase::kForward || s == vocab::phase::kRecomputeForward) {
    return int(kForwardPhase);
  }
  if (s == vocab::phase::kBackward || s == vocab::phase::kBackwardInput ||
      s == vocab::phase::kBackwardWeight) {  // zb-h1's B and W are backward too
    return int(kBackwardPhase);
  }
  if (s == vocab::phase::kOptimizer) return int(kOptimizerPhase);
  return int(kOther);
}

// Builds a rank's Context from its thread tracks' spans, track by track in span order.
class ContextBuilder {
 public:
  explicit ContextBuilder(const TraceReader& reader) : codes_(reader, contextCode) {}

  void beginTrack() {
    ops_.clear();
    opEnd_ = INT64_MIN;
  }
  void add(const SpanRow& s) {
    const bool op = s.category == core::Category::kOp || s.category == core::Category::kBackward;
    // The first op opens an interval whatever its start (INT64_MIN in a damaged file too).
    if (op && (ops_.empty() || s.start_ns > opEnd_)) {
      ops_.emplace_back(s.start_ns, s.end_ns());
      opEnd_ = s.end_ns();
    } else if (op) {
      opEnd_ = std::max(opEnd_, s.end_ns());  // nested (or overlapping): part of the outermost
      ops_.back().second = opEnd_;
    }
    if (s.category == core::Category::kBackward) {
      c_.backward.emplace_back(s.start_ns, s.end_ns());
    } else if (s.category == core::Category::kPhase) {
      const int code = codes_(s.name);
      if (code == kForwardPhase) {
        c_.forward.emplace_back(s.start_ns, s.end_ns());
        c_.has_forward_phases = true;
      }
      if (code == kBackwardPhase) {
        c_.backward.emplace_back(s.start_ns, s.end_ns());
        c_.backward_phases.emplace_back(s.start_ns, s.end_ns());
      }
      if (code == kOptimizerPhase) c_.optimizer.emplace_back(s.start_ns, s.end_ns());
    }
    // Merge as we go: autograd nodes can be millions; their union is usually small. When it is
    // not (disjoint nodes), the next merge waits until the list doubled: amortised O(n log n).
    if (c_.backward.size() > mergeAt_) {
      normalize(c_.backward);
      mergeAt_ = std::max<size_t>(4096, 2 * c_.backward.size());
    }
  }
  void endTrack() { c_.outermost_ops.push_back(std::move(ops_)); }
  // After the last track.
  Context take() {
    normalize(c_.forward);
    normalize(c_.backward);
    normalize(c_.optimizer);
    normalize(c_.backward_phases);
    return std::move(c_);
  }

 private:
  NameCodes codes_;
  Context c_;
  size_t mergeAt_ = 4096;
  Intervals ops_;  // the track being read: its outermost ops so far
  int64_t opEnd_ = INT64_MIN;
};

// ---------------------------------------------------------------------------------------------
// classification pass

struct DeviceKey {
  int type, index;
  bool operator<(const DeviceKey& o) const {
    return type != o.type ? type < o.type : index < o.index;
  }
};

struct Pending {
  int64_t ordinal = 0;  // index of the allocation among the rank's allocations
  int64_t ts = 0, bytes = 0;
  MemoryCategory tag = MemoryCategory::kUnknown;
  int64_t op_end = -1;
  int64_t phase_end = -1;  // end of the optimizer or backward phase it was allocated in, or -1
  bool in_forward = false;
};

bool isStateTag(MemoryCategory c) {
  return c == MemoryCategory::kParameter || c == MemoryCategory::kGradient ||
         c == MemoryCategory::kOptimizerState || c == MemoryCategory::kOther ||
         c == MemoryCategory::kInput;
}

// The category of an allocation freed at `freeTs` (-1: never freed).
MemoryCategory classify(const Pending& p, int64_t freeTs, const Context& ctx, DeviceMemory& d) {
  if (isStateTag(p.tag) || p.tag == MemoryCategory::kTemporary) return p.tag;
  if (freeTs >= 0 && p.op_end >= 0 && freeTs <= p.op_end) {
    if (p.tag == MemoryCategory::kUnknown) ++d.inferred_temporaries;
    return MemoryCategory::kTemporary;
  }
  // Made and freed inside one optimizer phase (an update's intermediates) or one backward phase
  // (gradients passed between autograd nodes, a gradient added into .grad): a temporary too.
  if (p.tag == MemoryCategory::kUnknown && freeTs >= 0 && p.phase_end >= 0 &&
      freeTs <= p.phase_end) {
    ++d.inferred_temporaries;
    return MemoryCategory::kTemporary;
  }
  if (p.tag == MemoryCategory::kActivation) return p.tag;
  if (freeTs >= 0 && p.in_forward && ctx.inBackward(freeTs)) {
    ++d.inferred_activations;
    return MemoryCategory::kActivation;
  }
  // Made in a forward and alive through the backward after it, freed later: the forward's
  // outputs the program itself holds (nanoGPT's logits, kept by `logits, loss = model(x, y)`
  // until the next step), activations that autograd did not save.
  if (freeTs >= 0 && p.in_forward && ctx.backwardStartsIn(p.ts, freeTs)) {
    ++d.inferred_activations;
    return MemoryCategory::kActivation;
  }
  return MemoryCategory::kOther;
}

struct RankState {
  std::map<DeviceKey, DeviceMemory> devices;
  std::vector<MemoryCategory> category;  // per allocation ordinal
  std::map<DeviceKey, int64_t> first_ts, last_ts;
  std::map<DeviceKey, int64_t> peak_event;  // event ordinal of each device's peak
};

// Live bytes of one device (categories aside): the total the replay pass will find, and where it
// first peaks. A device's peak is the first event after which the total of live bytes is highest
// (and above 0); it does not depend on the categories, so the classification pass finds it and
// the replay pass can collect the live set at the peak as it goes.
struct TotalTracker {
  int64_t total = 0, peak = 0;
  // After an allocation of `bytes` (replacing a live block of `dropped` bytes, 0 when none);
  // true when the total is a new peak.
  bool allocated(int64_t bytes, int64_t dropped) {
    // Saturated as the replay pass does: the same arithmetic gives the same peak.
    total = satSub(total, dropped);
    total = satAdd(total, bytes);
    if (total <= peak) return false;
    peak = total;
    return true;
  }
  void freed(int64_t bytes) { total = satSub(total, bytes); }
};

void classificationPass(const TraceReader& reader, int rank, const Context& ctx, RankState& st) {
  struct Dev {
    DeviceMemory* d = nullptr;
    int64_t* last_ts = nullptr;
    std::unordered_map<uint64_t, Pending> live;
    TotalTracker totals;
  };
  std::map<DeviceKey, Dev> devs;
  Dev* dev = nullptr;  // the last row's device: rows of one device usually come in runs
  DeviceKey devKey{0, 0};
  int64_t allocations = 0, event = 0;
  reader.forEachMemory(rank, INT64_MIN, INT64_MAX, [&](const MemoryRow& m) {
    const int64_t index = event++;
    const DeviceKey key{m.device_type, m.device_index};
    if (dev == nullptr || key.type != devKey.type || key.index != devKey.index) {
      devKey = key;
      dev = &devs[key];
      if (dev->d == nullptr) {  // first seen
        DeviceMemory& d = st.devices[key];
        d.rank = rank;
        d.device_type = m.device_type;
        d.device_index = m.device_index;
        st.first_ts[key] = m.ts_ns;
        dev->d = &d;
        dev->last_ts = &st.last_ts[key];
      }
    }
    DeviceMemory& d = *dev->d;
    *dev->last_ts = m.ts_ns;
    auto& map = dev->live;
    if (m.bytes > 0) {
      ++d.allocations;
      auto [it, inserted] = map.try_emplace(m.ptr);
      int64_t dropped = 0;
      if (!inserted) {  // the free of the earlier block was not recorded
        ++d.reused_pointers;
        st.category[static_cast<size_t>(it->second.ordinal)] = classify(it->second, -1, ctx, d);
        dropped = it->second.bytes;
      }
      if (dev->totals.allocated(m.bytes, dropped)) st.peak_event[key] = index;
      Pending& p = it->second;
      p.ordinal = allocations++;
      p.ts = m.ts_ns;
      p.bytes = m.bytes;
      p.tag = m.category;
      p.op_end = m.op != 0 ? ctx.opEndAt(m.ts_ns) : -1;
      p.in_forward = ctx.inForward(m.ts_ns);
      p.phase_end = std::max(Context::endAt(ctx.optimizer, m.ts_ns),
                             Context::endAt(ctx.backward_phases, m.ts_ns));
      st.category.push_back(MemoryCategory::kOther);
    } else if (m.bytes < 0) {
      ++d.frees;
      auto it = map.find(m.ptr);
      if (it == map.end()) {
        ++d.unmatched_frees;
        return;
      }
      st.category[static_cast<size_t>(it->second.ordinal)] = classify(it->second, m.ts_ns, ctx, d);
      dev->totals.freed(it->second.bytes);
      map.erase(it);
    } else if (m.category != MemoryCategory::kUnknown) {
      // A tag (0 bytes, tracerun_annotate_tag_memory): the live block at ptr takes the category
      // for its whole allocation; the last tag before its free wins. No block there: ignored.
      auto it = map.find(m.ptr);
      if (it != map.end() &&
          static_cast<int>(m.category) < static_cast<int>(MemoryCategory::kCount)) {
        it->second.tag = m.category;
      }
    }
  });
  for (auto& [key, dv] : devs) {
    for (auto& [ptr, p] : dv.live) {
      st.category[static_cast<size_t>(p.ordinal)] = classify(p, -1, ctx, *dv.d);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// replay pass: live bytes by category, peak, timeline

struct Block {
  int64_t bytes;
  MemoryCategory category;
};

// The allocations live up to the last device's peak (the classification pass found each peak),
// and each device's largest ones at its peak event.
class PeakSet {
 public:
  PeakSet(const MemoryOptions& o, const RankState& st) : top_(o.top_allocations) {
    if (top_ == 0) return;
    for (const auto& [key, e] : st.peak_event) last_ = std::max(last_, e);
  }
  void add(int64_t index, const DeviceKey& key, const MemoryRow& m, MemoryCategory category,
           RankState& st) {
    if (index > last_) return;
    auto& map = live_[key];
    if (m.bytes > 0) {
      LiveAllocation a;
      a.ptr = m.ptr;
      a.bytes = m.bytes;
      a.ts_ns = m.ts_ns;
      a.category = category;
      a.tag = m.category;
      a.op = m.op;
      a.scope = m.scope;
      map[m.ptr] = a;
    } else if (m.bytes < 0) {
      map.erase(m.ptr);
    }
    auto pe = st.peak_event.find(key);
    if (pe == st.peak_event.end() || pe->second != index) return;
    std::vector<LiveAllocation> all;
    all.reserve(map.size());
    for (const auto& [ptr, a] : map) all.push_back(a);
    const size_t k = std::min(top_, all.size());
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                      [](const LiveAllocation& a, const LiveAllocation& b) {
                        return a.bytes != b.bytes ? a.bytes > b.bytes : a.ts_ns < b.ts_ns;
                      });
    all.resize(k);
    st.devices[key].largest_at_peak = std::move(all);
  }
  void done() { live_.clear(); }

 private:
  size_t top_;
  int64_t last_ = -1;  // no event: nothing kept
  std::map<DeviceKey, std::unordered_map<uint64_t, LiveAllocation>> live_;
};

void replayPass(const TraceReader& reader, int rank, const MemoryOptions& o, RankState& st) {
  struct Dev {
    DeviceMemory* d = nullptr;
    std::unordered_map<uint64_t, Block> live;
    CategoryBytes bytes{};
    int64_t total = 0;
    std::vector<MemoryPoint> slices;
    std::vector<bool> used;
  };
  std::map<DeviceKey, Dev> devs;
  for (auto& [key, d] : st.devices) {
    Dev& dv = devs[key];
    dv.d = &d;
    dv.slices.resize(o.timeline_points);
    dv.used.assign(o.timeline_points, false);
  }
  PeakSet peakSet(o, st);
  Dev* last = nullptr;  // the last row's device (the classification pass saw every device)
  DeviceKey lastKey{0, 0};
  int64_t allocations = 0, event = 0;
  reader.forEachMemory(rank, INT64_MIN, INT64_MAX, [&](const MemoryRow& m) {
    const int64_t index = event++;
    const DeviceKey key{m.device_type, m.device_index};
    if (last == nullptr || key.type != lastKey.type || key.index != lastKey.index) {
      lastKey = key;
      last = &devs[key];
      if (last->d == nullptr) {  // not in the first pass: the file changed in between
        last->d = &st.devices[key];
        last->slices.resize(o.timeline_points);
        last->used.assign(o.timeline_points, false);
      }
    }
    Dev& dv = *last;
    DeviceMemory& d = *dv.d;
    const MemoryCategory c =
        m.bytes > 0 ? st.category[static_cast<size_t>(allocations++)] : MemoryCategory::kOther;
    peakSet.add(index, key, m, c, st);
    if (m.bytes > 0) {
      auto [it, inserted] = dv.live.try_emplace(m.ptr, Block{m.bytes, c});
      if (!inserted) {  // an unrecorded free: drop the earlier block
        at(dv.bytes, it->second.category) =
            satSub(at(dv.bytes, it->second.category), it->second.bytes);
        dv.total = satSub(dv.total, it->second.bytes);
        it->second = Block{m.bytes, c};
      }
      // Saturated: a damaged file's sizes may add up past int64 (subtracting a block again is
      // then exact only below the limit, which real sizes never reach).
      at(dv.bytes, c) = satAdd(at(dv.bytes, c), m.bytes);
      at(d.allocated, c) = satAdd(at(d.allocated, c), m.bytes);
      dv.total = satAdd(dv.total, m.bytes);
      at(d.category_peaks, c) = std::max(at(d.category_peaks, c), at(dv.bytes, c));
      if (dv.total > d.peak_bytes) {
        d.peak_bytes = dv.total;
        d.peak_ts_ns = m.ts_ns;
        d.at_peak = dv.bytes;
      }
    } else if (m.bytes < 0) {
      auto it = dv.live.find(m.ptr);
      if (it == dv.live.end()) return;
      at(dv.bytes, it->second.category) =
          satSub(at(dv.bytes, it->second.category), it->second.bytes);
      dv.total = satSub(dv.total, it->second.bytes);
      dv.live.erase(it);
    }
    if (o.timeline_points == 0) return;
    const int64_t t0 = st.first_ts[key], t1 = st.last_ts[key];
    // In doubles: a damaged file's times may span the whole int64 range (exact enough for an
    // index among a few hundred slices). Events come in time order, so t0 <= ts <= t1.
    const double width = double(t1) - double(t0) + 1;
    const double at = (double(m.ts_ns) - double(t0)) / width * double(o.timeline_points);
    const size_t k = t1 > t0 && at > 0
                         ? std::min(static_cast<size_t>(std::min(at, 1e18)), o.timeline_points - 1)
                         : 0;
    if (!dv.used[k] || dv.total > dv.slices[k].total) {
      dv.slices[k] = MemoryPoint{m.ts_ns, dv.total, dv.bytes};
      dv.used[k] = true;
    }
  });
  for (auto& [key, dv] : devs) {
    DeviceMemory& d = st.devices[key];
    d.live_at_end = dv.total;
    for (size_t k = 0; k < dv.slices.size(); ++k) {
      if (dv.used[k]) d.timeline.push_back(dv.slices[k]);
    }
  }
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// entry point

const DeviceMemory* MemoryAnalysis::primary(int rank) const {
  const DeviceMemory* best = nullptr;
  for (const DeviceMemory& d : devices) {
    if (d.rank != rank) continue;
    if (best == nullptr || (best->device_type != 1 && d.device_type == 1)) best = &d;
  }
  return best;
}

// ---------------------------------------------------------------------------------------------
// the pass's consumer

struct MemorySpans::State {
  State(const TraceReader& r, int rk) : reader(r), rank(rk), context(r) {}
  const TraceReader& reader;
  int rank;
  ContextBuilder context;
};

MemorySpans::MemorySpans(const TraceReader& reader, int rank)
    : s_(std::make_unique<State>(reader, rank)) {}
MemorySpans::~MemorySpans() = default;

bool MemorySpans::wantsTrack(const TrackRow& t) {
  if (t.rank != s_->rank || t.kind != core::TrackKind::kThread) return false;
  s_->context.beginTrack();
  return true;
}

int MemorySpans::onSpan(const SpanRow& span) {
  s_->context.add(span);
  return 0;
}

void MemorySpans::endTrack(const TrackRow&, std::vector<PickedSpan>&) {
  s_->context.endTrack();
}

void MemorySpans::analyze(const MemoryOptions& options, MemoryAnalysis& out) {
  const Context ctx = s_->context.take();
  RankState st;
  classificationPass(s_->reader, s_->rank, ctx, st);
  if (st.devices.empty()) return;
  if (options.replay) replayPass(s_->reader, s_->rank, options, st);
  if (options.keep_categories) out.categories[s_->rank] = std::move(st.category);
  for (auto& [key, d] : st.devices) out.devices.push_back(std::move(d));
}

MemoryAnalysis analyzeMemory(const TraceReader& reader, const MemoryOptions& options) {
  MemoryAnalysis out;
  const std::vector<TrackRow> tracks = reader.tracks();
  for (const RankInfo& r : reader.ranks()) {
    if (options.rank >= 0 && r.rank != options.rank) continue;
    MemorySpans pass(reader, r.rank);
    runSpanPass(reader, tracks, {&pass});
    pass.analyze(options, out);
  }
  return out;
}

std::map<std::string, std::string> memoryDtypes(const TraceReader& reader) {
  std::map<std::string, std::string> out;
  const std::string prefix = vocab::scope::kMemoryDtypePrefix;
  for (size_t i = 1; i < reader.stringCount(); ++i) {
    const std::string& s = reader.str(static_cast<core::StringId>(i));
    const size_t eq = s.find('=', prefix.size());
    if (s.compare(0, prefix.size(), prefix) != 0 || eq == std::string::npos) continue;
    const std::string dtype = s.substr(eq + 1);
    std::string& named = out[s.substr(prefix.size(), eq - prefix.size())];
    if (named.empty()) {
      named = dtype;
    } else if (("|" + named + "|").find("|" + dtype + "|") == std::string::npos) {
      named += "|" + dtype;
    }
  }
  return out;
}

}  // namespace tracerun::trace::analysis
