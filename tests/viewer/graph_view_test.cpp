// traceview's call graph and model tabs on a real gpttrain trace (2 layers, traced by the tracerun
// launcher): the dumped nodes are tracedot's (its SVG read back by svg_nodes.py), at the positions
// dot/'s layout gives; the screenshot shows each node's fill at its computed box; a selected span
// highlights its module (found independently from the reader's spans); ×N folds unfold one by one;
// a graph too wide to read fitted opens at a readable scale on its heaviest root, with an overview
// whose clicks move the view.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "dot_test_util.h"
#include "e2e_common.h"
#include "graph/graph_palette.h"
#include "tracerun/dot/callgraph_graph.h"
#include "tracerun/dot/layout.h"
#include "tracerun/dot/model_graph.h"
#include "tracerun/dot/theme.h"
#include "tracerun/trace/reader.h"
#include "viewer_test_util.h"

using namespace tracerun;
using namespace tracerun::viewertest;

namespace {

const std::string& gptTrace() {
  static const std::string path = [] {
    const std::string db = e2e::scratch().file("gpt2l.db");
    const auto r = e2e::runGpttrain(
        {"-o", db}, GPTTRAIN_BIN,
        {"--layers", "2", "--hidden", "32", "--heads", "2", "--seq-len", "8", "--vocab", "64",
         "--steps", "2", "--global-batch", "2", "--micro-batch-size", "1"});
    if (!r.exited || r.exit_code != 0) throw std::runtime_error("gpttrain: " + r.describe());
    return db;
  }();
  return path;
}

struct DumpNode {
  double cx = 0, cy = 0, w = 0, h = 0;
  uint32_t fill = 0;
  int fold = 1;
  int64_t span = -1;
  std::map<std::string, int64_t> num;
};

struct Dump {
  double canvasX = 0, canvasY = 0, canvasW = 0, canvasH = 0, panX = 0, panY = 0, scale = 1;
  std::map<std::string, DumpNode> nodes;
  std::vector<std::string> order;
  std::map<std::string, std::vector<double>> clusters;
  std::string highlighted;
  std::map<std::string, std::pair<double, std::string>> labels;  // id -> (px, name as drawn)
  std::string opened, root;  // "readable" / "fitted", the heaviest root's id
  double fitScale = 0, readableScale = 0;
  bool overview = false;
  double frame[4] = {0, 0, 0, 0}, map[4] = {0, 0, 0, 0}, view[4] = {0, 0, 0, 0};
  std::vector<std::string> visible;
  double sx(double x) const { return canvasX + (x - panX) * scale; }
  double sy(double y) const { return canvasY + (y - panY) * scale; }
};

std::vector<std::string> splitTabs(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, '\t')) out.push_back(f);
  return out;
}

Dump readDump(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in);
  Dump d;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("transform ", 0) == 0) {
      char a[32], b[32], c[32];
      REQUIRE(std::sscanf(line.c_str(), "transform %31s %lf %lf %lf %lf %31s %lf %lf %31s %lf", a,
                          &d.canvasX, &d.canvasY, &d.canvasW, &d.canvasH, b, &d.panX, &d.panY, c,
                          &d.scale) == 10);
    } else if (line.rfind("node ", 0) == 0) {
      const auto f = splitTabs(line);
      REQUIRE(f.size() == 3);
      DumpNode n;
      REQUIRE(std::sscanf(f[1].c_str(), "%lf %lf %lf %lf", &n.cx, &n.cy, &n.w, &n.h) == 4);
      std::stringstream ss(f[2]);
      std::string kv;
      while (ss >> kv) {
        const size_t eq = kv.find('=');
        const std::string k = kv.substr(0, eq), v = kv.substr(eq + 1);
        if (k == "fill") {
          n.fill = static_cast<uint32_t>(std::stoul(v, nullptr, 16));
        } else if (k == "fold") {
          n.fold = std::stoi(v);
        } else if (k == "span") {
          n.span = std::stoll(v);
        } else {
          n.num[k] = std::stoll(v);
        }
      }
      const std::string id = f[0].substr(5);
      d.order.push_back(id);
      d.nodes[id] = n;
    } else if (line.rfind("cluster ", 0) == 0) {
      const auto f = splitTabs(line);
      std::vector<double> box(4);
      REQUIRE(std::sscanf(f[1].c_str(), "%lf %lf %lf %lf", &box[0], &box[1], &box[2], &box[3]) ==
              4);
      d.clusters[f[0].substr(8)] = box;
    } else if (line.rfind("label ", 0) == 0) {
      const auto f = splitTabs(line);
      REQUIRE(f.size() == 3);
      d.labels[f[0].substr(6)] = {std::stod(f[1]), f[2]};
    } else if (line.rfind("opened ", 0) == 0) {
      char how[32], root[512];
      REQUIRE(std::sscanf(line.c_str(), "opened %31s fit %lf readable %lf root %511s", how,
                          &d.fitScale, &d.readableScale, root) == 4);
      d.opened = how;
      d.root = root;
    } else if (line.rfind("overview frame ", 0) == 0) {
      double* f = d.frame;
      double* m = d.map;
      double* v = d.view;
      REQUIRE(std::sscanf(line.c_str(),
                          "overview frame %lf %lf %lf %lf map %lf %lf %lf %lf view %lf %lf %lf %lf",
                          &f[0], &f[1], &f[2], &f[3], &m[0], &m[1], &m[2], &m[3], &v[0], &v[1],
                          &v[2], &v[3]) == 12);
      d.overview = true;
    } else if (line.rfind("visible ", 0) == 0) {
      d.visible.push_back(line.substr(8));
    } else if (line.rfind("highlighted ", 0) == 0) {
      d.highlighted = line.substr(12);
    }
  }
  return d;
}

// A node's colours as the graph tabs draw it: the viewer's dark theme over the node's role.
dot::Paint painted(const dot::Node& n) {
  return dot::nodePaint(viewer::palette::graphTheme(), n);
}

uint32_t rgbOf(dot::Rgb c) {
  return static_cast<uint32_t>(c.r) << 16 | static_cast<uint32_t>(c.g) << 8 | c.b;
}

