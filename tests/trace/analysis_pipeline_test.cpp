// Pipeline analysis on hand-built traces of known schedules: the test builds GPipe, 1F1B and
// interleaved 1F1B action lists itself (Megatron's ordering), runs them in a small simulation
// (a receive waits for its send; forward costs F/v, backward B/v; messages cost nothing), writes
// the resulting spans as a real trace, and compares the analysis with the closed forms.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include "analysis_builder.h"
#include "tracerun/trace/analysis/pipeline.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;
using namespace tracerun::testing;
using trace::analysis::analyzePipeline;
using trace::analysis::closedFormBubble;
using trace::analysis::closedFormName;

namespace {

enum Kind { kRecvF, kF, kSendF, kRecvB, kB, kSendB };

struct Act {
  Kind kind;
  int mb, chunk;
};

// Compute order of pipeline rank r (forwards and backwards only).
std::vector<Act> computeOrder(const std::string& schedule, int p, int v, int m, int r) {
  std::vector<Act> out;
  const int total = m * v;
  auto fwd = [&](int k) {  // k-th forward of this rank: Megatron's chunk / microbatch order
    return Act{kF, (k / (p * v)) * p + k % p, v == 1 ? 0 : (k / p) % v};
  };
  auto bwd = [&](int k) {
    return Act{kB, (k / (p * v)) * p + k % p, v == 1 ? 0 : v - 1 - (k / p) % v};
  };
  int warmup = total;
  if (schedule == "1f1b") warmup = std::min(p - r - 1, total);
  if (schedule == "interleaved") warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
  for (int k = 0; k < warmup; ++k) out.push_back(fwd(k));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(fwd(warmup + k));
    out.push_back(bwd(k));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(bwd(k));
  return out;
}

// With messages: each forward preceded by its receive and followed by its send (where the
// neighbouring virtual stage exists), each backward likewise.
std::vector<Act> withMessages(const std::vector<Act>& order, int p, int v, int r) {
  std::vector<Act> out;
  const int last = p * v - 1;
  for (const Act& a : order) {
    const int stage = a.chunk * p + r;
    if (a.kind == kF) {
      if (stage > 0) out.push_back({kRecvF, a.mb, a.chunk});
      out.push_back(a);
      if (stage < last) out.push_back({kSendF, a.mb, a.chunk});
    } else {
      if (stage < last) out.push_back({kRecvB, a.mb, a.chunk});
      out.push_back(a);
      if (stage > 0) out.push_back({kSendB, a.mb, a.chunk});
    }
  }
  return out;
}

struct Sim {
  std::string schedule = "1f1b";
  int p = 4, v = 1, m = 8, steps = 2, replicas = 1;
  int64_t f = 3000, b = 6000;  // per model (all chunks): a chunk costs f / v, b / v
  // Extra cost of one compute action: (step, global rank, index among its computes) -> ns.
  std::map<std::tuple<int, int, int>, int64_t> extra;
  // Jitter: forward k of a stage costs f/v + jitter * ((microbatch % 3) - 1).
  int64_t jitter = 0;
  // A slower rank: every compute of that global rank lasts this much longer (ns).
  std::map<int, int64_t> slower;
  // gpttrain's convention: the `stage` argument is the pipeline rank, not the virtual stage.
  bool stage_is_pipeline_rank = false;
  // Each replica is an attempt of a restarted job (replica k: attempt k, its ranks RANK 0..p-1,
  // peers numbered within it) instead of a data-parallel replica.
  bool replicas_are_attempts = false;
  // (step, global rank) -> compute phases of that step the rank wrote: the rest of its step is
  // not in the trace (a run ended mid-step). The simulation still runs them.
  std::map<std::pair<int, int>, int> cut_after;
};

// Runs the simulation and records every rank's spans; returns the merged trace's path.
std::string buildTrace(const Sim& s, const std::string& name) {
  TraceBuilder tb(s.p * s.replicas);
  if (s.replicas_are_attempts) {
    for (int g = 0; g < s.p * s.replicas; ++g) tb.attempt(g, g / s.p, g % s.p, s.p);
  }
  const int peerBase = s.replicas_are_attempts ? 0 : 1;  // x rep * p: a peer's first rank
  const int64_t fc = s.f / s.v, bc = s.b / s.v;
  int64_t stepStart = 1000;
  for (int step = 1; step <= s.steps; ++step) {
    int64_t stepEnd = stepStart;
    for (int rep = 0; rep < s.replicas; ++rep) {
      const int n = s.p;
      std::vector<std::vector<Act>> lists;
      for (int r = 0; r < n; ++r) {
        lists.push_back(withMessages(computeOrder(s.schedule, s.p, s.v, s.m, r), s.p, s.v, r));
      }
      std::vector<size_t> next(n, 0);
      std::vector<int64_t> clock(n, stepStart + 50);
      std::vector<int> computes(n, 0);
      // (consumer virtual stage, microbatch, direction) -> time the message was posted
      std::map<std::tuple<int, int, int>, int64_t> posted;
      bool moved = true;
      while (moved) {
        moved = false;
        for (int r = 0; r < n; ++r) {
          const int g = rep * s.p + r;  // global rank
          while (next[r] < lists[r].size()) {
            const Act& a = lists[r][next[r]];
            const int stage = a.chunk * s.p + r;
            BSpan sp;
            sp.depth = 1;
            if (a.kind == kRecvF || a.kind == kRecvB) {
              const int dir = a.kind == kRecvF ? 0 : 1;
              auto it = posted.find({stage, a.mb, dir});
              if (it == posted.end()) break;
              const int from = dir == 0 ? stage - 1 : stage + 1;
              sp.name = dir == 0 ? "recv_forward" : "recv_backward";
              sp.category = core::Category::kUser;
              sp.start = clock[r];
              sp.end = std::max(clock[r], it->second);
              sp.args = {{"peer", peerBase * rep * s.p + from % s.p},
                         {"microbatch", a.mb},
                         {"chunk", a.chunk}};
              clock[r] = sp.end;
            } else if (a.kind == kSendF || a.kind == kSendB) {
              const int dir = a.kind == kSendF ? 0 : 1;
              const int to = dir == 0 ? stage + 1 : stage - 1;
              posted[{to, a.mb, dir}] = clock[r];
              sp.name = dir == 0 ? "send_forward" : "send_backward";
              sp.category = core::Category::kUser;
              sp.start = sp.end = clock[r];
              sp.args = {{"peer", peerBase * rep * s.p + to % s.p},
                         {"microbatch", a.mb},
                         {"chunk", a.chunk}};
            } else {
              sp.name = a.kind == kF ? "forward" : "backward";
              sp.category = core::Category::kPhase;
              int64_t d = a.kind == kF ? fc + s.jitter * ((a.mb % 3) - 1) : bc;
              if (const auto sl = s.slower.find(g); sl != s.slower.end()) d += sl->second;
              auto ex = s.extra.find({step, g, computes[r]});
              const int64_t gap = ex == s.extra.end() ? 0 : ex->second;
              ++computes[r];
              sp.start = clock[r] + gap;
              sp.end = sp.start + d;
              sp.args = {{"stage", s.stage_is_pipeline_rank ? r : stage},
                         {"chunk", a.chunk},
                         {"microbatch", a.mb}};
              clock[r] = sp.end;
            }
            const auto cut = s.cut_after.find({step, g});
            if (cut == s.cut_after.end() || computes[r] <= cut->second) tb.span(g, sp);
            ++next[r];
            moved = true;
          }
        }
      }
      for (int r = 0; r < n; ++r) {
        REQUIRE(next[r] == lists[r].size());  // the schedule ran to completion
        stepEnd = std::max(stepEnd, clock[r]);
      }
    }
    for (int g = 0; g < s.p * s.replicas; ++g) {
      tb.span(g, BSpan{"main",
                       "step",
                       core::Category::kPhase,
                       stepStart,
                       stepEnd + 500,
                       0,
                       {{"step", step}}});
      tb.span(g,
              BSpan{"main", "optimizer", core::Category::kPhase, stepEnd + 100, stepEnd + 400, 1});
    }
    stepStart = stepEnd + 1000;
  }
  return tb.write(scratchDir(name));
}

}  // namespace

