// The call graph and model tabs (see graph_view.h): a GraphScene from a BackgroundQuery, drawn with
// ImGui's draw list in Graphviz's coordinates (points) under a pan/zoom transform; clusters, edges
// (cubic Béziers with arrowheads), nodes with their labels; hover, click to select, ×N folds
// expanded by a click (a new layout on the background thread). It opens at a scale where names read
// (the whole picture only when that is readable), with an overview of the whole picture in the
// bottom-right corner whenever the tab shows only part of it.
//
// Sections: the view · transform and input · drawing · overview · dump
#include "graph/graph_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "app/palette.h"
#include "data/background_query.h"
#include "graph/graph_palette.h"
#include "graph/graph_scene.h"

namespace tracerun::viewer {

namespace {

constexpr float kMargin = 16;     // px around the fitted picture
constexpr float kMaxFit = 1.5f;   // px per point at most when fitting a small graph
constexpr double kNodeFont = 10;  // the layout's node font size, points
constexpr double kEdgeFont = 9;
// Below the scale where the layout's own text reaches this many px (ImGui's font size times it),
// a node or cluster shows only its name, at that fixed size, shortened with "..." to its box;
// hidden only when the box cannot hold a line of that height or a few characters.
constexpr float kFixedLabel = 0.85f;
constexpr float kLabelPad = 3;  // px between a fixed-size name and its box's sides
// Opening: the smallest scale where the lowest node box holds its name's line (at the fixed size)
// with this many px to spare; the whole picture opens fitted only when its fit is at least that.
constexpr float kReadablePad = 2;
// The overview: at most this share of the tab's width and height, this far from its corner, the
// whole picture inside a frame at least kOverviewMinH px high, kOverviewPad px inside its border.
constexpr float kOverviewWidth = 0.2f, kOverviewHeight = 0.25f;
constexpr float kOverviewGap = 10, kOverviewPad = 3, kOverviewMinH = 24;

uint32_t colour(dot::Rgb c, uint8_t alpha = 255) {
  return palette::rgba(c.r, c.g, c.b, alpha);
}

// The lines of a '\n'-separated label.
template <typename Fn>
void forEachLine(const std::string& text, Fn&& fn) {
  size_t at = 0, k = 0;
  while (at <= text.size()) {
    size_t nl = text.find('\n', at);
    if (nl == std::string::npos) nl = text.size();
    fn(k++, text.data() + at, text.data() + nl);
    at = nl + 1;
  }
}

size_t lineCount(const std::string& text) {
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
}

// The first line of a label: the node's or module's name.
std::string firstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// `text` when it fits in `width` px at `size`, else its longest prefix (whole UTF-8 characters, at
// least three bytes) that fits followed by "...", else "".
std::string shortened(ImFont* font, float size, const std::string& text, float width) {
  const char* b = text.data();
  if (font->CalcTextSizeA(size, 1e9f, 0, b, b + text.size()).x <= width) return text;
  const float dots = font->CalcTextSizeA(size, 1e9f, 0, "...").x;
  size_t lo = 0, hi = text.size();  // a prefix of lo bytes fits, of hi does not
  while (hi - lo > 1) {
    const size_t mid = (lo + hi) / 2;
    if (font->CalcTextSizeA(size, 1e9f, 0, b, b + mid).x + dots <= width) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  while (lo > 0 && (static_cast<unsigned char>(text[lo]) & 0xC0) == 0x80) --lo;
  return lo < 3 ? std::string() : text.substr(0, lo) + "...";
}

// The share of a node's box width a centred line may use (its shape narrows above and below the
// middle).
float usableWidth(dot::NodeShape shape) {
  return shape == dot::NodeShape::kEllipse || shape == dot::NodeShape::kHexagon ? 0.7f : 1.0f;
}

class GraphView final : public View {
 public:
  explicit GraphView(GraphKind kind) : kind_(kind) {}

  const char* word() const override {
    return kind_ == GraphKind::kCallGraph ? "callgraph" : "model";
  }
  const char* title() const override {
    return kind_ == GraphKind::kCallGraph ? "Call graph" : "Model";
  }

  void draw(ViewHost& host, float width, float height) override;
  bool settled() const override {
    if (!query_.started()) return true;
    if (!query_.ready()) return false;
    return query_.result() == nullptr || placed_;
  }
  std::string dumpText() const override;
  std::vector<std::pair<std::string, std::string>> options() const override {
    if (kind_ != GraphKind::kCallGraph) return {};  // one word for both tabs
    return {{"graph-fit",
             "open the Call graph and Model tabs fitted (the whole picture, as Fit does) even "
             "when names are then too small to read"}};
  }

 private:
  // ---- the view
  void start(ViewHost& host);
  void sceneArrived();
  // ---- transform and input
  ImVec2 toScreen(dot::Point p) const {
    return ImVec2(canvas_.x + static_cast<float>((p.x - panX_) * scale_),
                  canvas_.y + static_cast<float>((p.y - panY_) * scale_));
  }
  dot::Point toGraph(ImVec2 s) const {
    return {panX_ + (s.x - canvas_.x) / scale_, panY_ + (s.y - canvas_.y) / scale_};
  }
  void fit(const char* why, const ViewHost& host);
  double fitScale() const;
  // The smallest scale where every node box holds its name (0 when no node has a box).
  double readableScale() const;
  // The first placement of a layout: fitted when that reads, else readableScale() on the heaviest
  // root, the picture's top under the caption.
  void open(const ViewHost& host);  // openAt, remembered as opened_
  void openAt(const ViewHost& host);
  // After a fold was unfolded: the new layout at the same scale, centred on the fold's first
  // member (found by id); false when there is none to centre on.
  bool refocus(const ViewHost& host);
  // Centres the tab on point `p` of the picture at the current scale.
  void centreOn(dot::Point p);
  void handleInput(ViewHost& host, bool hovered);
  GraphElement hitTest(ImVec2 mouse) const;
  void click(ViewHost& host, GraphElement e);
  // ---- drawing
  void drawScene(ImDrawList* dl) const;
  // Lines from `topLeft`; with centreX >= 0 the first line (every line with `centreAll`) is
  // centred on it, as Graphviz places a node's bold first line.
  void drawText(ImDrawList* dl, const std::string& text, ImVec2 topLeft, float size, float lineH,
                ImVec4 clip, uint32_t col, float centreX, bool centreAll = false) const;
  void drawTooltip(GraphElement e) const;
  // ---- overview
  // Places the overview's frame for the current canvas and says whether it is shown (some of the
  // picture lies outside the tab).
  void placeOverview();
  ImVec2 toOverview(dot::Point p) const {
    return ImVec2(ovMap_.x + static_cast<float>(p.x * ovScale_),
                  ovMap_.y + static_cast<float>(p.y * ovScale_));
  }
  // Press or drag in the overview (its button is the current item): the tab centres there.
  void overviewInput(const ViewHost& host);
  void drawOverview(ImDrawList* dl) const;
  // The fixed-size names (first label lines) shortened to their boxes at the current scale:
  // rebuilt when the scale changes (a zoom), not per frame.
  void fitNames();

  GraphKind kind_;
  dot::Theme theme_ = palette::graphTheme();  // the colours this tab gives the graph's roles
  BackgroundQuery<GraphScene> query_;
  std::vector<std::string> expanded_;          // ids of ×N folds drawn unfolded
  std::string refocus_;                        // the fold just unfolded ("" none)
  std::vector<dot::Point> edgeMin_, edgeMax_;  // per edge, its control points' bounds
  bool arrived_ = false;                       // sceneArrived ran for the current result
  bool placed_ = false;                        // the current layout was placed (opened or fitted)
  // Where open() placed the view, for which canvas: while the view is still there, a new canvas
  // size opens it again.
  struct Opened {
    ImVec2 size;
    double scale, panX, panY;
  };
  std::optional<Opened> opened_;
  bool openedReadable_ = false;        // it opened at readableScale(), not fitted
  double fitAt_ = 0, readableAt_ = 0;  // fitScale() and readableScale() at the last placement
  ImVec2 canvas_{0, 0}, canvasSize_{1, 1};
  double panX_ = 0, panY_ = 0, scale_ = 1;  // screen = canvas + (point - pan) * scale
  GraphElement hovered_, highlight_;
  ImVec2 pressAt_{0, 0};
  // fitNames(): per node / cluster, its name as drawn at the fixed size ("" = hidden), for the
  // scale and font size they were made for.
  struct FitName {
    std::string text;
    float width = 0;  // px at the fixed size
  };
  std::vector<FitName> nodeNames_, clusterNames_;
  double namesScale_ = -1;
  float namesFont_ = -1, namesLineH_ = 0;
  // placeOverview(): the frame (screen px), where the picture's (0, 0) lands in it and its scale.
  bool ovShown_ = false;
  ImVec2 ovMin_{0, 0}, ovMax_{0, 0}, ovMap_{0, 0};
  double ovScale_ = 1;
};

// ---------------------------------------------------------------------------------------------
// the view

void GraphView::start(ViewHost& host) {
  arrived_ = false;
  placed_ = false;
  ovShown_ = false;
  hovered_ = {};
  highlight_ = {};
  const GraphKind kind = kind_;
  const std::string path = host.tracePath();
  const std::vector<std::string> expand = expanded_;
  query_.start(
      [kind, path, expand](const std::atomic<bool>& cancel) {
        return buildGraphScene(path, kind, expand, cancel);
      },
      host.waker());
}

void GraphView::sceneArrived() {
  arrived_ = true;
  namesScale_ = -1;
  const GraphScene& s = *query_.result();
  edgeMin_.assign(s.layout.edges.size(), {});
  edgeMax_.assign(s.layout.edges.size(), {});
  for (size_t i = 0; i < s.layout.edges.size(); ++i) {
    dot::Point lo{1e300, 1e300}, hi{-1e300, -1e300};
    const auto& r = s.layout.edges[i];
    auto take = [&](dot::Point p) {
      lo = {std::min(lo.x, p.x), std::min(lo.y, p.y)};
      hi = {std::max(hi.x, p.x), std::max(hi.y, p.y)};
    };
    for (const auto& bz : r.beziers)
      for (const dot::Point& p : bz) take(p);
    if (r.has_head_arrow) take(r.head_arrow);
    if (r.has_tail_arrow) take(r.tail_arrow);
    edgeMin_[i] = lo;
    edgeMax_[i] = hi;
  }
}

void GraphView::draw(ViewHost& host, float width, float height) {
  if (!query_.started()) start(host);
  // Toolbar.
  if (ImGui::Button("Fit (F)") && query_.result()) fit("fit", host);
  ImGui::SameLine();
  if (!expanded_.empty()) {
    if (ImGui::Button("Fold again")) {
      expanded_.clear();
      refocus_.clear();
      host.log(std::string(word()) + " folds restored");
      start(host);
    }
    ImGui::SameLine();
  }
  const GraphScene* scene = query_.result();
  if (scene) {
    ImGui::TextColored(ImColor(palette::kTextDim),
                       "%zu nodes, %zu edges%s  drag pans, wheel zooms, "
                       "click selects%s",
                       scene->graph.nodes.size(), scene->graph.edges.size(),
                       scene->layout.limited ? " (large: Graphviz limits applied)" : "",
                       kind_ == GraphKind::kCallGraph ? " (a \u00d7N node also unfolds)"
                                                      : " (a \u00d7N fold also unfolds)");
  } else {
    ImGui::TextUnformatted("");
  }
  const ImVec2 pos = ImGui::GetCursorScreenPos();
  const float top = ImGui::GetCursorPosY();
  (void)height;
  const ImVec2 size(std::max(1.0f, width), std::max(1.0f, ImGui::GetWindowHeight() - top));
  if (!query_.ready()) {
    ImGui::TextColored(ImColor(palette::kTextDim), "laying out the %s...",
                       kind_ == GraphKind::kCallGraph ? "call graph" : "model diagram");
    return;
  }
  if (!scene) {
    ImGui::TextColored(ImColor(palette::kError), "%s", query_.error().c_str());
    return;
  }
  if (!arrived_) sceneArrived();
  canvas_ = pos;
  canvasSize_ = size;
  // The first placement is for the canvas of its frame; a window's first frames can be smaller
  // than the window becomes (a screenshot under a loaded Xvfb once fitted the call graph to them).
  // While the view is where open() put it, a new canvas size places it again.
  if (placed_ && opened_ && opened_->scale == scale_ && opened_->panX == panX_ &&
      opened_->panY == panY_ && (opened_->size.x != size.x || opened_->size.y != size.y)) {
    placed_ = false;
  }
  if (!placed_ && !refocus(host)) open(host);

  // The selection's element, every frame (a binary search; the selection may change anywhere).
  const auto sel = host.selectedSpan();
  highlight_ = sel ? scene->elementOfSpan(*sel) : GraphElement{};

  // The overview's button first: the first item under the mouse takes the hover, so a press on
  // the overview never reaches the canvas (nor selects the node beneath).
  placeOverview();
  if (ovShown_) {
    ImGui::SetCursorScreenPos(ovMin_);
    ImGui::InvisibleButton("overview", ImVec2(ovMax_.x - ovMin_.x, ovMax_.y - ovMin_.y),
                           ImGuiButtonFlags_MouseButtonLeft);
    overviewInput(host);
    ImGui::SetCursorScreenPos(pos);
  }
  ImGui::InvisibleButton("canvas", size, ImGuiButtonFlags_MouseButtonLeft);
  const bool hovered = ImGui::IsItemHovered();
  handleInput(host, hovered);
  if (!query_.result()) return;  // a click unfolded a fold: a new layout is on its way
  placeOverview();               // after this frame's pan and zoom
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->PushClipRect(pos, ImVec2(pos.x + size.x, pos.y + size.y), true);
  dl->AddRectFilled(pos, ImVec2(pos.x + size.x, pos.y + size.y), colour(theme_.paper));
  fitNames();
  drawScene(dl);
  // The picture's title and caption (tracedot prints them above the graph), fixed on screen.
  dl->AddText(ImVec2(pos.x + 8, pos.y + 6), colour(theme_.caption), scene->graph.title.c_str());
  dl->AddText(ImVec2(pos.x + 8, pos.y + 8 + ImGui::GetTextLineHeight()), colour(theme_.caption),
              scene->graph.caption.c_str());
  if (ovShown_) drawOverview(dl);
  dl->PopClipRect();
  if (hovered && hovered_.kind != GraphElement::kNone && !ImGui::IsMouseDown(0)) {
    drawTooltip(hovered_);
  }
}

// ---------------------------------------------------------------------------------------------
// transform and input

double GraphView::fitScale() const {
  const GraphScene& s = *query_.result();
  const double w = std::max(1.0, s.layout.width), h = std::max(1.0, s.layout.height);
  const double k = std::min({(canvasSize_.x - 2 * kMargin) / w, (canvasSize_.y - 2 * kMargin) / h,
                             static_cast<double>(kMaxFit)});
  return std::max(k, 1e-3);
}

double GraphView::readableScale() const {
  const GraphScene& s = *query_.result();
  if (s.min_node_height <= 0) return 0;
  // fitNames()'s line: the name's first line at the fixed size (about 12.75 px at a 15 px font).
  const float px = ImGui::GetFontSize() * kFixedLabel;
  ImFont* font = ImGui::GetFont();
  const float line = font->CalcTextSizeA(px, 1e9f, 0, "Ag").y;
  const double tall = (line + kReadablePad) / s.min_node_height;
  // Across: half the nodes' names whole in their boxes (the others shortened with "...").
  std::vector<double> whole;
  whole.reserve(s.graph.nodes.size());
  for (size_t i = 0; i < s.graph.nodes.size() && i < s.layout.nodes.size(); ++i) {
    const dot::Node& n = s.graph.nodes[i];
    const double w = s.layout.nodes[i].width * usableWidth(n.shape);
    if (n.shape == dot::NodeShape::kPlain || w <= 0) continue;
    const size_t nl = n.label.find('\n');
    const char* b = n.label.c_str();
    const float text = font->CalcTextSizeA(px, 1e9f, 0, b, b + std::min(nl, n.label.size())).x;
    whole.push_back((text + 2 * kLabelPad) / w);
  }
  double wide = 0;
  if (!whole.empty()) {
    std::nth_element(whole.begin(), whole.begin() + whole.size() / 2, whole.end());
    wide = whole[whole.size() / 2];
  }
  return std::min(std::max(tall, wide), static_cast<double>(kMaxFit));
}

void GraphView::fit(const char* why, const ViewHost& host) {
  const GraphScene& s = *query_.result();
  const double w = std::max(1.0, s.layout.width), h = std::max(1.0, s.layout.height);
  scale_ = fitScale();
  fitAt_ = scale_;
  panX_ = w / 2 - canvasSize_.x / 2 / scale_;
  panY_ = h / 2 - canvasSize_.y / 2 / scale_;
  placed_ = true;
  openedReadable_ = false;
  if (why) host.log(std::string(word()) + " " + why);
}

void GraphView::open(const ViewHost& host) {
  openAt(host);
  opened_ = Opened{canvasSize_, scale_, panX_, panY_};
}

void GraphView::openAt(const ViewHost& host) {
  const GraphScene& s = *query_.result();
  const double readable = readableScale();
  fitAt_ = fitScale();
  readableAt_ = readable;
  if (host.viewOption("graph-fit") || s.root < 0 || readable <= 0 || fitScale() >= readable) {
    fit(nullptr, host);
    return;
  }
  scale_ = readable;
  // Across: the heaviest root centred, the view kept on the picture (with its margin); a picture
  // narrower than the tab is centred instead.
  const double w = std::max(1.0, s.layout.width), seen = canvasSize_.x / scale_;
  const double m = kMargin / scale_;
  if (seen >= w + 2 * m) {
    panX_ = w / 2 - seen / 2;
  } else {
    const double cx = s.layout.nodes[static_cast<size_t>(s.root)].center.x;
    panX_ = std::clamp(cx - seen / 2, -m, w + m - seen);
  }
  // Down: the picture's top below the title and caption lines drawn over the tab's top-left.
  const double caption =
      static_cast<double>(lineCount(s.graph.caption) + 1) * ImGui::GetTextLineHeight() + 8;
  panY_ = s.top - (caption + kMargin) / scale_;
  placed_ = true;
  openedReadable_ = true;
  host.log(std::string(word()) + " opened at scale " + std::to_string(scale_) + " on " +
           s.graph.nodes[static_cast<size_t>(s.root)].id);
}

bool GraphView::refocus(const ViewHost& host) {
  if (refocus_.empty()) return false;
  std::string id = refocus_, first = refocus_;
  refocus_.clear();
  const size_t star = first.rfind('*');  // the call graph's "layers.*": its first is "layers.0"
  if (star != std::string::npos) first.replace(star, 1, "0");
  const GraphScene& s = *query_.result();
  for (const std::string& want : {first, id}) {
    for (size_t i = 0; i < s.graph.nodes.size(); ++i) {
      if (s.graph.nodes[i].id != want) continue;
      centreOn(s.layout.nodes[i].center);
      placed_ = true;
      host.log(std::string(word()) + " centred on " + want);
      return true;
    }
    for (size_t i = 0; i < s.graph.clusters.size(); ++i) {
      if (s.graph.clusters[i].id != want) continue;
      const dot::ClusterBox& c = s.layout.clusters[i];
      centreOn({(c.min.x + c.max.x) / 2, (c.min.y + c.max.y) / 2});
      placed_ = true;
      host.log(std::string(word()) + " centred on " + want);
      return true;
    }
  }
  return false;
}

void GraphView::centreOn(dot::Point p) {
  panX_ = p.x - canvasSize_.x / 2 / scale_;
  panY_ = p.y - canvasSize_.y / 2 / scale_;
}

GraphElement GraphView::hitTest(ImVec2 mouse) const {
  const GraphScene& s = *query_.result();
  const dot::Point p = toGraph(mouse);
  for (size_t i = s.layout.nodes.size(); i-- > 0;) {
    const dot::NodeBox& b = s.layout.nodes[i];
    if (std::fabs(p.x - b.center.x) <= b.width / 2 && std::fabs(p.y - b.center.y) <= b.height / 2)
      return {GraphElement::kNode, static_cast<int>(i)};
  }
  // Clusters nest, children after their parents: the last one containing the point is innermost.
  for (size_t i = s.layout.clusters.size(); i-- > 0;) {
    const dot::ClusterBox& c = s.layout.clusters[i];
    if (p.x >= c.min.x && p.x <= c.max.x && p.y >= c.min.y && p.y <= c.max.y)
      return {GraphElement::kCluster, static_cast<int>(i)};
  }
  return {};
}

void GraphView::click(ViewHost& host, GraphElement e) {
  const GraphScene& s = *query_.result();
  const std::string id = s.idOf(e);
  const int fold = e.kind == GraphElement::kNode
                       ? s.graph.nodes[static_cast<size_t>(e.index)].fold
                       : s.graph.clusters[static_cast<size_t>(e.index)].fold;
  const int64_t span = e.kind == GraphElement::kNode ? s.node_span[static_cast<size_t>(e.index)]
                                                     : s.cluster_span[static_cast<size_t>(e.index)];
  if (span >= 0) {
    host.selectSpan(span, true);
    host.log("selected node " + id);
  } else {
    host.log("node " + id + " has no span");
  }
  if (fold > 1) {
    expanded_.push_back(id);
    refocus_ = id;
    host.log("expanded fold " + id + " \u00d7" + std::to_string(fold));
    start(host);  // drops the scene: nothing below may read it
  }
}

void GraphView::handleInput(ViewHost& host, bool hovered) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 mouse = io.MousePos;
  hovered_ = hovered ? hitTest(mouse) : GraphElement{};
  if (hovered && io.MouseWheel != 0) {
    const dot::Point at = toGraph(mouse);
    const double f = std::pow(1.2, static_cast<double>(io.MouseWheel));
    scale_ = std::clamp(scale_ * f, 1e-3, 20.0);
    panX_ = at.x - (mouse.x - canvas_.x) / scale_;
    panY_ = at.y - (mouse.y - canvas_.y) / scale_;
  }
  if (ImGui::IsItemActivated()) pressAt_ = mouse;
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(0, 3)) {
    panX_ -= io.MouseDelta.x / scale_;
    panY_ -= io.MouseDelta.y / scale_;
  }
  if (ImGui::IsItemDeactivated() && std::fabs(mouse.x - pressAt_.x) < 3 &&
      std::fabs(mouse.y - pressAt_.y) < 3) {
    const GraphElement e = hitTest(mouse);
    if (e.kind != GraphElement::kNone) {
      click(host, e);
      return;
    }
  }
  if (!io.WantTextInput && !io.KeyCtrl && ImGui::IsKeyPressed('F', false)) fit("fit", host);
  if (!io.WantTextInput && !io.KeyCtrl && ImGui::IsKeyPressed('Z', false) &&
      highlight_.kind != GraphElement::kNone) {
    // The selection's element, centred at a scale where its whole label is drawn.
    const GraphScene& s = *query_.result();
    dot::Point c;
    if (highlight_.kind == GraphElement::kNode) {
      c = s.layout.nodes[static_cast<size_t>(highlight_.index)].center;
    } else {
      const dot::ClusterBox& b = s.layout.clusters[static_cast<size_t>(highlight_.index)];
      c = {(b.min.x + b.max.x) / 2, (b.min.y + b.max.y) / 2};
    }
    scale_ = std::max(scale_, ImGui::GetFontSize() * kFixedLabel / (kNodeFont * 1.15));
    panX_ = c.x - canvasSize_.x / 2 / scale_;
    panY_ = c.y - canvasSize_.y / 2 / scale_;
    host.log(std::string(word()) + " zoom to " + s.idOf(highlight_));
  }
}

// ---------------------------------------------------------------------------------------------
// drawing

void GraphView::fitNames() {
  const GraphScene& s = *query_.result();
  const float px = ImGui::GetFontSize() * kFixedLabel;
  if (scale_ == namesScale_ && px == namesFont_) return;
  namesScale_ = scale_;
  namesFont_ = px;
  nodeNames_.assign(s.graph.nodes.size(), {});
  clusterNames_.assign(s.graph.clusters.size(), {});
  if (static_cast<float>(kNodeFont * scale_) * 1.15f >= px) return;  // full labels are drawn
  ImFont* font = ImGui::GetFont();
  // A line's height at px (ascent + descent): a box three quarters of it holds the letters.
  namesLineH_ = font->CalcTextSizeA(px, 1e9f, 0, "Ag").y;
  auto fitted = [&](const std::string& label, float w, float h) {
    FitName f;
    if (h < 0.75f * namesLineH_ || w <= 0) return f;
    f.text = shortened(font, px, firstLine(label), w);
    if (!f.text.empty()) f.width = font->CalcTextSizeA(px, 1e9f, 0, f.text.c_str()).x;
    return f;
  };
  for (size_t i = 0; i < s.graph.nodes.size(); ++i) {
    const dot::NodeBox& b = s.layout.nodes[i];
    const dot::Node& n = s.graph.nodes[i];
    const float w = static_cast<float>(b.width * scale_) * usableWidth(n.shape) - 2 * kLabelPad;
    nodeNames_[i] = fitted(n.label, w, static_cast<float>(b.height * scale_));
  }
  for (size_t i = 0; i < s.graph.clusters.size(); ++i) {
    const dot::ClusterBox& c = s.layout.clusters[i];
    const float w = static_cast<float>((c.max.x - c.min.x) * scale_) - 2 * kLabelPad;
    // A cluster's name sits in its top band, above its members (Graphviz's label space).
    clusterNames_[i] = fitted(s.graph.clusters[i].label, w, namesLineH_ + 2);
    if (static_cast<float>((c.max.y - c.min.y) * scale_) < namesLineH_ + 4) clusterNames_[i] = {};
  }
}

void GraphView::drawText(ImDrawList* dl, const std::string& text, ImVec2 topLeft, float size,
                         float lineH, ImVec4 clip, uint32_t col, float centreX,
                         bool centreAll) const {
  ImFont* font = ImGui::GetFont();
  forEachLine(text, [&](size_t k, const char* b, const char* e) {
    float x = topLeft.x;
    if ((k == 0 || centreAll) && centreX >= 0) {
      x = centreX - font->CalcTextSizeA(size, 1e9f, 0, b, e).x / 2;
    }
    const float y = topLeft.y + static_cast<float>(k) * lineH;
    if (y > clip.w || y + lineH < clip.y) return;
    dl->AddText(font, size, ImVec2(x, y), col, b, e, 0, &clip);
  });
}

void GraphView::drawScene(ImDrawList* dl) const {
  const GraphScene& s = *query_.result();
  const float sc = static_cast<float>(scale_);
  const ImVec2 lo = canvas_, hi(canvas_.x + canvasSize_.x, canvas_.y + canvasSize_.y);
  auto visible = [&](ImVec2 a, ImVec2 b) {
    return b.x >= lo.x && a.x <= hi.x && b.y >= lo.y && a.y <= hi.y;
  };
  const float textSize = static_cast<float>(kNodeFont * scale_) * 1.15f;
  // The layout's own labels, scaled, once they read; below that each name at a fixed size.
  const float fixedPx = namesFont_;
  const bool text = textSize >= fixedPx;
  const float lineH = textSize * 1.1f;
  ImFont* font = ImGui::GetFont();

  // Clusters (parents first, so children paint over them).
  for (size_t i = 0; i < s.layout.clusters.size(); ++i) {
    const dot::ClusterBox& c = s.layout.clusters[i];
    const dot::Cluster& g = s.graph.clusters[i];
    const ImVec2 a = toScreen(c.min), b = toScreen(c.max);
    if (!visible(a, b)) continue;
    const float round = std::min(6.0f, 4 * sc);
    const dot::Paint paint = dot::clusterPaint(theme_, g);
    dl->AddRectFilled(a, b, colour(paint.fill), round);
    const bool lit = highlight_ == GraphElement{GraphElement::kCluster, static_cast<int>(i)};
    dl->AddRect(a, b, lit ? palette::kHighlight : colour(paint.line), round, 0, lit ? 3.0f : 1.0f);
    if (g.fold > 1) {
      dl->AddRect(ImVec2(a.x + 3, a.y + 3), ImVec2(b.x - 3, b.y - 3), colour(paint.line), round);
    }
    if (text && c.has_label) {
      const float n = static_cast<float>(lineCount(g.label));
      const ImVec2 at = toScreen(c.label);
      drawText(dl, g.label, ImVec2(a.x + 8 * sc, at.y - n * lineH / 2), textSize, lineH,
               ImVec4(a.x, a.y, b.x, b.y), colour(paint.ink), -1);
    } else if (!text && !clusterNames_[i].text.empty()) {
      const ImVec4 clip(a.x, a.y, b.x, b.y);
      dl->AddText(font, fixedPx, ImVec2(a.x + kLabelPad, a.y + 1), colour(paint.ink),
                  clusterNames_[i].text.c_str(), nullptr, 0, &clip);
    }
  }

  // Edges: Béziers, then the arrowhead from the curve's end to its tip.
  for (size_t i = 0; i < s.layout.edges.size(); ++i) {
    if (!visible(toScreen(edgeMin_[i]), toScreen(edgeMax_[i]))) continue;
    const dot::Edge& e = s.graph.edges[i];
    const dot::EdgeRoute& r = s.layout.edges[i];
    const uint32_t col =
        colour(dot::edgeColour(theme_, e), e.style == dot::EdgeStyle::kSolid ? 255 : 150);
    const float thick = std::clamp(static_cast<float>(e.penwidth) * std::min(1.0f, sc * 1.5f) *
                                       (e.style == dot::EdgeStyle::kBold ? 2.0f : 1.0f),
                                   1.0f, 8.0f);
    for (const auto& bz : r.beziers) {
      for (size_t k = 0; k + 3 < bz.size(); k += 3) {
        dl->AddBezierCubic(toScreen(bz[k]), toScreen(bz[k + 1]), toScreen(bz[k + 2]),
                           toScreen(bz[k + 3]), col, thick);
      }
    }
    auto arrow = [&](dot::Point from, dot::Point tip) {
      const ImVec2 a = toScreen(from), t = toScreen(tip);
      const float dx = t.x - a.x, dy = t.y - a.y;
      const float len = std::sqrt(dx * dx + dy * dy);
      if (len < 0.5f) return;
      const float px = -dy / len * len * 0.35f, py = dx / len * len * 0.35f;
      dl->AddTriangleFilled(t, ImVec2(a.x + px, a.y + py), ImVec2(a.x - px, a.y - py), col);
    };
    if (r.has_head_arrow && !r.beziers.empty() && !r.beziers.back().empty())
      arrow(r.beziers.back().back(), r.head_arrow);
    if (r.has_tail_arrow && !r.beziers.empty() && !r.beziers.front().empty())
      arrow(r.beziers.front().front(), r.tail_arrow);
    if (textSize >= 5 && r.has_label && !e.label.empty()) {
      const float es = static_cast<float>(kEdgeFont * scale_) * 1.15f;
      const ImVec2 at = toScreen(r.label);
      const float n = static_cast<float>(lineCount(e.label));
      drawText(dl, e.label, ImVec2(at.x, at.y - n * es * 1.1f / 2), es, es * 1.1f,
               ImVec4(lo.x, lo.y, hi.x, hi.y), colour(theme_.caption), at.x, true);
    }
  }

  // Nodes.
  for (size_t i = 0; i < s.layout.nodes.size(); ++i) {
    const dot::NodeBox& b = s.layout.nodes[i];
    const dot::Node& n = s.graph.nodes[i];
    const ImVec2 a = toScreen({b.center.x - b.width / 2, b.center.y - b.height / 2});
    const ImVec2 z = toScreen({b.center.x + b.width / 2, b.center.y + b.height / 2});
    if (!visible(a, z)) continue;
    const ImVec2 c((a.x + z.x) / 2, (a.y + z.y) / 2);
    const dot::Paint paint = dot::nodePaint(theme_, n);
    const uint32_t fill = colour(paint.fill), border = colour(paint.line);
    const float pen = std::max(1.0f, static_cast<float>(n.penwidth) * std::min(1.0f, sc * 1.5f));
    switch (n.shape) {
      case dot::NodeShape::kHexagon: {
        const float q = (z.x - a.x) / 4;
        const ImVec2 pts[6] = {{a.x, c.y}, {a.x + q, a.y}, {z.x - q, a.y},
                               {z.x, c.y}, {z.x - q, z.y}, {a.x + q, z.y}};
        dl->AddConvexPolyFilled(pts, 6, fill);
        dl->AddPolyline(pts, 6, border, ImDrawFlags_Closed, pen);
        break;
      }
      case dot::NodeShape::kEllipse: {
        ImVec2 pts[32];
        for (int k = 0; k < 32; ++k) {
          const float t = static_cast<float>(k) / 32 * 6.2831853f;
          pts[k] = ImVec2(c.x + std::cos(t) * (z.x - a.x) / 2, c.y + std::sin(t) * (z.y - a.y) / 2);
        }
        dl->AddConvexPolyFilled(pts, 32, fill);
        dl->AddPolyline(pts, 32, border, ImDrawFlags_Closed, pen);
        break;
      }
      case dot::NodeShape::kPlain:
        break;
      default: {
        const float round = n.shape == dot::NodeShape::kRoundedBox ? std::min(8.0f, 6 * sc) : 0;
        dl->AddRectFilled(a, z, fill, round);
        dl->AddRect(a, z, border, round, 0, pen);
        if (n.shape == dot::NodeShape::kNote) {
          const float k = std::min(8 * sc, (z.y - a.y) / 3);
          dl->AddTriangleFilled(ImVec2(z.x - k, a.y), ImVec2(z.x, a.y), ImVec2(z.x, a.y + k),
                                colour(theme_.paper));
          dl->AddLine(ImVec2(z.x - k, a.y), ImVec2(z.x, a.y + k), border, pen);
        }
        break;
      }
    }
    if (n.fold > 1) {  // peripheries=2, as tracedot draws a fold
      dl->AddRect(ImVec2(a.x - 3, a.y - 3), ImVec2(z.x + 3, z.y + 3), border, 0, 0, 1.0f);
    }
    const GraphElement self{GraphElement::kNode, static_cast<int>(i)};
    if (highlight_ == self) {
      dl->AddRect(ImVec2(a.x - 5, a.y - 5), ImVec2(z.x + 5, z.y + 5), palette::kHighlight, 3, 0,
                  3.0f);
    } else if (hovered_ == self) {
      dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(z.x + 2, z.y + 2), palette::kGraphHover, 2, 0,
                  2.0f);
    }
    if (text) {
      const float lines = static_cast<float>(lineCount(n.label));
      drawText(dl, n.label, ImVec2(a.x + 8 * sc, c.y - lines * lineH / 2), textSize, lineH,
               ImVec4(a.x, a.y, z.x, z.y), colour(paint.ink),
               n.shape == dot::NodeShape::kPlain ? -1 : c.x);
    } else if (!nodeNames_[i].text.empty()) {
      const FitName& f = nodeNames_[i];
      const ImVec4 clip(a.x, a.y, z.x, z.y);
      dl->AddText(font, fixedPx, ImVec2(c.x - f.width / 2, c.y - namesLineH_ / 2),
                  colour(paint.ink), f.text.c_str(), nullptr, 0, &clip);
    }
  }
}

