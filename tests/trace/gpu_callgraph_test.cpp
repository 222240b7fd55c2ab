// The call graph weighed by GPU time (CallGraphOptions::gpu_time, `tracedot callgraph --time gpu`):
// kernels under the ops that launched them, on a hand-built trace with the answer worked out
// below, and on real H100 traces against SQL over the file (each kernel's launching op found by
// joining flows to spans, durations summed by sqlite).
#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using namespace tracerun::trace::analysis;
namespace fs = std::filesystem;

namespace {

const std::string kStream = "cuda:0 stream 7";

// name -> node index of the first node with that name.
int nodeNamed(const CallGraph& g, const trace::TraceReader& r, const std::string& name) {
  for (size_t i = 1; i < g.nodes.size(); ++i) {
    if (r.str(g.nodes[i].name) == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("gpu callgraph: kernels under their launching ops, GPU time by hand",
          "[analysis][gpu][callgraph]") {
  TraceBuilder tb(1);
  tb.span(0, {"main", "aten::linear", core::Category::kOp, 0, 100, 0});
  tb.span(0, {"main", "aten::addmm", core::Category::kOp, 10, 90, 1});
  tb.span(0, {"main", "aten::add", core::Category::kOp, 120, 150, 0});
  tb.span(0, {kStream, "gemm", core::Category::kKernel, 200, 500});
  tb.span(0, {kStream, "gemm", core::Category::kKernel, 510, 530});
  tb.span(0, {kStream, "add_kernel", core::Category::kKernel, 600, 650});
  tb.span(0, {kStream, "memcpy HtoD", core::Category::kMemcpy, 700, 720});  // no op
  tb.flow(0, {core::FlowKind::kOpKernel, "main", kStream, 10, 200});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", kStream, 10, 510});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", kStream, 120, 600});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("gpu_callgraph")));
  CallGraphOptions o;
  o.gpu_time = true;
  o.attribute_memory = false;
  const CallGraph g = buildCallGraph(reader, o);
  CHECK(g.gpu_activities == 4);
  CHECK(g.gpu_without_op == 1);
  CHECK(g.links.empty());  // op -> kernel flows are the parent links
  CHECK(g.unresolved_flows == 0);
  const int linear = nodeNamed(g, reader, "aten::linear");
  const int addmm = nodeNamed(g, reader, "aten::addmm");
  const int gemm = nodeNamed(g, reader, "gemm");
  const int add = nodeNamed(g, reader, "aten::add");
  const int addk = nodeNamed(g, reader, "add_kernel");
  const int copy = nodeNamed(g, reader, "memcpy HtoD");
  REQUIRE(std::min({linear, addmm, gemm, add, addk, copy}) > 0);
  auto node = [&](int i) { return g.nodes[static_cast<size_t>(i)]; };
  CHECK(node(gemm).parent == addmm);
  CHECK(node(gemm).depth == 2);
  CHECK(node(gemm).count == 2);
  CHECK(node(gemm).exclusive_ns == 320);
  CHECK(node(gemm).inclusive_ns == 320);
  CHECK(node(addmm).exclusive_ns == 0);
  CHECK(node(addmm).inclusive_ns == 320);
  CHECK(node(linear).inclusive_ns == 320);
  CHECK(node(linear).count == 1);
  CHECK(node(addk).parent == add);
  CHECK(node(add).inclusive_ns == 50);
  CHECK(node(copy).parent == 0);
  CHECK(node(copy).depth == 0);
  CHECK(node(copy).inclusive_ns == 20);
  // Without gpu_time the same trace weighs CPU time and draws the flows as links.
  const CallGraph cpu = buildCallGraph(reader);
  CHECK(cpu.nodes[static_cast<size_t>(nodeNamed(cpu, reader, "aten::linear"))].inclusive_ns == 100);
  CHECK(cpu.links.size() == 2);
}

