// Memory analysis on a hand-built trace whose live set is known in closed form: tagged state
// (parameters, gradients, optimizer state), per-layer activations freed in backward, temporaries
// freed inside their op, one untagged block that is never freed, an unmatched free, a CUDA device.
// Also a user program's closed-form line from hand-built model_states records.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/analysis/memory_summary.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using core::MemoryCategory;
using trace::analysis::analyzeMemory;
using trace::analysis::at;

namespace {

constexpr int kLayers = 4;
constexpr int kSteps = 2;
constexpr int64_t kStepLength = 10000;
constexpr int64_t kActivation = 1000;  // layer l's output: (l + 1) * kActivation bytes
constexpr int64_t kForwardTemp = 300, kBackwardTemp = 200, kTaggedTemp = 50, kLeftover = 500;

int64_t stepBase(int s) {
  return 1000 + s * kStepLength;
}

// Layer l's forward op starts here; its backward op (layers in reverse) there.
int64_t forwardOp(int s, int l) {
  return stepBase(s) + 100 + l * 900;
}
int64_t backwardOp(int s, int l) {
  return stepBase(s) + 4100 + (kLayers - 1 - l) * 1000;
}

std::string buildTrace(TraceBuilder& tb) {
  uint64_t next = 0x1000;
  auto alloc = [&](int64_t ts, int64_t bytes, MemoryCategory c, const std::string& op) {
    const uint64_t ptr = next += 0x100;
    tb.memory(0, BMemory{ts, ptr, bytes, c, op, ""});
    return ptr;
  };
  auto release = [&](int64_t ts, uint64_t ptr, int64_t bytes, MemoryCategory c) {
    tb.memory(0, BMemory{ts, ptr, -bytes, c, "", ""});
  };
  tb.memory(0, BMemory{5, 0xdead, -999, MemoryCategory::kUnknown, "", ""});  // unmatched free
  alloc(10, 1000, MemoryCategory::kParameter, "aten::empty");
  alloc(20, 2000, MemoryCategory::kParameter, "aten::empty");
  alloc(30, 4000, MemoryCategory::kParameter, "aten::empty");
  alloc(40, 7000, MemoryCategory::kGradient, "aten::zeros");
  alloc(50, 7000, MemoryCategory::kOptimizerState, "aten::zeros");
  alloc(60, 7000, MemoryCategory::kOptimizerState, "aten::zeros");
  tb.memory(0, BMemory{70, 0xc0de, 1 << 20, MemoryCategory::kParameter, "aten::empty", "", 1, 0});

  for (int s = 0; s < kSteps; ++s) {
    const int64_t b = stepBase(s);
    tb.span(0, BSpan{"main", "step", core::Category::kPhase, b, b + 9800, 0, {{"step", s + 1}}});
    tb.span(0, BSpan{"main", "forward", core::Category::kPhase, b, b + 4000, 1});
    tb.span(0, BSpan{"main", "backward", core::Category::kPhase, b + 4000, b + 9000, 1});
    std::vector<uint64_t> act(kLayers);
    for (int l = 0; l < kLayers; ++l) {
      const int64_t t = forwardOp(s, l);
      tb.span(0, BSpan{"main", "aten::linear", core::Category::kOp, t, t + 800, 2});
      tb.span(0, BSpan{"main", "aten::mm", core::Category::kOp, t + 90, t + 510, 3});
      const uint64_t tmp = alloc(t + 100, kForwardTemp, MemoryCategory::kUnknown, "aten::mm");
      if (l == 0) {  // tagged as activation, but freed inside its op: a temporary
        release(t + 200, alloc(t + 150, kTaggedTemp, MemoryCategory::kActivation, "aten::mm"),
                kTaggedTemp, MemoryCategory::kActivation);
      }
      release(t + 500, tmp, kForwardTemp, MemoryCategory::kUnknown);
      // The last layer's output is tagged; the others are found from their lifetimes.
      act[l] = alloc(t + 600, (l + 1) * kActivation,
                     l == kLayers - 1 ? MemoryCategory::kActivation : MemoryCategory::kUnknown,
                     "aten::linear");
    }
    for (int l = kLayers - 1; l >= 0; --l) {
      const int64_t t = backwardOp(s, l);
      tb.span(0, BSpan{"main", "autograd::engine::evaluate_function: MmBackward0",
                       core::Category::kOp, t, t + 900, 2});
      tb.span(0, BSpan{"main", "MmBackward0", core::Category::kBackward, t + 50, t + 850, 3});
      tb.span(0, BSpan{"main", "aten::mm", core::Category::kOp, t + 60, t + 350, 4});
      const uint64_t g = alloc(t + 100, kBackwardTemp, MemoryCategory::kUnknown, "aten::mm");
      release(t + 300, g, kBackwardTemp, MemoryCategory::kUnknown);
      const MemoryCategory tag =
          l == kLayers - 1 ? MemoryCategory::kActivation : MemoryCategory::kUnknown;
      release(t + 400, act[l], (l + 1) * kActivation, tag);
    }
    if (s == 0) alloc(b + 9500, kLeftover, MemoryCategory::kUnknown, "aten::zeros");  // kept
  }
  return tb.write(scratchDir("memory"));
}

}  // namespace

