// Memory over time for the viewer's memory view: each device's live bytes by category as a
// replayable series with per-block min/max summaries (any window reduces to pixel columns without
// a scan of every event), what was live at a time, and the ZeRO closed form a trace knows.
// Categories are analyzeMemory's (memory.h); this file classifies nothing and draws nothing.
// Threading: one call uses the reader from the calling thread only; a MemorySeries is immutable
// once built and may be read from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

// The stacking order, bottom first (the report's column order); "other" stays last (on top).
inline constexpr int kStackCount = 7;
inline constexpr core::MemoryCategory kStackOrder[kStackCount] = {
    core::MemoryCategory::kParameter,      core::MemoryCategory::kGradient,
    core::MemoryCategory::kOptimizerState, core::MemoryCategory::kActivation,
    core::MemoryCategory::kTemporary,      core::MemoryCategory::kInput,
    core::MemoryCategory::kOther};
static_assert(kStackCount + 1 == static_cast<int>(core::MemoryCategory::kCount),
              "every category but kUnknown is stacked");
// The position of a category in kStackOrder (kUnknown counts as other).
int stackIndex(core::MemoryCategory c);

// Cumulative live bytes: level k is the bytes of kStackOrder[0..k] (the last level is the total).
using Levels = std::array<int64_t, kStackCount>;

// One device of one rank: every event that changed its live bytes (an allocation, the free of an
// allocation seen, the drop of a block whose free was not recorded), in trace order.
struct MemorySeries {
  static constexpr size_t kBlock = 64;  // events per summary block

  int rank = 0, device_type = 0, device_index = -1;
  std::vector<int64_t> ts;                 // per event, non-decreasing
  std::vector<int64_t> delta;              // signed bytes
  std::vector<uint8_t> stack;              // kStackOrder index of the bytes' category
  std::vector<Levels> block_start;         // levels before block b's first event
  std::vector<Levels> block_lo, block_hi;  // min / max of the levels after each event of block b
  int64_t peak_bytes = 0, peak_ts_ns = 0;  // highest total after an allocation (first such)
  CategoryBytes at_peak{};                 // by core::MemoryCategory at the peak

  size_t size() const { return ts.size(); }
  // The levels after the first i events (i <= size()).
  Levels levelsAfter(size_t i) const;

  struct Column {
    Levels lo{}, hi{};    // over the state carried into the column and the states after its events
    bool events = false;  // whether some event lies in the column
  };
  // Splits [t0, t1) into `columns` equal columns and fills `out` (resized) with each column's
  // min/max levels. Cost: O(columns * (kBlock + blocks per column)), not O(events).
  void reduce(double t0, double t1, size_t columns, std::vector<Column>& out) const;
};

// Builds the series of every device of every rank (rank -1) or one rank, replaying the memory
// events with `analysis`'s categories (analyzeMemory with keep_categories). `cancel` (may be
// null) is polled between ranks; a cancelled build returns what it has.
std::vector<MemorySeries> buildMemorySeries(const TraceReader& reader,
                                            const MemoryAnalysis& analysis, int rank = -1,
                                            const std::atomic<bool>* cancel = nullptr);

// One allocation live at a time.
struct LiveBlock {
  uint64_t ptr = 0;
  int64_t bytes = 0;
  int64_t ts_ns = 0;  // allocated at (age = t - ts_ns)
  int device_type = 0, device_index = -1;
  core::MemoryCategory category = core::MemoryCategory::kOther;  // after classification
  core::StringId op = 0, scope = 0;
  std::string module;  // innermost module scope running on the rank when it was allocated
};

// What was live on `rank` at `t` (allocated at or before t, not freed at or before t), every
// device, largest first (then oldest). `categories`: the rank's entry of
// MemoryAnalysis::categories. The module is looked up for the first `modules` blocks (0: all).
std::vector<LiveBlock> liveAt(const TraceReader& reader, int rank, int64_t t,
                              const std::vector<core::MemoryCategory>& categories,
                              size_t modules = 0);

// A reference line: bytes a rank's parameters + gradients + optimizer states should take.
struct MemoryClosedForm {
  std::string formula;  // "8Ψ + 8Ψ/N"
  std::string label;    // "ZeRO-1 8 psi + 8 psi/N = 400.5 KiB (psi 34,176 parameters, ...)"
  double bytes = 0;
};
// The closed forms the trace knows for `rank`: ZeRO's (Rajbhandari et al. 2020; fp32 AdamW: 16Ψ,
// 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N for stages 0-3; bf16 mixed precision, when the trace names its
// parameters bf16 (memoryDtypes): 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N) when the rank's grad_sync
// phase recorded its ZeRO stage ("zero"), DP size ("dp") and parameter count Ψ ("params": the
// model-parallel rank's, as gpttrain prints it). Empty when any of them is missing. Fine-tuning
// (a "fine_tuning" phase with "frozen" = phi frozen parameters, LoRA / prompt / prefix tuning):
// psi is what trains and the frozen base adds 4 phi (2 phi when bf16): "4Φ + 16Ψ" at ZeRO-0.
// ZeRO-Offload / ZeRO-Infinity (gpttrain --offload-optimizer), seen in `series` (the rank's
// memory series, memorySummary's; without them the states count as on the device): when one of
// the rank's offload devices (type >= 100: nvme, cpu-offload) holds optimizer state and ZeRO is
// 1-3, the line is the rank's own device's, parameters and gradients only (fp32 8Ψ, 4Ψ + 4Ψ/N,
// 8Ψ/N for stages 1-3; bf16 mixed 4Ψ, 2Ψ + 2Ψ/N, 4Ψ/N), and the label names the offload device
// and the 12Ψ/N of fp32 master weights and moments it holds.
// A user program (no grad_sync arguments: Python programs through tracerun's training hooks, C++
// ones through tracerun::tagTraining) that recorded "model_states" phases (vocabulary.h): its
// optimizers' parameters P (bytes), as many gradient bytes G, and their optimizer states, k x P:
// "P + G + 2P" for AdamW / Adam, "P + G + P" for SGD with momentum, "P + G" for plain SGD, labelled
// with the optimizer's class ("AdamW: P + G + 2P = ..."); several optimizers sum (the last record
// of each). Empty when an optimizer's kind is unknown (states -1).
std::vector<MemoryClosedForm> memoryClosedForms(const TraceReader& reader, int rank,
                                                const std::vector<MemorySeries>& series = {});
// The line of an offload device's chart: `offload`, a rank's series on an offload device holding
// optimizer state (as memoryClosedForms sees it), holds 12Ψ/N, the fp32 master weights and AdamW
// moments of the rank's shards. Empty for another series, or when the trace lacks the arguments
// memoryClosedForms reads or ran ZeRO 0.
std::vector<MemoryClosedForm> offloadClosedForms(const TraceReader& reader,
                                                 const MemorySeries& offload);

}  // namespace tracerun::trace::analysis
