// Communication analysis on a hand-built 4-rank trace: two tensor-parallel groups' all-reduces at
// different times, a world all-gather under a caller scope, an annotated broadcast, pipeline
// messages with known waits, and leaf ops overlapping collectives by known amounts. Expected
// values are the closed forms of nccl-tests' definitions.
#include <catch2/catch.hpp>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using namespace tracerun::trace::analysis;

TEST_CASE("comm: names, shapes and bus-bandwidth factors", "[analysis][comm]") {
  CHECK(normalizeCommName("gloo:all_reduce") == "all_reduce");
  CHECK(normalizeCommName("c10d::allreduce_") == "all_reduce");
  CHECK(normalizeCommName("nccl:AllGather") == "all_gather");
  CHECK(normalizeCommName("c10d::_reduce_scatter_base_") == "reduce_scatter");
  CHECK(normalizeCommName("gloo:recvAnysource") == "recv");
  CHECK(normalizeCommName("gloo:reduce") == "reduce");
  CHECK(normalizeCommName("aten::mm") == "");
  CHECK(bytesOfShapes("f32[32,1,64]") == 32 * 64 * 4);
  CHECK(bytesOfShapes("f32[2,3], i64[4], bf16[10]") == 24 + 32 + 20);
  CHECK(bytesOfShapes("{f64[1], f64[1]}") == 16);
  CHECK(bytesOfShapes("f32[]") == 4);
  CHECK(bytesOfShapes("int, str") == 0);
  CHECK(busBandwidthFactor("all_reduce", 4) == Approx(1.5));
  CHECK(busBandwidthFactor("all_gather", 4) == Approx(0.75));
  CHECK(busBandwidthFactor("reduce_scatter", 2) == Approx(0.5));
  CHECK(busBandwidthFactor("broadcast", 8) == 1);
  CHECK(busBandwidthFactor("all_reduce", 0) == 0);
}

TEST_CASE("comm: groups, bandwidth, receive waits and overlap in closed form", "[analysis][comm]") {
  TraceBuilder tb(4);
  const core::Category kComm = core::Category::kComm;
  // Tensor-parallel all-reduces: group {0, 1} at 1000 + 100000 k, group {2, 3} 50 us later.
  for (int k = 0; k < 5; ++k) {
    const int64_t t = 1000 + 100000 * k;
    tb.span(0, BSpan{"async", "gloo:all_reduce", kComm, t, t + 2000, 0, {}, "f32[1024]"});
    tb.span(1, BSpan{"async", "gloo:all_reduce", kComm, t + 100, t + 2000, 0, {}, "f32[1024]"});
    tb.span(2, BSpan{"async", "gloo:all_reduce", kComm, t + 50000, t + 52000, 0, {}, "f32[1024]"});
    tb.span(3, BSpan{"async", "gloo:all_reduce", kComm, t + 50050, t + 51900, 0, {}, "f32[1024]"});
  }
  // World all-gathers called through the trainer's fallback scope.
  for (int k = 0; k < 3; ++k) {
    const int64_t t = 600000 + 5000 * k;
    for (int r = 0; r < 4; ++r) {
      tb.span(r, BSpan{"main", "all_gather[all_gather_list+cat]", core::Category::kUser, t - 100,
                       t + 1100, 0});
      tb.span(r, BSpan{"async", "gloo:all_gather", kComm, t + 10 * r, t + 1000, 0, {}, "f32[256]"});
    }
  }
  // A broadcast whose group size the capture recorded.
  tb.span(
      0,
      BSpan{"async", "gloo:broadcast", kComm, 800000, 800500, 0, {{"group_size", 8}}, "f32[64]"});
  // Compute on rank 0: a leaf op over the first all-reduce; a parent op over the third whose own
  // time is a wait (only its leaf child computes).
  tb.span(0, BSpan{"main", "aten::mm", core::Category::kOp, 0, 1500, 0});
  tb.span(0, BSpan{"main", "aten::linear", core::Category::kOp, 200000, 210000, 0});
  tb.span(0, BSpan{"main", "aten::mm", core::Category::kOp, 201000, 202000, 1});
  // Pipeline messages 0 -> 1: the first receive waits 1000 ns for its send, the second none; a
  // receive from rank 2 whose send is not in the trace.
  auto msg = [&](int rank, const char* name, int peer, int mb, int64_t s, int64_t e) {
    tb.span(rank, BSpan{"main",
                        name,
                        core::Category::kUser,
                        s,
                        e,
                        0,
                        {{"peer", peer}, {"microbatch", mb}, {"bytes", 4096}}});
  };
  msg(0, "send_forward", 1, 0, 1000000, 1000010);
  msg(1, "recv_forward", 0, 0, 999000, 1000500);
  msg(0, "send_forward", 1, 1, 1001000, 1001010);
  msg(1, "recv_forward", 0, 1, 1001500, 1001700);
  msg(1, "recv_backward", 2, 5, 1010000, 1010300);

  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm")));
  const CommAnalysis a = analyzeComm(reader);

  auto find = [&](const std::string& op, std::vector<int> ranks) -> const CollectiveStats* {
    for (const auto& c : a.collectives) {
      if (c.op == op && c.ranks == ranks) return &c;
    }
    return nullptr;
  };
  for (const auto& group : {std::vector<int>{0, 1}, std::vector<int>{2, 3}}) {
    const CollectiveStats* c = find("all_reduce", group);
    REQUIRE(c != nullptr);
    CHECK(c->group_size == 2);
    CHECK(c->group_source == "matched");
    CHECK(c->calls == 5);
    CHECK(c->bytes == 5 * 4096);
    const int64_t time = group[0] == 0 ? 5 * (2000 + 1900) / 2 : 5 * (2000 + 1850) / 2;
    CHECK(c->time_ns == time);
    CHECK(c->algbw_gbps == Approx(5.0 * 4096 / time));
    CHECK(c->busbw_gbps == Approx(c->algbw_gbps * 2 * 1 / 2.0));
    CHECK(c->via == "");
  }
  const CollectiveStats* ag = find("all_gather", {0, 1, 2, 3});
  REQUIRE(ag != nullptr);
  CHECK(ag->group_size == 4);
  CHECK(ag->calls == 3);
  CHECK(ag->bytes == 3 * 4 * 1024);  // the gathered output, as nccl-tests counts it
  CHECK(ag->time_ns == 3 * (1000 + 990 + 980 + 970) / 4);
  CHECK(ag->busbw_gbps == Approx(ag->algbw_gbps * 0.75));
  CHECK(ag->via == "all_gather[all_gather_list+cat]");
  const CollectiveStats* bc = find("broadcast", {0});
  REQUIRE(bc != nullptr);
  CHECK(bc->group_source == "annotated");
  CHECK(bc->group_size == 8);
  CHECK(bc->busbw_gbps == Approx(256.0 / 500));
  CHECK(a.collectives.size() == 4);

  REQUIRE(a.ranks.size() == 4);
  const RankCommStats& r0 = a.ranks[0];
  CHECK(r0.comm_ns == 5 * 2000 + 3 * 1000 + 500);
  CHECK(r0.compute_ns == 1500 + 1000);
  CHECK(r0.overlap_ns == 500 + 1000);
  const RankCommStats& r1 = a.ranks[1];
  CHECK(r1.recv_ns == 1500 + 200 + 300);
  CHECK(r1.recv_wait_ns == 1000);
  CHECK(r1.recv_transfer_ns == 500 + 200);
  CHECK(r1.unmatched_recvs == 1);

  const PointToPointStats* fwd = nullptr;
  for (const auto& p : a.p2p) {
    if (p.src == 0 && p.dst == 1 && p.kind == "forward") fwd = &p;
  }
  REQUIRE(fwd != nullptr);
  CHECK(fwd->messages == 2);
  CHECK(fwd->bytes == 2 * 4096);
  CHECK(fwd->matched == 2);
  CHECK(fwd->wait_ns == 1000);
  CHECK(fwd->transfer_ns == 700);
}