bool near(uint32_t a, uint32_t b, int tol) {
  for (int s = 0; s < 24; s += 8) {
    if (std::abs(static_cast<int>((a >> s) & 255) - static_cast<int>((b >> s) & 255)) > tol)
      return false;
  }
  return true;
}

// Text of colour `font` antialiased over `fill`: the pixel lies on the line from fill to font, at
// least 15 % of the way (a pixel nearer the fill counts as fill).
bool textOver(uint32_t px, uint32_t fill, uint32_t font) {
  double a[3], b[3], p[3];
  for (int k = 0; k < 3; ++k) {
    a[k] = (fill >> (16 - 8 * k)) & 255;
    b[k] = (font >> (16 - 8 * k)) & 255;
    p[k] = (px >> (16 - 8 * k)) & 255;
  }
  double dd = 0, dp = 0;
  for (int k = 0; k < 3; ++k) {
    dd += (b[k] - a[k]) * (b[k] - a[k]);
    dp += (p[k] - a[k]) * (b[k] - a[k]);
  }
  if (dd < 900) return false;  // font and fill alike: no text to tell apart
  const double t = dp / dd;
  if (t < 0.15 || t > 1.05) return false;
  for (int k = 0; k < 3; ++k) {
    if (std::abs(p[k] - (a[k] + t * (b[k] - a[k]))) > 14) return false;
  }
  return true;
}

// The innermost module scope around each span of the trace, from the reader alone: span id ->
// module path ("" outside every module).
std::map<int64_t, std::string> moduleOfSpans(const trace::TraceReader& reader,
                                             std::map<int64_t, trace::SpanRow>& rows) {
  std::map<int64_t, std::string> out;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    std::vector<std::string> stack;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      const size_t depth = static_cast<size_t>(std::max(0, s.depth));
      if (stack.size() > depth) stack.resize(depth);
      std::string m = stack.empty() ? "" : stack.back();
      if (s.category == core::Category::kModule) m = reader.str(s.name);
      stack.push_back(m);
      out[s.id] = m;
      rows[s.id] = s;
    });
  }
  return out;
}

}  // namespace

TEST_CASE("callgraph view: tracedot's nodes and numbers at the layout's positions, on screen",
          "[viewer][graph]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().path();
  // dot/'s layout of the same graph, in this process (the view's positions are checked against it).
  const auto reader = trace::TraceReader::open(db);
  const dot::Graph g = dot::buildCallGraphGraph(reader, {});
  const auto laid = dot::LaidOutGraph::layout(g);
  const auto& pos = laid.positions();
  // Fitted (the whole picture; this graph opens at a readable scale otherwise, tested below), in
  // a window wide enough that the fit's scale is 0.17 or more: the smallest boxes (38 pt) are then
  // 6 px tall, room for the fill check below. Which ops pass the 0.5% node threshold depends on
  // timing: runs of it beside busy loops had 66 to 174 nodes. A fixed 1600 px window fitted 161
  // nodes (11,700 pt) at 0.136, and in CI stop 39 left 1 box of 174 wide enough to check.
  const int width = std::max(1600, static_cast<int>(std::ceil(pos.width * 0.17)) + 40);
  INFO("drawing " << pos.width << " x " << pos.height << " pt, " << g.nodes.size()
                  << " nodes, window " << width << " px wide");
  const auto r = runTraceviewXvfb(
      {db, "--view", "callgraph", "--view-option", "graph-fit", "--dump-view", dir + "/cg.txt",
       "--screenshot", dir + "/cg.png", "--size", std::to_string(width) + "x1000"},
      dir);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const Dump d = readDump(dir + "/cg.txt");

  // tracedot's own picture (another process, read back as XML): the same nodes, the same numbers.
  const auto t = e2e::runProcess(TRACEDOT_BIN, {"callgraph", db, "-o", dir + "/cg.svg"}, dir);
  REQUIRE(t.exit_code == 0);
  const auto svg = dottest::parseSvg(dir + "/cg.svg", dir);
  REQUIRE(svg.nodes.size() == d.nodes.size());
  REQUIRE(svg.nodes.size() >= 10);
  for (const auto& n : svg.nodes) {
    INFO(n.id);
    REQUIRE(d.nodes.count(n.id));
    const DumpNode& x = d.nodes.at(n.id);
    for (const char* k : {"calls", "inclusive_ns", "exclusive_ns", "bytes"}) {
      INFO(k);
      REQUIRE(x.num.count(k));
      CHECK(x.num.at(k) == n.num(k));
    }
    CHECK(x.fold == (n.fields.count("fold") ? n.num("fold") : 1));
  }
  CHECK(d.nodes.at("all").num.at("inclusive_ns") == svg.byId("all")->num("inclusive_ns"));
  // The 2 layers fold into one ×2 node.
  REQUIRE(d.nodes.count("all/step/forward/layers.*"));
  CHECK(d.nodes.at("all/step/forward/layers.*").fold == 2);

  // dot/'s layout: every node where the view says.
  REQUIRE(g.nodes.size() == d.nodes.size());
  const Png png = loadPng(dir + "/cg.png");
  int checked = 0, matched = 0, roomy = 0, named = 0;
  std::string firstMiss, firstUnnamed;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    INFO(g.nodes[i].id);
    REQUIRE(d.nodes.count(g.nodes[i].id));
    const DumpNode& x = d.nodes.at(g.nodes[i].id);
    CHECK(x.cx == Approx(pos.nodes[i].center.x).margin(0.01));
    CHECK(x.cy == Approx(pos.nodes[i].center.y).margin(0.01));
    CHECK(x.w == Approx(pos.nodes[i].width).margin(0.01));
    CHECK(x.h == Approx(pos.nodes[i].height).margin(0.01));
    CHECK(x.fill == rgbOf(painted(g.nodes[i]).fill));
    // On screen: the node's fill inside its box.
    const auto& b = pos.nodes[i];
    const double x0 = d.sx(b.center.x - b.width / 2) + 2, x1 = d.sx(b.center.x + b.width / 2) - 2;
    const double y0 = d.sy(b.center.y - b.height / 2) + 2, y1 = d.sy(b.center.y + b.height / 2) - 2;
    if (x1 - x0 < 4 || y1 - y0 < 2) continue;
    if (x0 < d.canvasX || y0 < d.canvasY || x1 > d.canvasX + d.canvasW ||
        y1 > d.canvasY + d.canvasH)
      continue;
    int in = 0, all = 0, ink = 0, text = 0;
    const uint32_t fill = rgbOf(painted(g.nodes[i]).fill), font = rgbOf(painted(g.nodes[i]).ink);
    for (int y = static_cast<int>(y0); y <= static_cast<int>(y1); ++y)
      for (int xx = static_cast<int>(x0); xx <= static_cast<int>(x1); ++xx) {
        const uint32_t px = png.rgb(xx, y);
        ++all;
        if (near(px, fill, 6)) {
          ++in;
        } else if (textOver(px, fill, font)) {
          ++text;  // the name drawn over the fill: set aside
        }
        ink += near(px, font, 40) ? 1 : 0;
      }
    ++checked;
    // At fit the name is drawn at a readable size: every box wide enough for a few letters has a
    // name as the view dumps it (its first line, or its start and "...") and text of the node's
    // font colour inside (none drawn before names had a fixed size). Text pixels are those on the
    // way from the fill to the font colour: a one-pixel stroke at a fractional x spreads over two
    // columns at half strength, so pixels near the font colour alone undercount it (loop run 29
    // found 2 of those in the root's box, whose name is "all" or its start: likely that).
    if (x1 - x0 >= 40 && y1 - y0 >= 8) {
      ++roomy;
      const auto label = d.labels.find(g.nodes[i].id);
      const bool dumped = label != d.labels.end() && !label->second.second.empty();
      if (dumped && std::max(text, ink) >= 8) {
        ++named;
      } else if (firstUnnamed.empty()) {
        // What is there instead: the box on screen and its most frequent colours.
        std::map<uint32_t, int> colours;
        for (int y = static_cast<int>(y0); y <= static_cast<int>(y1); ++y)
          for (int xx = static_cast<int>(x0); xx <= static_cast<int>(x1); ++xx)
            ++colours[png.rgb(xx, y)];
        std::vector<std::pair<int, uint32_t>> top;
        for (const auto& [c, n] : colours) top.emplace_back(n, c);
        std::sort(top.rbegin(), top.rend());
        char box[160];
        std::snprintf(box, sizeof box,
                      " in the box x %.0f..%.0f y %.0f..%.0f (fill %06x, ink %06x):", x0, x1, y0,
                      y1, fill, font);
        firstUnnamed = g.nodes[i].id + ": name " +
                       (dumped ? "'" + label->second.second + "'" : std::string("none")) +
                       " in the dump, " + std::to_string(text) + " text pixels (" +
                       std::to_string(ink) + " near the font colour)" + box;
        for (size_t k = 0; k < top.size() && k < 4; ++k) {
          char c[32];
          std::snprintf(c, sizeof c, " %06x x%d", top[k].second, top[k].first);
          firstUnnamed += c;
        }
      }
    }
    // Most of the box's inside, its name aside, has the fill (and the fill shows, whatever the
    // name covers: a box drawn elsewhere leaves paper, edges or other boxes here).
    if (in * 2 >= all - text && in * 5 >= all) {
      ++matched;
    } else if (firstMiss.empty()) {
      firstMiss = g.nodes[i].id + ": " + std::to_string(in) + " of " + std::to_string(all) +
                  " pixels have the fill, " + std::to_string(text) + " its name";
    }
  }
  INFO(firstMiss);
  CHECK(checked * 2 >= static_cast<int>(g.nodes.size()));
  CHECK(matched == checked);
  INFO(firstUnnamed);
  CHECK(named == roomy);
}

