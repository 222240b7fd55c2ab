// Module labels, tooltips, accents and the model caption (see model_labels.h).
#include "model_labels.h"

#include <algorithm>

#include "tracerun/trace/format.h"

namespace tracerun::dot::model_labels {

using trace::analysis::ModelTree;
using trace::analysis::ModuleNode;
using trace::analysis::TpSplit;

std::string grouped(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

namespace {

std::string count(int64_t n) {
  return n < 0 ? std::string("?") : grouped(n);
}

const ModuleNode& mod(const ModelTree& t, int m) {
  return t.modules[static_cast<size_t>(m)];
}

std::string layoutLine(const ModelTree& t, const std::vector<int>& run, bool sharded) {
  const ModuleNode& m = mod(t, run.front());
  std::string layout;
  if (m.tp_split != TpSplit::kNone && sharded) {  // a TP-capable layer on TP 1 is not split
    layout += std::string("TP ") + trace::analysis::tpSplitName(m.tp_split) +
              "-parallel, weight dim " + std::to_string(m.tp_dim);
  }
  if (sharded) {
    if (!layout.empty()) layout += ", ";
    layout += "TP shard " + std::to_string(m.shard) + " of " +
              std::to_string(std::max(m.tp_shards, m.shard + 1));
  }
  if (m.zero_unit >= 0) {
    if (!layout.empty()) layout += ", ";
    layout += run.size() > 1 ? "ZeRO-3 units " + std::to_string(m.zero_unit) + "\u2026" +
                                   std::to_string(mod(t, run.back()).zero_unit)
                             : "ZeRO-3 unit " + std::to_string(m.zero_unit);
  }
  return layout;
}

}  // namespace

std::string labelOf(const ModelTree& t, const std::vector<int>& run,
                    const std::string& first_line) {
  const ModuleNode& m = mod(t, run.front());
  const size_t n = run.size();
  std::string label =
      !first_line.empty() ? first_line
      : n > 1 ? "\u00d7" + std::to_string(n) + " " + m.path + " \u2026 " + mod(t, run.back()).path
              : m.path;
  label += "\n" + m.type;
  const bool sharded = m.shard >= 0 || m.tp_shards > 1;
  std::string params = "params " + count(m.params_logical);
  if (sharded || m.params_logical != m.params_local) {
    params += " logical, " + count(m.params_local) + " on rank " + std::to_string(m.rank);
  }
  if (m.param_bytes >= 0) params += " \u00b7 " + trace::formatBytes(double(m.param_bytes));
  if (m.params_trainable >= 0) params += " \u00b7 trainable " + grouped(m.params_trainable);
  if (n > 1 && m.params_logical >= 0)
    params +=
        " (each; \u00d7" + std::to_string(n) + ": " + grouped(m.params_logical * int64_t(n)) + ")";
  label += "\n" + params;
  const std::string layout = layoutLine(t, run, sharded);
  if (!layout.empty()) label += "\n" + layout;
  return label;
}

std::string tooltipOf(const ModelTree& t, const std::vector<int>& run) {
  const ModuleNode& m = mod(t, run.front());
  std::string tip = m.path + ": " + m.type;
  if (!m.inputs.empty()) tip += "\nin: " + m.inputs;
  if (!m.inputs_global.empty()) tip += " (global " + m.inputs_global + ")";
  if (!m.outputs.empty()) tip += "\nout: " + m.outputs;
  tip += "\ncalls " + std::to_string(m.calls) + ", rank " + std::to_string(m.rank);
  if (m.stage >= 0) tip += ", stage " + std::to_string(m.stage);
  if (m.chunk >= 0) tip += ", chunk " + std::to_string(m.chunk);
  if (run.size() > 1) {
    tip += "\nfolded:";
    for (int r : run) tip += " " + mod(t, r).path;
  }
  return tip;
}

Accent accentOf(const ModuleNode& m) {
  const Accent unit = m.zero_unit >= 0 ? Accent::kZeroUnit : Accent::kNone;
  if (m.shard < 0 && m.tp_shards <= 1) return unit;
  switch (m.tp_split) {
    case TpSplit::kColumn:
      return Accent::kColumnSplit;
    case TpSplit::kRow:
      return Accent::kRowSplit;
    case TpSplit::kVocab:
      return Accent::kVocabSplit;
    default:
      return unit;
  }
}

std::string captionOf(const ModelTree& t, int depth) {
  int tp = 1;
  bool zero3 = false;
  for (const ModuleNode& m : t.modules) {
    tp = std::max({tp, m.tp_shards, m.shard + 1});
    zero3 = zero3 || m.zero_unit >= 0;
  }
  std::string ranks;
  for (int r : t.ranks) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  std::string lines = "params " + grouped(t.logicalParams()) + " logical (" +
                      std::to_string(t.roots.size()) + " top-level module" +
                      (t.roots.size() == 1 ? "" : "s") + ", " + std::to_string(t.modules.size()) +
                      " modules)";
  if (const int64_t trainable = t.trainableParams(); trainable >= 0) {
    lines += "\ntrainable " + grouped(trainable) + " of " + grouped(t.logicalParams()) +
             " (fine-tuning: the rest is frozen)";
  }
  std::string layout;
  if (t.stages > 1) layout += "PP " + std::to_string(t.stages) + " stages";
  if (tp > 1) layout += std::string(layout.empty() ? "" : ", ") + "TP " + std::to_string(tp);
  if (t.dp > 1) layout += std::string(layout.empty() ? "" : ", ") + "DP " + std::to_string(t.dp);
  if (zero3) layout += std::string(layout.empty() ? "" : ", ") + "ZeRO-3 units (orange)";
  if (!layout.empty()) lines += "\nlayout: " + layout;
  lines += "\nread from rank" + std::string(t.ranks.size() == 1 ? " " : "s ") + ranks;
  if (depth >= 0) lines += ", depth " + std::to_string(depth);
  return lines;
}

}  // namespace tracerun::dot::model_labels
