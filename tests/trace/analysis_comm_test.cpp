// Communication analysis on a hand-built 4-rank trace: two tensor-parallel groups' all-reduces at
// different times, a world all-gather under a caller scope, an annotated broadcast, pipeline
// messages with known waits, and leaf ops overlapping collectives by known amounts. Expected
// values are the closed forms of nccl-tests' definitions.
#include <catch2/catch.hpp>

#include <functional>
#include <map>
#include <set>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/comm_instances.h"
#include "tracerun/trace/analysis/range_stats.h"
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
  CHECK(busBandwidthFactor("gather", 4) == Approx(0.75));  // nccl-tests' gather and scatter
  CHECK(busBandwidthFactor("scatter", 2) == Approx(0.5));
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
  for (const RankCommStats& r : a.ranks) CHECK_FALSE(r.gpu_kernels);  // no GPU: the CPU's spans
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

namespace {

// Four ranks in two groups of two making identical calls at the same time: 5 all-reduces of
// f32[1024] and 3 all-gathers of f32[256], rank r starting 10 r ns after rank 0. place(r) is
// rank r's group rank as the capture records it (group_size 2), or -1 for none recorded. Ranks
// for which `short_` says so lost their last all-reduce. groupId(r), when >= 0, is the name of
// rank r's group (group_id, as the Python hooks record it).
std::string lockstepTrace(
    const std::string& name, const std::function<int(int)>& place, int groupSize = 2,
    const std::function<bool(int)>& short_ = [](int) { return false; },
    const std::function<int64_t(int)>& groupId = [](int) { return -1; }) {
  TraceBuilder tb(4);
  for (int r = 0; r < 4; ++r) {
    std::vector<std::pair<std::string, int64_t>> args;
    if (place(r) >= 0) args = {{"group_size", groupSize}, {"group_rank", place(r)}};
    if (groupId(r) >= 0) args.emplace_back("group_id", groupId(r));
    for (int k = 0; k < (short_(r) ? 4 : 5); ++k) {
      const int64_t t = 1000 + 10000 * k + 10 * r;
      tb.span(r, BSpan{"async", "gloo:all_reduce", core::Category::kComm, t, t + 2000 - 10 * r, 0,
                       args, "f32[1024]"});
    }
    for (int k = 0; k < 3; ++k) {
      const int64_t t = 100000 + 10000 * k + 10 * r;
      tb.span(r, BSpan{"async", "gloo:all_gather", core::Category::kComm, t, t + 1000 - 10 * r, 0,
                       args, "f32[256]"});
    }
  }
  return tb.write(scratchDir(name));
}

// The viewer's instances of lockstepTrace's two calls: one group per (call, group) of `want`'s
// pairs, each instance with its two ranks.
void checkPairInstances(const trace::TraceReader& reader, const std::set<std::vector<int>>& want) {
  const auto instances = analyzeCommInstances(reader);
  REQUIRE(instances.groups.size() == 2 * want.size());
  std::set<std::vector<int>> members;
  for (const auto& g : instances.groups) members.insert(g.members);
  CHECK(members == want);
  for (const auto& in : instances.instances) {
    REQUIRE(in.ranks.size() == 2);
    CHECK(want.count({in.ranks[0].rank, in.ranks[1].rank}) == 1);
  }
}

std::set<std::vector<int>> rowsOf(const CommAnalysis& a, const std::string& op) {
  std::set<std::vector<int>> out;
  for (const auto& c : a.collectives) {
    if (c.op == op) out.insert(c.ranks);
  }
  return out;
}

}  // namespace