TEST_CASE("model view: --select SPAN highlights the module around that span", "[viewer][graph]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().path();
  const auto reader = trace::TraceReader::open(db);
  std::map<int64_t, trace::SpanRow> rows;
  const auto moduleOf = moduleOfSpans(reader, rows);
  // The model picture (the builder): which module paths are drawn as nodes.
  const dot::Graph g = dot::buildModelGraph(reader, {});
  std::map<std::string, bool> drawn;
  for (const auto& n : g.nodes) drawn[n.id] = true;
  // An op inside a module drawn as a node of its own, and that module's own span.
  int64_t op = -1, mod = -1;
  std::string path;
  for (const auto& [id, m] : moduleOf) {
    if (m.empty() || !drawn.count("module/" + m)) continue;
    const auto& s = rows.at(id);
    if (op < 0 && s.category == core::Category::kOp) {
      op = id;
      path = m;
    }
  }
  REQUIRE(op >= 0);
  for (const auto& [id, s] : rows) {
    if (s.category == core::Category::kModule && reader.str(s.name) == path) {
      mod = id;
      break;
    }
  }
  REQUIRE(mod >= 0);
  for (const int64_t span : {op, mod}) {
    INFO("span " << span << " in module " << path);
    const auto r = runTraceviewXvfb(
        {db, "--view", "model", "--select", std::to_string(span), "--dump-view", dir + "/model.txt",
         "--screenshot", dir + "/model.png", "--size", "1400x900"},
        dir);
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
    const Dump d = readDump(dir + "/model.txt");
    CHECK(d.highlighted == "module/" + path);
    REQUIRE(d.nodes.count("module/" + path));
    // The highlight ring (palette::kHighlight) around the node's box on screen.
    const DumpNode& n = d.nodes.at("module/" + path);
    const Png png = loadPng(dir + "/model.png");
    const double y = d.sy(n.cy);
    const double left = d.sx(n.cx - n.w / 2);
    bool ring = false;
    for (int x = static_cast<int>(left) - 7; x <= static_cast<int>(left) - 2; ++x)
      ring = ring || near(png.rgb(x, static_cast<int>(y)), 0xffdc00, 30);
    CHECK(ring);
  }
  // An op inside the second layer (folded into layers.0's ×2 cluster) highlights the same module
  // of the first layer, the one drawn.
  int64_t second = -1;
  std::string secondPath;
  for (const auto& [id, m] : moduleOf) {
    if (second < 0 && rows.at(id).category == core::Category::kOp && m.rfind("layers.1.", 0) == 0 &&
        drawn.count("module/layers.0." + m.substr(9))) {
      second = id;
      secondPath = "module/layers.0." + m.substr(9);
    }
  }
  REQUIRE(second >= 0);
  {
    const auto r = runTraceviewXvfb(
        {db, "--view", "model", "--select", std::to_string(second), "--dump-view",
         dir + "/model1.txt", "--screenshot", dir + "/model1.png", "--size", "1400x900"},
        dir);
    REQUIRE(r.exit_code == 0);
    CHECK(readDump(dir + "/model1.txt").highlighted == secondPath);
  }
  // Nothing selected: nothing highlighted.
  const auto r = runTraceviewXvfb({db, "--view", "model", "--dump-view", dir + "/model0.txt",
                                   "--screenshot", dir + "/model0.png", "--size", "1400x900"},
                                  dir);
  REQUIRE(r.exit_code == 0);
  const Dump d0 = readDump(dir + "/model0.txt");
  CHECK(d0.highlighted == "none");
  // At fit every module node's name is readable: text in the node's font colour in the middle
  // band of each box (its fill elsewhere); before names had a fixed size there was none.
  const Png png = loadPng(dir + "/model0.png");
  int boxes = 0, named = 0;
  std::string firstUnnamed;
  for (const auto& n : g.nodes) {
    if (!d0.nodes.count(n.id)) continue;
    const DumpNode& b = d0.nodes.at(n.id);
    const double x0 = d0.sx(b.cx - b.w / 2) + 3, x1 = d0.sx(b.cx + b.w / 2) - 3;
    const double y0 = d0.sy(b.cy) - 4, y1 = d0.sy(b.cy) + 4;
    if (x1 - x0 < 40) continue;
    ++boxes;
    // Its name (the label's first line, or the start of it and "...") at a readable size.
    const std::string name = n.label.substr(0, n.label.find('\n'));
    INFO(n.id << " named " << name);
    REQUIRE(d0.labels.count(n.id));
    const auto& [px, shown] = d0.labels.at(n.id);
    CHECK(px >= 12);
    if (shown != name) {
      REQUIRE(shown.size() > 3);
      CHECK(shown.substr(shown.size() - 3) == "...");
      CHECK(name.rfind(shown.substr(0, shown.size() - 3), 0) == 0);
    }
    int ink = 0;
    for (int y = static_cast<int>(y0); y <= static_cast<int>(y1); ++y)
      for (int x = static_cast<int>(x0); x <= static_cast<int>(x1); ++x)
        ink += near(png.rgb(x, y), rgbOf(painted(n).ink), 40) &&
               !near(rgbOf(painted(n).ink), rgbOf(painted(n).fill), 40);
    if (ink >= 8) {
      ++named;
    } else if (firstUnnamed.empty()) {
      firstUnnamed = n.id + ": " + std::to_string(ink) + " text pixels";
    }
  }
  INFO(firstUnnamed);
  CHECK(boxes >= 4);
  CHECK(named == boxes);
}

