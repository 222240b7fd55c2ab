// Call graph against brute force: on the fixture trace (random nested spans on several threads and
// ranks, an async lane, flows), every name path's count, inclusive and exclusive time and every
// flow link is recomputed from the generator's own list of spans (parents by index, not depth).
// Bytes: a hand-built trace with allocations inside ops on two threads.
#include <catch2/catch.hpp>

#include <map>
#include <tuple>

#include "analysis_builder.h"
#include "fixture_trace.h"
#include "tracerun/trace/analysis/callgraph.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using trace::analysis::buildCallGraph;
using trace::analysis::CallGraph;

namespace {

using Path = std::vector<std::pair<std::string, int>>;  // (name, category) from the top

struct Totals {
  int64_t count = 0, inclusive = 0, exclusive = 0;
};

Path pathOf(const fixture::Generated& g, size_t i) {
  Path p;
  for (long k = static_cast<long>(i); k >= 0; k = g.spans[static_cast<size_t>(k)].parent) {
    p.insert(p.begin(),
             {g.spans[static_cast<size_t>(k)].name, g.spans[static_cast<size_t>(k)].category});
  }
  return p;
}

Path pathOf(const CallGraph& cg, const trace::TraceReader& r, int node) {
  Path p;
  for (int n = node; n > 0; n = cg.nodes[static_cast<size_t>(n)].parent) {
    const auto& x = cg.nodes[static_cast<size_t>(n)];
    p.insert(p.begin(), {r.str(x.name), static_cast<int>(x.category)});
  }
  return p;
}

std::map<Path, Totals> bruteForce(const fixture::Generated& g, int rank) {
  std::map<Path, Totals> out;
  for (size_t i = 0; i < g.spans.size(); ++i) {
    const auto& s = g.spans[i];
    if (rank >= 0 && s.rank != rank) continue;
    Totals& t = out[pathOf(g, i)];
    ++t.count;
    t.inclusive += s.end - s.start;
    t.exclusive += s.end - s.start;
    if (s.parent >= 0) out[pathOf(g, static_cast<size_t>(s.parent))].exclusive -= s.end - s.start;
  }
  return out;
}

}  // namespace

TEST_CASE("call graph: counts, inclusive and exclusive time per name path equal brute force",
          "[analysis][callgraph]") {
  fixture::Options o;
  o.dir = scratchDir("callgraph_fixture");
  o.ranks = 3;
  o.threads = 3;
  o.roots_per_thread = 25;
  const auto g = fixture::writeFixture(o);
  const auto reader = trace::TraceReader::open(g.merged);
  for (int rank : {-1, 0, 2}) {
    INFO("rank " << rank);
    const CallGraph cg = buildCallGraph(reader, {rank, true});
    const auto expected = bruteForce(g, rank);
    std::map<Path, Totals> got;
    for (size_t n = 1; n < cg.nodes.size(); ++n) {
      const auto& x = cg.nodes[n];
      Totals& t = got[pathOf(cg, reader, static_cast<int>(n))];
      t.count += x.count;
      t.inclusive += x.inclusive_ns;
      t.exclusive += x.exclusive_ns;
      // A parent is listed before its children, and a node is its parent's child.
      CHECK(x.parent < static_cast<int>(n));
      const auto& kids = cg.nodes[static_cast<size_t>(x.parent)].children;
      CHECK(std::find(kids.begin(), kids.end(), static_cast<int>(n)) != kids.end());
    }
    REQUIRE(got.size() == expected.size());
    CHECK(cg.nodes.size() == expected.size() + 1);  // paths are unique nodes
    for (const auto& [path, t] : expected) {
      INFO(path.back().first);
      REQUIRE(got.count(path));
      CHECK(got[path].count == t.count);
      CHECK(got[path].inclusive == t.inclusive);
      CHECK(got[path].exclusive == t.exclusive);
    }
    // Flows: each link's count equals the flows between spans of those two paths.
    std::map<std::tuple<Path, Path, int>, int64_t> flows;
    for (const auto& f : g.flows) {
      if (rank >= 0 && f.rank != rank) continue;
      long src = -1, dst = -1;
      for (size_t i = 0; i < g.spans.size(); ++i) {
        const auto& s = g.spans[i];
        if (s.rank != f.rank) continue;
        if (s.track == f.src_track && s.start == f.src_ts) src = static_cast<long>(i);
        if (s.track == f.dst_track && s.start == f.dst_ts) dst = static_cast<long>(i);
      }
      REQUIRE(src >= 0);
      REQUIRE(dst >= 0);
      ++flows[{pathOf(g, static_cast<size_t>(src)), pathOf(g, static_cast<size_t>(dst)), f.kind}];
    }
    std::map<std::tuple<Path, Path, int>, int64_t> links;
    for (const auto& l : cg.links) {
      links[{pathOf(cg, reader, l.from), pathOf(cg, reader, l.to), static_cast<int>(l.kind)}] +=
          l.count;
    }
    CHECK(links == flows);
    CHECK(cg.unresolved_flows == 0);
  }
}

TEST_CASE("call graph: bytes allocated go to the span named by the allocation's op",
          "[analysis][callgraph]") {
  TraceBuilder tb;
  // main: step > forward > aten::linear > aten::empty; worker: MmBackward0 > aten::mm, both open
  // at t = 150 so only the op name tells where an allocation belongs.
  tb.span(0, BSpan{"main", "step", core::Category::kPhase, 0, 1000, 0});
  tb.span(0, BSpan{"main", "forward", core::Category::kPhase, 10, 900, 1});
  tb.span(0, BSpan{"main", "aten::linear", core::Category::kOp, 100, 400, 2});
  tb.span(0, BSpan{"main", "aten::empty", core::Category::kOp, 140, 160, 3});
  tb.span(0, BSpan{"worker", "MmBackward0", core::Category::kBackward, 120, 300, 0});
  tb.span(0, BSpan{"worker", "aten::mm", core::Category::kOp, 130, 290, 1});
  tb.memory(0, BMemory{150, 0x10, 64, core::MemoryCategory::kUnknown, "aten::empty", ""});
  tb.memory(0, BMemory{151, 0x20, 128, core::MemoryCategory::kUnknown, "aten::mm", ""});
  tb.memory(0, BMemory{200, 0x30, 256, core::MemoryCategory::kUnknown, "aten::linear", ""});
  tb.memory(0, BMemory{500, 0x40, 512, core::MemoryCategory::kUnknown, "", "forward"});
  tb.memory(0, BMemory{950, 0x50, 1024, core::MemoryCategory::kUnknown, "", ""});  // nowhere
  tb.memory(0, BMemory{960, 0x10, -64, core::MemoryCategory::kUnknown, "", ""});   // a free
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("callgraph_bytes")));
  const CallGraph cg = buildCallGraph(reader);
  std::map<std::string, int64_t> bytes;
  for (size_t n = 1; n < cg.nodes.size(); ++n) {
    bytes[cg.path(static_cast<int>(n), reader)] = cg.nodes[n].alloc_bytes;
  }
  CHECK(bytes["step > forward > aten::linear > aten::empty"] == 64);
  CHECK(bytes["MmBackward0 > aten::mm"] == 128);
  CHECK(bytes["step > forward > aten::linear"] == 256);
  CHECK(bytes["step > forward"] == 512);
  CHECK(bytes["step"] == 0);
  CHECK(cg.unattributed_bytes == 1024);
  CHECK(cg.unattributed_allocs == 1);
  CHECK(cg.subtreeBytes(0) == 64 + 128 + 256 + 512);
}