TEST_CASE("closed forms of the bubble", "[analysis][pipeline]") {
  CHECK(closedFormBubble("1f1b", 4, 8, 1) == Approx(3.0 / 11));
  CHECK(closedFormBubble("gpipe", 2, 6, 1) == Approx(1.0 / 7));
  CHECK(closedFormBubble("interleaved", 4, 8, 2) == Approx(1.5 / 9.5));
  CHECK(closedFormBubble("1f1b", 1, 8, 1) == 0);
  CHECK(closedFormBubble("chimera", 4, 4, 2) == Approx(2.0 / 10));  // Li & Hoefler, Table 1
  CHECK(closedFormBubble("chimera", 2, 8, 2) == 0);
  CHECK(closedFormName("chimera") == "(p-2)/(2m+p-2)");
}

TEST_CASE("gpipe, 1f1b and interleaved: measured and modeled bubbles equal the closed form",
          "[analysis][pipeline]") {
  struct Case {
    std::string schedule;
    int p, v, m;
  };
  const std::vector<Case> cases = {{"gpipe", 4, 1, 8},       {"1f1b", 4, 1, 8},
                                   {"1f1b", 2, 1, 5},        {"1f1b", 3, 1, 2},
                                   {"interleaved", 4, 2, 8}, {"interleaved", 2, 3, 4}};
  for (const Case& c : cases) {
    INFO(c.schedule << " p " << c.p << " v " << c.v << " m " << c.m);
    Sim s;
    s.schedule = c.schedule;
    s.p = c.p;
    s.v = c.v;
    s.m = c.m;
    const std::string path = buildTrace(s, c.schedule + std::to_string(c.p) + std::to_string(c.m));
    const auto a = analyzePipeline(trace::TraceReader::open(path));
    REQUIRE(a.present);
    CHECK(a.schedule == c.schedule);
    CHECK(a.stages == c.p);
    CHECK(a.virtual_stages == c.v);
    CHECK(a.microbatches == c.m);
    CHECK(a.steps == 2);
    CHECK(a.replicas.size() == 1);
    CHECK(a.unmatched_recvs == 0);
    const double theory = closedFormBubble(c.schedule, c.p, c.m, c.v);
    CHECK(a.bubble_theory == Approx(theory));
    CHECK(a.bubble_measured == Approx(theory).margin(1e-9));
    CHECK(a.bubble_modeled == Approx(theory).margin(1e-9));
    REQUIRE(a.per_stage.size() == size_t(c.p));
    const double compute = double(c.m) * (s.f / c.v + s.b / c.v) * c.v;
    for (const auto& st : a.per_stage) {
      INFO("stage " << st.stage);
      CHECK(st.ranks == std::vector<int>{st.stage});
      CHECK(st.forward_ns + st.backward_ns == Approx(compute));
      CHECK(st.bubble == Approx(theory).margin(1e-9));
      CHECK(st.modeled_bubble == Approx(theory).margin(1e-9));
      // Every nanosecond of the window is accounted for.
      CHECK(st.forward_ns + st.backward_ns + st.send_ns + st.recv_wait_ns + st.idle_ns ==
            Approx(st.window_ns));
    }
  }
}

