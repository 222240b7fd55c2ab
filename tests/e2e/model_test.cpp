// `tracedot model` end to end: real programs traced by the built tracerun, drawn by the built
// tracedot, every SVG parsed as XML by Python's ElementTree (which also lists its text). Truths
// from outside tracedot: torchvision's own parameter count of ResNet-18 and each module's parameter
// bytes (computed here by running python3 with torchvision), gpttrain's parameter count in closed
// form, the layer count asked for.
// Bad input: a trace without module scopes, a file that is not a trace, a rank that is not there.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "analysis_builder.h"
#include "e2e_common.h"
#include "tracerun/trace/format.h"

using namespace tracerun;
using namespace tracerun::e2e;

namespace {

const char* kPython = "/usr/bin/python3";  // Debian's, with torch and torchvision (NOTES.md)

ProcessResult runTracedot(const std::vector<std::string>& args) {
  return runProcess(TRACEDOT_BIN, args, scratch().path());
}

// The SVG's text (every element's text, one line each), after ElementTree parsed it; fails the
// test when the file is not well-formed XML.
std::string svgText(const std::string& svg) {
  const ProcessResult r =
      runProcess(kPython,
                 {"-c",
                  "import sys, xml.etree.ElementTree as ET\n"
                  "root = ET.parse(sys.argv[1]).getroot()\n"
                  "assert root.tag.endswith('svg'), root.tag\n"
                  "print('\\n'.join(t.strip() for t in root.itertext() if t.strip()))\n",
                  svg},
                 scratch().path());
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string grouped(int64_t n) {
  std::string d = std::to_string(n), out;
  for (size_t i = 0; i < d.size(); ++i) {
    if (i > 0 && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return out;
}

// torchvision's own count: the independent truth for both ResNet-18 samples.
int64_t torchvisionResnet18Params() {
  const ProcessResult r = runProcess(kPython,
                                     {"-c",
                                      "import torchvision\n"
                                      "m = torchvision.models.resnet18(num_classes=10)\n"
                                      "print(sum(p.numel() for p in m.parameters()))\n"},
                                     scratch().path());
  INFO(r.describe());
  REQUIRE(r.exit_code == 0);
  return std::stoll(r.out);
}

// Traces `program args` and draws it; returns the SVG's text.
std::string traceAndDraw(const std::string& tag, const std::vector<std::string>& launch,
                         const std::vector<std::string>& drawArgs = {}) {
  const std::string db = scratch().file(tag + ".db"), svg = scratch().file(tag + ".svg");
  std::vector<std::string> args = {"-o", db};
  args.insert(args.end(), launch.begin(), launch.end());
  const ProcessResult t = runTracerun(args);
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  std::vector<std::string> draw = {"model", db, "-o", svg};
  draw.insert(draw.end(), drawArgs.begin(), drawArgs.end());
  const ProcessResult d = runTracedot(draw);
  INFO(d.describe());
  REQUIRE(d.exit_code == 0);
  return svgText(svg);
}

}  // namespace

TEST_CASE("ResNet-18 from torchvision, unmodified Python: totals equal torchvision's count",
          "[e2e][model]") {
  const int64_t expected = torchvisionResnet18Params();
  CHECK(expected == 11181642);  // NOTES.md; the test's truth is the line above
  const std::string text = traceAndDraw(
      "resnet18_py", {"--", kPython, TRACERUN_SOURCE_DIR "/samples/python/resnet18_step.py"});
  INFO(text);
  // The caption's total (over the top-level modules: ResNet and the loss) and the root's label.
  CHECK(occurrences(text, "params " + grouped(expected) + " logical (2 top-level modules") == 1);
  CHECK(text.find("ResNet\nResNet\nparams " + grouped(expected)) != std::string::npos);
  // layer1's two BasicBlocks are alike (no downsample): folded; layer2.0 has a downsample.
  CHECK(occurrences(text, "\u00d72 layer1.0 \u2026 layer1.1") == 1);
  CHECK(text.find("layer2.0.downsample") != std::string::npos);
  CHECK(text.find("f32[8,64,8,8]") != std::string::npos);  // shapes on the edges
  // --depth 2: the blocks are boxes, their convolutions not drawn.
  const std::string shallow = svgText([&] {
    const std::string svg = scratch().file("resnet18_py_d2.svg");
    const ProcessResult d =
        runTracedot({"model", scratch().file("resnet18_py.db"), "-o", svg, "--depth", "2"});
    INFO(d.describe());
    REQUIRE(d.exit_code == 0);
    return svg;
  }());
  CHECK(shallow.find("layer1.0.conv1") == std::string::npos);
  CHECK(shallow.find("layer1") != std::string::npos);
}

TEST_CASE(
    "ResNet-18 from torchvision, unmodified Python: each module's parameter bytes equal "
    "torchvision's",
    "[e2e][model]") {
  // Truth: torchvision's own modules, sum of numel x element size over each one's parameters
  // (children included, as the hooks' `params` counts them), one "path count bytes" line each.
  const ProcessResult truth =
      runProcess(kPython,
                 {"-c",
                  "import torchvision\n"
                  "m = torchvision.models.resnet18(num_classes=10)\n"
                  "for name, mod in m.named_modules():\n"
                  "    if name:\n"
                  "        ps = list(mod.parameters())\n"
                  "        print(name, sum(p.numel() for p in ps),\n"
                  "              sum(p.numel() * p.element_size() for p in ps))\n"},
                 scratch().path());
  INFO(truth.describe());
  REQUIRE(truth.exit_code == 0);
  const std::string db = scratch().file("resnet18_bytes.db");
  const ProcessResult t = runTracerun(
      {"-o", db, "--", kPython, TRACERUN_SOURCE_DIR "/samples/python/resnet18_step.py"});
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  const std::string txt = scratch().file("resnet18_bytes.txt");
  const ProcessResult d = runTracedot({"model", db, "--expand", "-T", "txt", "-o", txt});
  INFO(d.describe());
  REQUIRE(d.exit_code == 0);
  const std::string text = readFile(txt);
  INFO(text);
  // tracedot's text lines read "PATH | TYPE | params COUNT · BYTES" (docs/capture.md).
  std::istringstream lines(truth.out);
  std::string path;
  int64_t count = 0, bytes = 0;
  int lines_checked = 0;
  while (lines >> path >> count >> bytes) {
    const size_t at = text.find("\n" + path + " | ");
    const size_t indented = text.find(" " + path + " | ");
    const size_t found = at != std::string::npos ? at : indented;
    if (found == std::string::npos) continue;  // a block drawn as a cluster, not a line
    ++lines_checked;
    const size_t eol = text.find('\n', found + 1);
    const std::string line = text.substr(found + 1, eol - found - 1);
    INFO(path << ": " << line);
    CHECK(line.find("params " + grouped(count) + " \u00b7 " +
                    trace::formatBytes(static_cast<double>(bytes))) != std::string::npos);
  }
  CHECK(lines_checked >= 50);  // every convolution, batch norm, ReLU, pool and fc of ResNet-18
}

#ifdef RESNET18_CPP_BIN
TEST_CASE("ResNet-18 in C++ with ModuleScope: totals equal torchvision's count", "[e2e][model]") {
  const int64_t expected = torchvisionResnet18Params();
  const std::string text = traceAndDraw("resnet18_cpp", {"--", RESNET18_CPP_BIN});
  INFO(text);
  CHECK(occurrences(text, "params " + grouped(expected) + " logical (2 top-level modules") == 1);
  CHECK(occurrences(text, "\u00d72 layer1.0 \u2026 layer1.1") == 1);
}
#endif

#ifdef GPTTRAIN_BIN
namespace {
// gpttrain's parameters in closed form: embeddings V*H + S*H, per layer 12H^2 + 13H, final
// LayerNorm 2H (the output projection is tied to the embedding).
int64_t gptParams(int64_t layers, int64_t h, int64_t s, int64_t v) {
  return v * h + s * h + layers * (12 * h * h + 13 * h) + 2 * h;
}
const std::vector<std::string> kSmall = {
    "--hidden", "32", "--heads",        "2", "--seq-len",          "16", "--vocab", "64",
    "--steps",  "1",  "--global-batch", "2", "--micro-batch-size", "1"};
std::vector<std::string> gpt(std::vector<std::string> layout) {
  layout.insert(layout.end(), kSmall.begin(), kSmall.end());
  return layout;
}
}  // namespace

TEST_CASE("gpttrain with 24 layers folds into exactly one x24, on two stages x12 + x12",
          "[e2e][model]") {
  const int64_t expected = gptParams(24, 32, 16, 64);
  const std::string one = scratch().file("gpt24.db");
  {
    const ProcessResult t = runGpttrain({"-o", one}, GPTTRAIN_BIN, gpt({"--layers", "24"}));
    INFO(t.describe());
    REQUIRE(t.exit_code == 0);
    const std::string svg = scratch().file("gpt24.svg");
    const ProcessResult d = runTracedot({"model", one, "-o", svg});
    INFO(d.describe());
    REQUIRE(d.exit_code == 0);
    const std::string text = svgText(svg);
    INFO(text);
    CHECK(occurrences(text, "\u00d724 ") == 1);
    CHECK(occurrences(text, "\u00d712 ") == 0);
    CHECK(occurrences(text, "params " + grouped(expected) + " logical") == 1);
  }
  const std::string two = scratch().file("gpt24pp2.db");
  {
    const ProcessResult t = runGpttrain({"--nproc-per-node", "2", "-o", two}, GPTTRAIN_BIN,
                                        gpt({"--layers", "24", "--pp", "2"}));
    INFO(t.describe());
    REQUIRE(t.exit_code == 0);
    const std::string svg = scratch().file("gpt24pp2.svg");
    const ProcessResult d = runTracedot({"model", two, "-o", svg});
    INFO(d.describe());
    REQUIRE(d.exit_code == 0);
    const std::string text = svgText(svg);
    INFO(text);
    CHECK(occurrences(text, "\u00d712 ") == 2);
    CHECK(occurrences(text, "\u00d724 ") == 0);
    CHECK(occurrences(text, "pipeline stage 0") == 1);
    CHECK(occurrences(text, "pipeline stage 1") == 1);
    CHECK(occurrences(text, "params " + grouped(expected) + " logical") == 1);
    // One rank: only its stage.
    const std::string svg1 = scratch().file("gpt24pp2_r1.svg");
    const ProcessResult d1 = runTracedot({"model", two, "-o", svg1, "--rank", "1"});
    REQUIRE(d1.exit_code == 0);
    const std::string text1 = svgText(svg1);
    CHECK(occurrences(text1, "\u00d712 layers.12 \u2026 layers.23") == 1);
    CHECK(text1.find("layers.0") == std::string::npos);
  }
}

TEST_CASE("gpttrain on TP 2 + SP: logical counts, column/row splits, shards, shapes",
          "[e2e][model]") {
  const std::string db = scratch().file("gpt_tp2.db");
  const ProcessResult t = runGpttrain({"--nproc-per-node", "2", "-o", db}, GPTTRAIN_BIN,
                                      gpt({"--layers", "2", "--tp", "2", "--sp"}));
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  const std::string svg = scratch().file("gpt_tp2.svg");
  const ProcessResult d = runTracedot({"model", db, "-o", svg, "--expand"});
  INFO(d.describe());
  REQUIRE(d.exit_code == 0);
  const std::string text = svgText(svg);
  INFO(text);
  CHECK(occurrences(text, "params " + grouped(gptParams(2, 32, 16, 64)) + " logical") == 1);
  // qkv: 3H x H weight split by rows of the output (column-parallel), bias too.
  const int64_t qkv = 3 * 32 * 32 + 3 * 32;
  CHECK(text.find("params " + grouped(qkv) + " logical, " + grouped(qkv / 2) + " on rank 0") !=
        std::string::npos);
  CHECK(occurrences(text, "TP column-parallel, weight dim 0, TP shard 0 of 2") == 4);  // qkv, fc1
  CHECK(text.find("TP row-parallel, weight dim 1") != std::string::npos);
  CHECK(text.find("layout: TP 2") != std::string::npos);
  // Edges: [S, B, H] = [16, 1, 32]; SP splits the sequence of the layers' inputs, a row-parallel
  // linear's input is split on the hidden dimension.
  CHECK(occurrences(text, "f32[8,1,32] on this rank\nf32[16,1,32] global") >= 1);
  CHECK(occurrences(text, "f32[16,1,16] on this rank\nf32[16,1,32] global") >= 1);   // -> proj
  CHECK(occurrences(text, "f32[16,1,64] on this rank\nf32[16,1,128] global") >= 1);  // -> fc2
}

TEST_CASE("gpttrain with ZeRO-3 on DP 2: one unit per layer, DP in the caption", "[e2e][model]") {
  const std::string db = scratch().file("gpt_zero3.db");
  const ProcessResult t = runGpttrain({"--nproc-per-node", "2", "-o", db}, GPTTRAIN_BIN,
                                      gpt({"--layers", "3", "--zero", "3"}));
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  const std::string svg = scratch().file("gpt_zero3.svg");
  ProcessResult d = runTracedot({"model", db, "-o", svg, "--expand"});
  INFO(d.describe());
  REQUIRE(d.exit_code == 0);
  std::string text = svgText(svg);
  INFO(text);
  for (int unit = 0; unit < 3; ++unit) {
    CHECK(occurrences(text, "ZeRO-3 unit " + std::to_string(unit) + "\n") == 1);
  }
  CHECK(text.find("layout: DP 2, ZeRO-3 units") != std::string::npos);
  CHECK(occurrences(text, "params " + grouped(gptParams(3, 32, 16, 64)) + " logical") == 1);
  // Folded: the three layers differ only in their unit index.
  d = runTracedot({"model", db, "-o", svg});
  REQUIRE(d.exit_code == 0);
  text = svgText(svg);
  CHECK(occurrences(text, "\u00d73 layers.0 \u2026 layers.2") == 1);
  CHECK(occurrences(text, "ZeRO-3 units 0\u20262") == 1);
}
#endif

TEST_CASE("tracedot model: bad input is one line and a non-zero exit", "[e2e][model]") {
  // A real trace with ops and a phase but no module scope.
  testing::TraceBuilder tb(1);
  tb.span(0, testing::BSpan{"main", "forward", core::Category::kPhase, 0, 100, 0, {{"stage", 0}}});
  tb.span(0, testing::BSpan{"main", "aten::mm", core::Category::kOp, 10, 20, 1});
  const std::string db = tb.write(testing::scratchDir("model_no_modules"));
  const std::string svg = scratch().file("none.svg");
  ProcessResult r = runTracedot({"model", db, "-o", svg});
  CHECK(r.exit_code != 0);
  REQUIRE(r.errLines().size() == 1);
  CHECK(r.errLines()[0].find("no module scopes") != std::string::npos);

  const std::string junk = scratch().file("junk.db");
  writeFile(junk, "this is not a trace\n");
  r = runTracedot({"model", junk, "-o", svg});
  CHECK(r.exit_code != 0);
  CHECK(r.errLines().size() == 1);

  tb.span(0, testing::BSpan{"main",
                            "layers.0",
                            core::Category::kModule,
                            30,
                            40,
                            1,
                            {{"params", 5}, {"shard", -1}},
                            "Linear"});
  const std::string one = tb.write(testing::scratchDir("model_one_module"));
  r = runTracedot({"model", one, "-o", svg, "--rank", "3"});
  CHECK(r.exit_code != 0);
  REQUIRE(r.errLines().size() == 1);
  CHECK(r.errLines()[0].find("no rank 3") != std::string::npos);
  r = runTracedot({"model", one, "-o", svg});
  INFO(r.describe());
  CHECK(r.exit_code == 0);
}

TEST_CASE("Python hooks: the program's own sitecustomize still runs, modules are recorded",
          "[e2e][model]") {
  const std::string site = scratch().file("usersite");
  REQUIRE(std::system(("mkdir -p '" + site + "'").c_str()) == 0);
  writeFile(site + "/sitecustomize.py", "print('user sitecustomize ran')\n");
  ::setenv("PYTHONPATH", site.c_str(), 1);
  const std::string db = scratch().file("tiny_py.db");
  const ProcessResult t =
      runTracerun({"-o", db, "--", kPython, "-c",
                   "import torch\n"
                   "m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())\n"
                   "m(torch.zeros(2, 4)).sum().backward()\n"});
  ::unsetenv("PYTHONPATH");
  INFO(t.describe());
  REQUIRE(t.exit_code == 0);
  CHECK(t.out.find("user sitecustomize ran") != std::string::npos);
  const std::string svg = scratch().file("tiny_py.svg");
  const ProcessResult d = runTracedot({"model", db, "-o", svg});
  INFO(d.describe());
  REQUIRE(d.exit_code == 0);
  const std::string text = svgText(svg);
  INFO(text);
  CHECK(text.find("Sequential") != std::string::npos);
  CHECK(text.find("params 15 logical") != std::string::npos);  // 4*3 + 3
  CHECK(text.find("f32[2,3]") != std::string::npos);           // Linear -> ReLU
}
