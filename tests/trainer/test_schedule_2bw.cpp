// PipeDream-2BW's action lists (schedule_2bw.h) on their own, without processes or tensors: all
// ranks' lists over several batches run together by a small simulator (a send posts and goes on, a
// receive blocks until its message was sent). Checked: every microbatch's F and B exactly once per
// stage, dependencies, no deadlock, the 1F1B in-flight bound, each batch's update after its last
// backward and before the next batch's backwards and batch b + 2's forwards (two weight versions
// suffice), and with forward F and backward B the idle fraction of the fill formula.
#include "schedule_2bw.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

using namespace gpttrain;

namespace {

struct Sim {
  std::string error;
  std::vector<int> in_flight;
  std::vector<double> busy;
  double end = 0.0;
};

Sim simulate2bw(const PipelineShape& s, int first_batch, int batches, double f, double b) {
  const int p = s.stages, m = s.microbatches, n = m * batches;
  std::vector<std::vector<Action>> lists;
  for (int r = 0; r < p; ++r) lists.push_back(buildTwoBwSchedule(s, r, first_batch, batches));
  Sim res;
  res.in_flight.assign(p, 0);
  res.busy.assign(p, 0.0);
  std::vector<size_t> next(p, 0);
  std::vector<double> clock(p, 0.0);
  std::vector<int> live(p, 0);
  std::map<std::tuple<int, int, int>, double> posted;  // (from, to, tag) -> time
  std::set<std::tuple<int, int, int>> ever;
  // Per rank, per global microbatch: 0, 1 input, 2 forwarded, 3 grad in, 4 backwarded.
  std::vector<std::map<int, int>> state(p);
  std::vector<std::vector<int>> updated(p);  // per rank: batches updated, in order
  std::vector<std::vector<int>> backwards(p, std::vector<int>(first_batch + batches, 0));
  std::ostringstream err;
  auto fail = [&](int r, const Action& a, const std::string& why) {
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
        const bool first = r == 0, last = r == p - 1;
        const int batch = a.microbatch / m;
        int& st = state[r][a.microbatch];
        const int updates = static_cast<int>(updated[r].size());  // of batches first_batch..
        switch (a.kind) {
          case ActionKind::kRecvForward:
          case ActionKind::kRecvBackward: {
            auto it = posted.find({a.peer, r, a.tag});
            if (it == posted.end()) goto blocked;
            clock[r] = std::max(clock[r], it->second);
            posted.erase(it);
            if (a.kind == ActionKind::kRecvForward) {
              if (st != 0) fail(r, a, "input received twice");
              st = 1;
            } else {
              if (st != 2) fail(r, a, "gradient before forward");
              st = 3;
            }
            break;
          }
          case ActionKind::kSendForward:
          case ActionKind::kSendBackward:
            if (!ever.insert({r, a.peer, a.tag}).second) fail(r, a, "tag sent twice");
            if (st != (a.kind == ActionKind::kSendForward ? 2 : 4))
              fail(r, a, "send before compute");
            posted[{r, a.peer, a.tag}] = clock[r];
            break;
          case ActionKind::kForward:
            if (st != (first ? 0 : 1)) fail(r, a, "forward without input, or twice");
            // V_b's buffer is rewritten by update b - 2: it must have run.
            if (batch - 2 >= first_batch && updates < batch - 2 - first_batch + 1) {
              fail(r, a, "forward of batch b before update b - 2 (a third version needed)");
            }
            st = 2;
            clock[r] += f;
            res.busy[r] += f;
            res.in_flight[r] = std::max(res.in_flight[r], ++live[r]);
            break;
          case ActionKind::kBackward:
            if (st != (last ? 2 : 3)) fail(r, a, "backward without forward or gradient, or twice");
            if (updates != batch - first_batch) fail(r, a, "backward in the wrong batch's window");
            st = 4;
            ++backwards[r][batch];
            clock[r] += b;
            res.busy[r] += b;
            --live[r];
            break;
          case ActionKind::kApplyUpdate:
            if (a.microbatch != first_batch + updates) fail(r, a, "update out of order");
            if (backwards[r][a.microbatch] != m) fail(r, a, "update before the last backward");
            updated[r].push_back(a.microbatch);
            break;
          case ActionKind::kBackwardInput:  // zb-h1's only
          case ActionKind::kBackwardWeight:
            fail(r, a, "a split backward in a 2bw list");
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
    for (int k = first_batch * m; k < first_batch * m + n && err.tellp() == 0; ++k) {
      if (state[r][k] != 4) err << "rank " << r << " mb " << k << " not forwarded and backwarded";
    }
    if (err.tellp() == 0 && static_cast<int>(updated[r].size()) != batches) {
      err << "rank " << r << " ran " << updated[r].size() << " updates of " << batches;
    }
  }
  if (err.tellp() == 0 && !posted.empty()) err << posted.size() << " messages never received";
  res.error = err.str();
  res.end = *std::max_element(clock.begin(), clock.end());
  return res;
}

}  // namespace

TEST_CASE("2bw: every p <= 6, p <= m <= 12, 1-4 batches: complete, ordered, two versions, fill",
          "[trainer][schedule][2bw]") {
  for (int p = 1; p <= 6; ++p) {
    for (int m = p; m <= 12; ++m) {
      for (int batches = 1; batches <= 4; ++batches) {
        const PipelineShape s{p, 1, m};
        const double f = 1.0, b = 2.0;  // F != B
        const Sim res = simulate2bw(s, 3, batches, f, b);
        INFO("p " << p << " m " << m << " batches " << batches);
        REQUIRE(res.error == "");
        for (int r = 0; r < p; ++r) {
          INFO("rank " << r);
          CHECK(res.in_flight[r] <= std::min(p - r, m * batches));
          CHECK(res.busy[r] == Approx(batches * m * (f + b)));
          CHECK((res.end - res.busy[r]) / res.end ==
                Approx(twoBwFillFraction(s, batches)).margin(1e-9));
        }
      }
    }
  }
}

TEST_CASE("2bw: no flush between batches, and updates sit right after the batch's last backward",
          "[trainer][schedule][2bw]") {
  const PipelineShape s{2, 1, 2};
  std::string text;
  for (const Action& a : buildTwoBwSchedule(s, 0, 0, 2)) {
    if (a.kind == ActionKind::kForward) text += "F" + std::to_string(a.microbatch) + " ";
    if (a.kind == ActionKind::kBackward) text += "B" + std::to_string(a.microbatch) + " ";
    if (a.kind == ActionKind::kApplyUpdate) text += "U" + std::to_string(a.microbatch) + " ";
  }
  // Batch 1's forwards (microbatches 2, 3) start before batch 0 has drained.
  CHECK(text == "F0 F1 B0 F2 B1 U0 F3 B2 B3 U1 ");
  // Message tags stay unique over the run (a later batch does not reuse batch 0's).
  std::set<int> tags;
  for (const Action& a : buildTwoBwSchedule(PipelineShape{3, 1, 4}, 1, 0, 5)) {
    if (a.kind == ActionKind::kSendForward || a.kind == ActionKind::kSendBackward) {
      CHECK(tags.insert(a.tag).second);
    }
  }
}

TEST_CASE("2bw: fewer microbatches than stages, or virtual chunks, are one-line errors",
          "[trainer][schedule][2bw]") {
  CHECK(twoBwShapeError(PipelineShape{4, 1, 4}) == "");
  CHECK(twoBwShapeError(PipelineShape{4, 1, 3}).find("at least as many microbatches") !=
        std::string::npos);
  CHECK(twoBwShapeError(PipelineShape{2, 2, 4}).find("--vp") != std::string::npos);
  CHECK(scheduleError(ScheduleKind::kTwoBw, PipelineShape{4, 1, 3}) != "");
  CHECK(twoBwFillFraction(PipelineShape{4, 1, 8}, 10) == Approx(3.0 / 83.0));
}