TEST_CASE("per stage, the modeled bubble is the stage's own in the replay: a slow stage idles less",
          "[analysis][pipeline]") {
  for (const char* schedule : {"1f1b", "gpipe"}) {
    INFO(schedule);
    Sim s;
    s.schedule = schedule;
    s.slower[2] = 1500;  // rank 2's forwards and backwards each take 1.5 us longer
    const auto a =
        analyzePipeline(trace::TraceReader::open(buildTrace(s, std::string("slow_") + schedule)));
    REQUIRE(a.per_stage.size() == 4);
    // Every action of a stage costs the same, so the replay at the median costs is the recorded
    // run: each stage's modeled bubble is its measured one, and their mean the pipeline's.
    double sum = 0;
    for (const auto& st : a.per_stage) {
      INFO("stage " << st.stage);
      CHECK(st.modeled_bubble == Approx(st.bubble).margin(1e-9));
      sum += st.modeled_bubble;
    }
    CHECK(sum / 4 == Approx(a.bubble_modeled).margin(1e-12));
    CHECK(a.per_stage[2].modeled_bubble < a.per_stage[0].modeled_bubble - 0.05);
  }
}

TEST_CASE("interleaved with stage = pipeline rank (gpttrain's annotation): same shape and bubbles",
          "[analysis][pipeline]") {
  struct Case {
    int p, v, m;
  };
  for (const Case& c : {Case{4, 2, 8}, Case{2, 3, 4}}) {
    INFO("p " << c.p << " v " << c.v << " m " << c.m);
    Sim s;
    s.schedule = "interleaved";
    s.p = c.p;
    s.v = c.v;
    s.m = c.m;
    s.stage_is_pipeline_rank = true;
    const auto a = analyzePipeline(trace::TraceReader::open(
        buildTrace(s, "rank-stage" + std::to_string(c.p) + std::to_string(c.v))));
    REQUIRE(a.present);
    CHECK(a.schedule == "interleaved");
    CHECK(a.stages == c.p);
    CHECK(a.virtual_stages == c.v);
    CHECK(a.microbatches == c.m);
    const double theory = closedFormBubble("interleaved", c.p, c.m, c.v);
    CHECK(a.bubble_theory == Approx(theory));
    CHECK(a.bubble_measured == Approx(theory).margin(1e-9));
    CHECK(a.bubble_modeled == Approx(theory).margin(1e-9));
    REQUIRE(a.per_stage.size() == size_t(c.p));
    for (const auto& st : a.per_stage) CHECK(st.ranks == std::vector<int>{st.stage});
  }
  // One chunk per rank: both conventions are the same numbers, nothing is rewritten.
  Sim s;
  s.stage_is_pipeline_rank = true;
  const auto a = analyzePipeline(trace::TraceReader::open(buildTrace(s, "rank-stage-1f1b")));
  CHECK(a.stages == 4);
  CHECK(a.virtual_stages == 1);
  CHECK(a.notes.empty());
}

