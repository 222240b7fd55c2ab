// tracedot on real traces: gpttrain traced by the tracerun launcher (6 layers in one process; 4
// layers on two pipeline stages; a 1F1B dry run with p = 4, m = 8; two data-parallel copies of a
// 2-stage pipeline for --replica), each SVG parsed as XML and read back against trace/'s
// analyses; bad input; byte-identical output.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "dot_test_util.h"
#include "e2e_common.h"
#include "tracerun/dot/autograd_graph.h"
#include "tracerun/trace/analysis/autograd.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/analysis/critical_path.h"
#include "tracerun/trace/analysis/pipeline.h"

using namespace tracerun;
using e2e::ProcessResult;

namespace {

ProcessResult tracedot(const std::vector<std::string>& args) {
  return e2e::runProcess(TRACEDOT_BIN, args, e2e::scratch().path());
}

dottest::Svg svgOf(const std::string& path) {
  return dottest::parseSvg(path, e2e::scratch().path());
}

std::vector<const dottest::SvgNode*> foldNodes(const dottest::Svg& s) {
  std::vector<const dottest::SvgNode*> out;
  for (const auto& n : s.nodes) {
    if (n.fields.count("fold")) out.push_back(&n);
  }
  return out;
}

// Every drawn node whose children are drawn adds up: self + children = inclusive.
void checkAddsUp(const dottest::Svg& s) {
  std::map<std::string, int64_t> childSum;
  std::map<std::string, int> children;
  for (const auto& n : s.nodes) {
    const size_t slash = n.id.rfind('/');
    if (slash == std::string::npos) continue;
    childSum[n.id.substr(0, slash)] += n.num("inclusive_ns");
    ++children[n.id.substr(0, slash)];
  }
  for (const auto& n : s.nodes) {
    if (!children.count(n.id)) continue;
    INFO(n.id);
    CHECK(n.num("exclusive_ns") + childSum[n.id] == n.num("inclusive_ns"));
  }
}

#ifdef GPTTRAIN_BIN
const std::string& singleTrace() {
  static const std::string path = [] {
    const std::string db = e2e::scratch().file("gpt6.db");
    const auto r = e2e::runGpttrain(
        {"-o", db}, GPTTRAIN_BIN,
        {"--layers", "6", "--hidden", "32", "--heads", "2", "--seq-len", "8", "--vocab", "64",
         "--steps", "2", "--global-batch", "2", "--micro-batch-size", "1"});
    if (!r.exited || r.exit_code != 0) throw std::runtime_error("gpttrain: " + r.describe());
    return db;
  }();
  return path;
}
#endif

}  // namespace