TEST_CASE("callgraph view: --select a step span highlights its node", "[viewer][graph]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().path();
  const auto reader = trace::TraceReader::open(db);
  int64_t step = -1;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (step < 0 && s.depth == 0 && reader.str(s.name) == "step") step = s.id;
    });
  }
  REQUIRE(step >= 0);
  const auto r = runTraceviewXvfb(
      {db, "--view", "callgraph", "--select", std::to_string(step), "--dump-view",
       dir + "/cgsel.txt", "--screenshot", dir + "/cgsel.png", "--size", "1400x900"},
      dir);
  REQUIRE(r.exit_code == 0);
  const Dump d = readDump(dir + "/cgsel.txt");
  CHECK(d.highlighted == "all/step");
  // The node's span (what a click selects) is its longest: a step span of the trace.
  REQUIRE(d.nodes.count("all/step"));
  int64_t longest = -1, dur = -1;
  for (const auto& t : reader.tracks()) {
    if (t.kind != core::TrackKind::kThread) continue;
    reader.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (s.depth == 0 && reader.str(s.name) == "step" && s.dur_ns > dur) {
        dur = s.dur_ns;
        longest = s.id;
      }
    });
  }
  CHECK(d.nodes.at("all/step").span == longest);
}

TEST_CASE("builders: a fold named in expand_folds is drawn unfolded, the others stay folded",
          "[viewer][graph]") {
  const auto reader = trace::TraceReader::open(gptTrace());
  auto ids = [](const dot::Graph& g) {
    std::map<std::string, int> out;
    for (const auto& n : g.nodes) out[n.id] = n.fold;
    for (const auto& c : g.clusters) out[c.id] = c.fold;
    return out;
  };
  // Call graph: every fold, each unfolded alone.
  const auto folded = ids(dot::buildCallGraphGraph(reader, {}));
  std::vector<std::string> folds;
  for (const auto& [id, f] : folded)
    if (f > 1) folds.push_back(id);
  REQUIRE(!folds.empty());
  for (const std::string& f : folds) {
    INFO(f);
    dot::CallGraphGraphOptions o;
    o.expand_folds = {f};
    const auto x = ids(dot::buildCallGraphGraph(reader, o));
    CHECK(!x.count(f));
    const std::string stem = f.substr(0, f.rfind('*'));
    CHECK(x.count(stem + "0" + f.substr(f.rfind('*') + 1)));
    CHECK(x.count(stem + "1" + f.substr(f.rfind('*') + 1)));
    for (const std::string& other : folds) {
      if (other.rfind(f, 0) != 0) CHECK(x.count(other));  // folds outside this one stay
    }
  }
  // Model: the ×2 run of layers, unfolded by its first member's id.
  const auto model = ids(dot::buildModelGraph(reader, {}));
  std::string fold;
  for (const auto& [id, f] : model)
    if (f == 2) fold = id;
  REQUIRE(!fold.empty());
  dot::ModelGraphOptions mo;
  mo.expand_folds = {fold};
  const auto mx = ids(dot::buildModelGraph(reader, mo));
  CHECK(mx.at(fold) == 1);
  CHECK(mx.size() > model.size());
}

