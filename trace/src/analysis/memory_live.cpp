// Memory over time for the viewer (see memory_live.h): the per-device series with block
// summaries, their reduction to pixel columns, the live set at a time, and the closed forms
// (gpttrain's ZeRO forms; a user program's parameters + gradients + optimizer states).
// Not the classification (memory.cpp) and not drawing (viewer/src/memory_view.cpp).
//
// Sections: series · reduction · live set · closed forms
#include "tracerun/trace/analysis/memory_live.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <unordered_map>

#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/format.h"

namespace tracerun::trace::analysis {

namespace {

using core::MemoryCategory;

struct DeviceKey {
  int type, index;
  bool operator<(const DeviceKey& o) const {
    return type != o.type ? type < o.type : index < o.index;
  }
};

void apply(Levels& l, int64_t delta, uint8_t stack) {
  for (size_t k = stack; k < l.size(); ++k) l[k] = satAdd(l[k], delta);
}

void widen(Levels& lo, Levels& hi, const Levels& l) {
  for (size_t k = 0; k < l.size(); ++k) {
    lo[k] = std::min(lo[k], l[k]);
    hi[k] = std::max(hi[k], l[k]);
  }
}

constexpr Levels filled(int64_t v) {
  Levels l{};
  for (int64_t& x : l) x = v;
  return l;
}
constexpr Levels kHighest = filled(INT64_MAX);
constexpr Levels kLowest = filled(INT64_MIN);

// Appends events to a series, keeping the block summaries and the levels current.
struct SeriesBuilder {
  size_t index = 0;  // into the rank's series
  Levels levels{};
  CategoryBytes bytes{};