TEST_CASE("gpu callgraph: real H100 traces against SQL over the file",
          "[analysis][gpu][callgraph]") {
  std::vector<std::string> files = {std::string(TRACERUN_SOURCE_DIR) +
                                    "/tests/data/gpu/nccl_one_rank_h100.db"};
  const char* env = std::getenv("TRACERUN_GPU_TRACES");
  const fs::path nano =
      (env ? fs::path(env) : fs::path("/work/shared/gpu-traces")) / "nanogpt_h100_ops_cuda.db";
  if (fs::exists(nano)) files.push_back(nano.string());
  for (const std::string& path : files) {
    INFO(path);
    // (launching op, activity) -> GPU ns, straight from the file ("" when no flow names an op).
    std::map<std::pair<std::string, std::string>, int64_t> want;
    int64_t total = 0;
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
    const char* sql =
        "SELECT coalesce((SELECT n2.value FROM flows f JOIN spans o ON o.track = f.src_track AND "
        "o.start_ns = f.src_ts_ns JOIN strings n2 ON n2.id = o.name WHERE f.kind = 2 AND "
        "f.dst_track = s.track AND f.dst_ts_ns = s.start_ns ORDER BY o.depth DESC LIMIT 1), ''), "
        "n.value, sum(s.dur_ns) FROM spans s JOIN tracks t ON t.id = s.track JOIN strings n ON "
        "n.id = s.name WHERE t.name GLOB 'cuda:[0-9]* stream [0-9]*' AND s.category IN (6, 7) "
        "GROUP BY 1, 2";
    sqlite3_stmt* st = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK);
    while (sqlite3_step(st) == SQLITE_ROW) {
      const std::string op = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
      const std::string k = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
      want[{op, k}] += sqlite3_column_int64(st, 2);
      total += sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    REQUIRE(total > 0);

    const auto reader = trace::TraceReader::open(path);
    CallGraphOptions o;
    o.gpu_time = true;
    o.attribute_memory = false;
    const CallGraph g = buildCallGraph(reader, o);
    std::map<std::pair<std::string, std::string>, int64_t> got;
    int64_t top = 0;
    for (size_t i = 1; i < g.nodes.size(); ++i) {
      const CallNode& n = g.nodes[i];
      if (n.parent == 0) top += n.inclusive_ns;
      if (n.category != core::Category::kKernel && n.category != core::Category::kMemcpy) continue;
      const std::string op =
          n.parent > 0 ? reader.str(g.nodes[static_cast<size_t>(n.parent)].name) : "";
      got[{op, reader.str(n.name)}] += n.exclusive_ns;
    }
    CHECK(top == total);
    CHECK(got == want);
  }
}

TEST_CASE("callgraph: CUDA launch calls are not top-level spans (their time is the op's)",
          "[analysis][gpu]") {
  TraceBuilder tb(1);
  tb.span(0, {"main", "aten::mm", core::Category::kOp, 0, 100});
  tb.span(0, {"cuda api thread 5",
              "cudaLaunchKernel",
              core::Category::kOther,
              10,
              30,
              0,
              {{"correlation", 1}}});
  tb.span(0,
          {"cuda:0 stream 7", "gemm", core::Category::kKernel, 50, 250, 0, {{"correlation", 1}}});
  tb.flow(0, {core::FlowKind::kOpKernel, "main", "cuda:0 stream 7", 0, 50});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("cg_launch_calls")));
  for (bool gpu : {false, true}) {
    INFO("gpu_time " << gpu);
    CallGraphOptions o;
    o.gpu_time = gpu;
    const CallGraph g = buildCallGraph(reader, o);
    int64_t top = 0;  // the root's children: the top-level spans (CPU) or their GPU time
    for (const CallNode& n : g.nodes) {
      CHECK(reader.str(n.name) != "cudaLaunchKernel");
      if (n.parent == 0) top += n.inclusive_ns;
    }
    // CPU: the op's 100 ns (+ the kernel's 200 as a span of its own track); GPU: the kernel's.
    CHECK(top == (gpu ? 200 : 300));
  }
}