void GraphView::drawTooltip(GraphElement e) const {
  const GraphScene& s = *query_.result();
  const bool node = e.kind == GraphElement::kNode;
  const std::string& label = node ? s.graph.nodes[static_cast<size_t>(e.index)].label
                                  : s.graph.clusters[static_cast<size_t>(e.index)].label;
  const std::string& tip = node ? s.graph.nodes[static_cast<size_t>(e.index)].tooltip
                                : s.graph.clusters[static_cast<size_t>(e.index)].tooltip;
  const int fold = node ? s.graph.nodes[static_cast<size_t>(e.index)].fold
                        : s.graph.clusters[static_cast<size_t>(e.index)].fold;
  const int64_t span = node ? s.node_span[static_cast<size_t>(e.index)]
                            : s.cluster_span[static_cast<size_t>(e.index)];
  ImGui::BeginTooltip();
  ImGui::PushTextWrapPos(ImGui::GetFontSize() * 40);
  ImGui::TextUnformatted(label.c_str());
  if (!tip.empty() && tip != label) {
    ImGui::Separator();
    ImGui::TextUnformatted(tip.c_str());
  }
  ImGui::Separator();
  if (span >= 0) {
    ImGui::TextColored(ImColor(palette::kTextDim), "click: select its longest span (id %lld)%s",
                       static_cast<long long>(span), fold > 1 ? " and unfold it" : "");
  } else if (fold > 1) {
    ImGui::TextColored(ImColor(palette::kTextDim), "click: unfold it");
  }
  ImGui::PopTextWrapPos();
  ImGui::EndTooltip();
}

