// The layout service and renderers on hand-made graphs: escaping survives an XML parser, ids and
// tooltips reach the SVG, positions match the nodes, the budget is enforced, output is
// byte-identical, every format renders, and the text tree.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "analysis_builder.h"
#include "dot_test_util.h"
#include "escape.h"
#include "tracerun/dot/layout.h"
#include "tracerun/dot/render.h"

using namespace tracerun;
using namespace tracerun::dot;

namespace {

Edge edge(int from, int to) {
  Edge e;
  e.from = from;
  e.to = to;
  return e;
}

Graph nastyGraph() {
  Graph g;
  g.title = "title <&> {x|y} \"q\" 'a'";
  g.caption = "line one\nline \\N two";
  Cluster cl;
  cl.id = "cl<1>";
  cl.label = "cluster & co";
  const int c = g.addCluster(cl);
  Node a;
  a.id = "all/a<b>&c{d}|e\"f'\\N\\";
  a.label = "op<T>&{x|y}\n\"quoted\" \\N 'x'";
  a.tooltip = "shape: [2, 3] & <float>\nsecond \\G line";
  a.cluster = c;
  g.addNode(a);
  Node b;
  b.id = "all/b";
  b.label = "b \xff bad utf8 \xc3\xa9";
  b.shape = NodeShape::kHexagon;
  b.fold = 3;
  g.addNode(b);
  Edge e;
  e.from = 0;
  e.to = 1;
  e.label = "<edge>&";
  g.addEdge(e);
  return g;
}

void write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

TEST_CASE("escaping: < > & { } | quotes survive Graphviz and an XML parser", "[dot][render]") {
  CHECK(htmlText("a<b>&{c}|\"d'") == "a&lt;b&gt;&amp;&#123;c&#125;&#124;&quot;d&#39;");
  CHECK(attributeText("x\\N&y\nz") == "x\\\\\\\\N&amp;y&#10;z");
  CHECK(attributeText("x\\N", true) == "x\\\\N");
  const std::string dir = testing::scratchDir("dot_escape");
  const std::string svg = dir + "/nasty.svg";
  write(svg, renderGraph(nastyGraph(), Format::kSvg));
  const auto parsed = dottest::parseSvg(svg, dir);  // throws when not well-formed XML
  const auto* a = parsed.byId("all/a<b>&c{d}|e\"f'\\N\\");
  REQUIRE(a);
  CHECK(a->tooltip == "shape: [2, 3] & <float>\nsecond \\G line");
  REQUIRE(a->text.size() == 2);
  CHECK(a->text[0] == "op<T>&{x|y}");
  CHECK(a->text[1] == "\"quoted\" \\N 'x'");
  const auto* b = parsed.byId("all/b");
  REQUIRE(b);
  CHECK(b->text[0] == "b \xef\xbf\xbd bad utf8 \xc3\xa9");
  REQUIRE(parsed.caption.size() == 3);
  CHECK(parsed.caption[0] == "title <&> {x|y} \"q\" 'a'");
  CHECK(parsed.caption[2] == "line \\N two");
  REQUIRE(parsed.clusters.size() == 1);
  CHECK(parsed.clusters[0].id == "cl<1>");
  CHECK(parsed.edges == 1);
}

TEST_CASE("layout: one box per node, one route per edge, inside the drawing", "[dot][layout]") {
  Graph g = nastyGraph();
  for (int i = 0; i < 20; ++i) {
    Node n;
    n.id = "n" + std::to_string(i);
    n.label = n.id;
    g.addNode(n);
    g.addEdge(edge(1, static_cast<int>(g.nodes.size()) - 1));
  }
  const auto laid = LaidOutGraph::layout(g);
  const Layout& l = laid.positions();
  REQUIRE(l.nodes.size() == g.nodes.size());
  REQUIRE(l.edges.size() == g.edges.size());
  REQUIRE(l.clusters.size() == 1);
  CHECK_FALSE(l.limited);
  for (const auto& b : l.nodes) {
    CHECK(b.width > 0);
    CHECK(b.height > 0);
    CHECK(b.center.x >= 0);
    CHECK(b.center.x <= l.width);
    CHECK(b.center.y >= 0);
    CHECK(b.center.y <= l.height);
  }
  for (const auto& e : l.edges) {
    REQUIRE_FALSE(e.beziers.empty());
    CHECK(e.beziers[0].size() % 3 == 1);
    CHECK(e.has_head_arrow);
  }
  // Children of node 1 lie below it (top to bottom, y grows downwards).
  for (size_t i = 2; i < l.nodes.size(); ++i) CHECK(l.nodes[i].center.y > l.nodes[1].center.y);
  // The cluster encloses its node.
  CHECK(l.clusters[0].min.x <= l.nodes[0].center.x);
  CHECK(l.clusters[0].max.x >= l.nodes[0].center.x);
  CHECK(l.clusters[0].min.y <= l.nodes[0].center.y);
  CHECK(l.clusters[0].max.y >= l.nodes[0].center.y);
}

TEST_CASE("layout: the node budget refuses a larger graph, large graphs get limits",
          "[dot][layout]") {
  Graph g;
  for (int i = 0; i < 40; ++i) {
    Node n;
    n.id = n.label = "n" + std::to_string(i);
    g.addNode(n);
    if (i > 0) g.addEdge(edge(i / 2, i));
  }
  LayoutOptions o;
  o.max_nodes = 39;
  CHECK_THROWS_WITH(LaidOutGraph::layout(g, o),
                    Catch::Contains("40 nodes") && Catch::Contains("budget of 39"));
  o.max_nodes = 40;
  o.large_nodes = 30;
  const auto laid = LaidOutGraph::layout(g, o);
  CHECK(laid.positions().limited);
  CHECK(laid.render(Format::kDot).find("remincross=false") != std::string::npos);
  CHECK(laid.render(Format::kDot).find("ortho") == std::string::npos);
}

TEST_CASE("render: byte-identical output, every format", "[dot][render]") {
  const Graph g = nastyGraph();
  CHECK(renderGraph(g, Format::kSvg) == renderGraph(g, Format::kSvg));
  CHECK(renderGraph(g, Format::kDot) == renderGraph(g, Format::kDot));
  CHECK(renderGraph(g, Format::kPng).substr(1, 3) == "PNG");
  const std::string pdf = renderGraph(g, Format::kPdf);
  CHECK(pdf.substr(0, 5) == "%PDF-");
  CHECK(pdf.find("/CreationDate (D:00000000000000Z)") != std::string::npos);
  CHECK(parseFormat("txt") == Format::kTxt);
  CHECK_THROWS_WITH(parseFormat("jpg"), Catch::Contains("svg, png, pdf, dot or txt"));
  CHECK(formatOfPath("a/b.PNG", Format::kSvg) == Format::kPng);
  CHECK(formatOfPath("a.b/c", Format::kSvg) == Format::kSvg);
}

TEST_CASE("render: the text tree", "[dot][render]") {
  Graph g;
  g.title = "T";
  for (const char* name : {"root", "a", "b", "c"}) {
    Node n;
    n.id = name;
    n.label = std::string(name) + "\n1 ms";
    g.addNode(n);
  }
  g.addEdge(edge(0, 1));
  g.addEdge(edge(0, 2));
  g.addEdge(edge(1, 3));
  Edge link = edge(3, 2);
  link.style = EdgeStyle::kDashed;
  link.constraint = false;
  link.label = "x2";
  g.addEdge(link);
  CHECK(renderText(g) ==
        "T\n\nroot | 1 ms\n  a | 1 ms\n    c | 1 ms\n  b | 1 ms\n\nlinks:\n  c | 1 ms ~> b | 1 ms "
        "(x2)\n");
}

TEST_CASE("writeOutput: no half-written file on a bad path", "[dot][render]") {
  CHECK_THROWS_WITH(writeOutput("/nonexistent-dir/x.svg", "x"),
                    Catch::Contains("/nonexistent-dir/x.svg") && Catch::Contains("cannot write"));
}
