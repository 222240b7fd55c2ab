// tracedot_bench: the call-graph picture end to end (open the trace, build, prune, lay out with
// Graphviz, render SVG, write) on (a) one step of a traced 12-layer gpttrain run and (b) a
// synthetic step of 50,000 ops pruned to the node budget (threshold 0, so the budget alone cuts),
// each beside a baseline measured in the same run: trace/'s buildCallGraph of the same step alone
// (the reading no picture can avoid); and (c) the model diagram of a traced 80-layer gpttrain
// (default depth, folded, and --expand) beside open + buildModelTree alone. Prints medians and
// their ratio; asserts nothing. Built by default, never run by CI. Results and the command:
// docs/performance.md ("tracedot").
//
//   tracedot_bench [--repeat K] [--dir DIR] [--ops N] [--no-gpt] [--model-layers L]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "analysis_builder.h"
#include "tracerun/dot/callgraph_graph.h"
#include "tracerun/dot/layout.h"
#include "tracerun/dot/model_graph.h"
#include "tracerun/dot/render.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/analysis/model.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

namespace {

double seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0
                   : (v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2);
}

// One step of N ops: step > forward > 50 modules (names without digits, so nothing folds) >
// ops three levels deep drawn from a pool of 60 names; every op 1..200 us.
std::string syntheticTrace(const std::string& dir, int ops) {
  testing::TraceBuilder tb;
  std::mt19937 rng(42);
  const int modules = 50;
  const int perModule = std::max(1, ops / modules);
  auto letters = [](int i) {
    std::string s;
    do {
      s += static_cast<char>('a' + i % 26);
      i /= 26;
    } while (i > 0);
    return s;
  };
  int64_t t = 1000;
  const int64_t stepStart = t;
  std::vector<testing::BSpan> spans;
  for (int m = 0; m < modules; ++m) {
    const int64_t mStart = t;
    for (int k = 0; k < perModule;) {
      // An op with up to two nested ops, each with up to one nested op.
      const int64_t opStart = t;
      const std::string name = "aten::op_" + letters(static_cast<int>(rng() % 60));
      std::vector<testing::BSpan> inner;
      int64_t u = t + 1;
      const int kids = static_cast<int>(rng() % 3);
      for (int c = 0; c < kids && k + 1 < perModule; ++c) {
        const int64_t d = 1000 + static_cast<int64_t>(rng() % 100000);
        inner.push_back({"main", "aten::op_" + letters(static_cast<int>(rng() % 60)),
                         core::Category::kOp, u, u + d, 4});
        if (rng() % 2 && k + 2 < perModule) {
          inner.push_back({"main", "aten::op_" + letters(static_cast<int>(rng() % 60)),
                           core::Category::kOp, u + 1, u + d / 2, 5});
          ++k;
        }
        u += d + 1;
        ++k;
      }
      const int64_t end = u + 1000 + static_cast<int64_t>(rng() % 100000);
      spans.push_back({"main", name, core::Category::kOp, opStart, end, 3});
      spans.insert(spans.end(), inner.begin(), inner.end());
      ++k;
      t = end + 10;
    }
    tb.span(0, {"main", "module_" + letters(m), core::Category::kModule, mStart, t, 2});
    for (auto& s : spans) tb.span(0, std::move(s));
    spans.clear();
    t += 10;
  }
  tb.span(0, {"main", "forward", core::Category::kPhase, stepStart, t, 1});
  tb.span(0, {"main", "step", core::Category::kPhase, stepStart - 1, t + 1, 0, {{"step", 1}}});
  return tb.write(dir);
}

struct Row {
  std::string name;
  size_t analysisNodes = 0, drawn = 0;
  double baseline = 0, picture = 0;
};

Row measure(const std::string& name, const std::string& db, int step, double nodeThres, int repeat,
            const std::string& out) {
  Row row;
  row.name = name;
  std::vector<double> base, pic;
  for (int i = 0; i < repeat; ++i) {
    double t0 = seconds();
    {
      const auto reader = trace::TraceReader::open(db);
      trace::analysis::CallGraphOptions co;
      co.step = step;
      row.analysisNodes = trace::analysis::buildCallGraph(reader, co).nodes.size();
    }
    base.push_back(seconds() - t0);
    t0 = seconds();
    {
      const auto reader = trace::TraceReader::open(db);
      dot::CallGraphGraphOptions o;
      o.step = step;
      o.node_thres = nodeThres;
      const dot::Graph g = dot::buildCallGraphGraph(reader, o);
      dot::LayoutOptions lo;
      lo.max_nodes = o.max_nodes + 64;
      dot::writeOutput(out, dot::LaidOutGraph::layout(g, lo).render(dot::Format::kSvg));
      row.drawn = g.nodes.size();
    }
    pic.push_back(seconds() - t0);
  }
  row.baseline = median(base);
  row.picture = median(pic);
  return row;
}