TEST_CASE("comm: the c10d decorator's tracks name the groups, and replace Gloo's own spans",
          "[analysis][comm]") {
  // Two data-parallel groups {0, 2} and {1, 3} in lockstep: matching by time alone could not tell
  // them apart; the decorator's track names can. Gloo's scopes of the same calls are dropped.
  TraceBuilder tb(4);
  for (int k = 0; k < 4; ++k) {
    const int64_t t = 1000 + 20000 * k;
    for (int r = 0; r < 4; ++r) {
      const std::string track = r % 2 == 0 ? "async:c10d dp [0,2]" : "async:c10d dp [1,3]";
      tb.span(r, BSpan{track,
                       "c10d:allreduce",
                       core::Category::kComm,
                       t,
                       t + 3000,
                       0,
                       {{"bytes", 8192}, {"group_size", 2}, {"seq", k}},
                       "dp"});
      tb.span(r, BSpan{"async",
                       "gloo:all_reduce",
                       core::Category::kComm,
                       t + 100,
                       t + 2900,
                       0,
                       {},
                       "f32[2048]"});
    }
  }
  // A send and its receive through the decorator (no pipeline scopes): paired by tag.
  tb.span(0, BSpan{"async:c10d pp [0,1]",
                   "c10d:send",
                   core::Category::kComm,
                   100000,
                   100100,
                   0,
                   {{"bytes", 64}, {"peer", 1}, {"tag", 7}},
                   "pp"});
  tb.span(1, BSpan{"async:c10d pp [0,1]",
                   "c10d:recv",
                   core::Category::kComm,
                   99000,
                   100600,
                   0,
                   {{"bytes", 64}, {"peer", 0}, {"tag", 7}},
                   "pp"});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm_decorator")));
  const CommAnalysis a = analyzeComm(reader);
  REQUIRE(a.collectives.size() == 2);
  for (const auto& c : a.collectives) {
    INFO(c.op << " " << c.ranks.size());
    CHECK(c.op == "all_reduce");
    CHECK((c.ranks == std::vector<int>{0, 2} || c.ranks == std::vector<int>{1, 3}));
    CHECK(c.group_source == "annotated");
    CHECK(c.group_size == 2);
    CHECK(c.calls == 4);
    CHECK(c.bytes == 4 * 8192);
    CHECK(c.time_ns == 4 * 3000);
    CHECK(c.busbw_gbps == Approx(4.0 * 8192 / (4 * 3000)));
  }
  REQUIRE(a.p2p.size() == 1);
  CHECK(a.p2p[0].src == 0);
  CHECK(a.p2p[0].dst == 1);
  CHECK(a.p2p[0].messages == 1);
  CHECK(a.p2p[0].matched == 1);
  CHECK(a.p2p[0].wait_ns == 1000);
  CHECK(a.p2p[0].transfer_ns == 600);
}