TEST_CASE("memory: peak, live set by category and largest blocks in closed form",
          "[analysis][memory]") {
  TraceBuilder tb;
  const std::string path = buildTrace(tb);
  const auto reader = trace::TraceReader::open(path);
  const auto a = analyzeMemory(reader, {-1, 64, 5});
  REQUIRE(a.devices.size() == 2);
  const auto& cpu = a.devices[0];
  REQUIRE(cpu.device_type == 0);
  const int64_t params = 1000 + 2000 + 4000, grads = 7000, opt = 14000;
  int64_t activations = 0;
  for (int l = 0; l < kLayers; ++l) activations += (l + 1) * kActivation;
  // The peak: the last step's first backward op holds its temporary while every activation of
  // the step, the state and the block left over from step 1 are live.
  const int64_t peak = params + grads + opt + activations + kBackwardTemp + kLeftover;
  CHECK(cpu.peak_bytes == peak);
  CHECK(cpu.peak_ts_ns == backwardOp(kSteps - 1, kLayers - 1) + 100 + tb.offset());
  CHECK(at(cpu.at_peak, MemoryCategory::kParameter) == params);
  CHECK(at(cpu.at_peak, MemoryCategory::kGradient) == grads);
  CHECK(at(cpu.at_peak, MemoryCategory::kOptimizerState) == opt);
  CHECK(at(cpu.at_peak, MemoryCategory::kActivation) == activations);
  CHECK(at(cpu.at_peak, MemoryCategory::kTemporary) == kBackwardTemp);
  CHECK(at(cpu.at_peak, MemoryCategory::kOther) == kLeftover);
  CHECK(at(cpu.at_peak, MemoryCategory::kUnknown) == 0);
  CHECK(at(cpu.category_peaks, MemoryCategory::kActivation) == activations);
  // Layer 0 holds its forward temporary and the tagged one at once.
  CHECK(at(cpu.category_peaks, MemoryCategory::kTemporary) == kForwardTemp + kTaggedTemp);

  // Classification counts: untagged temporaries (forward and backward, every layer and step),
  // untagged activations (all layers but the tagged last one).
  CHECK(cpu.inferred_temporaries == 2 * kLayers * kSteps);
  CHECK(cpu.inferred_activations == (kLayers - 1) * kSteps);
  CHECK(at(cpu.allocated, MemoryCategory::kTemporary) ==
        kSteps * (kLayers * (kForwardTemp + kBackwardTemp) + kTaggedTemp));
  CHECK(at(cpu.allocated, MemoryCategory::kActivation) == kSteps * activations);
  CHECK(cpu.unmatched_frees == 1);
  CHECK(cpu.reused_pointers == 0);
  CHECK(cpu.allocations == 6 + kSteps * (3 * kLayers + 1) + 1);
  CHECK(cpu.live_at_end == params + grads + opt + kLeftover);

  // Largest at the peak: size, then allocation time.
  REQUIRE(cpu.largest_at_peak.size() == 5);
  const auto& top = cpu.largest_at_peak;
  CHECK(top[0].bytes == 7000);
  CHECK(top[0].category == MemoryCategory::kGradient);
  CHECK(top[1].category == MemoryCategory::kOptimizerState);
  CHECK(top[2].category == MemoryCategory::kOptimizerState);
  CHECK(top[3].bytes == 4000);
  CHECK(top[3].category == MemoryCategory::kParameter);
  CHECK(top[4].bytes == 4000);
  CHECK(top[4].category == MemoryCategory::kActivation);
  CHECK(reader.str(top[4].op) == "aten::linear");

  // The timeline holds the peak, stays under it, and ends at the live bytes at the end.
  REQUIRE(!cpu.timeline.empty());
  CHECK(cpu.timeline.size() <= 64);
  int64_t highest = 0;
  for (size_t i = 0; i < cpu.timeline.size(); ++i) {
    const auto& p = cpu.timeline[i];
    int64_t sum = 0;
    for (int64_t v : p.by_category) sum += v;
    CHECK(sum == p.total);
    highest = std::max(highest, p.total);
    if (i > 0) CHECK(p.ts_ns > cpu.timeline[i - 1].ts_ns);
  }
  CHECK(highest == peak);

  // The CUDA device is the rank's primary one.
  const auto* primary = a.primary(0);
  REQUIRE(primary != nullptr);
  CHECK(primary->device_type == 1);
  CHECK(primary->peak_bytes == (1 << 20));
  CHECK(at(primary->at_peak, MemoryCategory::kParameter) == (1 << 20));
  CHECK(a.primary(1) == nullptr);
}