TEST_CASE("a script: clicking the x2 node selects its span and unfolds it alone",
          "[viewer][graph][script]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().path();
  const std::string dump = dir + "/live.txt", after = dir + "/live-after.txt";
  // Fitted, so the x2 node is on the canvas: at the readable scale the view opens centred on the
  // heaviest root, and where the fold lies from it depends on the run's timings (this test failed
  // about 1 run in 5 with the node at x = -1170 or -2207, off the window).
  const std::vector<std::string> args{db,          "--size",        "1400x900", "--view",
                                      "callgraph", "--view-option", "graph-fit"};
  std::vector<std::string> shot = args;
  shot.insert(shot.end(), {"--screenshot", dir + "/live.png", "--dump-view", dump});
  runTraceviewOk(shot, dir);
  const Dump d = readDump(dump);
  const std::string fold = "all/step/forward/layers.*";
  REQUIRE(d.nodes.count(fold));
  const DumpNode& n = d.nodes.at(fold);
  const int cx = static_cast<int>(d.sx(n.cx)), cy = static_cast<int>(d.sy(n.cy));
  INFO("the x2 node at (" << cx << ", " << cy << "), canvas " << d.canvasX << "," << d.canvasY
                          << " " << d.canvasW << "x" << d.canvasH << " scale " << d.scale);
  REQUIRE(cx >= d.canvasX);
  REQUIRE(cx < d.canvasX + d.canvasW);
  REQUIRE(cy >= d.canvasY);
  REQUIRE(cy < d.canvasY + d.canvasH);
  // The same window, the node hovered for a frame and clicked by a script (--script).
  const auto r = runScript(args,
                           {"0 move " + std::to_string(cx) + " " + std::to_string(cy), "+1 click",
                            "+1 settle", "+0 dump-view " + after},
                           dir, "x2-script.txt");
  INFO("stdout:\n" << r.out);
  const size_t at = r.out.find("selected node " + fold);
  REQUIRE(at != std::string::npos);
  REQUIRE(r.out.find("expanded fold " + fold, at) != std::string::npos);
  // The timeline selected the node's longest span (the viewer logs the span it selected).
  REQUIRE(r.out.find("selected span " + std::to_string(n.span), at) != std::string::npos);
  const Dump e = readDump(after);
  CHECK(!e.nodes.count(fold));
  CHECK(e.nodes.count("all/step/forward/layers.0"));
  CHECK(e.nodes.count("all/step/forward/layers.1"));
  // The two layers' numbers add up to the fold's.
  for (const char* k : {"calls", "inclusive_ns", "exclusive_ns"}) {
    INFO(k);
    CHECK(e.nodes.at("all/step/forward/layers.0").num.at(k) +
              e.nodes.at("all/step/forward/layers.1").num.at(k) ==
          n.num.at(k));
  }
  // The span selected is the one the view said; it lies in layer 0 or 1, so it is highlighted.
  CHECK((e.highlighted == "all/step/forward/layers.0" ||
         e.highlighted == "all/step/forward/layers.1"));
  // The new layout keeps the scale, centred on the fold's first member (not reopened elsewhere).
  CHECK(r.out.find("callgraph centred on all/step/forward/layers.0") != std::string::npos);
  CHECK(e.scale == Approx(d.scale).epsilon(1e-4));
  const DumpNode& first = e.nodes.at("all/step/forward/layers.0");
  CHECK(e.sx(first.cx) == Approx(e.canvasX + e.canvasW / 2).margin(1));
  CHECK(e.sy(first.cy) == Approx(e.canvasY + e.canvasH / 2).margin(1));
}

TEST_CASE("model view: a trace without module scopes says so in one line", "[viewer][graph]") {
  const std::string dir = e2e::scratch().path();
  writeSmallTrace(dir + "/plain.db", 20);
  const auto r = runTraceviewXvfb({dir + "/plain.db", "--view", "model", "--dump-view",
                                   dir + "/plain.txt", "--screenshot", dir + "/plain.png"},
                                  dir);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);  // the trace is fine; the tab explains what it cannot draw
  std::ifstream in(dir + "/plain.txt");
  std::string line, rest;
  REQUIRE(std::getline(in, line));
  CHECK(line.rfind("error ", 0) == 0);
  CHECK(line.find("no module scopes") != std::string::npos);
  CHECK(!std::getline(in, rest));
}

namespace {

// The px a fixed-size name needs: the window's 15 px font at 85 % (docs/viewer.md).
constexpr double kNamePx = 15 * 0.85;

// The lowest box of a drawn node (points).
double minNodeHeight(const dot::Graph& g, const dot::Layout& l) {
  double h = 1e300;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (g.nodes[i].shape != dot::NodeShape::kPlain) h = std::min(h, l.nodes[i].height);
  return h;
}

// The scale Fit gives: the layout in the canvas less a 16 px margin, at most 1.5 px per point.
double fitScaleOf(const dot::Layout& l, const Dump& d) {
  return std::min({(d.canvasW - 32) / l.width, (d.canvasH - 32) / l.height, 1.5});
}

// The graph's heaviest root, from the graph alone: a node no edge enters, the most inclusive
// time (the dumped numbers, which the first test holds equal to tracedot's), then the most nodes
// reached, then the first.
std::string heaviestRoot(const dot::Graph& g, const Dump& d) {
  std::vector<std::vector<int>> out(g.nodes.size());
  std::vector<bool> entered(g.nodes.size());
  for (const auto& e : g.edges) {
    if (e.from == e.to) continue;
    entered[static_cast<size_t>(e.to)] = true;
    out[static_cast<size_t>(e.from)].push_back(e.to);
  }
  auto reach = [&](size_t from) {
    std::vector<bool> seen(g.nodes.size());
    std::vector<size_t> todo{from};
    seen[from] = true;
    size_t n = 0;
    while (!todo.empty()) {
      const size_t v = todo.back();
      todo.pop_back();
      ++n;
      for (int w : out[v])
        if (!seen[static_cast<size_t>(w)]) {
          seen[static_cast<size_t>(w)] = true;
          todo.push_back(static_cast<size_t>(w));
        }
    }
    return n;
  };
  std::string best;
  int64_t bestT = -1;
  size_t bestR = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (entered[i] || g.nodes[i].shape == dot::NodeShape::kPlain) continue;
    const auto& num = d.nodes.at(g.nodes[i].id).num;
    const int64_t t = num.count("inclusive_ns") ? num.at("inclusive_ns") : 0;
    const size_t r = reach(i);
    if (t > bestT || (t == bestT && r > bestR)) {
      best = g.nodes[i].id;
      bestT = t;
      bestR = r;
    }
  }
  return best;
}

