// Memory analysis (see memory.h). Per rank: one pass over the thread tracks for the context
// (outermost op intervals, forward and backward time), then three streamed passes over the memory
// events: classify each allocation when it is freed (a record of 0 bytes re-tags a live block);
// replay live bytes by category for the peak and the timeline; replay up to each device's peak
// for the largest live allocations.
//
// Sections: span context · classification pass · replay pass · peak live-set pass · entry point
#include "tracerun/trace/analysis/memory.h"

#include <algorithm>
#include <map>
#include <unordered_map>

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
  // End of the (merged) interval of v running at t, or -1.
  static int64_t endAt(const Intervals& v, int64_t t) {
    auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(t, INT64_MAX));
    if (it == v.begin()) return -1;
    --it;
    return t >= it->first && t <= it->second ? it->second : -1;
  }
};

Context contextOf(const TraceReader& reader, int rank) {
  enum { kOther = 1, kForwardPhase, kBackwardPhase, kOptimizerPhase };
  NameCodes codes(reader, [](const std::string& s) {
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
  });
  Context c;
  size_t mergeAt = 4096;
  for (const TrackRow& t : reader.tracks()) {
    if (t.rank != rank || t.kind != core::TrackKind::kThread) continue;
    Intervals ops;
    int64_t opEnd = INT64_MIN;
    reader.forEachSpan(t.id, [&](const SpanRow& s) {
      const bool op = s.category == core::Category::kOp || s.category == core::Category::kBackward;
      // The first op opens an interval whatever its start (INT64_MIN in a damaged file too).
      if (op && (ops.empty() || s.start_ns > opEnd)) {
        ops.emplace_back(s.start_ns, s.end_ns());
        opEnd = s.end_ns();
      } else if (op) {
        opEnd = std::max(opEnd, s.end_ns());  // nested (or overlapping): part of the outermost
        ops.back().second = opEnd;
      }
      if (s.category == core::Category::kBackward) {
        c.backward.emplace_back(s.start_ns, s.end_ns());
      } else if (s.category == core::Category::kPhase) {
        const int code = codes(s.name);
        if (code == kForwardPhase) {
          c.forward.emplace_back(s.start_ns, s.end_ns());
          c.has_forward_phases = true;
        }
        if (code == kBackwardPhase) {
          c.backward.emplace_back(s.start_ns, s.end_ns());
          c.backward_phases.emplace_back(s.start_ns, s.end_ns());
        }
        if (code == kOptimizerPhase) c.optimizer.emplace_back(s.start_ns, s.end_ns());
      }
      // Merge as we go: autograd nodes can be millions; their union is usually small. When it is
      // not (disjoint nodes), the next merge waits until the list doubled: amortised O(n log n).
      if (c.backward.size() > mergeAt) {
        normalize(c.backward);
        mergeAt = std::max<size_t>(4096, 2 * c.backward.size());
      }
    });
    c.outermost_ops.push_back(std::move(ops));
  }
  normalize(c.forward);
  normalize(c.backward);
  normalize(c.optimizer);
  normalize(c.backward_phases);
  return c;
}

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
  return MemoryCategory::kOther;
}

struct RankState {
  std::map<DeviceKey, DeviceMemory> devices;
  std::vector<MemoryCategory> category;  // per allocation ordinal
  std::map<DeviceKey, int64_t> first_ts, last_ts;
  std::map<DeviceKey, int64_t> peak_event;  // event ordinal of each device's peak
};