#ifdef GPTTRAIN_BIN
TEST_CASE("tracedot callgraph: a 6-layer gpttrain step folds into exactly one x6",
          "[dot][e2e][callgraph]") {
  const std::string svg = e2e::scratch().file("cg6.svg");
  const auto r = tracedot({"callgraph", singleTrace(), "-o", svg, "--step", "2"});
  REQUIRE(r.exit_code == 0);
  CHECK(r.err.empty());
  const auto s = svgOf(svg);
  const auto f = foldNodes(s);
  REQUIRE(f.size() == 1);
  CHECK(f[0]->num("fold") == 6);
  CHECK(f[0]->id == "all/step/forward/layers.*");
  CHECK(f[0]->text[0] == "layers.* \u00d76");
  // Its numbers are the sums of the six layers in trace/'s call graph of step 2.
  const auto reader = trace::TraceReader::open(singleTrace());
  trace::analysis::CallGraphOptions co;
  co.step = 2;
  const auto cg = trace::analysis::buildCallGraph(reader, co);
  int64_t calls = 0, incl = 0, layers = 0, total = 0;
  for (size_t i = 1; i < cg.nodes.size(); ++i) {
    const std::string path = cg.path(static_cast<int>(i), reader, "/");
    if (std::regex_match(path, std::regex("step/forward/layers\\.[0-9]+"))) {
      calls += cg.nodes[i].count;
      incl += cg.nodes[i].inclusive_ns;
      ++layers;
    }
    if (cg.nodes[i].parent == 0) total += cg.nodes[i].inclusive_ns;
  }
  CHECK(layers == 6);
  CHECK(f[0]->num("calls") == calls);
  CHECK(f[0]->num("inclusive_ns") == incl);
  REQUIRE(s.byId("all"));
  CHECK(s.byId("all")->num("inclusive_ns") == total);
  checkAddsUp(s);
  // --expand draws each layer. With no node threshold: under load one layer's forward can fall
  // under the default 0.5% of the step and go into "other" (seen in the ctest -j2 loop beside
  // builds, issue 29), which is the threshold's business, not --expand's.
  const std::string expanded = e2e::scratch().file("cg6x.svg");
  REQUIRE(tracedot({"callgraph", singleTrace(), "-o", expanded, "--step", "2", "--expand",
                    "--node-thres", "0"})
              .exit_code == 0);
  const auto sx = svgOf(expanded);
  CHECK(foldNodes(sx).empty());
  for (int i = 0; i < 6; ++i) CHECK(sx.byId("all/step/forward/layers." + std::to_string(i)));
}

TEST_CASE("tracedot callgraph: two pipeline stages fold x2 + x2", "[dot][e2e][callgraph]") {
  const std::string db = e2e::scratch().file("pp2.db");
  const auto run = e2e::runGpttrain(
      {"--nproc-per-node", "2", "-o", db}, GPTTRAIN_BIN,
      {"--pp", "2", "--layers", "4", "--hidden", "32", "--heads", "2", "--seq-len", "8", "--vocab",
       "64", "--steps", "2", "--global-batch", "4", "--micro-batch-size", "2"});
  REQUIRE(run.exit_code == 0);
  // Every node drawn (--node-thres 0, a budget that needs no rise): a tiny model's two layers of
  // one stage are about 0.5% of the two ranks' total, so at the default threshold a fold fell
  // into "other" on some runs (timing), and the test drew one fold or two.
  const std::vector<std::string> all = {"--node-thres", "0", "--max-nodes", "5000"};
  const std::string svg = e2e::scratch().file("pp2cg.svg");
  std::vector<std::string> args = {"callgraph", db, "-o", svg};
  args.insert(args.end(), all.begin(), all.end());
  REQUIRE(tracedot(args).exit_code == 0);
  const auto s = svgOf(svg);
  const auto f = foldNodes(s);
  REQUIRE(f.size() == 2);
  CHECK(f[0]->num("fold") == 2);
  CHECK(f[1]->num("fold") == 2);
  CHECK(f[0]->fields.at("members") == "layers.0 layers.1");
  CHECK(f[1]->fields.at("members") == "layers.2 layers.3");
  checkAddsUp(s);
  // One rank: one stage, one x2.
  const std::string one = e2e::scratch().file("pp2r1.svg");
  args = {"callgraph", db, "-o", one, "--rank", "1"};
  args.insert(args.end(), all.begin(), all.end());
  REQUIRE(tracedot(args).exit_code == 0);
  const auto s1 = svgOf(one);
  const auto f1 = foldNodes(s1);
  REQUIRE(f1.size() == 1);
  CHECK(f1[0]->fields.at("members") == "layers.2 layers.3");
}

