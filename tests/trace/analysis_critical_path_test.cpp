// The measured critical path (trace/analysis/critical_path.h) against an independent brute force:
// small synthetic pipeline steps are simulated here (their actions, times and message pairs known
// to the test), written as traces, and every path through the simulated dependency graph is
// enumerated; the analysis must find the longest one's length, a chain that is a real path with
// that length, and a length within the step. Plus the hand-worked two-stage GPipe step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/critical_path.h"

using namespace tracerun;
using namespace tracerun::testing;
using C = core::Category;

namespace {

// One simulated action: what the test knows without the analysis.
struct SimAction {
  int rank = 0, stage = 0, mb = 0;
  char what = 'F';  // F, B: compute; S: send; R: receive
  bool fwd = true;  // messages: a forward activation (else a backward gradient)
  int64_t start = 0, end = 0;
  long match = -1;  // receives: the index of their send
};

// GPipe over `p` stages and `m` microbatches (all forwards, then all backwards), durations from
// a small generator; a send takes 3 ns, a receive ends 2 ns after its send ended (or when its
// rank gets to it). Ranks run their lists in order; a receive waits for its send.
std::vector<SimAction> simulateGpipe(int p, int m, uint32_t seed) {
  auto next = [&seed](int lo, int hi) {
    seed = seed * 1664525u + 1013904223u;
    return lo + static_cast<int>((seed >> 8) % static_cast<uint32_t>(hi - lo + 1));
  };
  std::vector<std::vector<SimAction>> lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& l = lists[static_cast<size_t>(r)];
    for (int mb = 0; mb < m; ++mb) {
      if (r > 0) l.push_back({r, r, mb, 'R', true});
      l.push_back({r, r, mb, 'F', true});
      if (r < p - 1) l.push_back({r, r, mb, 'S', true});
    }
    for (int mb = 0; mb < m; ++mb) {
      if (r < p - 1) l.push_back({r, r, mb, 'R', false});
      l.push_back({r, r, mb, 'B', false});
      if (r > 0) l.push_back({r, r, mb, 'S', false});
    }
  }
  // Run: repeatedly advance every rank as far as it can.
  std::vector<SimAction> done;
  std::vector<size_t> at(static_cast<size_t>(p), 0);
  std::vector<int64_t> free(static_cast<size_t>(p), 10);
  auto sendOf = [&](const SimAction& recv) -> long {
    const int from = recv.fwd ? recv.rank - 1 : recv.rank + 1;
    for (size_t i = 0; i < done.size(); ++i) {
      const SimAction& s = done[i];
      if (s.what == 'S' && s.rank == from && s.mb == recv.mb && s.fwd == recv.fwd) return long(i);
    }
    return -1;
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      auto& l = lists[static_cast<size_t>(r)];
      size_t& k = at[static_cast<size_t>(r)];
      int64_t& t = free[static_cast<size_t>(r)];
      while (k < l.size()) {
        SimAction a = l[k];
        a.start = t;
        if (a.what == 'R') {
          a.match = sendOf(a);
          if (a.match < 0) break;
          a.end = std::max(t, done[static_cast<size_t>(a.match)].end) + 2;
        } else {
          a.end = t + (a.what == 'S' ? 3 : a.what == 'F' ? next(40, 160) : next(80, 300));
        }
        t = a.end + next(0, 4);
        done.push_back(a);
        ++k;
        moved = true;
      }
    }
  }
  return done;
}

std::string writeTrace(const std::vector<SimAction>& acts, int p, const std::string& name) {
  TraceBuilder tb(p);
  for (int r = 0; r < p; ++r) {
    tb.span(r, BSpan{"main", "step", C::kPhase, 0, 100000, 0, {{"step", 1}}});
  }
  for (const SimAction& a : acts) {
    if (a.what == 'F' || a.what == 'B') {
      tb.span(a.rank, BSpan{"main",
                            a.what == 'F' ? "forward" : "backward",
                            C::kPhase,
                            a.start,
                            a.end,
                            1,
                            {{"stage", a.stage}, {"chunk", 0}, {"microbatch", a.mb}}});
    } else {
      const int peer = (a.what == 'S') == a.fwd ? a.rank + 1 : a.rank - 1;
      const char* what = a.what == 'S' ? (a.fwd ? "send_forward" : "send_backward")
                                       : (a.fwd ? "recv_forward" : "recv_backward");
      tb.span(a.rank, BSpan{"main",
                            what,
                            C::kUser,
                            a.start,
                            a.end,
                            1,
                            {{"peer", peer}, {"microbatch", a.mb}, {"chunk", 0}}});
    }
  }
  return tb.write(scratchDir(name));
}

