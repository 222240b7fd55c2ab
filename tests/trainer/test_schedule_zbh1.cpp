// ZB-H1's action lists as data: a simulator with the executor's semantics (sends post and go on,
// a receive blocks until its message was sent) that knows the split backward (B: gradient of the
// input, sends on; W: gradient of the weights, after its B, no messages). It checks, for every
// p <= 8 and m <= 32, each microbatch's F, B and W exactly once per rank in dependency order, no
// deadlock, at most min(p, m) microbatches forwarded and not yet W'd, and the step time against
// the closed form m(F+B+W) + (p-1)(F+B-W) computed here, independently of schedule.cpp.
#include "schedule.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

using namespace gpttrain;

namespace {

struct Costs {
  double f, b, w;  // kBackward (1F1B) costs b + w
};

struct Sim {
  std::string error;
  std::vector<int> in_flight;  // per rank: most microbatches forwarded and not yet W'd
  std::vector<double> busy;
  double end = 0;
};

Sim simulateZb(const std::vector<std::vector<Action>>& lists, const PipelineShape& s, Costs c) {
  const int p = s.stages, m = s.microbatches;
  Sim res;
  res.in_flight.assign(p, 0);
  res.busy.assign(p, 0.0);
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<int> live(p, 0);
  std::map<std::tuple<int, int, int>, double> posted;  // (from, to, tag) -> time sent
  std::set<std::tuple<int, int, int>> ever;
  // Per rank and microbatch: 0 nothing, 1 input, 2 forwarded, 3 gradient in, 4 B done, 5 W done.
  std::vector<std::map<int, int>> state(p);
  std::vector<std::map<ActionKind, int>> count(p);
  std::ostringstream err;
  auto fail = [&](int r, const Action& a, const char* why) {
    if (err.tellp() == 0) {
      err << "rank " << r << " action " << next[r] << " " << actionName(a.kind) << " mb "
          << a.microbatch << ": " << why;
    }
  };
  bool moved = true;
  while (moved && err.tellp() == 0) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < lists[r].size() && err.tellp() == 0) {
        const Action& a = lists[r][next[r]];
        int& st = state[r][a.microbatch];
        const bool first = r == 0, last = r == p - 1;
        auto run = [&](double cost) {
          clock[r] += cost;
          res.busy[r] += cost;
        };
        ++count[r][a.kind];
        switch (a.kind) {
          case ActionKind::kRecvForward:
          case ActionKind::kRecvBackward: {
            auto it = posted.find({a.peer, r, a.tag});
            if (it == posted.end()) {
              --count[r][a.kind];
              goto blocked;
            }
            clock[r] = std::max(clock[r], it->second);
            posted.erase(it);
            if (a.kind == ActionKind::kRecvForward) {
              if (st != 0) fail(r, a, "input received twice or late");
              st = 1;
            } else {
              if (st != 2) fail(r, a, "gradient received before forward");
              st = 3;
            }
            break;
          }
          case ActionKind::kSendForward:
          case ActionKind::kSendBackward: {
            if (!ever.insert({r, a.peer, a.tag}).second) fail(r, a, "message tag sent twice");
            if (a.kind == ActionKind::kSendForward ? st != 2 : st < 4) {
              fail(r, a, "sent before its compute");
            }
            posted[{r, a.peer, a.tag}] = clock[r];
            break;
          }
          case ActionKind::kForward:
            if (st != (first ? 0 : 1)) fail(r, a, "forward without its input (or twice)");
            st = 2;
            run(c.f);
            res.in_flight[r] = std::max(res.in_flight[r], ++live[r]);
            break;
          case ActionKind::kBackwardInput:
            if (st != (last ? 2 : 3)) fail(r, a, "B without forward or gradient (or twice)");
            st = 4;
            run(c.b);
            break;
          case ActionKind::kBackwardWeight:
            if (st != 4) fail(r, a, "W before its B (or twice)");
            st = 5;
            run(c.w);
            --live[r];
            break;
          case ActionKind::kBackward:
            if (st != (last ? 2 : 3)) fail(r, a, "backward without forward or gradient");
            st = 5;
            run(c.b + c.w);
            --live[r];
            break;
          case ActionKind::kApplyUpdate:  // 2bw's only
            fail(r, a, "a weight update in a zb-h1 list");
            break;
        }
        ++next[r];
        moved = true;
      }
    blocked:;
    }
  }
  for (int r = 0; r < p && err.tellp() == 0; ++r) {
    if (next[r] < lists[r].size()) err << "deadlock: rank " << r << " at action " << next[r];
    for (int mb = 0; mb < m && err.tellp() == 0; ++mb) {
      if (state[r][mb] != 5) err << "rank " << r << " mb " << mb << " not F, B and W'd";
    }
    for (ActionKind k :
         {ActionKind::kForward, ActionKind::kBackwardInput, ActionKind::kBackwardWeight}) {
      if (err.tellp() == 0 && count[r][k] != m) {
        err << "rank " << r << ": " << count[r][k] << " " << actionName(k) << ", not " << m;
      }
    }
  }
  if (err.tellp() == 0 && !posted.empty()) err << posted.size() << " messages never received";
  res.error = err.str();
  res.end = *std::max_element(clock.begin(), clock.end());
  return res;
}

