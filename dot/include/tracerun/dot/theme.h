// Themes: the colours a renderer gives a neutral Graph's elements from their roles, accents and
// numbers (graph.h), applied at output as gprof2dot's Theme is — the SVG/PNG writer uses the light
// theme, traceview its own dark one (viewer/src/graph_palette.h). Pure functions over plain data;
// no graph building, no drawing, no state.
#pragma once

#include "tracerun/dot/graph.h"

namespace tracerun::dot {

// Fill, text and line colours of one node or cluster (clusters use fill and line).
struct Paint {
  Rgb fill, ink, line;
};

struct Theme {
  Rgb paper{255, 255, 255};  // the background
  Rgb caption{0, 0, 0};      // the graph's title and caption text, edge labels
  bool state_paper = false;  // the Graphviz output names its background (bgcolor)
  // Nodes by role (the call graph's roles take the temperature / diverging scales instead).
  Rgb plain{255, 255, 255};  // kNone and kModule
  Rgb line{0, 0, 0};         // node borders without an accent
  Rgb other{224, 224, 224};
  Rgb function{238, 238, 238};
  Rgb input{204, 229, 255};
  Rgb forward{198, 219, 239};
  Rgb backward{253, 208, 162};
  Rgb weight_gradient{230, 145, 56};  // zb-h1's W: darker than a B, so deferred W's stand apart
  Rgb transfer{255, 236, 179};
  // Clusters: kGroup, kScope, kStage (tints cycled by Cluster::index).
  Rgb group{245, 245, 245}, group_line{170, 170, 170};
  Rgb scope{250, 250, 250}, scope_line{150, 150, 150};
  Rgb stages[6] = {{222, 235, 247}, {229, 245, 224}, {254, 230, 206},
                   {239, 237, 245}, {255, 247, 188}, {253, 224, 239}};
  // Edges by role.
  Rgb call{0, 0, 0}, hidden_call{170, 170, 170}, flow{96, 96, 160}, order{150, 150, 150},
      message{150, 150, 150};
  // Accents.
  Rgb critical{204, 0, 0};
  Rgb column_split{49, 130, 189}, row_split{49, 163, 84}, vocab_split{117, 107, 177};
  Rgb zero_unit{230, 85, 13};
  Rgb recomputed{255, 224, 178}, recomputed_line{230, 120, 0};

  // tracedot's colours (what SVG, PNG and PDF output use).
  static Theme light() { return Theme{}; }
};

Paint nodePaint(const Theme& theme, const Node& node);
Paint clusterPaint(const Theme& theme, const Cluster& cluster);
Rgb edgeColour(const Theme& theme, const Edge& edge);

}  // namespace tracerun::dot