// The model diagram as `tracedot model DB -o OUT [--expand]` makes it (default depth, the
// command's default budget) against open + buildModelTree alone. analysisNodes: modules in the
// tree; drawn: nodes in the graph.
Row measureModel(const std::string& name, const std::string& db, bool expand, int repeat,
                 const std::string& out) {
  Row row;
  row.name = name;
  std::vector<double> base, pic;
  for (int i = 0; i < repeat; ++i) {
    double t0 = seconds();
    {
      const auto reader = trace::TraceReader::open(db);
      row.analysisNodes = trace::analysis::buildModelTree(reader).modules.size();
    }
    base.push_back(seconds() - t0);
    t0 = seconds();
    {
      const auto reader = trace::TraceReader::open(db);
      dot::ModelGraphOptions o;
      o.expand = expand;
      const dot::Graph g = dot::buildModelGraph(reader, o);
      dot::LayoutOptions lo;
      lo.max_nodes = 600 + 64;  // as tools/dot_output.cpp with the default --max-nodes
      dot::writeOutput(out, dot::renderGraph(g, dot::Format::kSvg, lo));
      row.drawn = g.nodes.size();
    }
    pic.push_back(seconds() - t0);
  }
  row.baseline = median(base);
  row.picture = median(pic);
  return row;
}

#if defined(GPTTRAIN_EXE) && defined(TRACERUN_EXE)
// Traces gpttrain with `layers` layers (tiny hidden size, one process) into `db`.
bool traceGpt(const std::string& db, int layers, int steps) {
  std::remove(db.c_str());
  const std::string cmd =
      std::string("OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 ") + TRACERUN_EXE + " -o " + db +
      " -- " + GPTTRAIN_EXE + " --layers " + std::to_string(layers) +
      " --hidden 64 --heads 4 --seq-len 16 --vocab 128 --steps " + std::to_string(steps) +
      " --global-batch 4 --micro-batch-size 2 --threads 1 > /dev/null 2>&1";
  if (std::system(cmd.c_str()) == 0) return true;
  std::fprintf(stderr, "tracedot_bench: tracing gpttrain failed: %s\n", cmd.c_str());
  return false;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int repeat = 5, ops = 50000;
  std::string dir = "/tmp/tracedot_bench";
  bool noGpt = false;
  CLI::App app{"tracedot_bench: the call-graph picture end to end against buildCallGraph alone"};
  app.add_option("--repeat", repeat, "repetitions (medians are printed)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", dir, "scratch folder for the traces and pictures");
  app.add_option("--ops", ops, "ops in the synthetic step")->check(CLI::PositiveNumber);
  app.add_flag("--no-gpt", noGpt, "skip the traced gpttrain runs");
  int modelLayers = 80;
  app.add_option("--model-layers", modelLayers,
                 "layers of the gpttrain traced for the model diagram")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  if (std::system(("mkdir -p '" + dir + "/synthetic'").c_str()) != 0) return 1;

  std::vector<Row> rows;
#if defined(GPTTRAIN_EXE) && defined(TRACERUN_EXE)
  if (!noGpt) {
    const std::string db = dir + "/gpt12.db";
    if (!traceGpt(db, 12, 2)) return 1;
    rows.push_back(measure("gpttrain 12 layers, step 2", db, 2, 0.005, repeat, dir + "/gpt12.svg"));
  }
#endif
  std::vector<Row> modelRows;
#if defined(GPTTRAIN_EXE) && defined(TRACERUN_EXE)
  if (!noGpt) {
    const std::string db = dir + "/gpt" + std::to_string(modelLayers) + ".db";
    if (!traceGpt(db, modelLayers, 1)) return 1;
    const std::string layers = std::to_string(modelLayers);
    modelRows.push_back(measureModel("model " + layers + " layers", db, false, repeat,
                                     dir + "/model" + layers + ".svg"));
    modelRows.push_back(measureModel("model " + layers + " layers --expand", db, true, repeat,
                                     dir + "/model" + layers + "-expand.svg"));
  }
#endif
  const std::string synth = syntheticTrace(dir + "/synthetic", ops);
  // Threshold 0: every node is wanted, the budget (600) alone decides what is drawn.
  rows.push_back(measure("synthetic step, " + std::to_string(ops) + " ops, budget", synth, 1, 0.0,
                         repeat, dir + "/synthetic.svg"));

  std::printf("%-30s %10s %7s %14s %14s %7s\n", "case", "cg nodes", "drawn", "baseline s",
              "tracedot s", "ratio");
  for (const Row& r : rows) {
    std::printf("%-30s %10zu %7zu %14.3f %14.3f %7.2f\n", r.name.c_str(), r.analysisNodes, r.drawn,
                r.baseline, r.picture, r.baseline > 0 ? r.picture / r.baseline : 0.0);
  }
  std::printf(
      "(medians of %d; baseline: open + buildCallGraph of the step; tracedot: open + "
      "build + prune + layout + SVG + write)\n",
      repeat);
  if (!modelRows.empty()) {
    std::printf("\n%-30s %10s %7s %14s %14s %7s\n", "case", "modules", "drawn", "baseline s",
                "tracedot s", "ratio");
    for (const Row& r : modelRows) {
      std::printf("%-30s %10zu %7zu %14.3f %14.3f %7.2f\n", r.name.c_str(), r.analysisNodes,
                  r.drawn, r.baseline, r.picture, r.baseline > 0 ? r.picture / r.baseline : 0.0);
    }
    std::printf(
        "(medians of %d; baseline: open + buildModelTree; tracedot: open + model tree + "
        "build + fold + layout + SVG + write, default depth)\n",
        repeat);
  }
  return 0;
}
