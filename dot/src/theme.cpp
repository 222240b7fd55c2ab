// Themes (see theme.h): role + accent + numbers -> colours. Not the scales themselves (palette.cpp)
// and not the graph's building.
#include "tracerun/dot/theme.h"

#include <cmath>
#include <iterator>

#include "tracerun/dot/palette.h"

namespace tracerun::dot {

namespace {

bool measured(Role r) {
  return r == Role::kRoot || r == Role::kOp || r == Role::kScope || r == Role::kComm;
}

// The call graph's scales are the same in every theme: they are the picture's data.
Rgb measuredFill(const Metrics& m) {
  return !std::isnan(m.change) ? palette::diverging(m.change)
                               : palette::temperature(std::isnan(m.heat) ? 0.0 : m.heat);
}

Rgb roleFill(const Theme& t, const Node& n) {
  if (measured(n.role)) return measuredFill(n.metrics);
  switch (n.role) {
    case Role::kOther:
      return t.other;
    case Role::kFunction:
      return t.function;
    case Role::kInput:
      return t.input;
    case Role::kForward:
      return t.forward;
    case Role::kBackward:
      return t.backward;
    case Role::kWeightGradient:
      return t.weight_gradient;
    case Role::kTransfer:
      return t.transfer;
    default:
      return t.plain;
  }
}

// The accent's line colour; `fallback` when the element has none.
Rgb accentLine(const Theme& t, Accent a, Rgb fallback) {
  switch (a) {
    case Accent::kCritical:
      return t.critical;
    case Accent::kColumnSplit:
      return t.column_split;
    case Accent::kRowSplit:
      return t.row_split;
    case Accent::kVocabSplit:
      return t.vocab_split;
    case Accent::kZeroUnit:
      return t.zero_unit;
    case Accent::kRecomputed:
      return t.recomputed_line;
    case Accent::kNone:
      break;
  }
  return fallback;
}

}  // namespace

Paint nodePaint(const Theme& t, const Node& n) {
  Paint p;
  p.fill = n.accent == Accent::kRecomputed ? t.recomputed : roleFill(t, n);
  p.ink = palette::textOn(p.fill);
  p.line = accentLine(t, n.accent, t.line);
  return p;
}

Paint clusterPaint(const Theme& t, const Cluster& c) {
  Paint p;
  switch (c.role) {
    case Role::kGroup:
      p.fill = t.group;
      p.line = t.group_line;
      break;
    case Role::kScope:
      p.fill = t.scope;
      p.line = t.scope_line;
      break;
    case Role::kStage:
      p.fill = t.stages[static_cast<size_t>(c.index < 0 ? 0 : c.index) % std::size(t.stages)];
      p.line = t.group_line;
      break;
    default:
      p.fill = t.plain;
      p.line = t.line;
      break;
  }
  p.ink = palette::textOn(p.fill);
  p.line = accentLine(t, c.accent, p.line);
  return p;
}

Rgb edgeColour(const Theme& t, const Edge& e) {
  Rgb c = t.call;
  switch (e.role) {
    case Role::kHiddenCall:
      c = t.hidden_call;
      break;
    case Role::kFlow:
      c = t.flow;
      break;
    case Role::kOrder:
      c = t.order;
      break;
    case Role::kMessage:
      c = t.message;
      break;
    default:
      break;
  }
  return accentLine(t, e.accent, c);
}

}  // namespace tracerun::dot