TEST_CASE("jitter and a stall change the measured bubble, not the modeled one",
          "[analysis][pipeline]") {
  Sim s;
  s.steps = 3;
  s.jitter = 400;              // forwards of 2600, 3000, 3400 ns: the median stays 3000
  s.extra[{2, 2, 5}] = 20000;  // step 2: rank 2 stalls 20 us before its 6th compute
  const auto a = analyzePipeline(trace::TraceReader::open(buildTrace(s, "jitter")));
  REQUIRE(a.present);
  const double theory = closedFormBubble("1f1b", 4, 8, 1);
  CHECK(a.bubble_modeled == Approx(theory).margin(1e-9));
  REQUIRE(a.per_step.size() == 3);
  for (const auto& st : a.per_step) CHECK(st.modeled_bubble == Approx(theory).margin(1e-9));
  // The stalled step is the worst; the measured median is neither the stall nor the theory.
  CHECK(a.per_step[1].bubble > a.per_step[0].bubble + 0.05);
  CHECK(a.bubble_measured == Approx(std::max(a.per_step[0].bubble, a.per_step[2].bubble)));
  CHECK(std::abs(a.bubble_measured - theory) > 1e-3);
}

TEST_CASE("replicas: two pipelines found from their messages, stages averaged over both",
          "[analysis][pipeline]") {
  // Two data-parallel replicas; then the same as the two attempts of a restarted job, each with
  // its ranks numbered 0 and 1 (peers too), which the merge numbers 0, 1 (the last attempt) and
  // 2, 3: the same two pipelines, the closed form, nothing unmatched (peers never cross).
  for (const bool attempts : {false, true}) {
    INFO((attempts ? "two attempts" : "two replicas"));
    Sim s;
    s.p = 2;
    s.m = 4;
    s.replicas = 2;
    s.replicas_are_attempts = attempts;
    const auto a = analyzePipeline(
        trace::TraceReader::open(buildTrace(s, attempts ? "attempts" : "replicas")));
    REQUIRE(a.present);
    CHECK(a.stages == 2);
    REQUIRE(a.replicas.size() == 2);
    CHECK(a.replicas[0] == std::vector<int>{0, 1});
    CHECK(a.replicas[1] == std::vector<int>{2, 3});
    CHECK(a.per_stage[0].ranks == std::vector<int>{0, 2});
    CHECK(a.per_stage[1].ranks == std::vector<int>{1, 3});
    CHECK(a.per_step.size() == 4);  // 2 steps x 2 replicas
    CHECK(a.unmatched_recvs == 0);
    CHECK(a.bubble_measured == Approx(closedFormBubble("1f1b", 2, 4, 1)).margin(1e-9));
  }
}

