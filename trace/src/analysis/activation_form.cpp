// The activation closed form (see activation_form.h): reads gpttrain's activation_shape and
// activation_layout phases and builds the memory view's reference lines. Not the measured bytes
// (memory.cpp) and not the drawing (viewer/src/views/memory_view.cpp).
#include "tracerun/trace/analysis/activation_form.h"

#include <array>
#include <string>

#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/format.h"

namespace tracerun::trace::analysis {

namespace {

// The arguments of the rank's first phase span named `phase` (-1 where absent); nothing when the
// rank has no such span.
template <size_t N>
std::optional<std::array<int64_t, N>> phaseArgs(const TraceReader& reader, int rank,
                                                const char* phase,
                                                const std::array<const char*, N>& keys) {
  const core::StringId name = NameCodes::find(reader, phase);
  if (name == 0) return std::nullopt;
  std::array<core::StringId, N> ids{};
  for (size_t i = 0; i < N; ++i) ids[i] = NameCodes::find(reader, keys[i]);
  for (const TrackRow& tr : reader.tracks()) {
    if (tr.rank != rank || tr.kind != core::TrackKind::kThread) continue;
    const auto picked = pickSpans(reader, tr, [&](const SpanRow& s) {
      return s.category == core::Category::kPhase && s.name == name ? 1 : 0;
    });
    if (picked.empty()) continue;
    std::array<int64_t, N> out{};
    for (size_t i = 0; i < N; ++i) out[i] = ids[i] == 0 ? -1 : picked.front().arg(ids[i], -1);
    return out;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ActivationShape> activationShape(const TraceReader& reader, int rank) {
  namespace arg = vocab::arg;
  const auto shape = phaseArgs<4>(reader, rank, vocab::phase::kActivationShape,
                                  {arg::kSeqLen, arg::kMicroBatch, arg::kHidden, arg::kHeads});
  const auto layout = phaseArgs<4>(reader, rank, vocab::phase::kActivationLayout,
                                   {arg::kAttention, arg::kLayers, arg::kTp, arg::kSp});
  if (!shape || !layout) return std::nullopt;
  ActivationShape a;
  a.s = (*shape)[0];
  a.b = (*shape)[1];
  a.h = (*shape)[2];
  a.a = (*shape)[3];
  a.flash = (*layout)[0] == 1;
  a.layers = (*layout)[1];
  a.t = (*layout)[2];
  a.sp = (*layout)[3] == 1;
  const bool known = (*layout)[0] == 0 || (*layout)[0] == 1;
  if (!known || a.s <= 0 || a.b <= 0 || a.h <= 0 || a.a <= 0 || a.layers <= 0 || a.t <= 0) {
    return std::nullopt;  // a damaged or foreign annotation: no line rather than a wrong one
  }
  return a;
}

double activationBytesPerLayer(const ActivationShape& z, bool flash) {
  const double s = double(z.s), b = double(z.b), h = double(z.h), a = double(z.a), t = double(z.t);
  const double sbh = s * b * h, sb = s * b, x = flash ? a * s * b : a * s * s * b;
  if (z.sp) return 4 * (16 * sbh + x + 4 * sb) / t;
  return 4 * (4 * sbh + 12 * sbh / t + x / t + 4 * sb);
}

double attentionMatrixBytesPerLayer(const ActivationShape& z) {
  const double s = double(z.s), b = double(z.b), a = double(z.a);
  return 4 * (a * s * s * b - a * s * b) / double(z.t);
}

std::vector<MemoryClosedForm> activationClosedForms(
    const TraceReader& reader, int rank, const std::vector<MemoryClosedForm>& model_states) {
  const auto z = activationShape(reader, rank);
  if (!z) return {};
  const double base = model_states.empty() ? 0 : model_states.front().bytes;
  const std::string states = model_states.empty() ? "" : "model states + ";
  const double layers = double(z->layers);
  const double own = layers * activationBytesPerLayer(*z, z->flash);
  const double matrix = layers * attentionMatrixBytesPerLayer(*z);
  // The per-layer formula as docs/trainer.md writes it (X: the attention term).
  const std::string x = z->flash ? "a s b" : "a s^2 b";
  std::string perLayer;
  if (z->sp) {
    perLayer = "4(16 sbh + " + x + " + 4 sb)/t";
  } else if (z->t > 1) {
    perLayer = "4(4 sbh + 12 sbh/t + " + x + "/t + 4 sb)";
  } else {
    perLayer = "4(16 sbh + " + x + " + 4 sb)";
  }
  const std::string dims = "s " + formatCount(z->s) + ", b " + formatCount(z->b) + ", h " +
                           formatCount(z->h) + ", a " + formatCount(z->a) + ", L " +
                           formatCount(z->layers) +
                           (z->t > 1 ? ", t " + formatCount(z->t) + (z->sp ? " + SP" : "") : "");
  MemoryClosedForm mine;
  mine.formula =
      (model_states.empty() ? "" : model_states.front().formula + " + ") + "L·" + perLayer;
  mine.bytes = base + own;
  mine.label = states + "activations (" + (z->flash ? "flash" : "standard") + " attention) L x " +
               perLayer + " = " + formatBytes(mine.bytes) + " (activations " + formatBytes(own) +
               "; " + dims + ")";
  MemoryClosedForm other;
  const std::string diff = z->t > 1 ? "4(a s^2 b - a s b)/t" : "4(a s^2 b - a s b)";
  other.formula = "L·" + diff;
  if (z->flash) {
    other.bytes = mine.bytes + matrix;
    other.label = "standard attention would keep L x " + diff + " = " + formatBytes(matrix) +
                  " more: the a s^2 b attention matrix (" + formatBytes(other.bytes) + ")";
  } else {
    other.bytes = mine.bytes - matrix;
    other.label = "flash would keep L x " + diff + " = " + formatBytes(matrix) +
                  " less: no a s^2 b attention matrix (" + formatBytes(other.bytes) + ")";
  }
  return {mine, other};
}

}  // namespace tracerun::trace::analysis
