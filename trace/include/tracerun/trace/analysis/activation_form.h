// The activation closed form a gpttrain trace knows (docs/trainer.md, "Activation memory" and
// "Flash attention"): the per-layer fp32 activation bytes of the attention kind the run used, the
// a s^2 b attention matrix that flash does not keep, and the memory view's reference lines built
// on them. The one place that arithmetic lives: the viewer draws these lines, tests compare them.
// Not a measurement (memory.h reads the bytes a run really kept) and not drawing.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

// What gpttrain's activation_shape and activation_layout phases record (core/vocabulary.h).
struct ActivationShape {
  int64_t s = 0, b = 0, h = 0, a = 0;  // sequence length, micro-batch, hidden, heads (all ranks')
  int64_t layers = 0;                  // transformer layers on the rank
  int64_t t = 1;                       // tensor-parallel ranks
  bool sp = false, flash = false;
};

// The rank's shape, or nothing when the trace does not record one (another program, or a gpttrain
// run the closed form does not cover: pipeline, recomputation, dropout, bf16, fine-tuning).
std::optional<ActivationShape> activationShape(const TraceReader& reader, int rank);

// Bytes one layer keeps for backward, fp32, dropout 0, with X = a s^2 b (standard) or a s b
// (flash, the log-sum-exp): one process 4(16sbh + X + 4sb); TP 4(4sbh + 12sbh/t + X/t + 4sb);
// TP + SP 4(16sbh + X + 4sb)/t. `flash` overrides the shape's own attention kind.
double activationBytesPerLayer(const ActivationShape& shape, bool flash);
// What flash saves per layer against standard: 4(a s^2 b - a s b)/t.
double attentionMatrixBytesPerLayer(const ActivationShape& shape);

// The memory view's activation lines for `rank`, on top of `model_states` (memoryClosedForms'
// line; 0 bytes when there is none): model states + L x the layer's activations of the attention
// kind the run used, and the other kind's line (standard: "flash would keep ... less"; flash:
// "standard would add ... : the a s^2 b attention matrix"). Empty without an ActivationShape.
std::vector<MemoryClosedForm> activationClosedForms(
    const TraceReader& reader, int rank, const std::vector<MemoryClosedForm>& model_states);

}  // namespace tracerun::trace::analysis