TEST_CASE("a step cut short on one rank is left out, not read as idle time",
          "[analysis][pipeline]") {
  // Three steps; in the third, rank 1 wrote only its first two compute phases (the run ended
  // there). Expected: the numbers of the first two steps alone, and a note naming step 3.
  Sim s;
  s.p = 2;
  s.m = 4;
  s.steps = 3;
  s.cut_after[{3, 1}] = 2;
  const auto a = analyzePipeline(trace::TraceReader::open(buildTrace(s, "cut_step")));
  Sim whole = s;
  whole.steps = 2;
  whole.cut_after.clear();
  const auto w = analyzePipeline(trace::TraceReader::open(buildTrace(whole, "cut_step_whole")));
  REQUIRE(a.present);
  CHECK(a.per_step.size() == 2);
  CHECK(a.steps == 2);
  CHECK(a.bubble_measured == Approx(w.bubble_measured).margin(1e-12));
  CHECK(a.bubble_modeled == Approx(w.bubble_modeled).margin(1e-12));
  REQUIRE(a.per_stage.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    CHECK(a.per_stage[k].forward_ns == Approx(w.per_stage[k].forward_ns));
    CHECK(a.per_stage[k].bubble == Approx(w.per_stage[k].bubble).margin(1e-12));
  }
  CHECK(a.unmatched_recvs == 0);
  bool noted = false;
  for (const auto& n : a.notes) noted = noted || n.find("incomplete") != std::string::npos;
  CHECK(noted);
}

TEST_CASE("no pipeline: one stage, or phases without stage arguments", "[analysis][pipeline]") {
  TraceBuilder tb;
  tb.span(0, BSpan{"main", "step", core::Category::kPhase, 0, 10000, 0, {{"step", 1}}});
  tb.span(0, BSpan{"main",
                   "forward",
                   core::Category::kPhase,
                   100,
                   3000,
                   1,
                   {{"stage", 0}, {"chunk", 0}, {"microbatch", 0}}});
  tb.span(0, BSpan{"main", "backward", core::Category::kPhase, 3000, 9000, 1, {{"microbatch", 0}}});
  const auto a = analyzePipeline(trace::TraceReader::open(tb.write(scratchDir("nopipe"))));
  CHECK_FALSE(a.present);
  CHECK(a.per_stage.empty());
}