// Every path through the simulated graph (an action -> the next on its rank, a send -> its
// receive), each action weighing its duration, a receive only what follows its send's end: the
// largest sum, by plain depth-first enumeration of all paths.
int64_t bruteForceLongest(const std::vector<SimAction>& acts) {
  const size_t n = acts.size();
  std::vector<std::vector<size_t>> next(n);
  for (size_t i = 0; i < n; ++i) {
    long nextOnRank = -1;
    for (size_t j = 0; j < n; ++j) {
      if (acts[j].rank == acts[i].rank && acts[j].start >= acts[i].end && j != i &&
          (nextOnRank < 0 || acts[j].start < acts[size_t(nextOnRank)].start)) {
        nextOnRank = long(j);
      }
    }
    if (nextOnRank >= 0) next[i].push_back(size_t(nextOnRank));
    for (size_t j = 0; j < n; ++j) {
      if (acts[j].match == long(i)) next[i].push_back(j);
    }
  }
  auto weight = [&](size_t i) {
    const SimAction& a = acts[i];
    if (a.what != 'R') return a.end - a.start;
    return std::max<int64_t>(0, a.end - std::max(a.start, acts[size_t(a.match)].end));
  };
  int64_t best = 0;
  std::function<void(size_t, int64_t)> walk = [&](size_t i, int64_t sum) {
    sum += weight(i);
    best = std::max(best, sum);
    for (size_t j : next[i]) walk(j, sum);
  };
  for (size_t i = 0; i < n; ++i) walk(i, 0);
  return best;
}

// The chain is a path: consecutive links are the next action on one rank or a send and its
// receive; its weights are criticalPathWeights' and add up to the length.
void checkChain(const trace::analysis::PipelineCriticalPath& cp) {
  using K = trace::analysis::PipelineActionKind;
  const auto w = trace::analysis::criticalPathWeights(cp.actions);
  int64_t sum = 0;
  for (size_t i = 0; i < cp.chain.size(); ++i) {
    const size_t a = cp.chain[i].action;
    CHECK(cp.chain[i].weight_ns == w[a]);
    CHECK(cp.on_path[a]);
    sum += cp.chain[i].weight_ns;
    if (i == 0) continue;
    const size_t b = cp.chain[i - 1].action;
    const auto& x = cp.actions[b];
    const auto& y = cp.actions[a];
    const bool message =
        (y.kind == K::kRecvForward || y.kind == K::kRecvBackward) && y.match == long(b);
    const bool sameRank = x.rank == y.rank && b < a && x.end_ns <= y.start_ns;
    CHECK((message || sameRank));
  }
  CHECK(sum == cp.length_ns);
  CHECK(cp.length_ns <= cp.step_ns);
}

}  // namespace

TEST_CASE("critical path: the hand-worked two-stage GPipe step", "[trace][pipeline][critical]") {
  // Same step as tests/dot/pipeline_graph_test.cpp's, worked out there: 845 of 850 ns.
  std::vector<SimAction> acts = {
      {0, 0, 0, 'F', true, 10, 110},   {0, 0, 0, 'S', true, 110, 115},
      {0, 0, 1, 'F', true, 120, 220},  {0, 0, 1, 'S', true, 220, 225},
      {0, 0, 0, 'R', false, 230, 450}, {0, 0, 0, 'B', false, 450, 650},
      {0, 0, 1, 'R', false, 650, 655}, {0, 0, 1, 'B', false, 655, 855},
      {1, 1, 0, 'R', true, 5, 130},    {1, 1, 0, 'F', true, 130, 230},
      {1, 1, 1, 'R', true, 230, 240},  {1, 1, 1, 'F', true, 240, 340},
      {1, 1, 0, 'B', false, 340, 440}, {1, 1, 0, 'S', false, 440, 445},
      {1, 1, 1, 'B', false, 445, 545}, {1, 1, 1, 'S', false, 545, 550},
  };
  acts[4].match = 13;
  acts[6].match = 15;
  acts[8].match = 1;
  acts[10].match = 3;
  CHECK(bruteForceLongest(acts) == 845);
  const auto reader = trace::TraceReader::open(writeTrace(acts, 2, "cp_gpipe_hand"));
  const auto cp = trace::analysis::pipelineCriticalPath(reader);
  REQUIRE(cp.found);
  CHECK(cp.step == 1);
  CHECK(cp.length_ns == 845);
  CHECK(cp.step_ns == 850);
  CHECK(cp.shareOfStep() == Approx(845.0 / 850.0));
  checkChain(cp);
  CHECK(trace::analysis::criticalPathChainText(cp) ==
        "F0 s0 -> send F0 s0 -> recv F0 s1 -> F0 s1 -> recv F1 s1 -> F1 s1 -> B0 s1 -> "
        "send B0 s1 -> recv B0 s0 -> B0 s0 -> recv B1 s0 -> B1 s0");
  CHECK(trace::analysis::criticalPathChainText(cp, 4) ==
        "F0 s0 -> send F0 s0 -> ... (8 more) -> recv B1 s0 -> B1 s0");
}