TEST_CASE("memory: forEachMemory streams the rows memory() returns", "[analysis][memory]") {
  TraceBuilder tb;
  const auto reader = trace::TraceReader::open(buildTrace(tb));
  const auto rows = reader.memory(0, INT64_MIN, INT64_MAX);
  size_t i = 0;
  bool same = true;
  const int64_t t0 = rows[10].ts_ns, t1 = rows[40].ts_ns;
  reader.forEachMemory(0, t0, t1, [&](const trace::MemoryRow& m) {
    while (i < rows.size() && rows[i].ts_ns < t0) ++i;
    same = same && i < rows.size() && rows[i].ptr == m.ptr && rows[i].bytes == m.bytes &&
           rows[i].ts_ns == m.ts_ns;
    ++i;
  });
  CHECK(same);
  CHECK(rows.size() > 40);
}

// Tags written after the allocation (tracerun_annotate_tag_memory's records of 0 bytes): the live
// block at the pointer takes the category for its whole allocation, the last tag wins, a tag on a
// pointer with no live block (never allocated, or already freed) changes nothing.
TEST_CASE("memory: a record of 0 bytes re-tags the live block at its pointer",
          "[analysis][memory]") {
  TraceBuilder tb;
  auto mem = [&](int64_t ts, uint64_t ptr, int64_t bytes, MemoryCategory c) {
    tb.memory(0, BMemory{ts, ptr, bytes, c, "", ""});
  };
  mem(10, 0x100, 1000, MemoryCategory::kUnknown);  // a parameter made before any tag
  mem(20, 0x200, 300, MemoryCategory::kUnknown);   // a gradient, tagged once
  mem(30, 0x300, 70, MemoryCategory::kUnknown);    // freed, then its address tagged: stays other
  mem(40, 0x400, 5, MemoryCategory::kGradient);    // re-tagged: the last tag wins
  mem(50, 0x300, -70, MemoryCategory::kUnknown);
  mem(60, 0x100, 0, MemoryCategory::kParameter);
  mem(61, 0x200, 0, MemoryCategory::kGradient);
  mem(62, 0x300, 0, MemoryCategory::kOptimizerState);
  mem(63, 0x999, 0, MemoryCategory::kParameter);  // no block there
  mem(64, 0x400, 0, MemoryCategory::kOptimizerState);
  mem(70, 0x500, 100, MemoryCategory::kUnknown);  // after the tags, at a new address: other
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("memory_tags")));
  const auto a = analyzeMemory(reader, {-1, 16, 5});
  REQUIRE(a.devices.size() == 1);
  const auto& cpu = a.devices[0];
  CHECK(cpu.peak_bytes == 1000 + 300 + 5 + 100);  // above 1000 + 300 + 70 + 5 at t=40
  CHECK(cpu.allocations == 5);
  CHECK(cpu.frees == 1);
  CHECK(cpu.unmatched_frees == 0);
  CHECK(at(cpu.at_peak, MemoryCategory::kParameter) == 1000);
  CHECK(at(cpu.at_peak, MemoryCategory::kGradient) == 300);
  CHECK(at(cpu.at_peak, MemoryCategory::kOptimizerState) == 5);
  CHECK(at(cpu.at_peak, MemoryCategory::kOther) == 100);
  // Allocated bytes by category follow the tags too (the parameter counts from t=10).
  CHECK(at(cpu.allocated, MemoryCategory::kParameter) == 1000);
  CHECK(at(cpu.allocated, MemoryCategory::kOther) == 70 + 100);
}

