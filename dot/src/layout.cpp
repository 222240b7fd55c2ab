// The layout service (see layout.h): neutral Graph -> cgraph (HTML-like labels, escaped) ->
// gvLayout "dot" once -> positions read back from the laid-out graph, renders through gvRenderData.
//
// Sections: formats · building the cgraph · reading positions · LaidOutGraph
#include "tracerun/dot/layout.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "escape.h"

namespace tracerun::dot {

// ---------------------------------------------------------------------------------------------
// formats

Format parseFormat(const std::string& name) {
  if (name == "svg") return Format::kSvg;
  if (name == "png") return Format::kPng;
  if (name == "pdf") return Format::kPdf;
  if (name == "dot" || name == "gv") return Format::kDot;
  if (name == "txt") return Format::kTxt;
  throw LayoutError("unknown output format '" + name + "' (svg, png, pdf, dot or txt)");
}

Format formatOfPath(const std::string& path, Format fallback) {
  const size_t dot = path.rfind('.');
  const size_t slash = path.rfind('/');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return fallback;
  std::string ext = path.substr(dot + 1);
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  try {
    return parseFormat(ext);
  } catch (const LayoutError&) {
    return fallback;
  }
}

namespace {

const char* gvFormat(Format f) {
  switch (f) {
    case Format::kSvg:
      return "svg";
    case Format::kPng:
      return "png";
    case Format::kPdf:
      return "pdf";
    case Format::kDot:
      return "dot";
    case Format::kTxt:
      break;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// building the cgraph

// cgraph's API takes char* everywhere; it copies what it keeps.
char* mut(const char* s) {
  return const_cast<char*>(s);
}

std::string color(Rgb c) {
  return hexColor(c.r, c.g, c.b);
}

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", x);
  return buf;
}

const char* shapeName(NodeShape s) {
  switch (s) {
    case NodeShape::kBox:
      return "box";
    case NodeShape::kRoundedBox:
      return "box";
    case NodeShape::kHexagon:
      return "hexagon";
    case NodeShape::kEllipse:
      return "ellipse";
    case NodeShape::kNote:
      return "note";
    case NodeShape::kPlain:
      return "plaintext";
  }
  return "box";
}

const char* edgeStyle(EdgeStyle s) {
  switch (s) {
    case EdgeStyle::kSolid:
      return "solid";
    case EdgeStyle::kDashed:
      return "dashed";
    case EdgeStyle::kDotted:
      return "dotted";
    case EdgeStyle::kBold:
      return "bold";
  }
  return "solid";
}

// An HTML-like label: the first line bold, the rest left-aligned beneath. Empty text gives "".
std::string htmlLabel(const std::string& text, bool boldFirst) {
  if (text.empty()) return "";
  const size_t nl = text.find('\n');
  std::string first = text.substr(0, nl);
  std::string out = boldFirst ? "<B>" + htmlText(first) + "</B>" : htmlText(first);
  if (nl != std::string::npos) {
    out += "<BR ALIGN=\"LEFT\"/>" + htmlText(text.substr(nl + 1)) + "<BR ALIGN=\"LEFT\"/>";
  }
  return out;
}

void setHtml(Agraph_t* root, void* obj, const char* name, const std::string& html) {
  char* s = agstrdup_html(root, mut(html.c_str()));
  agsafeset(obj, mut(name), s, mut(""));
  agstrfree(root, s);
}

void set(void* obj, const char* name, const std::string& value) {
  agsafeset(obj, mut(name), mut(value.c_str()), mut(""));
}

void validate(const Graph& g, const LayoutOptions& o) {
  if (static_cast<long>(g.nodes.size()) > o.max_nodes) {
    throw LayoutError("the graph has " + std::to_string(g.nodes.size()) +
                      " nodes, more than the layout budget of " + std::to_string(o.max_nodes) +
                      " (raise --max-nodes or the thresholds)");
  }
  const int n = static_cast<int>(g.nodes.size());
  for (const Edge& e : g.edges) {
    if (e.from < 0 || e.from >= n || e.to < 0 || e.to >= n) {
      throw LayoutError("an edge names a node that is not in the graph (builder bug)");
    }
  }
  for (size_t i = 0; i < g.clusters.size(); ++i) {
    const int p = g.clusters[i].parent;
    if (p >= static_cast<int>(i)) {
      throw LayoutError("a cluster's parent must come before it (builder bug)");
    }
  }
  for (const Node& node : g.nodes) {
    if (node.cluster >= static_cast<int>(g.clusters.size())) {
      throw LayoutError("a node names a cluster that is not in the graph (builder bug)");
    }
  }
}

// Object ids in creation order. cgraph's default discipline makes a named object's id the
// address of its interned name, and keeps subgraphs ordered by id, so clusters were laid out and
// written in an order that depended on memory addresses (a different output path could reorder
// them). Here a name gets the next even id the first time it is seen (anonymous objects keep odd
// ids, as in cgraph), so the order is the builder's.
struct NameIds {
  Agraph_t* graph = nullptr;  // names are interned in its string dictionary
  std::map<std::string, IDTYPE> ids;
  std::map<IDTYPE, char*> names;  // cgraph's own strings: agwrite reads their HTML flag
  IDTYPE named = 0, anonymous = 1;
};

// The state is owned by cgraph between open and close (idClose frees it); the interned names go
// with the graph's string dictionary at agclose.
void* idOpen(Agraph_t* g, Agdisc_t*) {
  return new NameIds{g, {}, {}, 0, 1};
}
long idMap(void* state, int, char* str, IDTYPE* id, int create) {
  auto* s = static_cast<NameIds*>(state);
  if (str == nullptr) {
    *id = s->anonymous;
    s->anonymous += 2;
    return 1;
  }
  auto it = s->ids.find(str);
  if (it == s->ids.end()) {
    if (!create) return 0;
    s->named += 2;
    it = s->ids.emplace(str, s->named).first;
    s->names.emplace(s->named, agstrdup(s->graph, str));
  }
  *id = it->second;
  return 1;
}
long idAlloc(void*, int, IDTYPE) {
  return 0;
}
void idFree(void*, int, IDTYPE) {}
char* idPrint(void* state, int, IDTYPE id) {
  auto* s = static_cast<NameIds*>(state);
  auto it = s->names.find(id);
  return it == s->names.end() ? nullptr : it->second;
}
void idClose(void* state) {
  std::unique_ptr<NameIds>(static_cast<NameIds*>(state));
}
void idRegister(void*, int, void*) {}

// Graphviz's process-wide state (plugin registry, attribute dictionaries, its error buffer) is
// touched by gvContext, gvLayout, gvRender*, gvFreeLayout, agclose and gvFreeContext: every call
// into it from this file holds this one lock, so callers on any thread need none of their own.
std::mutex& graphvizLock() {
  static std::mutex lock;
  return lock;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// LaidOutGraph

struct LaidOutGraph::Impl {
  GVC_t* gvc = nullptr;
  Agraph_t* root = nullptr;
  // The id discipline (NameIds) and the discipline set naming it; they outlive the graph.
  Agiddisc_t idDisc{idOpen, idMap, idAlloc, idFree, idPrint, idClose, idRegister};
  Agdisc_t disc{&AgMemDisc, &idDisc, &AgIoDisc};
  bool laidOut = false;
  std::vector<Agnode_t*> nodes;
  std::vector<Agedge_t*> edges;
  std::vector<Agraph_t*> clusters;
  Layout layout;

  Impl() : gvc(gvContext()) {}  // constructed under graphvizLock()
  ~Impl() {
    const std::lock_guard<std::mutex> lock(graphvizLock());
    if (gvc && root && laidOut) gvFreeLayout(gvc, root);
    if (root) agclose(root);
    if (gvc) gvFreeContext(gvc);
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  void build(const Graph& g, const LayoutOptions& o);
  void placeLabels();
  void readPositions();
};

namespace {

struct Box {
  double x0, y0, x1, y1;  // Graphviz's points, y up
  bool meets(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

Box boxAround(pointf c, double w, double h) {
  return {c.x - w / 2, c.y - h / 2, c.x + w / 2, c.y + h / 2};
}

pointf bezierAt(const bezier& bz, int piece, double t) {
  const pointf* p = bz.list + 3 * piece;
  const double u = 1 - t;
  return {
      u * u * u * p[0].x + 3 * u * u * t * p[1].x + 3 * u * t * t * p[2].x + t * t * t * p[3].x,
      u * u * u * p[0].y + 3 * u * u * t * p[1].y + 3 * u * t * t * p[2].y + t * t * t * p[3].y};
}

// Where an edge label may go: beside points along its route, nearest the route's middle first.
std::vector<pointf> labelCandidates(const splines* spl, double w, double h) {
  std::vector<pointf> along;
  for (int i = 0; spl && i < spl->size; ++i) {
    const bezier& bz = spl->list[i];
    for (int piece = 0; 3 * piece + 3 < bz.size; ++piece) {
      for (int k = 0; k < 8; ++k) along.push_back(bezierAt(bz, piece, k / 8.0));
    }
  }
  const double gap = 2;
  std::vector<pointf> out;
  const size_t mid = along.size() / 2;
  for (size_t d = 0; d <= mid + 1; ++d) {
    for (const size_t i : {mid + d, mid - d}) {
      if (i >= along.size() || (d == 0 && i != mid) || (d > mid && i == mid - d)) continue;
      const pointf p = along[i];
      for (int k = 0; k < 6; ++k) {  // beside the route, then further out (past a node)
        const double dx = w / 2 + gap + k * h, dy = h / 2 + gap + k * h;
        for (const pointf off : {pointf{0, dy}, pointf{0, -dy}, pointf{dx, 0}, pointf{-dx, 0}})
          out.push_back({p.x + off.x, p.y + off.y});
      }
    }
  }
  return out;
}

}  // namespace

// Graphviz places external edge labels (xlabels) clear of nodes but not of cluster titles, and
// with rankdir=LR not always clear of nodes either: a label that meets a node, a cluster title or
// an earlier label moves to the nearest free spot beside its own route, inside the drawing.
void LaidOutGraph::Impl::placeLabels() {
  std::vector<Box> taken;
  for (Agnode_t* n : nodes)
    taken.push_back(boxAround(ND_coord(n), ND_width(n) * 72.0, ND_height(n) * 72.0));
  for (Agraph_t* sg : clusters) {
    if (const textlabel_t* l = GD_label(sg); l && l->set)
      taken.push_back(boxAround(l->pos, l->dimen.x, l->dimen.y));
  }
  const boxf bb = GD_bb(root);
  const Box inside{bb.LL.x, bb.LL.y, bb.UR.x, bb.UR.y};
  auto free = [&](const Box& b) {
    if (b.x0 < inside.x0 || b.y0 < inside.y0 || b.x1 > inside.x1 || b.y1 > inside.y1) return false;
    return std::none_of(taken.begin(), taken.end(), [&](const Box& t) { return t.meets(b); });
  };
  for (Agedge_t* e : edges) {
    textlabel_t* l = ED_xlabel(e);
    if (!l || !l->set) continue;
    const double w = l->dimen.x, h = l->dimen.y;
    if (!free(boxAround(l->pos, w, h))) {
      for (const pointf c : labelCandidates(ED_spl(e), w, h)) {
        if (free(boxAround(c, w, h))) {
          l->pos = c;
          break;
        }
      }
    }
    taken.push_back(boxAround(l->pos, w, h));
  }
}

void LaidOutGraph::Impl::build(const Graph& g, const LayoutOptions& o) {
  root = agopen(mut("tracedot"), Agdirected, &disc);
  if (!root) throw LayoutError("Graphviz could not create a graph");
  const bool large = static_cast<long>(g.nodes.size()) >= o.large_nodes;
  set(root, "rankdir", g.direction == Direction::kLeftToRight ? "LR" : "TB");
  set(root, "charset", "UTF-8");
  set(root, "fontname", "DejaVu Sans");
  set(root, "fontsize", "12");
  set(root, "labelloc", "t");
  set(root, "labeljust", "l");
  set(root, "splines", "spline");  // never ortho
  set(root, "nodesep", "0.25");
  set(root, "ranksep", "0.4");
  if (large) {
    set(root, "nslimit", "2");
    set(root, "nslimit1", "2");
    set(root, "mclimit", "0.3");
    set(root, "searchsize", "10");
    set(root, "remincross", "false");
    set(root, "newrank", "true");
  }
  std::string caption = g.title.empty() ? "" : "<B>" + htmlText(g.title, false) + "</B>";
  if (!g.caption.empty()) {
    caption += (caption.empty() ? "" : "<BR ALIGN=\"LEFT\"/>") + htmlText(g.caption) +
               "<BR ALIGN=\"LEFT\"/>";
  }
  if (!caption.empty()) setHtml(root, root, "label", caption);
  const Theme& theme = o.theme;
  if (theme.state_paper) set(root, "bgcolor", color(theme.paper));
  if (theme.caption != Rgb{0, 0, 0}) set(root, "fontcolor", color(theme.caption));

  // Defaults declared once, so every object carries the attribute.
  agattr(root, AGNODE, mut("fontname"), mut("DejaVu Sans"));
  agattr(root, AGNODE, mut("fontsize"), mut("10"));
  agattr(root, AGEDGE, mut("fontname"), mut("DejaVu Sans"));
  agattr(root, AGEDGE, mut("fontsize"), mut("9"));

  clusters.reserve(g.clusters.size());
  for (size_t i = 0; i < g.clusters.size(); ++i) {
    const Cluster& c = g.clusters[i];
    Agraph_t* parent = c.parent < 0 ? root : clusters[static_cast<size_t>(c.parent)];
    const std::string name = "cluster_" + std::to_string(i);
    Agraph_t* sg = agsubg(parent, mut(name.c_str()), 1);
    set(sg, "id", attributeText(c.id, true));
    set(sg, "style", "filled,rounded");
    const Paint paint = clusterPaint(theme, c);
    set(sg, "fillcolor", color(paint.fill));
    set(sg, "color", color(paint.line));
    if (theme.state_paper) set(sg, "fontcolor", color(paint.ink));
    if (!c.label.empty()) setHtml(root, sg, "label", htmlLabel(c.label, true));
    if (!c.tooltip.empty()) set(sg, "tooltip", attributeText(c.tooltip));
    clusters.push_back(sg);
  }

  nodes.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    Agraph_t* owner = n.cluster < 0 ? root : clusters[static_cast<size_t>(n.cluster)];
    const std::string name = "n" + std::to_string(i);
    Agnode_t* an = agnode(owner, mut(name.c_str()), 1);
    set(an, "id", attributeText(n.id, true));
    set(an, "shape", shapeName(n.shape));
    set(an, "style", n.shape == NodeShape::kRoundedBox ? "filled,rounded" : "filled");
    const Paint paint = nodePaint(theme, n);
    set(an, "fillcolor", color(paint.fill));
    set(an, "fontcolor", color(paint.ink));
    set(an, "color", color(paint.line));
    if (n.penwidth != 1.0) set(an, "penwidth", number(n.penwidth));
    if (n.fold > 1) set(an, "peripheries", "2");
    setHtml(root, an, "label", htmlLabel(n.label, n.shape != NodeShape::kPlain));
    set(an, "tooltip", attributeText(n.tooltip.empty() ? n.label : n.tooltip));
    nodes.push_back(an);
  }

  edges.reserve(g.edges.size());
  for (const Edge& e : g.edges) {
    Agedge_t* ae = agedge(root, nodes[static_cast<size_t>(e.from)],
                          nodes[static_cast<size_t>(e.to)], nullptr, 1);
    if (e.style != EdgeStyle::kSolid) set(ae, "style", edgeStyle(e.style));
    set(ae, "color", color(edgeColour(theme, e)));
    if (theme.state_paper) set(ae, "fontcolor", color(theme.caption));
    if (e.penwidth != 1.0) set(ae, "penwidth", number(e.penwidth));
    if (!e.constraint) set(ae, "constraint", "false");
    // xlabel, not label: 2.42's flat_edges reallocates the rank array for a labelled edge
    // between nodes of one rank and gvFreeLayout then frees a stale pointer (valgrind: invalid
    // free in dot_layout's flat_edges); external labels are placed after layout, without it.
    if (!e.label.empty()) setHtml(root, ae, "xlabel", htmlText(e.label));
    if (!e.tooltip.empty()) set(ae, "tooltip", attributeText(e.tooltip));
    edges.push_back(ae);
  }
  layout.limited = large;
}

void LaidOutGraph::Impl::readPositions() {
  const boxf bb = GD_bb(root);
  const double top = bb.UR.y;
  const auto flip = [&](pointf p) { return Point{p.x - bb.LL.x, top - p.y}; };
  layout.width = bb.UR.x - bb.LL.x;
  layout.height = bb.UR.y - bb.LL.y;
  layout.nodes.clear();
  for (Agnode_t* n : nodes) {
    NodeBox b;
    b.center = flip(ND_coord(n));
    b.width = ND_width(n) * 72.0;
    b.height = ND_height(n) * 72.0;
    layout.nodes.push_back(b);
  }
  layout.edges.clear();
  for (Agedge_t* e : edges) {
    EdgeRoute r;
    if (const splines* spl = ED_spl(e)) {
      for (int i = 0; i < spl->size; ++i) {
        const bezier& bz = spl->list[i];
        std::vector<Point> pts;
        pts.reserve(static_cast<size_t>(bz.size));
        for (int k = 0; k < bz.size; ++k) pts.push_back(flip(bz.list[k]));
        r.beziers.push_back(std::move(pts));
        if (bz.eflag) {
          r.has_head_arrow = true;
          r.head_arrow = flip(bz.ep);
        }
        if (bz.sflag) {
          r.has_tail_arrow = true;
          r.tail_arrow = flip(bz.sp);
        }
      }
    }
    if (const textlabel_t* l = ED_xlabel(e); l && l->set) {
      r.has_label = true;
      r.label = flip(l->pos);
      r.label_width = l->dimen.x;
      r.label_height = l->dimen.y;
    }
    layout.edges.push_back(std::move(r));
  }
  layout.clusters.clear();
  for (Agraph_t* sg : clusters) {
    ClusterBox c;
    const boxf cb = GD_bb(sg);
    c.min = flip({cb.LL.x, cb.UR.y});
    c.max = flip({cb.UR.x, cb.LL.y});
    if (const textlabel_t* l = GD_label(sg); l && l->set) {
      c.has_label = true;
      c.label = flip(l->pos);
      c.label_width = l->dimen.x;
      c.label_height = l->dimen.y;
    }
    layout.clusters.push_back(c);
  }
}

LaidOutGraph::LaidOutGraph(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LaidOutGraph::~LaidOutGraph() = default;
LaidOutGraph::LaidOutGraph(LaidOutGraph&&) noexcept = default;
LaidOutGraph& LaidOutGraph::operator=(LaidOutGraph&&) noexcept = default;

LaidOutGraph LaidOutGraph::layout(const Graph& graph, const LayoutOptions& options) {
  validate(graph, options);
  std::unique_ptr<Impl> impl;  // destroyed (taking the lock itself) after the lock below is let go
  {
    const std::lock_guard<std::mutex> lock(graphvizLock());
    agseterr(AGMAX);  // no warnings on stderr: failures are reported by return codes below
    impl = std::make_unique<Impl>();
    if (!impl->gvc) throw LayoutError("Graphviz could not start (gvContext failed)");
    impl->build(graph, options);
    if (gvLayout(impl->gvc, impl->root, "dot") != 0) {
      const char* why = aglasterr();
      throw LayoutError(std::string("Graphviz could not lay the graph out") +
                        (why ? std::string(": ") + why : std::string()));
    }
    impl->laidOut = true;
    impl->placeLabels();
    impl->readPositions();
  }
  return LaidOutGraph(std::move(impl));
}

const Layout& LaidOutGraph::positions() const {
  return impl_->layout;
}

std::string LaidOutGraph::render(Format format) const {
  const char* name = gvFormat(format);
  if (!name) throw LayoutError("txt is not a Graphviz format (use renderText)");
  char* data = nullptr;
  unsigned int length = 0;
  const std::lock_guard<std::mutex> lock(graphvizLock());
  if (gvRenderData(impl_->gvc, impl_->root, name, &data, &length) != 0 || !data) {
    if (data) gvFreeRenderData(data);
    throw LayoutError(std::string("Graphviz could not render ") + name +
                      " (is its plugin installed? libgvc6 has svg and dot; png and pdf need "
                      "libgvc6's cairo plugin)");
  }
  std::string out(data, length);
  gvFreeRenderData(data);
  if (format == Format::kPdf) {
    // cairo 1.16 stamps the current time (and ignores SOURCE_DATE_EPOCH): overwrite it in place
    // with the same number of bytes, so the xref offsets stay right and the output is the same
    // for the same trace.
    const std::string key = "/CreationDate (D:";
    const size_t at = out.find(key);
    if (at != std::string::npos) {
      for (size_t i = at + key.size();
           i < out.size() && std::isdigit(static_cast<unsigned char>(out[i])); ++i) {
        out[i] = '0';
      }
    }
  }
  return out;
}

}  // namespace tracerun::dot
