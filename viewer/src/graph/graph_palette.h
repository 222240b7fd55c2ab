// The graph tabs' dark theme (graph_view.cpp): the colours traceview gives tracedot's roles on its
// own dark paper, beside palette.h's other colours (kept apart because only the graph tabs link
// dot/). The call graph's temperature and diff scales stay tracedot's. No logic.
#pragma once

#include "tracerun/dot/theme.h"

namespace tracerun::viewer::palette {

inline dot::Theme graphTheme() {
  dot::Theme t;
  t.paper = {34, 36, 42};
  t.caption = {205, 205, 215};
  t.state_paper = true;
  t.plain = {58, 62, 74};
  t.line = {150, 152, 165};
  t.other = {74, 76, 86};
  t.function = {62, 66, 78};
  t.input = {36, 72, 118};
  t.forward = {44, 88, 136};
  t.backward = {140, 84, 40};
  t.weight_gradient = {180, 104, 28};
  t.transfer = {122, 102, 38};
  t.group = {44, 46, 54};
  t.group_line = {92, 95, 108};
  t.scope = {42, 44, 52};
  t.scope_line = {104, 104, 118};
  const dot::Rgb stages[] = {{34, 50, 70}, {36, 60, 42}, {70, 52, 34},
                             {52, 48, 70}, {66, 62, 30}, {70, 40, 58}};
  for (size_t i = 0; i < 6; ++i) t.stages[i] = stages[i];
  t.call = {175, 175, 188};
  t.hidden_call = {96, 98, 110};
  t.flow = {140, 140, 230};
  t.order = {112, 112, 124};
  t.message = {112, 112, 124};
  t.critical = {255, 84, 84};
  t.column_split = {90, 170, 240};
  t.row_split = {90, 205, 120};
  t.vocab_split = {175, 155, 245};
  t.zero_unit = {255, 132, 52};
  t.recomputed = {112, 76, 30};
  t.recomputed_line = {255, 152, 40};
  return t;
}

}  // namespace tracerun::viewer::palette