// ---------------------------------------------------------------------------------------------
// overview

void GraphView::placeOverview() {
  const GraphScene& s = *query_.result();
  const double w = std::max(1.0, s.layout.width), h = std::max(1.0, s.layout.height);
  const ImVec2 a = toScreen({0, 0}), b = toScreen({w, h});
  const ImVec2 lo = canvas_, hi(canvas_.x + canvasSize_.x, canvas_.y + canvasSize_.y);
  ovShown_ = a.x < lo.x - 0.5f || a.y < lo.y - 0.5f || b.x > hi.x + 0.5f || b.y > hi.y + 0.5f;
  // The frame: at most kOverviewWidth x kOverviewHeight of the tab, the picture's aspect kept.
  const double maxW = canvasSize_.x * kOverviewWidth - 2 * kOverviewPad;
  const double maxH = canvasSize_.y * kOverviewHeight - 2 * kOverviewPad;
  ovScale_ = std::max(1e-6, std::min(maxW / w, maxH / h));
  const float mw = static_cast<float>(w * ovScale_), mh = static_cast<float>(h * ovScale_);
  const float fw = mw + 2 * kOverviewPad;
  const float fh = std::max(mh + 2 * kOverviewPad, std::min(kOverviewMinH, canvasSize_.y / 4));
  ovMax_ = ImVec2(hi.x - kOverviewGap, hi.y - kOverviewGap);
  ovMin_ = ImVec2(ovMax_.x - fw, ovMax_.y - fh);
  ovMap_ = ImVec2(ovMin_.x + kOverviewPad, ovMin_.y + (fh - mh) / 2);
  if (fw < 8 || fh < 8 || ovMin_.x < lo.x || ovMin_.y < lo.y) ovShown_ = false;  // no room
}