TEST_CASE("comm: two groups with identical calls at the same time, told apart by group rank",
          "[analysis][comm]") {
  using Groups = std::set<std::vector<int>>;
  SECTION("nothing recorded of the groups: one group of four (the limit of matching by time)") {
    const auto reader =
        trace::TraceReader::open(lockstepTrace("comm_lock_none", [](int) { return -1; }));
    const CommAnalysis a = analyzeComm(reader);
    CHECK(rowsOf(a, "all_reduce") == Groups{{0, 1, 2, 3}});
    const auto instances = analyzeCommInstances(reader);
    REQUIRE(instances.groups.size() == 2);
    CHECK(instances.groups[0].members == std::vector<int>{0, 1, 2, 3});
  }
  for (const bool strided : {false, true}) {
    DYNAMIC_SECTION((strided ? "strided" : "contiguous")
                    << " groups, their ranks' places recorded") {
      // new_group numbers a group's ranks in ascending order: {0,1},{2,3} gives places 0,1,0,1;
      // {0,2},{1,3} gives 0,0,1,1.
      const auto reader = trace::TraceReader::open(
          lockstepTrace(strided ? "comm_lock_strided" : "comm_lock_contiguous",
                        [strided](int r) { return strided ? r / 2 : r % 2; }));
      const CommAnalysis a = analyzeComm(reader);
      const Groups want = strided ? Groups{{0, 2}, {1, 3}} : Groups{{0, 1}, {2, 3}};
      CHECK(rowsOf(a, "all_reduce") == want);
      CHECK(rowsOf(a, "all_gather") == want);
      REQUIRE(a.collectives.size() == 4);
      for (const auto& c : a.collectives) {
        INFO(c.op << " [" << c.ranks.front() << "," << c.ranks.back() << "]");
        CHECK(c.group_size == 2);
        CHECK(c.group_source == "annotated");
        const int first = c.ranks[0], second = c.ranks[1];
        if (c.op == "all_reduce") {
          CHECK(c.calls == 5);
          CHECK(c.bytes == 5 * 4096);
          CHECK(c.time_ns == 5 * ((2000 - 10 * first) + (2000 - 10 * second)) / 2);
          CHECK(c.busbw_gbps == Approx(c.algbw_gbps * 1.0));  // 2(n-1)/n, n = 2
        } else {
          CHECK(c.calls == 3);
          CHECK(c.bytes == 3 * 2 * 1024);  // the gathered output of two ranks
          CHECK(c.busbw_gbps == Approx(c.algbw_gbps * 0.5));
        }
      }
      checkPairInstances(reader, want);
    }
  }
  SECTION("interleaved groups {0,3},{1,2}: cut wrongly by places, told apart by their names") {
    // new_group([0, 3]) and new_group([1, 2]): places 0,0,1,1, as the strided layout's.
    const auto place = [](int r) { return r == 0 || r == 1 ? 0 : 1; };
    const auto unnamed = trace::TraceReader::open(lockstepTrace("comm_lock_interleaved", place));
    CHECK(rowsOf(analyzeComm(unnamed), "all_reduce") == Groups{{0, 2}, {1, 3}});  // the limit
    // torch names them "1" and "2" on every rank (the world is "0").
    const auto named = trace::TraceReader::open(lockstepTrace(
        "comm_lock_interleaved_named", place, 2, [](int) { return false; },
        [](int r) { return r == 0 || r == 3 ? 1 : 2; }));
    const CommAnalysis a = analyzeComm(named);
    const Groups want{{0, 3}, {1, 2}};
    CHECK(rowsOf(a, "all_reduce") == want);
    CHECK(rowsOf(a, "all_gather") == want);
    for (const auto& c : a.collectives) {
      CHECK(c.group_size == 2);
      CHECK(c.calls == (c.op == "all_reduce" ? 5 : 3));
    }
    checkPairInstances(named, want);
  }
  SECTION("names on some ranks only: matched by size and place, as without names") {
    // Rank 3's capture ran out of names: {0,1},{2,3} as the places give, not rank 3 alone.
    const auto reader = trace::TraceReader::open(lockstepTrace(
        "comm_lock_partly_named", [](int r) { return r % 2; }, 2, [](int) { return false; },
        [](int r) { return r == 3 ? -1 : 1 + r / 2; }));
    CHECK(rowsOf(analyzeComm(reader), "all_reduce") == Groups{{0, 1}, {2, 3}});
    checkPairInstances(reader, Groups{{0, 1}, {2, 3}});
  }
  SECTION("places that make one group: the rest stand alone") {
    // Three ranks say place 0, one place 1: one group of two ({0,3}: the lowest place 0, then
    // the lowest place 1 above it); ranks 1 and 2 cannot share a group.
    const auto reader = trace::TraceReader::open(
        lockstepTrace("comm_lock_bad", [](int r) { return r == 3 ? 1 : 0; }));
    const CommAnalysis a = analyzeComm(reader);
    CHECK(rowsOf(a, "all_reduce") == Groups{{0, 3}, {1}, {2}});
    for (const auto& c : a.collectives) CHECK(c.group_size == 2);
  }
  SECTION("places that make no group: kept whole, with the recorded size") {
    // Every rank says place 1: no group of two starts anywhere.
    const auto reader =
        trace::TraceReader::open(lockstepTrace("comm_lock_none_zero", [](int) { return 1; }));
    const CommAnalysis a = analyzeComm(reader);
    CHECK(rowsOf(a, "all_reduce") == Groups{{0, 1, 2, 3}});
    for (const auto& c : a.collectives) CHECK(c.group_size == 2);
  }
  SECTION("two ranks of one place are never one group") {
    // {0,1},{2,3} in lockstep; ranks 1 and 3 lost a call, so 0 pairs with 2 and 1 with 3 by
    // time, each pair with one place twice: no group, each rank alone (size as recorded).
    const auto reader = trace::TraceReader::open(lockstepTrace(
        "comm_lock_lost", [](int r) { return r % 2; }, 2, [](int r) { return r % 2 == 1; }));
    const CommAnalysis a = analyzeComm(reader);
    CHECK(rowsOf(a, "all_reduce") == Groups{{0}, {1}, {2}, {3}});
    CHECK(rowsOf(a, "all_gather") == Groups{{0, 1}, {2, 3}});  // its calls were all kept
    // The viewer: the recorded places keep them apart too (no pool of the ranks left alone).
    const auto instances = analyzeCommInstances(reader);
    Groups members;
    for (const auto& g : instances.groups) members.insert(g.members);
    CHECK(members == Groups{{0}, {1}, {2}, {3}, {0, 1}, {2, 3}});
  }
  SECTION("a rank a call short: its group's other rank stands alone") {
    const auto reader = trace::TraceReader::open(lockstepTrace(
        "comm_lock_short", [](int r) { return r % 2; }, 2, [](int r) { return r == 3; }));
    const CommAnalysis a = analyzeComm(reader);
    CHECK(rowsOf(a, "all_reduce") == Groups{{0, 1}, {2}, {3}});
  }
  SECTION("a recorded size larger than the ranks present: kept whole") {
    // Four of eight ranks traced (tracerun --ranks), places 0..3: distinct, one group.
    const auto reader = trace::TraceReader::open(lockstepTrace(
        "comm_lock_partial", [](int r) { return r; }, 8));
    const CommAnalysis a = analyzeComm(reader);
    CHECK(rowsOf(a, "all_reduce") == Groups{{0, 1, 2, 3}});
    for (const auto& c : a.collectives) CHECK(c.group_size == 8);
  }
}