// A batch as the Python hooks tag it (tracerun_annotate_tag_memory's record of 0 bytes after the
// allocation): made before the forward and freed in backward, it would be an activation by its
// lifetime; the input tag keeps it input. The replayed series (the viewer's) and the summary
// stored in the file stack it below "other" and give the same bytes at the peak as analyzeMemory.
TEST_CASE("memory: an input-tagged batch stays input through forward and backward",
          "[analysis][memory]") {
  constexpr int64_t kBatch = 4 * 3 * 32 * 32 * 4, kTargets = 4 * 8, kParams = 1000, kSaved = 700,
                    kUntagged = 64;
  TraceBuilder tb;
  auto mem = [&](int64_t ts, uint64_t ptr, int64_t bytes, MemoryCategory c) {
    tb.memory(0, BMemory{ts, ptr, bytes, c, "", ""});
  };
  tb.span(0, BSpan{"main", "forward", core::Category::kPhase, 100, 200, 0});
  tb.span(0, BSpan{"main", "backward", core::Category::kPhase, 200, 300, 0});
  mem(10, 0x100, kParams, MemoryCategory::kParameter);
  mem(20, 0x200, kBatch, MemoryCategory::kUnknown);
  mem(21, 0x300, kTargets, MemoryCategory::kUnknown);
  mem(30, 0x400, kUntagged, MemoryCategory::kUnknown);  // never freed, never tagged: other
  mem(100, 0x200, 0, MemoryCategory::kInput);           // the root forward's pre-hook
  mem(100, 0x300, 0, MemoryCategory::kInput);
  mem(150, 0x500, kSaved, MemoryCategory::kUnknown);  // saved in forward, freed in backward
  mem(250, 0x500, -kSaved, MemoryCategory::kUnknown);
  mem(260, 0x200, -kBatch, MemoryCategory::kUnknown);  // the batch goes in backward too
  const std::string path = tb.write(scratchDir("memory_input"));
  const auto reader = trace::TraceReader::open(path);
  trace::analysis::MemoryOptions mo;
  mo.keep_categories = true;
  const auto a = analyzeMemory(reader, mo);
  REQUIRE(a.devices.size() == 1);
  const auto& cpu = a.devices[0];
  CHECK(cpu.peak_bytes == kParams + kBatch + kTargets + kUntagged + kSaved);
  CHECK(at(cpu.at_peak, MemoryCategory::kInput) == kBatch + kTargets);
  CHECK(at(cpu.at_peak, MemoryCategory::kActivation) == kSaved);
  CHECK(at(cpu.at_peak, MemoryCategory::kParameter) == kParams);
  CHECK(at(cpu.at_peak, MemoryCategory::kOther) == kUntagged);
  CHECK(at(cpu.allocated, MemoryCategory::kInput) == kBatch + kTargets);
  CHECK(cpu.inferred_activations == 1);

  const auto series = trace::analysis::buildMemorySeries(reader, a);
  REQUIRE(series.size() == 1);
  CHECK(series[0].peak_bytes == cpu.peak_bytes);
  CHECK(series[0].at_peak == cpu.at_peak);
  // The levels at the end, bottom first: input sits between temporary and other.
  const auto end = series[0].levelsAfter(series[0].size());
  REQUIRE(trace::analysis::kStackOrder[5] == MemoryCategory::kInput);
  CHECK(end[4] == kParams);
  CHECK(end[5] - end[4] == kTargets);
  CHECK(end[6] - end[5] == kUntagged);

  trace::analysis::writeMemorySummary(path);
  const auto stored = trace::analysis::storedMemorySummary(trace::TraceReader::open(path));
  REQUIRE(stored.has_value());
  REQUIRE(stored->series.size() == 1);
  CHECK(stored->series[0].peak_bytes == cpu.peak_bytes);
  CHECK(stored->series[0].at_peak == cpu.at_peak);
  CHECK(stored->categories.at(0) == a.categories.at(0));
}