// A pixel near `rgb` within `r` px of (x, y).
bool colourNear(const Png& png, double x, double y, int r, uint32_t rgb, int tol) {
  for (int dy = -r; dy <= r; ++dy)
    for (int dx = -r; dx <= r; ++dx)
      if (near(png.rgb(static_cast<int>(x) + dx, static_cast<int>(y) + dy), rgb, tol)) return true;
  return false;
}

// palette.h's kGraphOverviewBorder (150, 150, 162) and kGraphOverviewView.
constexpr uint32_t kOverviewBorder = 0x9696a2, kOverviewView = 0xd200d2;

// The overview as dumped, against the picture and the transform: its frame's border in the
// screenshot, a corner of at most a fifth of the tab's width, the picture mapped into it with its
// aspect kept, and the shown part (computed from the transform) drawn where the dump says.
void checkOverview(const Dump& d, const dot::Layout& l, const Png& png) {
  REQUIRE(d.overview);
  const double* f = d.frame;
  const double* m = d.map;
  CHECK(f[2] - f[0] <= d.canvasW * 0.2 + 1);
  CHECK(f[2] <= d.canvasX + d.canvasW);
  CHECK(f[3] <= d.canvasY + d.canvasH);
  CHECK(f[0] > d.canvasX + d.canvasW / 2);  // the bottom-right corner
  CHECK(f[1] > d.canvasY + d.canvasH / 2);
  CHECK((m[2] - m[0]) / l.width == Approx((m[3] - m[1]) / l.height).epsilon(0.01));
  const double k = (m[2] - m[0]) / l.width;
  const double v0 = m[0] + d.panX * k, v1 = m[0] + (d.panX + d.canvasW / d.scale) * k;
  CHECK(d.view[0] == Approx(v0).margin(0.5));
  CHECK(d.view[2] == Approx(v1).margin(0.5));
  const double midX = (f[0] + f[2]) / 2, midY = (f[1] + f[3]) / 2;
  CHECK(colourNear(png, f[0] + 0.5, midY, 1, kOverviewBorder, 20));
  CHECK(colourNear(png, f[2] - 1, midY, 1, kOverviewBorder, 20));
  CHECK(colourNear(png, midX, f[1] + 0.5, 1, kOverviewBorder, 20));
  CHECK(colourNear(png, midX, f[3] - 1, 1, kOverviewBorder, 20));
  // The shown part's sides, where they fall inside the frame.
  const double u0 = m[1] + d.panY * k, u1 = m[1] + (d.panY + d.canvasH / d.scale) * k;
  CHECK(d.view[1] == Approx(u0).margin(0.5));
  CHECK(d.view[3] == Approx(u1).margin(0.5));
  const double vy = std::clamp((std::max(u0, f[1]) + std::min(u1, f[3])) / 2, f[1] + 3, f[3] - 3);
  const double vx = std::clamp((std::max(v0, f[0]) + std::min(v1, f[2])) / 2, f[0] + 3, f[2] - 3);
  int sides = 0;
  for (const double x : {v0, v1}) {
    if (x < f[0] + 3 || x > f[2] - 3) continue;
    ++sides;
    INFO("shown part's side at x " << x << " y " << vy);
    CHECK(colourNear(png, x, vy, 2, kOverviewView, 40));
  }
  for (const double y : {u0, u1}) {
    if (y < f[1] + 3 || y > f[3] - 3) continue;
    ++sides;
    INFO("shown part's side at y " << y << " x " << vx);
    CHECK(colourNear(png, vx, y, 2, kOverviewView, 40));
  }
  CHECK(sides >= 1);
}

// A window width at which the fitted drawing is too small to read: `widest`, or narrower where the
// drawing is narrow enough to read fitted at that width. The call graph's node count follows the
// run's timings (66 to 174 nodes seen beside busy loops), so the window is what keeps a test's
// premise, fitted too small to read, true of every run.
int unreadableFittedWidth(const dot::Graph& g, const dot::Layout& l, int widest) {
  return std::min(widest, static_cast<int>(l.width * 0.9 * kNamePx / minNodeHeight(g, l)) + 40);
}

}  // namespace