void GraphView::overviewInput(const ViewHost& host) {
  if (ImGui::IsItemHovered()) ImGui::SetMouseCursor(ImGuiMouseCursor_Hand);
  const bool moved = ImGui::IsItemActive() || ImGui::IsItemDeactivated();
  if (!moved) return;
  const GraphScene& s = *query_.result();
  const ImVec2 m = ImGui::GetIO().MousePos;
  const dot::Point p{std::clamp((m.x - ovMap_.x) / ovScale_, 0.0, s.layout.width),
                     std::clamp((m.y - ovMap_.y) / ovScale_, 0.0, s.layout.height)};
  centreOn(p);
  if (ImGui::IsItemDeactivated()) {
    char b[96];
    std::snprintf(b, sizeof b, " overview centre %.2f %.2f", p.x, p.y);
    host.log(word() + std::string(b));
  }
}

void GraphView::drawOverview(ImDrawList* dl) const {
  const GraphScene& s = *query_.result();
  dl->AddRectFilled(ovMin_, ovMax_, palette::kGraphOverviewPaper);
  dl->PushClipRect(ovMin_, ovMax_, true);
  for (size_t i = 0; i < s.layout.clusters.size(); ++i) {
    const dot::ClusterBox& c = s.layout.clusters[i];
    dl->AddRect(toOverview(c.min), toOverview(c.max),
                colour(dot::clusterPaint(theme_, s.graph.clusters[i]).line, 120));
  }
  // Each node a filled box of its colour, at least a pixel each way.
  for (size_t i = 0; i < s.layout.nodes.size(); ++i) {
    const dot::NodeBox& b = s.layout.nodes[i];
    if (s.graph.nodes[i].shape == dot::NodeShape::kPlain) continue;
    ImVec2 a = toOverview({b.center.x - b.width / 2, b.center.y - b.height / 2});
    ImVec2 z = toOverview({b.center.x + b.width / 2, b.center.y + b.height / 2});
    if (z.x - a.x < 1) z.x = a.x + 1;
    if (z.y - a.y < 1) z.y = a.y + 1;
    dl->AddRectFilled(a, z, colour(dot::nodePaint(theme_, s.graph.nodes[i]).fill));
  }
  // The part the tab shows.
  const ImVec2 v0 = toOverview(toGraph(canvas_));
  const ImVec2 v1 =
      toOverview(toGraph(ImVec2(canvas_.x + canvasSize_.x, canvas_.y + canvasSize_.y)));
  dl->AddRectFilled(v0, v1, palette::kGraphOverviewViewFill);
  dl->AddRect(v0, v1, palette::kGraphOverviewView, 0, 0, 2.0f);
  dl->PopClipRect();
  dl->AddRect(ovMin_, ovMax_, palette::kGraphOverviewBorder, 0, 0, 2.0f);
}