std::vector<std::vector<Action>> lists(ScheduleKind kind, const PipelineShape& s) {
  std::vector<std::vector<Action>> out;
  for (int r = 0; r < s.stages; ++r) out.push_back(buildSchedule(kind, s, r));
  return out;
}

// The paper's ZB-H1 step, (p-1)(F+B-W) of bubble over m(F+B+W) of work.
double closedFormStep(const PipelineShape& s, Costs c) {
  return s.microbatches * (c.f + c.b + c.w) + (s.stages - 1) * (c.f + c.b - c.w);
}

std::string text(const std::vector<Action>& order) {
  std::string t;
  for (const Action& a : order) {
    const char* k = a.kind == ActionKind::kForward          ? "F"
                    : a.kind == ActionKind::kBackwardInput  ? "B"
                    : a.kind == ActionKind::kBackwardWeight ? "W"
                                                            : "?";
    t += k + std::to_string(a.microbatch) + " ";
  }
  return t;
}

}  // namespace

TEST_CASE("zb-h1: every p <= 8, m <= 32: F, B, W once each, in order, at most p in flight",
          "[trainer][schedule][zbh1]") {
  const Costs c{1.0, 2.0, 0.5};  // unequal, so an order that works only for F = B = W fails
  for (int p = 1; p <= 8; ++p) {
    for (int m = 1; m <= 32; ++m) {
      const PipelineShape s{p, 1, m};
      INFO("p " << p << " m " << m);
      const Sim res = simulateZb(lists(ScheduleKind::kZbH1, s), s, c);
      REQUIRE(res.error == "");
      for (int r = 0; r < p; ++r) {
        INFO("rank " << r);
        CHECK(res.in_flight[r] <= std::min(p, m));
        CHECK(res.in_flight[r] <= inFlightBound(ScheduleKind::kZbH1, s, r));
        CHECK(res.busy[r] == Approx(m * (c.f + c.b + c.w)));
      }
      if (m >= p) CHECK(res.in_flight[0] == p);  // 1F1B's peak on rank 0, not more
    }
  }
}

TEST_CASE("zb-h1: with F = B = W the step is 3m+p-1 and every stage idles (p-1)/(3m+p-1)",
          "[trainer][schedule][zbh1]") {
  for (int p = 2; p <= 8; ++p) {
    for (int m = p; m <= 32; ++m) {
      const PipelineShape s{p, 1, m};
      INFO("p " << p << " m " << m);
      const Sim res = simulateZb(lists(ScheduleKind::kZbH1, s), s, {1, 1, 1});
      REQUIRE(res.error == "");
      CHECK(res.end == Approx(3 * m + p - 1));
      const double ideal = double(p - 1) / (3 * m + p - 1);
      CHECK(idealBubbleFraction(ScheduleKind::kZbH1, s) == Approx(ideal));
      for (int r = 0; r < p; ++r) CHECK((res.end - res.busy[r]) / res.end == Approx(ideal));
      // 1F1B with the same work (backward = B + W) idles (p-1)(F+B+W): ZB-H1 saves 2(p-1)W.
      const Sim one = simulateZb(lists(ScheduleKind::kOneFOneB, s), s, {1, 1, 1});
      CHECK(one.end - res.end == Approx(2 * (p - 1)));
    }
  }
}