TEST_CASE("callgraph view: a graph too wide to read fitted opens readable on its heaviest root",
          "[viewer][graph][open]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().path();
  const auto reader = trace::TraceReader::open(db);
  const dot::Graph g = dot::buildCallGraphGraph(reader, {});
  const auto laid = dot::LaidOutGraph::layout(g);
  const dot::Layout& l = laid.positions();
  const double lowest = minNodeHeight(g, l);
  const std::string size = std::to_string(unreadableFittedWidth(g, l, 1600)) + "x1000";
  INFO("drawing " << l.width << " x " << l.height << " pt, " << g.nodes.size() << " nodes, window "
                  << size);
  const auto r = runTraceviewXvfb({db, "--view", "callgraph", "--dump-view", dir + "/open.txt",
                                   "--screenshot", dir + "/open.png", "--size", size},
                                  dir);
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const Dump d = readDump(dir + "/open.txt");
  // The graph is wide: fitted, its lowest boxes could not hold a name's line.
  REQUIRE(fitScaleOf(l, d) * lowest < kNamePx);
  // It opens where every box holds one, not fitted.
  CHECK(d.opened == "readable");
  CHECK(d.scale * lowest >= kNamePx);
  CHECK(d.scale > fitScaleOf(l, d) * 1.5);
  // On the heaviest root, centred across, its whole box in the tab, named at a readable size.
  const std::string root = heaviestRoot(g, d);
  INFO("root " << root);
  CHECK(d.root == root);
  REQUIRE(d.nodes.count(root));
  const DumpNode& n = d.nodes.at(root);
  const double x0 = d.sx(n.cx - n.w / 2), x1 = d.sx(n.cx + n.w / 2);
  const double y0 = d.sy(n.cy - n.h / 2), y1 = d.sy(n.cy + n.h / 2);
  CHECK(x0 >= d.canvasX);
  CHECK(x1 <= d.canvasX + d.canvasW);
  CHECK(y0 >= d.canvasY);
  CHECK(y1 <= d.canvasY + d.canvasH / 2);  // the top of the picture
  CHECK(std::find(d.visible.begin(), d.visible.end(), root) != d.visible.end());
  REQUIRE(d.labels.count(root));
  CHECK(d.labels.at(root).first >= 12);
  const Png png = loadPng(dir + "/open.png");
  size_t ri = 0;
  while (g.nodes[ri].id != root) ++ri;
  int ink = 0;
  for (int y = static_cast<int>(d.sy(n.cy)) - 4; y <= static_cast<int>(d.sy(n.cy)) + 4; ++y)
    for (int x = static_cast<int>(x0) + 3; x <= static_cast<int>(x1) - 3; ++x)
      ink += textOver(png.rgb(x, y), rgbOf(painted(g.nodes[ri]).fill),
                      rgbOf(painted(g.nodes[ri]).ink));
  CHECK(ink >= 8);  // its name's pixels: the font's colour antialiased over the fill
  // Every node whose whole box the tab shows (outside the overview) is named at 12 px or more,
  // with its label's first line or a "..." prefix of it.
  int shown = 0;
  for (const auto& node : g.nodes) {
    const DumpNode& b = d.nodes.at(node.id);
    const double a0 = d.sx(b.cx - b.w / 2), a1 = d.sx(b.cx + b.w / 2);
    const double b0 = d.sy(b.cy - b.h / 2), b1 = d.sy(b.cy + b.h / 2);
    if (a0 < d.canvasX || a1 > d.canvasX + d.canvasW || b0 < d.canvasY ||
        b1 > d.canvasY + d.canvasH)
      continue;
    if (a1 >= d.frame[0] && b1 >= d.frame[1]) continue;  // under the overview
    ++shown;
    INFO(node.id);
    REQUIRE(d.labels.count(node.id));
    CHECK(d.labels.at(node.id).first >= 12);
    const std::string name = node.label.substr(0, node.label.find('\n'));
    const std::string& text = d.labels.at(node.id).second;
    if (text != name) {
      REQUIRE(text.size() > 3);
      CHECK(text.substr(text.size() - 3) == "...");
      CHECK(name.rfind(text.substr(0, text.size() - 3), 0) == 0);
    }
  }
  CHECK(shown >= 10);
  CHECK(shown < static_cast<int>(g.nodes.size()));
  // The overview in the corner, the root's fill where the overview maps its centre.
  checkOverview(d, l, png);
  const double k = (d.map[2] - d.map[0]) / l.width;
  CHECK(colourNear(png, d.map[0] + n.cx * k, d.map[1] + n.cy * k, 1, n.fill, 40));
  // Fit (the option) shows everything: no overview.
  const auto f =
      runTraceviewXvfb({db, "--view", "callgraph", "--view-option", "graph-fit", "--dump-view",
                        dir + "/fit.txt", "--screenshot", dir + "/fit.png", "--size", size},
                       dir);
  REQUIRE(f.exit_code == 0);
  const Dump e = readDump(dir + "/fit.txt");
  CHECK(e.opened == "fitted");
  CHECK(e.scale == Approx(fitScaleOf(l, e)).epsilon(1e-4));
  CHECK(!e.overview);
}

TEST_CASE("model view: fitted when that reads, else readable with an overview",
          "[viewer][graph][open]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().path();
  const auto reader = trace::TraceReader::open(db);
  const dot::Graph g = dot::buildModelGraph(reader, {});
  const auto laid = dot::LaidOutGraph::layout(g);
  const dot::Layout& l = laid.positions();
  const double lowest = minNodeHeight(g, l);
  // A tall window: the small model fits readably and opens fitted, as before, no overview.
  {
    const auto r = runTraceviewXvfb({db, "--view", "model", "--dump-view", dir + "/m.txt",
                                     "--screenshot", dir + "/m.png", "--size", "1400x900"},
                                    dir);
    REQUIRE(r.exit_code == 0);
    const Dump d = readDump(dir + "/m.txt");
    REQUIRE(fitScaleOf(l, d) * lowest >= kNamePx);
    CHECK(d.opened == "fitted");
    CHECK(d.scale == Approx(fitScaleOf(l, d)).epsilon(1e-4));
    CHECK(!d.overview);
  }
  // A short one: fitted would not read; it opens readable on the top module, with an overview.
  const auto r = runTraceviewXvfb({db, "--view", "model", "--dump-view", dir + "/ms.txt",
                                   "--screenshot", dir + "/ms.png", "--size", "1000x300"},
                                  dir);
  REQUIRE(r.exit_code == 0);
  const Dump d = readDump(dir + "/ms.txt");
  REQUIRE(fitScaleOf(l, d) * lowest < kNamePx);
  CHECK(d.opened == "readable");
  CHECK(d.scale * lowest >= kNamePx);
  const std::string root = heaviestRoot(g, d);
  CHECK(d.root == root);
  CHECK(std::find(d.visible.begin(), d.visible.end(), root) != d.visible.end());
  REQUIRE(d.labels.count(root));
  CHECK(d.labels.at(root).first >= 12);
  checkOverview(d, l, loadPng(dir + "/ms.png"));
}

