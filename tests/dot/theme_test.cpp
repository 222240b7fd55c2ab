// Themes applied at output and the layout service's own Graphviz lock: the light theme gives each
// role tracedot's colours (the SVG's fills are the theme's), another theme changes only colours,
// and graphs laid out from several threads at once, with no lock of the caller's, all come out.
#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "tracerun/dot/layout.h"
#include "tracerun/dot/render.h"
#include "tracerun/dot/theme.h"

using namespace tracerun::dot;

namespace {

Graph roleGraph() {
  Graph g;
  g.title = "roles";
  Cluster stage;
  stage.id = "stage1";
  stage.role = Role::kStage;
  stage.index = 1;
  const int c = g.addCluster(stage);
  const Role roles[] = {Role::kForward, Role::kBackward, Role::kWeightGradient, Role::kTransfer,
                        Role::kOp};
  for (Role r : roles) {
    Node n;
    n.id = "n" + std::to_string(g.nodes.size());
    n.label = n.id;
    n.role = r;
    n.cluster = c;
    n.metrics.heat = 1.0;
    g.addNode(n);
  }
  g.nodes[0].accent = Accent::kCritical;
  Edge e;
  e.from = 0;
  e.to = 1;
  e.role = Role::kFlow;
  g.addEdge(e);
  return g;
}

}  // namespace

TEST_CASE("theme: the light theme gives each role tracedot's colours", "[dot][theme]") {
  const Theme t = Theme::light();
  const Graph g = roleGraph();
  CHECK(nodePaint(t, g.nodes[0]).fill == Rgb{198, 219, 239});  // forward
  CHECK(nodePaint(t, g.nodes[0]).line == Rgb{204, 0, 0});      // on the critical path
  CHECK(nodePaint(t, g.nodes[1]).fill == Rgb{253, 208, 162});  // backward
  CHECK(nodePaint(t, g.nodes[1]).line == Rgb{0, 0, 0});
  CHECK(nodePaint(t, g.nodes[2]).fill == Rgb{230, 145, 56});   // W
  CHECK(nodePaint(t, g.nodes[3]).fill == Rgb{255, 236, 179});  // send / receive
  CHECK(nodePaint(t, g.nodes[4]).fill == Rgb{255, 0, 0});      // heat 1: red
  CHECK(nodePaint(t, g.nodes[4]).ink == Rgb{255, 255, 255});
  CHECK(clusterPaint(t, g.clusters[0]).fill == Rgb{229, 245, 224});  // stage 1's tint
  CHECK(edgeColour(t, g.edges[0]) == Rgb{96, 96, 160});

  // The SVG is drawn in the theme's colours; no background is stated in the light theme.
  const std::string svg = renderGraph(g, Format::kSvg);
  CHECK(svg.find("fill=\"#c6dbef\"") != std::string::npos);
  CHECK(svg.find("stroke=\"#cc0000\"") != std::string::npos);
  CHECK(svg.find("fill=\"#e5f5e0\"") != std::string::npos);
}

TEST_CASE("theme: another theme changes colours only", "[dot][theme]") {
  const Graph g = roleGraph();
  Theme dark;
  dark.paper = {30, 30, 36};
  dark.state_paper = true;
  dark.forward = {40, 80, 130};
  LayoutOptions o;
  o.theme = dark;
  const LaidOutGraph a = LaidOutGraph::layout(g);
  const LaidOutGraph b = LaidOutGraph::layout(g, o);
  CHECK(a.positions().width == b.positions().width);
  CHECK(a.positions().height == b.positions().height);
  const std::string svg = b.render(Format::kSvg);
  CHECK(svg.find("fill=\"#285082\"") != std::string::npos);
  CHECK(svg.find("#1e1e24") != std::string::npos);  // the paper
  CHECK(svg.find("fill=\"#c6dbef\"") == std::string::npos);
  CHECK(nodePaint(dark, g.nodes[0]).ink == Rgb{255, 255, 255});  // light ink on a dark fill
}

TEST_CASE("layout: threads lay out and render at once without a lock of their own",
          "[dot][layout]") {
  const Graph g = roleGraph();
  const std::string want = renderGraph(g, Format::kSvg);
  std::vector<std::string> got(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 5; ++k) got[i] = LaidOutGraph::layout(g).render(Format::kSvg);
    });
  }
  for (auto& t : threads) t.join();
  for (const std::string& s : got) CHECK(s == want);
}