// A user program's line (issue 33 point 5): the model_states phases the Python hooks and
// tracerun::tagTraining record, one rank per case, against the bytes worked out here by hand.
TEST_CASE("memory: a user program's closed form is P + G + k P from its optimizers' records",
          "[analysis][memory]") {
  using Args = std::vector<std::pair<std::string, int64_t>>;
  const auto states = [](int64_t params, int64_t bytes, int64_t k, int64_t stateBytes) {
    return Args{
        {"params", params}, {"param_bytes", bytes}, {"states", k}, {"state_bytes", stateBytes}};
  };
  const auto record = [](int64_t t, const std::string& optimizer, Args args) {
    return BSpan{"main",          "model_states", core::Category::kPhase, t, t, 0,
                 std::move(args), optimizer};
  };
  TraceBuilder tb(5);
  // Rank 0: AdamW over 1,000 fp32 parameters.
  tb.span(0, record(100, "AdamW", states(1000, 4000, 2, 8000)));
  // Rank 1: the same optimizer's groups grew (add_param_group): its last record counts.
  tb.span(1, record(100, "AdamW", states(1000, 4000, 2, 8000)));
  tb.span(1, record(500, "AdamW", states(1500, 6000, 2, 12000)));
  // Rank 2: two optimizers, AdamW and plain SGD: summed, no single k.
  tb.span(2, record(100, "AdamW", states(1000, 4000, 2, 8000)));
  tb.span(2, record(200, "SGD #2", states(250, 1000, 0, 0)));
  // Rank 3: an optimizer whose states are not known: no line, even beside a known one.
  tb.span(3, record(100, "AdamW", states(1000, 4000, 2, 8000)));
  tb.span(3, record(200, "Adagrad #2", states(250, 1000, -1, -1)));
  // Rank 4: SGD with momentum.
  tb.span(4, record(100, "SGD", states(1000, 4000, 1, 4000)));
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("memory_user_forms")));
  const auto forms = [&](int rank) { return trace::analysis::memoryClosedForms(reader, rank); };

  REQUIRE(forms(0).size() == 1);
  CHECK(forms(0)[0].bytes == 4000 + 4000 + 8000);
  CHECK(forms(0)[0].formula == "P + G + 2P");
  CHECK(forms(0)[0].label.rfind("AdamW: P + G + 2P = 15.6 KiB (P 3.9 KiB, 1,000 parameters", 0) ==
        0);
  REQUIRE(forms(1).size() == 1);
  CHECK(forms(1)[0].bytes == 6000 + 6000 + 12000);
  REQUIRE(forms(2).size() == 1);
  CHECK(forms(2)[0].bytes == (4000 + 1000) * 2 + 8000);
  CHECK(forms(2)[0].formula == "P + G + S");
  CHECK(forms(2)[0].label.rfind("2 optimizers: P + G + S", 0) == 0);
  CHECK(forms(3).empty());
  REQUIRE(forms(4).size() == 1);
  CHECK(forms(4)[0].bytes == 3 * 4000);
  CHECK(forms(4)[0].formula == "P + G + P");
}
