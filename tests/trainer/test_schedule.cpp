// The pipeline schedules as data, without processes or tensors: for every p <= 8 and m <= 32, all
// ranks' action lists are run together by a small simulator with the executor's semantics (sends
// post and go on, a receive blocks until its message was sent). It checks that every microbatch is
// forwarded, then backwarded, once per chunk; that dependencies hold; that nothing deadlocks;
// the in-flight bound each schedule promises; and, with forward taking F and backward B, that
// every stage's idle fraction is the closed form.
#include "schedule.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

using namespace gpttrain;

namespace {

struct SimResult {
  std::string error;           // empty when everything held
  std::vector<int> in_flight;  // per rank: the most forwards without their backward yet
  std::vector<double> busy;    // per rank: compute time
  double end = 0.0;            // when the last rank finished
};

struct Message {
  int from, to, tag;
  bool operator<(const Message& o) const {
    return std::tie(from, to, tag) < std::tie(o.from, o.to, o.tag);
  }
};

// Runs every rank's list as far as it can, round-robin, until all are done or none can move.
SimResult simulateLists(const std::vector<std::vector<Action>>& lists, const PipelineShape& s,
                        double f, double b) {
  const int p = s.stages, v = s.chunks, m = s.microbatches;
  const double f_chunk = f / v, b_chunk = b / v;
  SimResult res;
  res.in_flight.assign(p, 0);
  res.busy.assign(p, 0.0);
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<int> live(p, 0);
  std::map<Message, double> posted;  // sent, not yet received: time posted
  std::set<Message> ever_sent;
  // Per rank and (chunk, microbatch): 0 nothing, 1 input received, 2 forwarded, 3 grad received,
  // 4 backwarded. Inputs of the first virtual stage and grads of the last need no message.
  std::vector<std::map<std::pair<int, int>, int>> state(p);
  std::ostringstream err;
  auto fail = [&](int r, const Action& a, const char* why) {
    if (err.tellp() == 0) {
      err << "rank " << r << " action " << next[r] << " " << actionName(a.kind) << " mb "
          << a.microbatch << " chunk " << a.chunk << ": " << why;
    }
  };
  bool moved = true;
  while (moved && err.tellp() == 0) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      while (next[r] < lists[r].size() && err.tellp() == 0) {
        const Action& a = lists[r][next[r]];
        const int stage = a.chunk * p + r;
        int& st = state[r][{a.chunk, a.microbatch}];
        const bool first = stage == 0, last = stage == s.virtualStages() - 1;
        if (a.kind == ActionKind::kRecvForward || a.kind == ActionKind::kRecvBackward) {
          auto it = posted.find(Message{a.peer, r, a.tag});
          if (it == posted.end()) break;  // blocks
          clock[r] = std::max(clock[r], it->second);
          posted.erase(it);
          if (a.kind == ActionKind::kRecvForward) {
            if (st != 0) fail(r, a, "input received twice or late");
            st = 1;
          } else {
            if (st != 2) fail(r, a, "gradient received before forward");
            st = 3;
          }
        } else if (a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward) {
          const Message msg{r, a.peer, a.tag};
          if (!ever_sent.insert(msg).second) fail(r, a, "message tag sent twice");
          if ((a.kind == ActionKind::kSendForward) != (st == 2) &&
              (a.kind == ActionKind::kSendBackward) != (st == 4)) {
            fail(r, a, "sent before its compute");
          }
          posted[msg] = clock[r];
        } else if (a.kind == ActionKind::kForward) {
          if (st != (first ? 0 : 1)) fail(r, a, "forward without its input (or twice)");
          st = 2;
          clock[r] += f_chunk;
          res.busy[r] += f_chunk;
          res.in_flight[r] = std::max(res.in_flight[r], ++live[r]);
        } else {
          if (st != (last ? 2 : 3)) fail(r, a, "backward without forward or gradient (or twice)");
          st = 4;
          clock[r] += b_chunk;
          res.busy[r] += b_chunk;
          --live[r];
        }
        ++next[r];
        moved = true;
      }
    }
  }
  for (int r = 0; r < p && err.tellp() == 0; ++r) {
    if (next[r] < lists[r].size()) {
      err << "deadlock: rank " << r << " stuck at action " << next[r] << " ("
          << actionName(lists[r][next[r]].kind) << " mb " << lists[r][next[r]].microbatch << ")";
    }
    for (int c = 0; c < v && err.tellp() == 0; ++c) {
      for (int mb = 0; mb < m; ++mb) {
        if (state[r][{c, mb}] != 4) {
          err << "rank " << r << " chunk " << c << " mb " << mb << " not forwarded and backwarded";
          break;
        }
      }
    }
  }
  if (err.tellp() == 0 && !posted.empty()) err << posted.size() << " messages never received";
  res.error = err.str();
  res.end = *std::max_element(clock.begin(), clock.end());
  return res;
}

SimResult simulate(ScheduleKind kind, const PipelineShape& s, double f, double b) {
  std::vector<std::vector<Action>> lists;
  for (int r = 0; r < s.stages; ++r) lists.push_back(buildSchedule(kind, s, r));
  return simulateLists(lists, s, f, b);
}