TEST_CASE("zb-h1: the closed form (p-1)(F+B-W) holds for m >= p and W <= min(F, B)",
          "[trainer][schedule][zbh1]") {
  const double values[] = {0.5, 1.0, 1.5, 3.0};
  for (double f : values) {
    for (double b : values) {
      for (double w : values) {
        for (int p = 2; p <= 6; ++p) {
          for (int m = 1; m <= 2 * p + 1; ++m) {
            const PipelineShape s{p, 1, m};
            const Costs c{f, b, w};
            INFO("F " << f << " B " << b << " W " << w << " p " << p << " m " << m);
            const Sim res = simulateZb(lists(ScheduleKind::kZbH1, s), s, c);
            REQUIRE(res.error == "");
            const double form = closedFormStep(s, c);
            if (m >= p && w <= std::min(f, b)) {
              CHECK(res.end == Approx(form));
              CHECK(zbH1BubbleFraction(s, f, b, w) == Approx((form - m * (f + b + w)) / form));
            } else {
              CHECK(res.end >= form - 1e-9);  // outside its conditions: a lower bound
            }
          }
        }
      }
    }
  }
  // Where it fails: m < p (the first microbatch's F and B chain through every stage) ...
  CHECK(simulateZb(lists(ScheduleKind::kZbH1, {4, 1, 2}), {4, 1, 2}, {1, 1, 1}).end > 9.0 + 1e-9);
  // ... and W > F (a deferred W holds back the next F on the critical path).
  CHECK(simulateZb(lists(ScheduleKind::kZbH1, {2, 1, 4}), {2, 1, 4}, {1, 1, 2}).end >
        closedFormStep({2, 1, 4}, {1, 1, 2}) + 0.5);
}

TEST_CASE("zb-h1: the lists of p 4, m 6: 1F1B's warm-up, B on the critical path, W deferred",
          "[trainer][schedule][zbh1]") {
  const PipelineShape s{4, 1, 6};
  CHECK(text(computeOrder(ScheduleKind::kZbH1, s, 0)) ==
        "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5 ");
  CHECK(text(computeOrder(ScheduleKind::kZbH1, s, 3)) ==
        "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 W3 W4 W5 ");
  // Messages: B receives the gradient and sends its own on; W has none.
  const auto full = buildSchedule(ScheduleKind::kZbH1, s, 1);
  for (size_t i = 0; i < full.size(); ++i) {
    if (full[i].kind == ActionKind::kBackwardInput) {
      CHECK(full[i - 1].kind == ActionKind::kRecvBackward);
      CHECK(full[i + 1].kind == ActionKind::kSendBackward);
    }
    if (full[i].kind == ActionKind::kBackwardWeight) CHECK(full[i].peer == -1);
  }
  CHECK(parseScheduleKind("zb-h1") == ScheduleKind::kZbH1);
  CHECK(std::string(scheduleName(ScheduleKind::kZbH1)) == "zb-h1");
  CHECK(scheduleError(ScheduleKind::kZbH1, PipelineShape{4, 2, 8}) != "");
}

TEST_CASE("zb-h1's simulator catches broken lists: W before B, a W missing, too many deferred",
          "[trainer][schedule][zbh1]") {
  const PipelineShape s{4, 1, 8};
  CHECK(simulateZb(lists(ScheduleKind::kZbH1, s), s, {1, 1, 1}).error == "");
  auto early = lists(ScheduleKind::kZbH1, s);  // rank 3: W0 moved before B0
  auto w = std::find_if(early[3].begin(), early[3].end(),
                        [](const Action& a) { return a.kind == ActionKind::kBackwardWeight; });
  const Action moved = *w;
  early[3].erase(w);
  early[3].insert(early[3].begin() + 1, moved);
  CHECK(simulateZb(early, s, {1, 1, 1}).error != "");
  auto missing = lists(ScheduleKind::kZbH1, s);
  missing[2].pop_back();
  CHECK(simulateZb(missing, s, {1, 1, 1}).error != "");
  // Every W of rank 3 at the end: legal, but 8 in flight, over ZB-H1's bound of p = 4.
  auto late = lists(ScheduleKind::kZbH1, s);
  std::stable_partition(late[3].begin(), late[3].end(),
                        [](const Action& a) { return a.kind != ActionKind::kBackwardWeight; });
  const Sim res = simulateZb(late, s, {1, 1, 1});
  CHECK(res.error == "");
  CHECK(res.in_flight[3] > inFlightBound(ScheduleKind::kZbH1, s, 3));
}