void classificationPass(const TraceReader& reader, int rank, const Context& ctx, RankState& st) {
  std::map<DeviceKey, std::unordered_map<uint64_t, Pending>> live;
  int64_t allocations = 0;
  reader.forEachMemory(rank, INT64_MIN, INT64_MAX, [&](const MemoryRow& m) {
    const DeviceKey key{m.device_type, m.device_index};
    DeviceMemory& d = st.devices[key];
    d.rank = rank;
    d.device_type = m.device_type;
    d.device_index = m.device_index;
    if (!st.first_ts.count(key)) st.first_ts[key] = m.ts_ns;
    st.last_ts[key] = m.ts_ns;
    auto& map = live[key];
    if (m.bytes > 0) {
      ++d.allocations;
      auto [it, inserted] = map.try_emplace(m.ptr);
      if (!inserted) {  // the free of the earlier block was not recorded
        ++d.reused_pointers;
        st.category[static_cast<size_t>(it->second.ordinal)] = classify(it->second, -1, ctx, d);
      }
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
  for (auto& [key, map] : live) {
    for (auto& [ptr, p] : map) {
      st.category[static_cast<size_t>(p.ordinal)] = classify(p, -1, ctx, st.devices[key]);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// replay pass: live bytes by category, peak, timeline

struct Block {
  int64_t bytes;
  MemoryCategory category;
};

void replayPass(const TraceReader& reader, int rank, const MemoryOptions& o, RankState& st) {
  struct Dev {
    std::unordered_map<uint64_t, Block> live;
    CategoryBytes bytes{};
    int64_t total = 0;
    std::vector<MemoryPoint> slices;
    std::vector<bool> used;
  };
  std::map<DeviceKey, Dev> devs;
  for (auto& [key, d] : st.devices) {
    Dev& dv = devs[key];
    dv.slices.resize(o.timeline_points);
    dv.used.assign(o.timeline_points, false);
  }
  int64_t allocations = 0, event = 0;
  reader.forEachMemory(rank, INT64_MIN, INT64_MAX, [&](const MemoryRow& m) {
    const int64_t index = event++;
    const DeviceKey key{m.device_type, m.device_index};
    Dev& dv = devs[key];
    DeviceMemory& d = st.devices[key];
    if (m.bytes > 0) {
      const MemoryCategory c = st.category[static_cast<size_t>(allocations++)];
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
        st.peak_event[key] = index;
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

// ---------------------------------------------------------------------------------------------
// peak live-set pass

void peakPass(const TraceReader& reader, int rank, const MemoryOptions& o, RankState& st) {
  if (o.top_allocations == 0) return;
  std::map<DeviceKey, std::unordered_map<uint64_t, LiveAllocation>> live;
  int64_t allocations = 0, event = 0;
  int64_t lastPeak = -1;
  for (const auto& [key, e] : st.peak_event) lastPeak = std::max(lastPeak, e);
  reader.forEachMemory(rank, INT64_MIN, INT64_MAX, [&](const MemoryRow& m) {
    const int64_t index = event++;
    if (index > lastPeak) return;
    const DeviceKey key{m.device_type, m.device_index};
    auto& map = live[key];
    if (m.bytes > 0) {
      LiveAllocation a;
      a.ptr = m.ptr;
      a.bytes = m.bytes;
      a.ts_ns = m.ts_ns;
      a.category = st.category[static_cast<size_t>(allocations++)];
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
    const size_t k = std::min(o.top_allocations, all.size());
    std::partial_sort(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k), all.end(),
                      [](const LiveAllocation& a, const LiveAllocation& b) {
                        return a.bytes != b.bytes ? a.bytes > b.bytes : a.ts_ns < b.ts_ns;
                      });
    all.resize(k);
    st.devices[key].largest_at_peak = std::move(all);
  });
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

MemoryAnalysis analyzeMemory(const TraceReader& reader, const MemoryOptions& options) {
  MemoryAnalysis out;
  for (const RankInfo& r : reader.ranks()) {
    if (options.rank >= 0 && r.rank != options.rank) continue;
    RankState st;
    const Context ctx = contextOf(reader, r.rank);
    classificationPass(reader, r.rank, ctx, st);
    if (st.devices.empty()) continue;
    if (options.replay) {
      replayPass(reader, r.rank, options, st);
      peakPass(reader, r.rank, options, st);
    }
    if (options.keep_categories) out.categories[r.rank] = std::move(st.category);
    for (auto& [key, d] : st.devices) out.devices.push_back(std::move(d));
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