TEST_CASE("tracedot pipeline: 1F1B dry run p=4 m=8, critical path against a brute force",
          "[dot][e2e][pipeline]") {
  const std::string db = e2e::scratch().file("dry.db");
  const auto run = e2e::runGpttrain({"--nproc-per-node", "4", "-o", db}, GPTTRAIN_BIN,
                                    {"--pp",
                                     "4",
                                     "--layers",
                                     "4",
                                     "--hidden",
                                     "32",
                                     "--heads",
                                     "2",
                                     "--seq-len",
                                     "8",
                                     "--vocab",
                                     "64",
                                     "--steps",
                                     "2",
                                     "--global-batch",
                                     "16",
                                     "--micro-batch-size",
                                     "2",
                                     "--schedule",
                                     "1f1b",
                                     "--dry-run-costs",
                                     "10,20"});
  REQUIRE(run.exit_code == 0);
  const std::string svg = e2e::scratch().file("dry.svg");
  REQUIRE(tracedot({"pipeline", db, "-o", svg, "--step", "2"}).exit_code == 0);
  const auto s = svgOf(svg);
  // One node per action: 4 stages x 8 microbatches x (F, B) compute, plus the messages.
  const auto reader = trace::TraceReader::open(db);
  const auto pa = trace::analysis::analyzePipeline(reader);
  REQUIRE(pa.present);
  CHECK(pa.stages == 4);
  CHECK(pa.microbatches == 8);
  int compute = 0;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& n : s.nodes) {
    const bool isCompute = n.text[0].rfind("F", 0) == 0 || n.text[0].rfind("B", 0) == 0;
    compute += isCompute ? 1 : 0;
    if (n.tooltip.find("critical: yes") == std::string::npos) continue;
    lo = std::min(lo, n.num("start_ns"));
    hi = std::max(hi, n.num("start_ns") + n.num("duration_ns"));
  }
  CHECK(compute == 4 * 8 * 2);
  // The measured step: the analysis' window of step 2, and the same from the file by brute force.
  int64_t window = 0;
  for (const auto& st : pa.per_step) {
    if (st.step == 2) window = st.end_ns - st.start_ns;
  }
  REQUIRE(window > 0);
  std::vector<e2e::TracedAction> step2;
  for (const auto& a : e2e::tracedPipelineActions(db)) {
    if (a.step == 2) step2.push_back(a);
  }
  REQUIRE(!step2.empty());
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& a : step2) {
    first = std::min(first, a.start);
    last = std::max(last, a.end);
  }
  CHECK(last - first == window);
  // The path's length against the brute force over the same trace, exactly; the drawn path lies
  // in the step. Not checked: how much of the step it explains (it was >= 95 %), since what the
  // window has beyond the path is time no dependency explains, such as a rank descheduled between
  // two of its actions: the machine's load, not the analysis.
  const int64_t brute = e2e::criticalPathLength(step2);
  const auto cp = trace::analysis::pipelineCriticalPath(reader, 2);
  REQUIRE(cp.found);
  CHECK(cp.length_ns == brute);
  CHECK(cp.step_ns == window);
  CHECK(brute <= window);
  CHECK(lo >= first);
  CHECK(hi <= last);
  std::smatch m;
  std::string caption;
  for (const auto& c : s.caption) caption += c + "\n";
  INFO(caption);
  REQUIRE(
      std::regex_search(caption, m, std::regex("critical path ([0-9.]+) ms = ([0-9.]+)% of it")));
  CHECK(std::stod(m[1]) * 1e6 == Approx(double(brute)).margin(500));  // printed to 1 us
  CHECK(std::stod(m[2]) == Approx(100.0 * double(brute) / double(window)).margin(0.05));
  CHECK(caption.find("(p-1)/(m+p-1) = 27.3%") != std::string::npos);
  CHECK(caption.find("1f1b p=4 m=8") != std::string::npos);
}