void checkSchedule(ScheduleKind kind, const PipelineShape& s) {
  // F != B so a schedule that only works for equal costs fails.
  const double f = 1.0, b = 2.0;
  const SimResult res = simulate(kind, s, f, b);
  INFO(scheduleName(kind) << " p " << s.stages << " v " << s.chunks << " m " << s.microbatches);
  REQUIRE(res.error == "");
  const double ideal = idealBubbleFraction(kind, s);
  for (int r = 0; r < s.stages; ++r) {
    INFO("rank " << r);
    CHECK(res.in_flight[r] <= inFlightBound(kind, s, r));
    CHECK(res.busy[r] == Approx(s.microbatches * (f + b)));
    CHECK((res.end - res.busy[r]) / res.end == Approx(ideal).margin(1e-9));
  }
}

}  // namespace

TEST_CASE("gpipe and 1f1b: every p <= 8, m <= 32 run to completion with the closed-form bubble",
          "[trainer][schedule]") {
  for (ScheduleKind kind : {ScheduleKind::kGpipe, ScheduleKind::kOneFOneB}) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 32; ++m) checkSchedule(kind, PipelineShape{p, 1, m});
    }
  }
}

TEST_CASE("interleaved: every p <= 8, v <= 4, m <= 32 (a multiple of p) likewise",
          "[trainer][schedule]") {
  for (int p = 2; p <= 8; ++p) {
    for (int v = 1; v <= 4; ++v) {
      for (int m = p; m <= 32; m += p) {
        checkSchedule(ScheduleKind::kInterleaved, PipelineShape{p, v, m});
      }
    }
  }
}

TEST_CASE("in-flight microbatches: 1f1b holds at most p - rank, gpipe all m",
          "[trainer][schedule]") {
  const PipelineShape s{4, 1, 8};
  for (int r = 0; r < 4; ++r) {
    CHECK(inFlightBound(ScheduleKind::kOneFOneB, s, r) == 4 - r);
    CHECK(inFlightBound(ScheduleKind::kGpipe, s, r) == 8);
    CHECK(simulate(ScheduleKind::kOneFOneB, s, 1, 2).in_flight[r] == 4 - r);
    CHECK(simulate(ScheduleKind::kGpipe, s, 1, 2).in_flight[r] == 8);
  }
  // Interleaved rank 0 of p 4, v 2: warm-up 2 * 3 + 4 = 10 forwards, then one more.
  CHECK(inFlightBound(ScheduleKind::kInterleaved, PipelineShape{4, 2, 8}, 0) == 11);
}

TEST_CASE("schedules are phases of one list: warm-up forwards, 1F1B pairs, cool-down backwards",
          "[trainer][schedule]") {
  const PipelineShape s{4, 1, 6};
  const auto order = computeOrder(ScheduleKind::kOneFOneB, s, 1);  // warm-up 2
  std::string text;
  for (const Action& a : order) {
    text += (a.kind == ActionKind::kForward ? "F" : "B") + std::to_string(a.microbatch) + " ";
  }
  CHECK(text == "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5 ");
  // Rank 1 of 4: receives activations from 0 and gradients from 2, sends the other way.
  const auto full = buildSchedule(ScheduleKind::kOneFOneB, s, 1);
  REQUIRE(full.size() == order.size() * 3);
  CHECK(full[0].kind == ActionKind::kRecvForward);
  CHECK(full[0].peer == 0);
  CHECK(full[2].kind == ActionKind::kSendForward);
  CHECK(full[2].peer == 2);
  // Interleaved: the last rank's chunk 0 feeds rank 0's chunk 1.
  const auto last = buildSchedule(ScheduleKind::kInterleaved, PipelineShape{2, 2, 2}, 1);
  CHECK(std::any_of(last.begin(), last.end(), [](const Action& a) {
    return a.kind == ActionKind::kSendForward && a.chunk == 0 && a.peer == 0;
  }));
  CHECK(scheduleError(ScheduleKind::kInterleaved, PipelineShape{4, 2, 6}) != "");
  CHECK(scheduleError(ScheduleKind::kOneFOneB, PipelineShape{4, 2, 8}) != "");
  CHECK(scheduleError(ScheduleKind::kInterleaved, PipelineShape{4, 2, 8}) == "");
}

TEST_CASE("the simulator catches broken lists: deadlock, missing work, wrong order",
          "[trainer][schedule]") {
  const PipelineShape s{2, 1, 2};
  auto lists = [&] {
    return std::vector<std::vector<Action>>{buildSchedule(ScheduleKind::kOneFOneB, s, 0),
                                            buildSchedule(ScheduleKind::kOneFOneB, s, 1)};
  };
  CHECK(simulateLists(lists(), s, 1, 2).error == "");
  // Rank 0 waits for a gradient before sending the activation that produces it: deadlock.
  auto deadlock = lists();
  std::swap(deadlock[0][1], deadlock[0][2]);  // F0 and its send
  std::rotate(deadlock[0].begin(), deadlock[0].begin() + 4, deadlock[0].end());
  CHECK(simulateLists(deadlock, s, 1, 2).error != "");
  // A backward dropped: microbatch 1 never completes.
  auto missing = lists();
  missing[1].pop_back();
  CHECK(simulateLists(missing, s, 1, 2).error != "");
  // Rank 1 backwards microbatch 0 before forwarding it.
  auto order = lists();
  std::swap(order[1][1], order[1][2]);
  CHECK(order[1][1].kind == ActionKind::kBackward);
  CHECK(simulateLists(order, s, 1, 2).error != "");
}