// ---------------------------------------------------------------------------------------------
// dump

std::string GraphView::dumpText() const {
  if (!query_.ready()) return "";
  const GraphScene* s = query_.result();
  if (!s) return "error " + query_.error() + "\n";
  std::string out;
  char b[256];
  std::snprintf(b, sizeof b, "graph %s %zu nodes %zu edges %zu clusters size %.2f %.2f\n", word(),
                s->graph.nodes.size(), s->graph.edges.size(), s->graph.clusters.size(),
                s->layout.width, s->layout.height);
  out += b;
  // screen px = canvas + (point - pan) * scale
  std::snprintf(b, sizeof b, "transform canvas %.2f %.2f %.2f %.2f pan %.4f %.4f scale %.6f\n",
                canvas_.x, canvas_.y, canvasSize_.x, canvasSize_.y, panX_, panY_, scale_);
  out += b;
  // How it opened (readable: at the readable scale on the root, not fitted) and the scales.
  std::snprintf(b, sizeof b, "opened %s fit %.6f readable %.6f root ",
                openedReadable_ ? "readable" : "fitted", fitAt_, readableAt_);
  out += b + (s->root >= 0 ? s->graph.nodes[static_cast<size_t>(s->root)].id : "none") + "\n";
  if (ovShown_) {
    // Screen px: the frame, where the picture's (0, 0) and (W, H) land, the part the tab shows.
    const ImVec2 m1 = toOverview({s->layout.width, s->layout.height});
    const ImVec2 v0 = toOverview(toGraph(canvas_));
    const ImVec2 v1 =
        toOverview(toGraph(ImVec2(canvas_.x + canvasSize_.x, canvas_.y + canvasSize_.y)));
    std::snprintf(b, sizeof b,
                  "overview frame %.2f %.2f %.2f %.2f map %.2f %.2f %.2f %.2f view %.2f %.2f %.2f "
                  "%.2f\n",
                  ovMin_.x, ovMin_.y, ovMax_.x, ovMax_.y, ovMap_.x, ovMap_.y, m1.x, m1.y, v0.x,
                  v0.y, v1.x, v1.y);
    out += b;
  } else {
    out += "overview none\n";
  }
  for (size_t i = 0; i < s->graph.nodes.size(); ++i) {
    const dot::Node& n = s->graph.nodes[i];
    const dot::NodeBox& p = s->layout.nodes[i];
    const dot::Rgb fill = dot::nodePaint(theme_, n).fill;  // as this tab draws it
    std::snprintf(b, sizeof b, "\t%.2f %.2f %.2f %.2f\tfill=%02x%02x%02x fold=%d span=%lld",
                  p.center.x, p.center.y, p.width, p.height, fill.r, fill.g, fill.b, n.fold,
                  static_cast<long long>(s->node_span[i]));
    out += "node " + n.id + b + tooltipNumbers(n.tooltip) + "\n";
  }
  for (size_t i = 0; i < s->graph.clusters.size(); ++i) {
    const dot::Cluster& c = s->graph.clusters[i];
    const dot::ClusterBox& p = s->layout.clusters[i];
    std::snprintf(b, sizeof b, "\t%.2f %.2f %.2f %.2f\tfold=%d span=%lld", p.min.x, p.min.y,
                  p.max.x, p.max.y, c.fold, static_cast<long long>(s->cluster_span[i]));
    out += "cluster " + c.id + b + "\n";
  }
  // Each node's name as drawn: px size and text (the label's first line; shortened at the fixed
  // size); none for a node drawn without one.
  const float full = static_cast<float>(kNodeFont * scale_) * 1.15f;
  for (size_t i = 0; i < s->graph.nodes.size(); ++i) {
    const bool whole = full >= namesFont_;
    const std::string text = whole                   ? firstLine(s->graph.nodes[i].label)
                             : i < nodeNames_.size() ? nodeNames_[i].text
                                                     : "";
    if (text.empty()) continue;
    std::snprintf(b, sizeof b, "\t%.2f\t", whole ? full : namesFont_);
    out += "label " + s->graph.nodes[i].id + b + text + "\n";
  }
  // The nodes whose whole box the tab shows.
  for (size_t i = 0; i < s->graph.nodes.size(); ++i) {
    const dot::NodeBox& p = s->layout.nodes[i];
    const ImVec2 a = toScreen({p.center.x - p.width / 2, p.center.y - p.height / 2});
    const ImVec2 z = toScreen({p.center.x + p.width / 2, p.center.y + p.height / 2});
    if (a.x >= canvas_.x && a.y >= canvas_.y && z.x <= canvas_.x + canvasSize_.x &&
        z.y <= canvas_.y + canvasSize_.y)
      out += "visible " + s->graph.nodes[i].id + "\n";
  }
  const std::string& lit = s->idOf(highlight_);
  out += "highlighted " + (lit.empty() ? std::string("none") : lit) + "\n";
  return out;
}

}  // namespace

void appendGraphViews(std::vector<std::unique_ptr<View>>& views) {
  views.push_back(std::make_unique<GraphView>(GraphKind::kCallGraph));
  views.push_back(std::make_unique<GraphView>(GraphKind::kModel));
}

}  // namespace tracerun::viewer