TEST_CASE("tracedot pipeline --replica: draws the data-parallel copy asked for",
          "[dot][e2e][pipeline]") {
  // 4 ranks with --pp 2: two data-parallel copies of a 2-stage pipeline (dry run, fast).
  const std::string db = e2e::scratch().file("dp2.db");
  const auto run = e2e::runGpttrain({"--nproc-per-node", "4", "-o", db}, GPTTRAIN_BIN,
                                    {"--pp",
                                     "2",
                                     "--layers",
                                     "2",
                                     "--hidden",
                                     "32",
                                     "--heads",
                                     "2",
                                     "--seq-len",
                                     "8",
                                     "--vocab",
                                     "64",
                                     "--steps",
                                     "2",
                                     "--global-batch",
                                     "8",
                                     "--micro-batch-size",
                                     "2",
                                     "--schedule",
                                     "1f1b",
                                     "--dry-run-costs",
                                     "5,10"});
  REQUIRE(run.exit_code == 0);
  // The ranks of each stage cluster, read from the labels "stage S (rank R)".
  auto ranksDrawn = [](const dottest::Svg& s) {
    std::set<int> out;
    const std::regex re("\\(rank ([0-9]+)\\)");
    for (const auto& c : s.clusters) {
      for (const auto& t : c.text) {
        std::smatch m;
        if (std::regex_search(t, m, re)) out.insert(std::stoi(m[1]));
      }
    }
    return out;
  };
  const std::string svg0 = e2e::scratch().file("dp2-r0.svg");
  const std::string svg1 = e2e::scratch().file("dp2-r1.svg");
  {
    const auto r = tracedot({"pipeline", db, "-o", svg0});
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
  }
  {
    const auto r = tracedot({"pipeline", db, "-o", svg1, "--replica", "1"});
    INFO(r.describe());
    REQUIRE(r.exit_code == 0);
  }
  const std::set<int> r0 = ranksDrawn(svgOf(svg0)), r1 = ranksDrawn(svgOf(svg1));
  // Two stages each; together the job's four ranks, no rank in both copies.
  CHECK(r0.size() == 2);
  CHECK(r1.size() == 2);
  std::set<int> all = r0;
  all.insert(r1.begin(), r1.end());
  CHECK(all == std::set<int>{0, 1, 2, 3});
  // Replica 1 is the analysis' second pipeline.
  const auto pa = trace::analysis::analyzePipeline(trace::TraceReader::open(db));
  REQUIRE(pa.replicas.size() == 2);
  CHECK(r1 == std::set<int>(pa.replicas[1].begin(), pa.replicas[1].end()));
  std::string caption;
  for (const auto& c : svgOf(svg1).caption) caption += c + "\n";
  CHECK(caption.find("replica 1 of 2") != std::string::npos);

  const auto bad =
      tracedot({"pipeline", db, "-o", e2e::scratch().file("dp2-r2.svg"), "--replica", "2"});
  INFO(bad.describe());
  CHECK(bad.exit_code == 1);
  REQUIRE(bad.errLines().size() == 1);
  CHECK(bad.errLines()[0].find("no replica 2 in the pipeline (replicas 0..1") != std::string::npos);
}