TEST_CASE("critical path: equals a brute force over every path of simulated steps",
          "[trace][pipeline][critical]") {
  const struct {
    int p, m;
    uint32_t seed;
  } cases[] = {{2, 2, 1}, {2, 3, 7}, {3, 2, 11}, {3, 3, 42}, {4, 3, 5}};
  for (const auto& c : cases) {
    INFO("p " << c.p << " m " << c.m << " seed " << c.seed);
    const std::vector<SimAction> acts = simulateGpipe(c.p, c.m, c.seed);
    REQUIRE(acts.size() == size_t(c.p * c.m * 2 + (c.p - 1) * c.m * 4));
    const int64_t want = bruteForceLongest(acts);
    const std::string name =
        "cp_sim_" + std::to_string(c.p) + "_" + std::to_string(c.m) + "_" + std::to_string(c.seed);
    const auto reader = trace::TraceReader::open(writeTrace(acts, c.p, name));
    const auto cp = trace::analysis::pipelineCriticalPath(reader);
    REQUIRE(cp.found);
    CHECK(cp.length_ns == want);
    int64_t lo = acts.front().start, hi = acts.front().end;
    for (const SimAction& a : acts) {
      lo = std::min(lo, a.start);
      hi = std::max(hi, a.end);
    }
    CHECK(cp.step_ns == hi - lo);
    checkChain(cp);
  }
}

TEST_CASE("critical path: a span that runs past the next action on its rank adds no time",
          "[trace][pipeline][critical]") {
  // Rank 0's send of F0 runs from 100 to 400 (an isend waited on late) while F1 and F2 run
  // inside it; rank 1 receives F0 at 402 and computes to 420. The step's window is 0..420, and
  // the longest real path is F0 -> send -> recv -> F0 on rank 1: 100 + 300 + 2 + 18 = 420. A
  // weight clamped to zero without carrying the send's end counted F2's 190 ns again (590).
  std::vector<SimAction> acts = {
      {0, 0, 0, 'F', true, 0, 100},   {0, 0, 0, 'S', true, 100, 400},
      {0, 0, 1, 'F', true, 105, 200}, {0, 0, 2, 'F', true, 200, 390},
      {1, 1, 0, 'R', true, 5, 402},   {1, 1, 0, 'F', true, 402, 420},
  };
  acts[4].match = 1;
  CHECK(bruteForceLongest(acts) == 420);
  const auto reader = trace::TraceReader::open(writeTrace(acts, 2, "cp_overlap"));
  const auto cp = trace::analysis::pipelineCriticalPath(reader);
  REQUIRE(cp.found);
  CHECK(cp.step_ns == 420);
  CHECK(cp.length_ns == 420);
  checkChain(cp);
}

TEST_CASE("critical path: no pipeline, no step", "[trace][pipeline][critical]") {
  TraceBuilder tb(1);
  tb.span(0, BSpan{"main", "aten::mm", C::kOp, 0, 100, 0});
  const auto reader = trace::TraceReader::open(tb.write(scratchDir("cp_none")));
  CHECK_FALSE(trace::analysis::pipelineCriticalPath(reader).found);
  CHECK_FALSE(trace::analysis::pipelineCriticalPath(reader, 7).found);
}
