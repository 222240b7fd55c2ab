// The dataflow model diagram (issue 27) on real traces: torch.fx as the truth for the module-to-
// module edges (model_fx_edges.py: ResNet-18, ResNet-50, a model with a branch and a shared
// module), gpttrain's residuals and layer norms, and the layout's boxes (no edge label on a node,
// a cluster title or another label; folded ResNet-18 within one screen height).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "e2e_common.h"
#include "tracerun/dot/layout.h"
#include "tracerun/dot/model_graph.h"
#include "tracerun/trace/analysis/model.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using e2e::ProcessResult;

namespace {

const char* kPython = "/usr/bin/python3";  // Debian's, with torch and torchvision (NOTES.md)
const std::string kSamples = TRACERUN_SOURCE_DIR "/samples/python";

// Traces samples/python/model_forward.py MODEL (once per capture list); returns the trace.
std::string tracePython(const std::string& model, const std::string& capture) {
  static std::map<std::string, std::string> made;
  const std::string key = model + "." + std::to_string(std::hash<std::string>()(capture));
  if (made.count(key)) return made[key];
  const std::string db = e2e::scratch().file(key + ".db");
  const ProcessResult r = e2e::runTracerun({"--status", "off", "--capture", capture, "-o", db, "--",
                                            kPython, kSamples + "/model_forward.py", model});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return made[key] = db;
}

// `tracedot model DB --expand -T dot` read by model_fx_edges.py against torch.fx.
ProcessResult compareWithFx(const std::string& model, const std::string& db) {
  const std::string dot = e2e::scratch().file(model + ".dot");
  const ProcessResult d = e2e::runProcess(
      TRACEDOT_BIN, {"model", db, "--expand", "-T", "dot", "-o", dot}, e2e::scratch().path());
  INFO(d.describe());
  REQUIRE(d.exit_code == 0);
  return e2e::runProcess(kPython, {MODEL_FX_EDGES_PY, model, dot, kSamples}, e2e::scratch().path());
}

struct Box {
  double x0, y0, x1, y1;
  bool meets(const Box& o) const {  // a quarter point of slack for rounding
    return x0 + 0.25 < o.x1 && o.x0 + 0.25 < x1 && y0 + 0.25 < o.y1 && o.y0 + 0.25 < y1;
  }
};

Box around(dot::Point c, double w, double h) {
  return {c.x - w / 2, c.y - h / 2, c.x + w / 2, c.y + h / 2};
}

// Every pair (edge label, node | cluster title | other edge label) and (cluster title, node) that
// meets, named; empty when none does.
std::vector<std::string> overlaps(const dot::Graph& g, const dot::Layout& l) {
  std::vector<std::pair<std::string, Box>> solid;  // nodes and cluster titles
  for (size_t i = 0; i < l.nodes.size(); ++i) {
    solid.emplace_back("node " + g.nodes[i].id,
                       around(l.nodes[i].center, l.nodes[i].width, l.nodes[i].height));
  }
  std::vector<std::pair<std::string, Box>> titles;
  for (size_t i = 0; i < l.clusters.size(); ++i) {
    const dot::ClusterBox& c = l.clusters[i];
    if (c.has_label) {
      titles.emplace_back("title of " + g.clusters[i].id,
                          around(c.label, c.label_width, c.label_height));
    }
  }
  std::vector<std::string> out;
  for (const auto& [name, box] : titles) {
    for (const auto& [other, b] : solid) {
      if (box.meets(b)) out.push_back(name + " meets " + other);
    }
  }
  solid.insert(solid.end(), titles.begin(), titles.end());
  for (size_t i = 0; i < l.edges.size(); ++i) {
    const dot::EdgeRoute& e = l.edges[i];
    if (!e.has_label) continue;
    const Box box = around(e.label, e.label_width, e.label_height);
    const std::string name = "label '" + g.edges[i].label + "' of " +
                             g.nodes[static_cast<size_t>(g.edges[i].from)].id + " -> " +
                             g.nodes[static_cast<size_t>(g.edges[i].to)].id;
    for (const auto& [other, b] : solid) {
      if (box.meets(b)) out.push_back(name + " meets " + other);
    }
    solid.emplace_back(name, box);
  }
  return out;
}

dot::Graph modelGraph(const std::string& db, bool expand = false) {
  const auto reader = trace::TraceReader::open(db);
  dot::ModelGraphOptions o;
  o.expand = expand;
  return dot::buildModelGraph(reader, o);
}

void checkNoOverlap(const std::string& what, const dot::Graph& g) {
  const dot::Layout l = dot::LaidOutGraph::layout(g).positions();
  size_t labels = 0;
  for (const auto& e : l.edges) labels += e.has_label ? 1 : 0;
  INFO(what << ": " << labels << " edge labels, " << l.clusters.size() << " clusters");
  CHECK(labels > 0);
  const std::vector<std::string> bad = overlaps(g, l);
  for (size_t i = 0; i < std::min<size_t>(bad.size(), 10); ++i) UNSCOPED_INFO(bad[i]);
  CHECK(bad.empty());
}

int nodeNamed(const dot::Graph& g, const std::string& id) {
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE(
    "model dataflow: module-to-module edges equal torch.fx's (ResNet-18, ResNet-50, a "
    "branch with a shared module)",
    "[dot][model][fx]") {
  for (const std::string model : {"branch", "resnet18", "resnet50"}) {
    const ProcessResult r = compareWithFx(model, tracePython(model, "ops,scopes,tensors"));
    // The differences first, on one line: a CI log keeps only a failure's first lines.
    std::string said = r.out + " " + r.err.substr(0, 2000);
    std::replace(said.begin(), said.end(), '\n', '|');
    INFO(model << " (exit " << r.exit_code << "): " << said);
    CHECK(r.exit_code == 0);
    CHECK(r.out.find(model + ": fx ") != std::string::npos);
  }
}

TEST_CASE("model dataflow: without the tensors word the call-order chain differs from fx",
          "[dot][model][fx]") {
  // The comparison has teeth: the old picture (one chain in call order) is not fx's graph.
  const ProcessResult r = compareWithFx("resnet18", tracePython("resnet18", "ops,scopes"));
  INFO(r.describe());
  CHECK(r.exit_code == 1);
  CHECK(r.out.find("edges only in fx") != std::string::npos);
}

TEST_CASE("model dataflow: a module called three times is three nodes, the shared weights twice",
          "[dot][model]") {
  const dot::Graph g = modelGraph(tracePython("branch", "ops,scopes,tensors"), true);
  for (const char* id : {"module/act", "module/act (2)", "module/act (3)", "module/proj",
                         "module/proj (2)", "input", "output"}) {
    INFO(id);
    CHECK(nodeNamed(g, id) >= 0);
  }
  CHECK(nodeNamed(g, "module/act (4)") < 0);
  // The residual: the add after the second projection takes the pooled tensor too.
  const int add = nodeNamed(g, "op/BranchShared/add");
  REQUIRE(add >= 0);
  std::set<std::string> into;
  for (const dot::Edge& e : g.edges) {
    if (e.to == add) into.insert(g.nodes[static_cast<size_t>(e.from)].id);
  }
  CHECK(into == std::set<std::string>{"module/proj (2)", "op/BranchShared/flatten"});
}

TEST_CASE("model dataflow: folded ResNet-18 fits one screen height and shows its residual adds",
          "[dot][model]") {
  const dot::Graph g = modelGraph(tracePython("resnet18", "ops,scopes,tensors"));
  const dot::Layout l = dot::LaidOutGraph::layout(g).positions();
  // 1080 pixels at 96 per inch; Graphviz's points are 1/72 inch.
  CHECK(l.height * 96.0 / 72.0 <= 1080.0);
  // layer1's blocks fold into one; layer2..4 each draw two blocks: 7 adds, each fed twice.
  int adds = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (g.nodes[i].label != "add_") continue;
    ++adds;
    int in = 0;
    for (const dot::Edge& e : g.edges) in += e.to == static_cast<int>(i) ? 1 : 0;
    INFO(g.nodes[i].id);
    CHECK(in == 2);
  }
  CHECK(adds == 7);
}

TEST_CASE("model dataflow: traceview's entry (tree, map) draws the same graph, modules mapped",
          "[dot][model]") {
  // traceview's Model tab builds the tree itself and passes it with a map (graph_scene.cpp).
  const std::string db = tracePython("resnet18", "ops,scopes,tensors");
  const auto reader = trace::TraceReader::open(db);
  const trace::analysis::ModelTree tree = trace::analysis::buildModelTree(reader);
  REQUIRE_FALSE(tree.flow.empty());
  dot::ModelGraphMap map;
  const dot::Graph viewer = dot::buildModelGraph(tree, {}, reader.path(), &map);
  const dot::Graph direct = modelGraph(db);
  REQUIRE(viewer.nodes.size() == direct.nodes.size());
  REQUIRE(viewer.edges.size() == direct.edges.size());
  for (size_t i = 0; i < viewer.nodes.size(); ++i) CHECK(viewer.nodes[i].id == direct.nodes[i].id);
  for (size_t i = 0; i < viewer.edges.size(); ++i) {
    CHECK(viewer.edges[i].from == direct.edges[i].from);
    CHECK(viewer.edges[i].to == direct.edges[i].to);
  }
  // Every module the pass called is drawn: as a node or a cluster (a fold's later members by
  // the fold's first, whose map entry the viewer follows).
  for (const auto& n : tree.flow.nodes) {
    if (n.kind != trace::analysis::FlowNode::Kind::kCall) continue;
    const std::string& path = tree.modules[static_cast<size_t>(n.module)].path;
    if (path.rfind("layer1.1", 0) == 0) continue;  // folded into layer1.0's ×2
    INFO(path);
    CHECK((map.node_of[static_cast<size_t>(n.module)] >= 0 ||
           map.cluster_of[static_cast<size_t>(n.module)] >= 0));
  }
}

TEST_CASE("model layout: no edge label meets a node, a cluster title or another label",
          "[dot][model][layout]") {
  checkNoOverlap("ResNet-18 dataflow, folded",
                 modelGraph(tracePython("resnet18", "ops,scopes,tensors")));
  checkNoOverlap("ResNet-18 dataflow, expanded",
                 modelGraph(tracePython("resnet18", "ops,scopes,tensors"), true));
  checkNoOverlap("ResNet-18 call-order chain", modelGraph(tracePython("resnet18", "ops,scopes")));
}

#ifdef GPTTRAIN_BIN
namespace {

std::string traceGpt(const std::string& capture, const std::string& tag, int pp = 1) {
  const std::string db = e2e::scratch().file("gpt_" + tag + ".db");
  const ProcessResult r = e2e::runGpttrain(
      {"--status", "off", "--nproc-per-node", std::to_string(pp), "--capture", capture, "-o", db},
      GPTTRAIN_BIN,
      {"--pp", std::to_string(pp), "--layers", std::to_string(2 * pp), "--hidden", "64", "--heads",
       "4", "--seq-len", "32", "--global-batch", "4", "--micro-batch-size", "2", "--steps", "1"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return db;
}

}  // namespace

TEST_CASE("model dataflow: gpttrain's residuals go around attention and MLP, layer norms drawn",
          "[dot][model]") {
  const std::string db = traceGpt("ops,scopes,tensors", "tensors");
  const dot::Graph g = modelGraph(db, true);
  auto clusterOf = [&](const std::string& id) {
    for (size_t i = 0; i < g.clusters.size(); ++i) {
      if (g.clusters[i].id == id) return static_cast<int>(i);
    }
    return -1;
  };
  for (const std::string block : {"layers.0.attn", "layers.0.mlp", "layers.1.attn"}) {
    INFO(block);
    const int c = clusterOf("module/" + block);
    REQUIRE(c >= 0);
    const int norm = nodeNamed(g, "op/" + block + "/layer_norm");
    REQUIRE(norm >= 0);
    CHECK(g.nodes[static_cast<size_t>(norm)].cluster == c);
    // The block's last add takes one tensor from inside the block and one from outside it (the
    // residual stream, around the block).
    const int add = nodeNamed(g, "op/" + block + "/add");
    REQUIRE(add >= 0);
    int inside = 0, outside = 0;
    for (const dot::Edge& e : g.edges) {
      if (e.to != add) continue;
      (g.nodes[static_cast<size_t>(e.from)].cluster == c ? inside : outside) += 1;
    }
    CHECK(inside == 1);
    CHECK(outside == 1);
  }
  checkNoOverlap("gpttrain dataflow", modelGraph(db));
}

TEST_CASE("model dataflow: pipeline stages are joined, stage 1 reads what stage 0 hands on",
          "[dot][model]") {
  const dot::Graph g = modelGraph(traceGpt("ops,scopes,tensors", "pp2", 2), true);
  auto from = [&](const std::string& to) {
    std::set<std::string> out;
    const int n = nodeNamed(g, to);
    for (const dot::Edge& e : g.edges) {
      if (e.to == n) out.insert(g.nodes[static_cast<size_t>(e.from)].id);
    }
    return out;
  };
  CHECK(from("module/embedding") == std::set<std::string>{"input"});
  // layers.2 (stage 1) reads layers.1's output (stage 0) in its layer norm and its residual.
  CHECK(from("op/layers.2.attn/layer_norm") == std::set<std::string>{"op/layers.1.mlp/add"});
  CHECK(from("op/layers.2.attn/add").count("op/layers.1.mlp/add") == 1);
  CHECK(from("output") == std::set<std::string>{"module/head"});
}

TEST_CASE("model layout: gpttrain's call-order chain keeps its labels off the cluster titles",
          "[dot][model][layout]") {
  checkNoOverlap("gpttrain call-order chain", modelGraph(traceGpt("ops,scopes", "chain")));
}
#endif