#ifdef GPTTRAIN_BIN
namespace {

// A gpttrain step on 4 ranks (TP 2 x PP 2, ZeRO-1, 1F1B, two microbatches), tiny width.
std::string tp2pp2Trace(int layers) {
  const std::string db = e2e::scratch().file("ag" + std::to_string(layers) + ".db");
  const auto run = e2e::runGpttrain({"--nproc-per-node", "4", "-o", db}, GPTTRAIN_BIN,
                                    {"--tp",
                                     "2",
                                     "--pp",
                                     "2",
                                     "--zero",
                                     "1",
                                     "--schedule",
                                     "1f1b",
                                     "--layers",
                                     std::to_string(layers),
                                     "--hidden",
                                     "16",
                                     "--heads",
                                     "2",
                                     "--seq-len",
                                     "4",
                                     "--vocab",
                                     "32",
                                     "--steps",
                                     "1",
                                     "--global-batch",
                                     "4",
                                     "--micro-batch-size",
                                     "2"});
  if (!run.exited || run.exit_code != 0) throw std::runtime_error("gpttrain: " + run.describe());
  return db;
}

// The folded and pruned graph of one rank against the unfolded analysis: every autograd node
// counted once (calls), the backward time kept, within the budget; the xN count is the number of
// layer scopes ("layers.N") the analysis finds on the rank.
void checkFoldedAutograd(const std::string& db, int rank, int budget, int layersPerStage) {
  INFO("rank " << rank << ", budget " << budget);
  const auto reader = trace::TraceReader::open(db);
  trace::analysis::AutogradOptions o;
  o.rank = rank;
  const auto ag = trace::analysis::buildAutogradGraph(reader, o);
  int64_t time = 0;
  std::set<std::string> layers;
  for (const auto& n : ag.nodes) {
    time += n.dur_ns;
    for (core::StringId m : n.modules) {
      if (std::regex_match(reader.str(m), std::regex("layers\\.[0-9]+")))
        layers.insert(reader.str(m));
    }
  }
  CHECK(static_cast<int>(layers.size()) == layersPerStage);
  dot::AutogradDrawOptions draw;
  draw.fold = true;
  draw.max_nodes = budget;
  const dot::Graph g = dot::buildAutogradGraph(reader, ag, draw);
  CHECK(static_cast<int>(g.nodes.size()) <= budget);
  int64_t calls = 0, drawnTime = 0, folds = 0;
  for (const auto& n : g.nodes) {
    calls += n.metrics.calls;
    drawnTime += n.metrics.duration_ns;
    if (n.fold > 1) {
      ++folds;
      CHECK(n.fold == layersPerStage);
    }
  }
  CHECK(calls == static_cast<int64_t>(ag.nodes.size()));
  CHECK(drawnTime == time);
  CHECK(folds > 0);
}

}  // namespace

TEST_CASE("tracedot autograd: an 8-layer TP2 x PP2 ZeRO-1 step folds layers x4 per stage",
          "[dot][e2e][autograd]") {
  const std::string db = tp2pp2Trace(8);
  for (int rank : {0, 2}) {
    checkFoldedAutograd(db, rank, 600, 4);
    checkFoldedAutograd(db, rank, 40, 4);  // pruned into "other": the totals still hold
  }
  const std::string svg = e2e::scratch().file("ag8.svg");
  const auto r = tracedot({"autograd", db, "-o", svg, "--rank", "2"});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  const auto s = svgOf(svg);
  CHECK(s.nodes.size() <= 600);
  const auto f = foldNodes(s);
  REQUIRE(!f.empty());
  for (const auto* n : f) CHECK(n->num("fold") == 4);
  // --expand draws all 400-odd nodes, which fit the budget here.
  const auto x = tracedot({"autograd", db, "-o", e2e::scratch().file("ag8x.svg"), "--expand"});
  CHECK(x.exit_code == 0);
  const auto ax = trace::analysis::buildAutogradGraph(trace::TraceReader::open(db));
  CHECK(svgOf(e2e::scratch().file("ag8x.svg")).nodes.size() == ax.nodes.size());
}

TEST_CASE("tracedot autograd: a 48-layer step draws within the budget, x24 per stage",
          "[dot][e2e][autograd]") {
  const std::string db = tp2pp2Trace(48);
  for (int rank : {0, 2}) checkFoldedAutograd(db, rank, 600, 24);
  const std::string svg = e2e::scratch().file("ag48.svg");
  const auto r = tracedot({"autograd", db, "-o", svg});
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  CHECK(svgOf(svg).nodes.size() <= 600);
  // Even a budget of 40 draws (pruned), and the caption says so.
  const auto small = tracedot({"autograd", db, "-o", svg, "--max-nodes", "40"});
  REQUIRE(small.exit_code == 0);
  const auto s = svgOf(svg);
  CHECK(s.nodes.size() <= 40);
  std::string caption;
  for (const auto& c : s.caption) caption += c + "\n";
  CHECK(caption.find("drawn as \"other\"") != std::string::npos);
  // --expand keeps the full graph and refuses it with one line.
  const auto x = tracedot({"autograd", db, "-o", svg, "--expand"});
  CHECK(x.exit_code != 0);
  REQUIRE(x.errLines().size() == 1);
  CHECK(x.errLines()[0].find("drop --expand") != std::string::npos);
}
#endif