  void push(MemorySeries& s, int64_t ts, int64_t delta, MemoryCategory c) {
    const uint8_t k = static_cast<uint8_t>(stackIndex(c));
    if (s.ts.size() % MemorySeries::kBlock == 0) {
      s.block_start.push_back(levels);
      s.block_lo.push_back(kHighest);
      s.block_hi.push_back(kLowest);
    }
    s.ts.push_back(ts);
    s.delta.push_back(delta);
    s.stack.push_back(k);
    apply(levels, delta, k);
    at(bytes, c) = satAdd(at(bytes, c), delta);
    widen(s.block_lo.back(), s.block_hi.back(), levels);
  }
};

struct Block {
  int64_t bytes;
  MemoryCategory category;
};

}  // namespace

int stackIndex(MemoryCategory c) {
  for (int k = 0; k < kStackCount; ++k) {
    if (kStackOrder[k] == c) return k;
  }
  return kStackCount - 1;  // unknown: other
}

// ---------------------------------------------------------------------------------------------
// series

std::vector<MemorySeries> buildMemorySeries(const TraceReader& reader,
                                            const MemoryAnalysis& analysis, int rank,
                                            const std::atomic<bool>* cancel) {
  std::vector<MemorySeries> out;
  for (const auto& [r, categories] : analysis.categories) {
    if (rank >= 0 && r != rank) continue;
    if (cancel != nullptr && cancel->load()) break;
    std::map<DeviceKey, SeriesBuilder> builders;
    std::map<DeviceKey, std::unordered_map<uint64_t, Block>> live;
    std::vector<MemorySeries> series;  // in order of first appearance
    size_t ordinal = 0;
    reader.forEachMemory(r, INT64_MIN, INT64_MAX, [&](const MemoryRow& m) {
      const DeviceKey key{m.device_type, m.device_index};
      auto b = builders.find(key);
      if (b == builders.end()) {
        MemorySeries s;
        s.rank = r;
        s.device_type = m.device_type;
        s.device_index = m.device_index;
        series.push_back(std::move(s));
        b = builders.emplace(key, SeriesBuilder{series.size() - 1, {}, {}}).first;
      }
      SeriesBuilder& sb = b->second;
      MemorySeries& s = series[sb.index];
      auto& map = live[key];
      if (m.bytes > 0) {
        const MemoryCategory c =
            ordinal < categories.size() ? categories[ordinal] : MemoryCategory::kOther;
        ++ordinal;
        auto [it, inserted] = map.try_emplace(m.ptr, Block{m.bytes, c});
        if (!inserted) {  // an unrecorded free: drop the earlier block (as analyzeMemory does)
          sb.push(s, m.ts_ns, -it->second.bytes, it->second.category);
          it->second = Block{m.bytes, c};
        }
        sb.push(s, m.ts_ns, m.bytes, c);
        if (sb.levels.back() > s.peak_bytes) {
          s.peak_bytes = sb.levels.back();
          s.peak_ts_ns = m.ts_ns;
          s.at_peak = sb.bytes;
        }
      } else if (m.bytes < 0) {
        auto it = map.find(m.ptr);
        if (it == map.end()) return;  // allocated before the capture: not counted
        sb.push(s, m.ts_ns, -it->second.bytes, it->second.category);
        map.erase(it);
      }
    });
    for (MemorySeries& s : series) out.push_back(std::move(s));
  }
  return out;
}

Levels MemorySeries::levelsAfter(size_t i) const {
  if (block_start.empty()) return Levels{};
  i = std::min(i, ts.size());
  const size_t b = std::min(i / kBlock, block_start.size() - 1);
  Levels l = block_start[b];
  for (size_t j = b * kBlock; j < i; ++j) apply(l, delta[j], stack[j]);
  return l;
}

// ---------------------------------------------------------------------------------------------
// reduction

void MemorySeries::reduce(double t0, double t1, size_t columns, std::vector<Column>& out) const {
  out.assign(columns, Column{});
  if (columns == 0 || !(t1 > t0)) return;
  const double dt = (t1 - t0) / static_cast<double>(columns);
  const auto firstAtOrAfter = [&](size_t from, double t) {
    return static_cast<size_t>(
        std::lower_bound(ts.begin() + static_cast<std::ptrdiff_t>(from), ts.end(), t,
                         [](int64_t v, double x) { return static_cast<double>(v) < x; }) -
        ts.begin());
  };
  size_t j = firstAtOrAfter(0, t0);
  Levels l = levelsAfter(j);
  for (size_t c = 0; c < columns; ++c) {
    const double end = c + 1 == columns ? t1 : t0 + dt * static_cast<double>(c + 1);
    const size_t i1 = firstAtOrAfter(j, end);
    Column& col = out[c];
    col.lo = col.hi = l;
    col.events = i1 > j;
    while (j < i1) {
      if (j % kBlock == 0 && j + kBlock <= i1) {
        const size_t b = j / kBlock;
        widen(col.lo, col.hi, block_lo[b]);
        widen(col.lo, col.hi, block_hi[b]);
        j += kBlock;
        l = b + 1 < block_start.size() ? block_start[b + 1] : levelsAfter(j);
      } else {
        apply(l, delta[j], stack[j]);
        widen(col.lo, col.hi, l);
        ++j;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// live set

std::vector<LiveBlock> liveAt(const TraceReader& reader, int rank, int64_t t,
                              const std::vector<MemoryCategory>& categories, size_t modules) {
  std::map<DeviceKey, std::unordered_map<uint64_t, LiveBlock>> live;
  size_t ordinal = 0;
  reader.forEachMemory(rank, INT64_MIN, t, [&](const MemoryRow& m) {
    auto& map = live[DeviceKey{m.device_type, m.device_index}];
    if (m.bytes > 0) {
      LiveBlock a;
      a.ptr = m.ptr;
      a.bytes = m.bytes;
      a.ts_ns = m.ts_ns;
      a.device_type = m.device_type;
      a.device_index = m.device_index;
      a.category = ordinal < categories.size() ? categories[ordinal] : MemoryCategory::kOther;
      a.op = m.op;
      a.scope = m.scope;
      ++ordinal;
      map[m.ptr] = a;  // a live address again: the earlier block's free was not recorded
    } else if (m.bytes < 0) {
      map.erase(m.ptr);
    }
  });
  std::vector<LiveBlock> out;
  for (auto& [key, map] : live) {
    for (auto& [ptr, a] : map) out.push_back(std::move(a));
  }
  const auto order = [](const LiveBlock& a, const LiveBlock& b) {
    if (a.bytes != b.bytes) return a.bytes > b.bytes;
    if (a.ts_ns != b.ts_ns) return a.ts_ns < b.ts_ns;
    return a.ptr < b.ptr;
  };
  std::sort(out.begin(), out.end(), order);
  // The module: the deepest module scope running on one of the rank's threads at the allocation.
  std::vector<int64_t> threads;
  for (const TrackRow& tr : reader.tracks()) {
    if (tr.rank == rank && tr.kind == core::TrackKind::kThread) threads.push_back(tr.id);
  }
  const size_t n = modules > 0 ? std::min(modules, out.size()) : out.size();
  for (size_t i = 0; i < n; ++i) {
    LiveBlock& a = out[i];
    int depth = -1;
    for (int64_t track : threads) {
      for (const SpanRow& s : reader.spans(track, a.ts_ns, a.ts_ns)) {
        if (s.category != core::Category::kModule || s.start_ns > a.ts_ns || s.end_ns() < a.ts_ns ||
            s.depth <= depth) {
          continue;
        }
        depth = s.depth;
        a.module = reader.str(s.name);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// closed forms

namespace {

// The frozen parameters `rank`'s fine_tuning phase recorded; 0 when it has none.
int64_t frozenParams(const TraceReader& reader, int rank) {
  const core::StringId phase = NameCodes::find(reader, vocab::phase::kFineTuning);
  const core::StringId key = NameCodes::find(reader, vocab::arg::kFrozen);
  if (phase == 0 || key == 0) return 0;
  int64_t frozen = 0;
  for (const TrackRow& tr : reader.tracks()) {
    if (tr.rank != rank || tr.kind != core::TrackKind::kThread) continue;
    const auto picked = pickSpans(reader, tr, [&](const SpanRow& s) {
      return s.category == core::Category::kPhase && s.name == phase ? 1 : 0;
    });
    for (const PickedSpan& p : picked) frozen = std::max<int64_t>(frozen, p.arg(key, 0));
  }
  return frozen;
}

// The offload device holding `rank`'s optimizer states: one of its series on an offload device
// (tracerun/annotate_abi.h's OffloadDevice, types from 100) with optimizer state at its peak.
const MemorySeries* offloadedStates(const std::vector<MemorySeries>& series, int rank) {
  for (const MemorySeries& s : series) {
    if (s.rank == rank && s.device_type >= 100 &&
        at(s.at_peak, MemoryCategory::kOptimizerState) > 0)
      return &s;
  }
  return nullptr;
}

// One precision's ZeRO formulas by stage 0-3, in Unicode (the formula) and ASCII (the label: the
// viewer's font has no Greek): everything on the device, and (offload) parameters and gradients.
struct ZeroFormulas {
  const char* formula[4];
  const char* ascii[4];
};
const ZeroFormulas kFp32{{"16Ψ", "8Ψ + 8Ψ/N", "4Ψ + 12Ψ/N", "16Ψ/N"},
                         {"16 psi", "8 psi + 8 psi/N", "4 psi + 12 psi/N", "16 psi/N"}};
const ZeroFormulas kMixed{{"16Ψ", "4Ψ + 12Ψ/N", "2Ψ + 14Ψ/N", "16Ψ/N"},
                          {"16 psi", "4 psi + 12 psi/N", "2 psi + 14 psi/N", "16 psi/N"}};
const ZeroFormulas kFp32Offload{{"8Ψ", "8Ψ", "4Ψ + 4Ψ/N", "8Ψ/N"},
                                {"8 psi", "8 psi", "4 psi + 4 psi/N", "8 psi/N"}};
const ZeroFormulas kMixedOffload{{"4Ψ", "4Ψ", "2Ψ + 2Ψ/N", "4Ψ/N"},
                                 {"4 psi", "4 psi", "2 psi + 2 psi/N", "4 psi/N"}};

// What `rank`'s grad_sync phases recorded: ZeRO stage, DP size and parameter count psi (the
// model-parallel rank's); nothing when one is missing or out of range.
struct ZeroRun {
  int zero = -1, dp = -1;
  int64_t params = -1;
};
std::optional<ZeroRun> zeroRun(const TraceReader& reader, int rank) {
  const core::StringId gradSync = NameCodes::find(reader, vocab::phase::kGradSync);
  const core::StringId zeroKey = NameCodes::find(reader, vocab::arg::kZero);
  const core::StringId dpKey = NameCodes::find(reader, vocab::arg::kDp);
  const core::StringId paramsKey = NameCodes::find(reader, vocab::arg::kParams);
  if (gradSync == 0 || zeroKey == 0 || dpKey == 0 || paramsKey == 0) return std::nullopt;
  ZeroRun run;
  for (const TrackRow& tr : reader.tracks()) {
    if (tr.rank != rank || tr.kind != core::TrackKind::kThread) continue;
    const auto picked = pickSpans(reader, tr, [&](const SpanRow& s) {
      return s.category == core::Category::kPhase && s.name == gradSync ? 1 : 0;
    });
    for (const PickedSpan& p : picked) {
      run.zero = std::max<int>(run.zero, static_cast<int>(p.arg(zeroKey, -1)));
      run.dp = std::max<int>(run.dp, static_cast<int>(p.arg(dpKey, -1)));
      run.params = std::max<int64_t>(run.params, p.arg(paramsKey, -1));
    }
  }
  if (run.zero < 0 || run.zero > 3 || run.dp < 1 || run.params <= 0) return std::nullopt;
  return run;
}

// What a user program's optimizers hold on `rank` (model_states phases, vocabulary.h): the last
// record of each optimizer (its detail names it), summed. Nothing when there is none, or when one
// optimizer's kind is unknown (its states are not known, so neither is the total).
struct UserRun {
  int64_t params = 0, param_bytes = 0, state_bytes = 0;
  int64_t states = -1;    // per parameter, when every optimizer keeps the same number
  std::string optimizer;  // the detail of the one optimizer, or "N optimizers"
};
std::optional<UserRun> userRun(const TraceReader& reader, int rank) {
  const core::StringId phase = NameCodes::find(reader, vocab::phase::kModelStates);
  const core::StringId paramsKey = NameCodes::find(reader, vocab::arg::kParams);
  const core::StringId bytesKey = NameCodes::find(reader, vocab::arg::kParamBytes);
  const core::StringId statesKey = NameCodes::find(reader, vocab::arg::kStates);
  const core::StringId stateBytesKey = NameCodes::find(reader, vocab::arg::kStateBytes);
  if (phase == 0 || bytesKey == 0) return std::nullopt;
  std::map<core::StringId, std::pair<int64_t, PickedSpan>> last;  // by detail: (start, span)
  for (const TrackRow& tr : reader.tracks()) {
    if (tr.rank != rank || tr.kind != core::TrackKind::kThread) continue;
    const auto picked = pickSpans(reader, tr, [&](const SpanRow& s) {
      return s.category == core::Category::kPhase && s.name == phase ? 1 : 0;
    });
    for (const PickedSpan& p : picked) {
      auto it = last.find(p.span.detail);
      if (it == last.end() || p.span.start_ns >= it->second.first) {
        last.insert_or_assign(p.span.detail, std::make_pair(p.span.start_ns, p));
      }
    }
  }
  if (last.empty()) return std::nullopt;
  UserRun run;
  for (const auto& [detail, entry] : last) {
    const PickedSpan& p = entry.second;
    const int64_t bytes = p.arg(bytesKey, -1);
    const int64_t states = statesKey != 0 ? p.arg(statesKey, -1) : -1;
    const int64_t stateBytes = stateBytesKey != 0 ? p.arg(stateBytesKey, -1) : -1;
    if (bytes <= 0 || states < 0 || stateBytes < 0) return std::nullopt;  // unknown kind
    run.params = satAdd(run.params, std::max<int64_t>(0, p.arg(paramsKey, 0)));
    run.param_bytes = satAdd(run.param_bytes, bytes);
    run.state_bytes = satAdd(run.state_bytes, stateBytes);
    // One number of states per parameter when every optimizer keeps the same, in the parameters'
    // own element size (torch.optim's and libtorch's states are zeros_like the parameter).
    int64_t product = 0;
    const bool uniform = !__builtin_mul_overflow(states, bytes, &product) && product == stateBytes;
    if (run.optimizer.empty()) {
      run.states = uniform ? states : -1;
      run.optimizer = detail != 0 ? reader.str(detail) : "optimizer";
    } else {
      if (!uniform || run.states != states) run.states = -1;
      run.optimizer = std::to_string(last.size()) + " optimizers";
    }
  }
  return run;
}

// A user program's line (no ZeRO: everything on the rank): parameters P + gradients G (one per
// parameter, as large) + optimizer states, k x P when every state is one parameter's size.
MemoryClosedForm userClosedForm(const UserRun& run) {
  const double p = static_cast<double>(run.param_bytes);
  MemoryClosedForm f;
  f.bytes = 2 * p + static_cast<double>(run.state_bytes);
  f.formula = run.states == 0   ? "P + G"
              : run.states == 1 ? "P + G + P"
              : run.states > 1  ? "P + G + " + std::to_string(run.states) + "P"
                                : "P + G + S";
  const std::string states =
      run.states >= 0
          ? std::to_string(run.states) + " optimizer state" + (run.states == 1 ? "" : "s") +
                " per parameter"
          : "S " + formatBytes(static_cast<double>(run.state_bytes)) + " of optimizer states";
  f.label = run.optimizer + ": " + f.formula + " = " + formatBytes(f.bytes) + " (P " +
            formatBytes(p) +
            (run.params > 0 ? ", " + formatCount(run.params) + " parameters" : std::string()) +
            "; " + states + ")";
  return f;
}

}  // namespace

std::vector<MemoryClosedForm> memoryClosedForms(const TraceReader& reader, int rank,
                                                const std::vector<MemorySeries>& series) {
  const std::optional<ZeroRun> run = zeroRun(reader, rank);
  if (!run) {
    const std::optional<UserRun> user = userRun(reader, rank);
    if (!user) return {};
    return {userClosedForm(*user)};
  }
  const int zero = run->zero, dp = run->dp;
  const int64_t params = run->params;
  const int64_t frozen = frozenParams(reader, rank);
  const double psi = static_cast<double>(params);
  const double n = dp;
  // Mixed precision (gpttrain --precision bf16-mixed names its parameters bf16): 2 bytes of
  // parameters, 2 of gradients and 12 of fp32 master weights and AdamW moments per parameter
  // (the ZeRO paper's own accounting); otherwise fp32 throughout: 4 + 4 + 8.
  const auto dtypes = memoryDtypes(reader);
  const auto named = dtypes.find("parameter");
  const bool mixed = named != dtypes.end() && named->second == "bf16";
  // Offloaded (ZeRO 1-3 only): the states are on the offload device, off this line.
  const MemorySeries* offload = zero >= 1 ? offloadedStates(series, rank) : nullptr;
  const ZeroFormulas& forms =
      offload ? (mixed ? kMixedOffload : kFp32Offload) : (mixed ? kMixed : kFp32);
  const double p = mixed ? 2 : 4, g = mixed ? 2 : 4, o = offload ? 0 : mixed ? 12 : 8;
  MemoryClosedForm f;
  f.formula = forms.formula[zero];
  f.bytes = psi * (p / (zero >= 3 ? n : 1) + g / (zero >= 2 ? n : 1) + o / (zero >= 1 ? n : 1));
  const std::string stage = "ZeRO-" + std::to_string(zero) + (offload ? " offload" : "");
  // What the offload device holds: fp32 master weights and both moments, 12 bytes a shard element.
  const std::string offloaded =
      offload ? "; on " + deviceName(offload->device_type, offload->device_index) +
                    ": 12 psi/N = " + formatBytes(12 * psi / n) + " of optimizer state"
              : "";
  f.label = stage + " " + forms.ascii[zero] + " = " + formatBytes(f.bytes) + " (psi " +
            formatCount(static_cast<int64_t>(psi)) + " parameters, N " + std::to_string(dp) +
            (mixed ? ", bf16 mixed: fp32 master + AdamW" : ", fp32 AdamW") + offloaded + ")";
  if (frozen > 0) {
    // Fine-tuning: psi is what trains; the frozen base (phi) is held whole, in the parameters'
    // dtype, with no gradient and no optimizer state.
    const double phi = static_cast<double>(frozen);
    f.formula = (mixed ? "2Φ + " : "4Φ + ") + f.formula;
    f.bytes += p * phi;
    f.label = std::string("fine-tuning, ") + stage + ": " + (mixed ? "2" : "4") + " phi + " +
              forms.ascii[zero] + " = " + formatBytes(f.bytes) + " (phi " + formatCount(frozen) +
              " frozen, psi " + formatCount(static_cast<int64_t>(psi)) + " trainable, N " +
              std::to_string(dp) + (mixed ? ", bf16 mixed" : ", fp32 AdamW") + offloaded + ")";
  }
  return {f};
}

std::vector<MemoryClosedForm> offloadClosedForms(const TraceReader& reader,
                                                 const MemorySeries& offload) {
  if (offload.device_type < 100 || at(offload.at_peak, MemoryCategory::kOptimizerState) <= 0) {
    return {};
  }
  const std::optional<ZeroRun> run = zeroRun(reader, offload.rank);
  if (!run || run->zero < 1) return {};
  const double psi = static_cast<double>(run->params);
  MemoryClosedForm f;
  f.formula = "12Ψ/N";
  f.bytes = 12 * psi / run->dp;
  f.label = "ZeRO-" + std::to_string(run->zero) + " offload 12 psi/N = " + formatBytes(f.bytes) +
            " (psi " + formatCount(run->params) + " parameters, N " + std::to_string(run->dp) +
            ": fp32 master weights + AdamW moments)";
  return {f};
}

}  // namespace tracerun::trace::analysis