TEST_CASE("a script: a click and a drag in the overview move the view there",
          "[viewer][graph][script][open]") {
  const std::string& db = gptTrace();
  const std::string dir = e2e::scratch().file("overview");
  std::filesystem::create_directories(dir);
  const std::string dump = dir + "/ov.txt";
  const auto reader = trace::TraceReader::open(db);
  const dot::Graph g = dot::buildCallGraphGraph(reader, {});
  const auto laid = dot::LaidOutGraph::layout(g);
  const dot::Layout& l = laid.positions();
  // A window the drawing does not fit readably (a fitted view has no overview).
  const std::string size = std::to_string(unreadableFittedWidth(g, l, 1400)) + "x900";
  INFO("drawing " << l.width << " x " << l.height << " pt, " << g.nodes.size() << " nodes, window "
                  << size);
  const std::vector<std::string> args{db, "--size", size, "--view", "callgraph"};
  std::vector<std::string> shot = args;
  shot.insert(shot.end(), {"--screenshot", dir + "/ov.png", "--dump-view", dump});
  runTraceviewOk(shot, dir);
  const Dump d = readDump(dump);
  REQUIRE(fitScaleOf(l, d) * minNodeHeight(g, l) < kNamePx);
  REQUIRE(d.overview);
  const double k = (d.map[2] - d.map[0]) / l.width;  // overview px per point
  // The picture's point under overview pixel (px, py), clamped to the picture.
  const auto pointAt = [&](int px, int py) {
    return std::make_pair(std::clamp((px - d.map[0]) / k, 0.0, l.width),
                          std::clamp((py - d.map[1]) / k, 0.0, l.height));
  };
  // A click at 85 % across the overview, far right of where the view opened (15 % when it opened
  // on the right half: where it opens depends on the run's timings).
  const double opened = (d.canvasX + d.canvasW / 2 - d.sx(0)) / d.scale;  // picture x at centre
  const double across = opened > l.width / 2 ? 0.15 : 0.85;
  INFO("opened centred on x " << opened << " of " << l.width << "; click at " << across);
  const int px = static_cast<int>(d.map[0] + across * (d.map[2] - d.map[0]));
  const int py = static_cast<int>((d.map[1] + d.map[3]) / 2);
  // What lies beneath that pixel in the main view: it must not be selected.
  std::string beneath;
  for (const auto& [id, n] : d.nodes) {
    if (std::fabs(px - d.sx(n.cx)) <= n.w / 2 * d.scale &&
        std::fabs(py - d.sy(n.cy)) <= n.h / 2 * d.scale)
      beneath = id;
  }
  INFO("beneath the overview click: " << (beneath.empty() ? "no node" : beneath));
  // The view moves there: a node near the new centre, clicked where the moved transform puts it,
  // is the one selected.
  const auto [gx, gy] = pointAt(px, py);
  const double cx = d.canvasX + d.canvasW / 2, cy = d.canvasY + d.canvasH / 2;
  auto screenX = [&](double x) { return cx + (x - gx) * d.scale; };
  auto screenY = [&](double y) { return cy + (y - gy) * d.scale; };
  std::string target;
  double best = 1e300;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto& b = l.nodes[i];
    const double sx = screenX(b.center.x), sy = screenY(b.center.y);
    if (g.nodes[i].fold > 1 || sx < d.canvasX + 20 || sy < d.canvasY + 80 ||
        sx > d.canvasX + d.canvasW - 20 || sy > d.frame[1] - 20)
      continue;
    const double dist = std::hypot(sx - cx, sy - cy);
    if (dist < best) {
      best = dist;
      target = g.nodes[i].id;
    }
  }
  REQUIRE(!target.empty());
  const DumpNode& t = d.nodes.at(target);
  INFO("target " << target);
  // Out of the tab before the move (where the view opened).
  CHECK(std::find(d.visible.begin(), d.visible.end(), target) == d.visible.end());
  CHECK(std::fabs(screenX(t.cx) - d.sx(t.cx)) > d.canvasW / 2);
  // Then a drag inside the overview: the view follows to where the button is released.
  const int qx = static_cast<int>(d.map[0] + 0.10 * (d.map[2] - d.map[0]));
  const int sx0 = static_cast<int>(d.map[0] + 0.40 * (d.map[2] - d.map[0]));
  const auto xy = [](double x, double y) {
    return std::to_string(static_cast<int>(x)) + " " + std::to_string(static_cast<int>(y));
  };
  const auto r = runScript(
      args,
      {"0 move " + xy(px, py), "+1 click", "+1 settle",
       "+1 move " + xy(screenX(t.cx), screenY(t.cy)), "+1 click", "+1 settle",
       "+1 move " + xy(sx0, py), "+1 drag " + xy(sx0, py) + " " + xy(qx, py) + " 4", "+1 settle"},
      dir, "ov-script.txt");
  INFO("stdout:\n" << r.out);
  // Where the view centred after each release in the overview (the log says): the picture's point
  // under that pixel (within the pixel).
  std::vector<std::pair<double, double>> centres;
  size_t selected = std::string::npos, firstCentre = std::string::npos;
  for (size_t at = r.out.find("callgraph overview centre "); at != std::string::npos;
       at = r.out.find("callgraph overview centre ", at + 1)) {
    double x = 0, y = 0;
    REQUIRE(std::sscanf(r.out.c_str() + at + 26, "%lf %lf", &x, &y) == 2);
    centres.emplace_back(x, y);
    if (firstCentre == std::string::npos) firstCentre = at;
  }
  REQUIRE(centres.size() == 2);
  CHECK(centres[0].first == Approx(gx).margin(1.5 / k));
  CHECK(centres[0].second == Approx(gy).margin(1.5 / k));
  const auto [qgx, qgy] = pointAt(qx, py);
  CHECK(centres[1].first == Approx(qgx).margin(1.5 / k));
  CHECK(centres[1].second == Approx(qgy).margin(1.5 / k));
  // The overview click selected nothing; the click after it selected the target.
  selected = r.out.find("selected node");
  REQUIRE(selected != std::string::npos);
  CHECK(selected > firstCentre);
  CHECK(r.out.find("node " + target, firstCentre) != std::string::npos);
}