TEST_CASE("tracedot: the same trace gives byte-identical output", "[dot][e2e]") {
  for (const char* fmt : {"svg", "dot", "txt"}) {
    const std::string a = e2e::scratch().file(std::string("same1.") + fmt);
    const std::string b = e2e::scratch().file(std::string("same2.") + fmt);
    REQUIRE(tracedot({"callgraph", singleTrace(), "-o", a}).exit_code == 0);
    REQUIRE(tracedot({"callgraph", singleTrace(), "-o", b}).exit_code == 0);
    CHECK(e2e::readFile(a) == e2e::readFile(b));
  }
}

#ifdef GPTTRAIN_BIN
TEST_CASE("tracedot: output paths of different lengths give identical bytes", "[dot][e2e]") {
  // Graphviz kept subgraphs ordered by the addresses of their interned names; clusters are now
  // created with ids in the builder's order (layout.cpp), so the heap's layout cannot reorder them.
  const std::string deep = e2e::scratch().file("a/much/longer/directory/for/the/output");
  REQUIRE(e2e::runProcess("/bin/mkdir", {"-p", deep}, e2e::scratch().path()).exit_code == 0);
  for (const char* fmt : {"svg", "dot"}) {
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"autograd", singleTrace(), "--expand", "--step", "2"},
          std::vector<std::string>{"callgraph", singleTrace()},
          std::vector<std::string>{"model", singleTrace()}}) {
      const std::string a = e2e::scratch().file(std::string("p.") + fmt);
      const std::string b = deep + "/" + cmd[0] + "-with-a-long-name." + fmt;
      std::vector<std::string> ra = cmd, rb = cmd;
      ra.insert(ra.end(), {"-o", a});
      rb.insert(rb.end(), {"-o", b});
      INFO(cmd[0] << " " << fmt);
      REQUIRE(tracedot(ra).exit_code == 0);
      REQUIRE(tracedot(rb).exit_code == 0);
      CHECK(e2e::readFile(a) == e2e::readFile(b));
    }
  }
}
#endif

TEST_CASE("tracedot: bad input is one line and a non-zero exit", "[dot][e2e]") {
  const std::string out = e2e::scratch().file("bad.svg");
  const std::string notTrace = e2e::scratch().file("not-a-trace.db");
  e2e::writeFile(notTrace, "hello\n");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"callgraph", notTrace, "-o", out}, 1, "not an SQLite file"},
      {{"callgraph", singleTrace(), "-o", out, "--rank", "7"}, 1, "no rank 7 in the trace"},
      {{"callgraph", singleTrace(), "-o", out, "--step", "99"},
       1,
       "no step 99 in the trace (steps 1..2)"},
      {{"pipeline", singleTrace(), "-o", out}, 1, "no pipeline in the trace"},
      {{"callgraph", singleTrace(), "-o", out, "--node-thres", "150%"}, 2, "--node-thres"},
      {{"callgraph", singleTrace(), "-o", out, "--bogus"}, 2, "--bogus"},
      {{"model", singleTrace(), "-o", out, "--bogus-too"}, 2, ""},
  };
  for (const auto& c : cases) {
    const auto r = tracedot(c.args);
    INFO(r.describe());
    CHECK(r.exit_code == c.code);
    REQUIRE(r.errLines().size() == 1);
    CHECK(r.errLines()[0].rfind("tracedot: ", 0) == 0);
    CHECK(r.errLines()[0].find(c.says) != std::string::npos);
    CHECK(r.out.empty());
  }
  CHECK_FALSE(std::ifstream(out).good());  // nothing written
}
#endif