TEST_CASE("comm: two groups of one size on a rank, one signature: unknown, or told apart by name",
          "[analysis][comm]") {
  // Rank 0 all-reduces the same f32[1024] with rank 1 (group "1") and then with rank 2 (group
  // "2"), 4 times each, every call place 0 for rank 0 and place 1 for the other.
  const auto build = [](const std::string& name, bool named) {
    TraceBuilder tb(3);
    for (int k = 0; k < 4; ++k) {
      for (int g = 1; g <= 2; ++g) {
        const int64_t t = 1000 + 10000 * k + 5000 * (g - 1);
        for (const int r : {0, g}) {
          std::vector<std::pair<std::string, int64_t>> args = {{"group_size", 2},
                                                               {"group_rank", r == 0 ? 0 : 1}};
          if (named) args.emplace_back("group_id", g);
          tb.span(r, BSpan{"async", "gloo:all_reduce", core::Category::kComm, t + r, t + 2000, 0,
                           args, "f32[1024]"});
        }
      }
    }
    return tb.write(scratchDir(name));
  };
  using Groups = std::set<std::vector<int>>;
  // Unnamed: rank 0's 8 calls cannot pair with 4 and 4: per rank, unknown (docs/report.md).
  const auto unnamed = trace::TraceReader::open(build("comm_two_groups_one_rank", false));
  CHECK(rowsOf(analyzeComm(unnamed), "all_reduce") == Groups{{0}, {1}, {2}});
  const auto named = trace::TraceReader::open(build("comm_two_groups_one_rank_named", true));
  const CommAnalysis a = analyzeComm(named);
  CHECK(rowsOf(a, "all_reduce") == Groups{{0, 1}, {0, 2}});
  for (const auto& c : a.collectives) {
    CHECK(c.calls == 4);
    CHECK(c.group_size == 2);
  }
  Groups members;
  for (const auto& g : analyzeCommInstances(named).groups) members.insert(g.members);
  CHECK(members == Groups{{0, 1}, {0, 2}});
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

TEST_CASE("comm: wrapping one group keeps the calls of a group the decorator does not wrap",
          "[analysis][comm]") {
  // Group {0, 1} through the decorator (Gloo's own scopes inside its calls), and group {1, 2},
  // not wrapped, whose calls Gloo alone recorded (a program that wrapped its pp group only).
  // Expected: the wrapped group's 3 calls once, and the other group's 2 calls of 4 KiB matched
  // on both its ranks (rank 1 had lost its side of them). An unwrapped broadcast issued on
  // another thread while a wrapped all-reduce runs is its own call too (same time, other op).
  TraceBuilder tb(3);
  for (int r = 0; r < 2; ++r) {
    tb.span(r,
            BSpan{"async", "gloo:broadcast", core::Category::kComm, 1500, 2500, 0, {}, "f32[16]"});
  }
  for (int r = 0; r < 2; ++r) {
    for (int k = 0; k < 3; ++k) {
      const int64_t t = 1000 + 20000 * k;
      tb.span(r, BSpan{"async:c10d pp [0,1]",
                       "c10d:allreduce",
                       core::Category::kComm,
                       t,
                       t + 3000,
                       0,
                       {{"bytes", 8}, {"group_size", 2}, {"seq", k}},
                       "pp"});
      // Gloo's scope ends after the decorator's span, as in libtorch (the future completes
      // first): still the same call.
      tb.span(r, BSpan{"async",
                       "gloo:all_reduce",
                       core::Category::kComm,
                       t + 100,
                       t + 15000,
                       0,
                       {},
                       "f32[2]"});
    }
  }
  for (int r = 1; r < 3; ++r) {
    for (int k = 0; k < 2; ++k) {
      const int64_t t = 100000 + 20000 * k;
      tb.span(
          r,
          BSpan{
              "async", "gloo:all_reduce", core::Category::kComm, t, t + 5000, 0, {}, "f32[1024]"});
    }
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm_partly_wrapped")));
  const CommAnalysis a = analyzeComm(reader);
  REQUIRE(a.collectives.size() == 3);
  const CollectiveStats& wrapped = a.collectives[0];
  const CollectiveStats& unwrapped = a.collectives[1];
  const CollectiveStats& broadcast = a.collectives[2];
  CHECK(broadcast.op == "broadcast");
  CHECK(broadcast.ranks == std::vector<int>{0, 1});
  CHECK(broadcast.calls == 1);
  CHECK(broadcast.bytes == 64);
  CHECK(wrapped.op == "all_reduce");
  CHECK(wrapped.ranks == std::vector<int>{0, 1});
  CHECK(wrapped.group_source == "annotated");
  CHECK(wrapped.calls == 3);
  CHECK(wrapped.bytes == 3 * 8);
  CHECK(unwrapped.op == "all_reduce");
  CHECK(unwrapped.ranks == std::vector<int>{1, 2});
  CHECK(unwrapped.group_source == "matched");
  CHECK(unwrapped.calls == 2);
  CHECK(unwrapped.bytes == 2 * 4096);
  CHECK(unwrapped.time_ns == 2 * 5000);
}

TEST_CASE("comm: NCCL's set-up calls are listed apart, not counted as communication",
          "[analysis][comm]") {
  // Each rank: a 400 us ncclCommInitRankConfig, two 10 us all-reduces, group markers around them,
  // a 300 us ncclCommDestroy. Communication time is the two all-reduces alone.
  TraceBuilder tb(2);
  const std::string comm = "nccl 00000000000000ab";
  for (int r = 0; r < 2; ++r) {
    auto call = [&](const char* name, int64_t start, int64_t end, bool onComm) {
      BSpan s{onComm ? "async:" + comm : "async:nccl",
              name,
              core::Category::kComm,
              start,
              end,
              0,
              {{"bytes", onComm ? 4096 : 0}},
              onComm ? comm : ""};
      if (onComm) {
        s.args.push_back({"group_size", 2});
        s.args.push_back({"group_rank", r});
      }
      tb.span(r, s);
    };
    call("nccl:CommInitRankConfig", 1000, 401000, false);
    call("nccl:GroupStart", 500000, 500100, false);
    call("nccl:AllReduce", 500200, 510200, true);
    call("nccl:AllReduce", 520000, 530000, true);
    call("nccl:GroupEnd", 530100, 530200, false);
    call("nccl:CommDestroy", 600000, 900000, true);
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm_nccl_control")));
  const CommAnalysis a = analyzeComm(reader);
  REQUIRE(a.collectives.size() == 1);
  CHECK(a.collectives[0].op == "all_reduce");
  // The two all-reduces between GroupStart and GroupEnd are coalesced: one call of both's bytes.
  CHECK(a.collectives[0].calls == 1);
  CHECK(a.collectives[0].bytes == 2 * 4096);
  // The host call is NCCL's enqueue: its length gives no bandwidth (an H100 read 4,012 GB/s).
  CHECK(a.collectives[0].host_call_time);
  CHECK(a.collectives[0].algbw_gbps == 0);
  CHECK(a.collectives[0].busbw_gbps == 0);
  REQUIRE(a.ranks.size() == 2);
  // No kernels recorded (no `cuda` capture): the host spans are all there is, here the group's
  // from its GroupStart to its GroupEnd's end.
  for (const RankCommStats& r : a.ranks) CHECK((r.comm_ns == 530200 - 500000 && !r.gpu_kernels));
  std::map<std::string, CommControlStats> control;
  for (const auto& c : a.control) control[c.name] = c;
  REQUIRE(control.size() == 4);
  CHECK(control["nccl:CommInitRankConfig"].ranks == 2);
  CHECK(control["nccl:CommInitRankConfig"].calls == 2);
  CHECK(control["nccl:CommInitRankConfig"].total_ns == 2 * 400000);
  CHECK(control["nccl:CommInitRankConfig"].longest_ns == 400000);
  CHECK(control["nccl:CommDestroy"].total_ns == 2 * 300000);
  CHECK(control["nccl:GroupStart"].calls == 2);
  CHECK(control["nccl:GroupEnd"].calls == 2);
}

TEST_CASE("comm: NCCL send/recv peers are ranks of their communicator, mapped to trace ranks",
          "[analysis][comm]") {
  // Four ranks, a pipeline communicator per data-parallel replica: {0, 2} and {1, 3}, each rank
  // 0 or 1 inside it. Rank 0 sends to its communicator's rank 1 (trace rank 2), rank 1 to trace
  // rank 3; NCCL's arguments say peer 1 and peer 0.
  TraceBuilder tb(4);
  for (int r = 0; r < 4; ++r) {
    const std::string comm = r % 2 == 0 ? "nccl 00000000000000a0" : "nccl 00000000000000b1";
    const int inComm = r / 2;
    const bool sender = inComm == 0;
    for (int k = 0; k < 3; ++k) {
      const int64_t t = 1000 + 50000 * k;
      tb.span(
          r,
          BSpan{"async:" + comm,
                sender ? "nccl:Send" : "nccl:Recv",
                core::Category::kComm,
                sender ? t + 2000 : t,
                t + 5000,
                0,
                {{"bytes", 256}, {"peer", 1 - inComm}, {"group_size", 2}, {"group_rank", inComm}},
                comm});
    }
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm_nccl_peers")));
  const CommAnalysis a = analyzeComm(reader);
  std::map<std::pair<int, int>, PointToPointStats> byPair;
  for (const auto& p : a.p2p) byPair[{p.src, p.dst}] = p;
  REQUIRE(byPair.size() == 2);
  for (const auto& [src, dst] : {std::pair<int, int>{0, 2}, {1, 3}}) {
    INFO(src << " -> " << dst);
    REQUIRE(byPair.count({src, dst}) == 1);
    const PointToPointStats& s = byPair[{src, dst}];
    CHECK(s.messages == 3);
    CHECK(s.bytes == 3 * 256);
    CHECK(s.matched == 3);
    CHECK(s.wait_ns == 3 * 2000);
    CHECK(s.transfer_ns == 3 * 3000);
  }
}

TEST_CASE("comm: group names count per attempt: a restart's named calls are told apart by name",
          "[analysis][comm]") {
  // A 4-rank job in two attempts, interleaved groups {0,3},{1,2} in lockstep (places 0,0,1,1),
  // 5 all-reduces each. The first attempt (file ranks 4..7) recorded no names, the second (file
  // ranks 0..3) torch's names 1 and 2: the second's groups come from the names, the first's from
  // size and place, as without names.
  TraceBuilder tb(8);
  for (int g = 0; g < 8; ++g) {
    const int attempt = g < 4 ? 1 : 0, r = g % 4;
    tb.attempt(g, attempt, r, 4);
    std::vector<std::pair<std::string, int64_t>> args = {{"group_size", 2},
                                                         {"group_rank", r < 2 ? 0 : 1}};
    if (attempt == 1) args.emplace_back("group_id", r == 0 || r == 3 ? 1 : 2);
    for (int k = 0; k < 5; ++k) {
      const int64_t t = 1000 + 1'000'000 * attempt + 10000 * k + 10 * r;
      tb.span(g, BSpan{"async", "gloo:all_reduce", core::Category::kComm, t, t + 2000, 0, args,
                       "f32[1024]"});
    }
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm_attempt_names")));
  using Groups = std::set<std::vector<int>>;
  CHECK(rowsOf(analyzeComm(reader), "all_reduce") == Groups{{0, 3}, {1, 2}, {4, 6}, {5, 7}});
  Groups members;
  for (const auto& g : analyzeCommInstances(reader).groups) members.insert(g.members);
  CHECK(members == Groups{{0, 3}, {1, 2}, {4, 6}, {5, 7}});
}

TEST_CASE("comm: a restarted job's attempts are grouped apart, peers within their attempt",
          "[analysis][comm]") {
  // Two attempts of a 2-rank job, each RANK 0 and 1: three all-reduces on the decorator's
  // "c10d dp [0,1]" and a send 0 -> 1 (peer numbered within the attempt). The merged file numbers
  // the first attempt's ranks 2 and 3. Expected: each attempt's group and messages on its own.
  TraceBuilder tb(4);
  for (int g = 0; g < 4; ++g) {
    const int attempt = g / 2, r = g % 2;
    tb.attempt(g, attempt, r, 2);
    const int64_t t0 = 1000 + 1'000'000 * attempt;
    for (int k = 0; k < 3; ++k) {
      const int64_t t = t0 + 20000 * k;
      tb.span(g, BSpan{"async:c10d dp [0,1]",
                       "c10d:allreduce",
                       core::Category::kComm,
                       t,
                       t + 3000,
                       0,
                       {{"bytes", 64}, {"group_size", 2}, {"seq", k}},
                       "dp"});
    }
    tb.span(g, BSpan{"async:c10d dp [0,1]",
                     r == 0 ? "c10d:send" : "c10d:recv",
                     core::Category::kComm,
                     t0 + 100000 + (r == 0 ? 1000 : 0),
                     t0 + 101500,
                     0,
                     {{"bytes", 16}, {"peer", 1 - r}, {"tag", 3}},
                     "dp"});
  }
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("comm_attempts")));
  const CommAnalysis a = analyzeComm(reader);
  REQUIRE(a.collectives.size() == 2);
  CHECK(a.collectives[0].ranks == std::vector<int>{0, 1});
  CHECK(a.collectives[1].ranks == std::vector<int>{2, 3});
  for (const auto& c : a.collectives) {
    CHECK(c.calls == 3);
    CHECK(c.bytes == 3 * 64);
  }
  std::map<std::pair<int, int>, PointToPointStats> byPair;
  for (const auto& p : a.p2p) byPair[{p.src, p.dst}] = p;
  REQUIRE(byPair.size() == 2);
  for (const auto& [src, dst] : {std::pair<int, int>{0, 1}, {2, 3}}) {
    INFO(src << " -> " << dst);
    REQUIRE(byPair.count({src, dst}) == 1);
    CHECK(byPair[{src, dst}].messages == 1);
    CHECK(byPair[{src, dst}].matched == 1);
    CHECK(byPair[{src, dst}].wait_ns == 1000);
  }
  // The viewer's instances: each attempt's group with its own file ranks as members (the track
  // names the first attempt's RANKs 0 and 1, which are file ranks 2 and 3).
  const auto instances = analyzeCommInstances(reader);
  std::set<std::vector<int>> members;
  for (const auto& g : instances.groups) {
    if (g.name.rfind("c10d dp", 0) == 0) members.insert(g.members);
  }
  CHECK(members == std::set<std::vector<int>>{{0, 1}, {2, 3}});
  for (const auto& in : instances.instances) {
    INFO(instances.groups[static_cast<size_t>(in.group)].name << " seq " << in.seq);
    REQUIRE(in.ranks.size() == 2);
    CHECK(instances.groups[static_cast<size_t>(in.group)].members ==
          std::vector<int>{in.ranks[0].rank, in.ranks[1].rank});
  }
}

TEST_CASE("range statistics: two group sizes in one row or NCCL host calls give no bus bandwidth",
          "[analysis][comm]") {
  // Gloo spans carry the group size of their call (the dispatcher's process group): an all-reduce
  // row over the tensor-parallel group (2) and the world (4) has no one nccl-tests factor.
  for (const bool mixed : {false, true}) {
    TraceBuilder tb(1);
    for (int k = 0; k < 3; ++k) {
      const int size = mixed && k == 2 ? 4 : 2;
      tb.span(0, BSpan{"async",
                       "gloo:all_reduce",
                       core::Category::kComm,
                       1000 * k,
                       1000 * k + 512,
                       0,
                       {{"group_size", size}, {"group_rank", 0}},
                       "f32[1024]"});
    }
    const auto reader =
        trace::TraceReader::open(tb.write(scratchDir(mixed ? "range_mixed" : "range_one")));
    const RangeStats r = rangeStats(reader, {});
    REQUIRE(r.collectives.size() == 1);
    const RangeCollective& c = r.collectives[0];
    INFO((mixed ? "sizes 2, 2, 4" : "sizes 2, 2, 2"));
    CHECK(c.calls == 3);
    CHECK(c.algbw_gbps == Approx(3.0 * 4096 / (3 * 512)));
    CHECK(c.group_size == (mixed ? 0 : 2));
    CHECK(c.busbw_gbps == Approx(mixed ? 0.0 : c.algbw_gbps));  // all-reduce, n = 2: factor 1
    CHECK_FALSE(c.host_call_time);
  }
  // NCCL's host calls: the span is the enqueue, no bandwidth (as the report's rows).
  TraceBuilder tb(1);
  tb.span(0, BSpan{"async:comm 0x7f",
                   "nccl:AllReduce",
                   core::Category::kComm,
                   0,
                   500,
                   0,
                   {{"bytes", 1 << 20}, {"group_size", 2}, {"group_rank", 0}},
                   "comm 0x7f"});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("range_nccl")));
  const RangeStats r = rangeStats(reader, {});
  REQUIRE(r.collectives.size() == 1);
  CHECK(r.collectives[0].host_call_time);
  CHECK(r.collectives[0].algbw_gbps == 0);
  CHECK(r.collectives[0].busbw_gbps == 0);
}

TEST_CASE("comm: NCCL host calls are timed by the communication kernels they launched",
          "[analysis][comm]") {
  // Two ranks, three all-reduces of 1 MiB on one communicator. Each host call (the enqueue,
  // 20 us) launches an NCCL kernel (its launch API record inside the call, joined to the kernel
  // by the correlation id as CUPTI records them) that runs 100 us on rank 0 and 101 us on rank 1,
  // and, inside the same call, a compute kernel that is not communication.
  // Variants: with launch records; without (nothing says which kernel is a call's); rank 0's
  // second call launched its kernel after it returned (a nonblocking communicator: outside its
  // span, inside nobody's): that call has no kernel, so the row keeps the spans' time.
  const std::string comm = "comm 0x7f";
  // kSendHolds: on rank 0 a send of another thread overlaps the third call and holds its launch
  // too (the launching thread is not recorded): that launch is neither's.
  enum Variant { kRecords, kNoRecords, kLateLaunch, kSendHolds };
  for (const Variant variant : {kRecords, kNoRecords, kLateLaunch, kSendHolds}) {
    const bool records = variant != kNoRecords;
    TraceBuilder tb(2);
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 3; ++k) {
        const int64_t t = 1'000'000 * (k + 1);
        tb.span(r, BSpan{"async:" + comm,
                         "nccl:AllReduce",
                         core::Category::kComm,
                         t,
                         t + 20'000,
                         0,
                         {{"bytes", 1 << 20}, {"group_size", 2}, {"group_rank", r}},
                         comm});
        const int64_t nccl = 100 + 2 * k, other = 101 + 2 * k;  // correlation ids
        if (variant == kSendHolds && r == 0 && k == 2) {
          tb.span(r, BSpan{"async:" + comm,
                           "nccl:Send",
                           core::Category::kComm,
                           t + 1'000,
                           t + 15'000,
                           0,
                           {{"bytes", 64}, {"peer", 1}, {"group_size", 2}, {"group_rank", r}},
                           comm});
        }
        const int64_t run = 100'000 + 1'000 * r;
        tb.span(r, BSpan{"cuda:0 stream 7",
                         "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                         core::Category::kKernel,
                         t + 30'000,
                         t + 30'000 + run,
                         0,
                         {{"correlation", nccl}}});
        tb.span(r, BSpan{"cuda:0 stream 9",
                         "elementwise_kernel",
                         core::Category::kKernel,
                         t + 25'000,
                         t + 500'000,
                         0,
                         {{"correlation", other}}});
        if (!records) continue;
        for (const int64_t corr : {nccl, other}) {
          const bool late = variant == kLateLaunch && r == 0 && k == 1 && corr == nccl;
          const int64_t at = late ? t + 22'000 : t + 5'000 + 1'000 * (corr - nccl);
          tb.span(r, BSpan{"cuda api thread 555",
                           "cudaLaunchKernelExC",
                           core::Category::kOther,
                           at,
                           at + 500,
                           0,
                           {{"correlation", corr}}});
        }
      }
    }
    const char* names[] = {"comm_nccl_kernels", "comm_nccl_no_records", "comm_nccl_late",
                           "comm_nccl_send_holds"};
    const auto reader = trace::TraceReader::open(tb.write(scratchDir(names[variant])));
    const CommAnalysis a = analyzeComm(reader);
    REQUIRE(a.collectives.size() == 1);
    const CollectiveStats& c = a.collectives[0];
    INFO(names[variant]);
    CHECK(c.ranks == std::vector<int>{0, 1});
    CHECK(c.calls == 3);
    CHECK(c.bytes == 3 * (1 << 20));
    if (variant == kRecords) {
      CHECK(c.kernel_time);
      CHECK_FALSE(c.host_call_time);
      CHECK(c.time_ns == 3 * (100'000 + 101'000) / 2);  // per call the members' mean
      CHECK(c.algbw_gbps == Approx(3.0 * (1 << 20) / (3 * (100'000 + 101'000) / 2)));
      CHECK(c.busbw_gbps == Approx(c.algbw_gbps));  // all-reduce, n = 2: 2(n-1)/n = 1
    } else {
      // One call without its kernel: no bandwidth, and the spans' time for every call (never
      // kernel time for some calls and enqueue time for others).
      CHECK_FALSE(c.kernel_time);
      CHECK(c.host_call_time);
      CHECK(c.time_ns == 3 * 20'000);
      CHECK(c.algbw_gbps == 0);
    }
    // Per rank, the GPU's account whatever the launch records: NCCL's kernels (100 or 101 us
    // each) against the other kernels (475 us each, around them), not the 20 us enqueues.
    REQUIRE(a.ranks.size() == 2);
    for (const RankCommStats& r : a.ranks) {
      INFO("rank " << r.rank);
      CHECK(r.gpu_kernels);
      CHECK(r.comm_ns == 3 * (100'000 + 1'000 * r.rank));
      CHECK(r.compute_ns == 3 * 475'000);
      CHECK(r.overlap_ns == r.comm_ns);
    }
  }
}

namespace {

// One NCCL call of `rank` on communicator `comm` (group_size 2), as libtracerun_nccl records it.
void ncclCall(TraceBuilder& tb, int rank, const std::string& comm, const std::string& name,
              int64_t start, int64_t end, std::vector<std::pair<std::string, int64_t>> args) {
  args.push_back({"group_size", 2});
  args.push_back({"group_rank", rank});
  tb.span(rank, BSpan{"async:" + comm, name, core::Category::kComm, start, end, 0, args, comm});
}

// A call tracerun's c10d decorator recorded for `rank` in the data-parallel group {0, 1}.
void dpCall(TraceBuilder& tb, int rank, const std::string& name, int64_t start, int64_t end,
            std::vector<std::pair<std::string, int64_t>> args) {
  tb.span(rank,
          BSpan{"async:c10d dp [0,1]", name, core::Category::kComm, start, end, 0, args, "dp"});
}

// ncclGroupStart / ncclGroupEnd: control calls on the rank's `nccl` track.
void ncclMarker(TraceBuilder& tb, int rank, const std::string& name, int64_t start, int64_t end) {
  tb.span(rank, BSpan{"async:nccl", name, core::Category::kComm, start, end, 0, {}, ""});
}

// A communication kernel of `rank` running [start, end), launched at `launch` (its launch API
// record, joined by the correlation id).
void ncclKernel(TraceBuilder& tb, int rank, int64_t correlation, int64_t launch, int64_t start,
                int64_t end) {
  tb.span(rank, BSpan{"cuda:0 stream 7",
                      "ncclDevKernel_SendRecv",
                      core::Category::kKernel,
                      start,
                      end,
                      0,
                      {{"correlation", correlation}}});
  tb.span(rank, BSpan{"cuda api thread 555",
                      "cuLaunchKernelEx",
                      core::Category::kOther,
                      launch,
                      launch + 500,
                      0,
                      {{"correlation", correlation}}});
}

}  // namespace

TEST_CASE("comm: an NCCL group of a send to and a receive from every rank is one all_to_all",
          "[analysis][comm]") {
  // Two ranks, three all_to_all calls as PyTorch makes them on NCCL (torch/csrc/cuda/nccl.cpp):
  // ncclGroupStart, then a send to and a receive from each rank of the communicator (itself
  // included; 4 KiB each way), then ncclGroupEnd, which launches one kernel (80 us on rank 0,
  // 82 us on rank 1). Variants:
  // - kPeerTwice: rank 0 sends to itself twice and never to rank 1: its groups are no
  //   all-to-all and stay messages (rank 1's still fold, alone);
  // - kSkippedPeer: rank 0's second call skips peer 1 both ways (an unequal split with a zero
  //   count): still an all_to_all (the send to itself says so), and the three calls still pair;
  // - kDecorated: the c10d decorator recorded each call around the group (gpttrain's
  //   alltoall_base): one row, the decorator's, not a second one from NCCL's calls.
  enum Variant { kAllToAll, kPeerTwice, kSkippedPeer, kDecorated };
  for (const Variant variant : {kAllToAll, kPeerTwice, kSkippedPeer, kDecorated}) {
    const std::string comm = "nccl 00000000000000c3";
    TraceBuilder tb(2);
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 3; ++k) {
        const int64_t t = 1'000'000 * (k + 1);
        if (variant == kDecorated) {
          dpCall(tb, r, "c10d:alltoall_base", t - 500, t + 31'000, {{"bytes", 8192}, {"seq", k}});
        }
        ncclMarker(tb, r, "nccl:GroupStart", t, t + 1'000);
        for (int peer = 0; peer < 2; ++peer) {
          if (variant == kSkippedPeer && r == 0 && k == 1 && peer == 1) continue;
          const int64_t at = t + 2'000 + 4'000 * peer;
          const int64_t to = variant == kPeerTwice && r == 0 ? 0 : peer;
          ncclCall(tb, r, comm, "nccl:Send", at, at + 1'000, {{"bytes", 4096}, {"peer", to}});
          ncclCall(tb, r, comm, "nccl:Recv", at + 1'500, at + 2'500,
                   {{"bytes", 4096}, {"peer", peer}});
        }
        ncclMarker(tb, r, "nccl:GroupEnd", t + 20'000, t + 30'000);
        ncclKernel(tb, r, 100 + k, t + 25'000, t + 40'000, t + 40'000 + 80'000 + 2'000 * r);
      }
    }
    const char* names[] = {"comm_nccl_alltoall", "comm_nccl_a2a_twice", "comm_nccl_a2a_skipped",
                           "comm_nccl_a2a_decorated"};
    INFO(names[variant]);
    const auto reader = trace::TraceReader::open(tb.write(scratchDir(names[variant])));
    const CommAnalysis a = analyzeComm(reader);
    const auto instances = analyzeCommInstances(reader);
    if (variant == kPeerTwice) {
      REQUIRE(a.collectives.size() == 1);  // rank 1's all-to-alls, alone
      CHECK(a.collectives[0].op == "all_to_all");
      CHECK(a.collectives[0].ranks == std::vector<int>{1});
      CHECK(a.collectives[0].calls == 3);
      int64_t fromRank0 = 0;
      for (const PointToPointStats& m : a.p2p) fromRank0 += m.src == 0 ? m.messages : 0;
      CHECK(fromRank0 == 6);  // rank 0's sends stay messages
      continue;
    }
    REQUIRE(a.collectives.size() == 1);
    const CollectiveStats& c = a.collectives[0];
    CHECK(c.op == "all_to_all");
    CHECK(c.ranks == std::vector<int>{0, 1});
    CHECK(c.group_size == 2);
    CHECK(c.calls == 3);
    CHECK(a.p2p.empty());  // the sends and receives are the all_to_all's, not messages
    // The viewer's instances: three, each with both ranks.
    REQUIRE(instances.instances.size() == 3);
    for (const CollectiveInstance& in : instances.instances) {
      CHECK(in.op == "all_to_all");
      CHECK(in.ranks.size() == 2);
    }
    if (variant == kDecorated) {
      CHECK(c.group_source == "annotated");  // the decorator's row; NCCL's calls inside it dropped
      continue;
    }
    // Per call what a rank sends, as nccl-tests counts it; rank 0's second call sends one 4 KiB
    // message less with kSkippedPeer.
    CHECK(c.bytes == (variant == kSkippedPeer ? 3 * 2 * 4096 - 4096 / 2 : 3 * 2 * 4096));
    CHECK(c.kernel_time);
    CHECK_FALSE(c.host_call_time);
    CHECK(c.time_ns == 3 * (80'000 + 82'000) / 2);
    if (variant == kAllToAll) {
      CHECK(c.algbw_gbps == Approx(3.0 * 2 * 4096 / (3 * (80'000 + 82'000) / 2)));
      CHECK(c.busbw_gbps == Approx(c.algbw_gbps / 2));  // all_to_all, n = 2: (n-1)/n
      // Each instance's span on a rank is that rank's GroupEnd (a span to select).
      for (const CollectiveInstance& in : instances.instances) {
        for (const InstanceRank& x : in.ranks) CHECK(x.end_ns - x.start_ns == 30'000);
      }
      // The ranks' communication time is their NCCL kernels' (the groups' spans are enqueues).
      for (const RankCommStats& r : a.ranks) {
        CHECK(r.gpu_kernels);
        CHECK(r.comm_ns == 3 * (80'000 + 2'000 * r.rank));
      }
    }
  }
}

TEST_CASE(
    "comm: a collective alone or coalesced in an NCCL group is timed by its GroupEnd's kernel",
    "[analysis][comm]") {
  // Two ranks, three all-reduces of 1 MiB, each between ncclGroupStart and ncclGroupEnd (as a
  // coalescing manager with one call makes them): the all-reduce's call launches nothing, the
  // GroupEnd launches its kernel (60 us, 64 us). Variant kCoalesced: two all-reduces in each
  // group, one kernel for both: one coalesced all-reduce of 2 MiB per group, timed by it.
  // Variant kMixed: an all-reduce and an all-gather in each group: no one op, so nothing says
  // which part of the kernel is whose: untimed, no bandwidth. kDecorated: the coalesced calls,
  // each inside tracerun's c10d decorator span (startCoalescing, then the calls, traced one by
  // one), the GroupStart 100 us before the first: the decorator's spans stand for them, nothing
  // is folded beside them. kUneven: a broadcast from each rank coalesced (ProcessGroupNCCL's
  // all_gather of unequal sizes): one all_gather of the two parts.
  enum Variant { kLone, kCoalesced, kMixed, kDecorated, kUneven };
  for (const Variant variant : {kLone, kCoalesced, kMixed, kDecorated, kUneven}) {
    const std::string comm = "nccl 00000000000000d4";
    TraceBuilder tb(2);
    for (int r = 0; r < 2; ++r) {
      for (int k = 0; k < 3; ++k) {
        const int64_t t = 1'000'000 * (k + 1);
        ncclMarker(tb, r, "nccl:GroupStart", t - 100'000, t - 99'000);
        for (int m = 0; m < (variant == kLone ? 1 : 2); ++m) {
          const int64_t at = t + 2'000 + 4'000 * m;
          if (variant == kDecorated) {
            dpCall(tb, r, "c10d:allreduce", at - 500, at + 3'500,
                   {{"bytes", 1 << 20}, {"seq", 2 * k + m}});
          }
          if (variant == kUneven) {
            ncclCall(tb, r, comm, "nccl:Broadcast", at, at + 3'000,
                     {{"bytes", (1 << 20) * (m + 1)}, {"root", m}});
          } else {
            ncclCall(tb, r, comm, variant == kMixed && m == 1 ? "nccl:AllGather" : "nccl:AllReduce",
                     at, at + 3'000, {{"bytes", 1 << 20}});
          }
        }
        ncclMarker(tb, r, "nccl:GroupEnd", t + 20'000, t + 30'000);
        ncclKernel(tb, r, 200 + k, t + 25'000, t + 40'000, t + 40'000 + 60'000 + 4'000 * r);
      }
    }
    const char* names[] = {"comm_nccl_grouped", "comm_nccl_coalesced", "comm_nccl_mixed_group",
                           "comm_nccl_coalesced_decorated", "comm_nccl_coalesced_uneven"};
    INFO(names[variant]);
    const auto reader = trace::TraceReader::open(tb.write(scratchDir(names[variant])));
    const CommAnalysis a = analyzeComm(reader);
    const CommInstances instances = analyzeCommInstances(reader);
    if (variant == kMixed) {
      REQUIRE(a.collectives.size() == 2);
      for (const CollectiveStats& c : a.collectives) {
        CHECK(c.calls == 3);
        CHECK_FALSE(c.kernel_time);
        CHECK(c.host_call_time);
        CHECK(c.algbw_gbps == 0);
      }
      CHECK(instances.instances.size() == 6);  // each call its own instance, both ranks in it
      continue;
    }
    if (variant == kDecorated) {
      REQUIRE(a.collectives.size() == 1);  // the decorator's row alone
      CHECK(a.collectives[0].calls == 6);
      CHECK(a.collectives[0].group_source == "annotated");
      CHECK(instances.instances.size() == 6);
      continue;
    }
    if (variant == kUneven) {
      REQUIRE(a.collectives.size() == 1);
      const CollectiveStats& c = a.collectives[0];
      CHECK(c.op == "all_gather");
      CHECK(c.calls == 3);
      CHECK(c.kernel_time);
      CHECK(c.bytes == 3 * 3 * (1 << 20));
      CHECK(c.busbw_gbps == Approx(c.algbw_gbps / 2));  // all-gather, n = 2: (n-1)/n
      continue;
    }
    REQUIRE(a.collectives.size() == 1);
    const CollectiveStats& c = a.collectives[0];
    CHECK(c.op == "all_reduce");
    CHECK(c.ranks == std::vector<int>{0, 1});
    CHECK(c.calls == 3);
    CHECK(c.kernel_time);
    CHECK(c.time_ns == 3 * (60'000 + 64'000) / 2);
    const double bytes = (variant == kCoalesced ? 2.0 : 1.0) * (1 << 20);
    CHECK(c.bytes == static_cast<int64_t>(3 * bytes));
    CHECK(c.algbw_gbps == Approx(3.0 * bytes / (3 * (60'000 + 64'000) / 2)));
    CHECK(c.busbw_gbps == Approx(c.algbw_gbps));  // all-reduce, n = 2: 2(n-1)/n = 1
    CHECK(c.coalesced_calls == (variant == kCoalesced ? 6 : 0));
    // The viewer's instances: one per group, both ranks in each.
    REQUIRE(instances.instances.size() == 3);
    for (const CollectiveInstance& in : instances.instances) {
      CHECK(in.op == "all_reduce");
      CHECK(in.ranks.size() == 2);
      if (variant == kCoalesced) {  // from the GroupStart to the GroupEnd's end
        for (const InstanceRank& x : in.ranks) CHECK(x.end_ns - x.start_ns == 130'000);
      }
    }
  }
}

TEST_CASE("comm: a rank's NCCL communication is measured on its GPU kernels, device by device",
          "[analysis][comm]") {
  // Rank 0 calls NCCL (an all-reduce enqueued in 2 us); its kernels, on two devices:
  //   cuda:0 stream 7  NCCL's kernel          [10, 20) us   communication
  //   cuda:0 stream 9  a compute kernel       [15, 40) us   overlaps the last 5 us of it
  //   cuda:0 stream 9  a copy                 [0, 100) us   not a kernel: in neither
  //   cuda:1 stream 7  a compute kernel       [10, 20) us   same time, another device: no overlap
  // Rank 1 uses Gloo (a 2 us span) beside a 1 us op: its row stays the CPU's.
  // kDecorated: rank 0's call sits inside tracerun's c10d decorator span, which replaces it in
  // the rows; the rank still called NCCL, and is measured on its kernels all the same.
  for (const bool decorated : {false, true}) {
    INFO((decorated ? "decorated" : "plain"));
    TraceBuilder tb(2);
    if (decorated) {
      dpCall(tb, 0, "c10d:allreduce", 500, 3'500, {{"bytes", 4096}, {"group_size", 2}, {"seq", 0}});
    }
    ncclCall(tb, 0, "nccl 00000000000000d1", "nccl:AllReduce", 1'000, 3'000, {{"bytes", 4096}});
    const auto kernel = [&](int rank, const std::string& track, const std::string& name,
                            core::Category category, int64_t start, int64_t end) {
      tb.span(rank, BSpan{track, name, category, start, end, 0, {}});
    };
    kernel(0, "cuda:0 stream 7", "ncclDevKernel_AllReduce_Sum_f32_RING_LL", core::Category::kKernel,
           10'000, 20'000);
    kernel(0, "cuda:0 stream 9", "elementwise_kernel", core::Category::kKernel, 15'000, 40'000);
    kernel(0, "cuda:0 stream 9", "Memcpy HtoD", core::Category::kMemcpy, 0, 100'000);
    kernel(0, "cuda:1 stream 7", "elementwise_kernel", core::Category::kKernel, 10'000, 20'000);
    tb.span(
        1,
        BSpan{"async", "gloo:all_reduce", core::Category::kComm, 1'000, 3'000, 0, {}, "f32[1024]"});
    tb.span(1, BSpan{"main", "aten::add", core::Category::kOp, 1'500, 2'500, 0});
    const auto reader = trace::TraceReader::open(
        tb.write(scratchDir(decorated ? "comm_gpu_ranks_decorated" : "comm_gpu_ranks")));
    const CommAnalysis a = analyzeComm(reader);
    REQUIRE(a.ranks.size() == 2);
    const RankCommStats& r0 = a.ranks[0];
    CHECK(r0.gpu_kernels);
    CHECK(r0.comm_ns == 10'000);
    CHECK(r0.compute_ns == 25'000 + 10'000);
    CHECK(r0.overlap_ns == 5'000);
    const RankCommStats& r1 = a.ranks[1];
    CHECK_FALSE(r1.gpu_kernels);
    CHECK(r1.comm_ns == 2'000);
    CHECK(r1.compute_ns == 1'000);
    CHECK(r1.overlap_ns == 1'000);
  }
}
