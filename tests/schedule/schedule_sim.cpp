// The schedule tests' simulator (see schedule_sim.h): one pass over all ranks' lists with the
// checks every schedule shares; the times are the schedule library's replay (replaySchedule).
// Schedule-specific rules stay in the tests (SimSpec::extra_check).
#include "schedule_sim.h"

#include "tracerun/schedule/replay.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <tuple>

namespace tracerun::schedule::testing {

SimSpec virtualStageSpec(const PipelineShape& shape) {
  SimSpec spec;
  spec.ranks = shape.stages;
  spec.chunks = shape.chunks;
  spec.microbatches = shape.microbatches;
  const int p = shape.stages;
  spec.stage_of = [p](int rank, int chunk) { return chunk * p + rank; };
  return spec;
}

int SimResult::count(int rank, ActionKind kind) const {
  auto it = ran.at(rank).find(kind);
  return it == ran.at(rank).end() ? 0 : it->second;
}

namespace {

// Where one rank's chunk sits: its pipe and stage, and the ranks holding the stages around it.
struct Place {
  int pipe = 0, stage = 0;
  int prev = -1, next = -1;  // ranks of stage - 1 and stage + 1 of the pipe; -1 past its ends
};

// How far one (rank, chunk, microbatch) has come.
enum class Step { kNone, kInput, kForwarded, kGradient, kInputGradient, kComplete };

struct Message {
  int from, to, tag;
  bool operator<(const Message& o) const {
    return std::tie(from, to, tag) < std::tie(o.from, o.to, o.tag);
  }
};

// A message posted and not yet received: which stage's activation or gradient it is.
struct Posted {
  bool forward;
  int pipe, stage, microbatch;
};

class Replay {
 public:
  Replay(const std::vector<std::vector<Action>>& lists, const SimSpec& spec)
      : lists_(lists),
        spec_(spec),
        next_(spec.ranks, 0),
        live_(spec.ranks, 0),
        steps_(static_cast<size_t>(spec.ranks) * spec.chunks * spec.microbatches, Step::kNone) {
    res_.in_flight.assign(spec.ranks, 0);
    res_.ran.assign(spec.ranks, {});
  }

  SimResult run() {
    error_ = layOut();
    bool moved = error_.empty();
    while (moved && error_.empty()) {
      moved = false;
      for (int r = 0; r < spec_.ranks; ++r) {
        while (next_[r] < lists_[r].size() && error_.empty() && step(r)) moved = true;
      }
    }
    if (error_.empty()) error_ = finish();
    res_.error = error_;
    time();
    return res_;
  }

 private:
  // Fills places_ from the spec, or says what is wrong with it.
  std::string layOut() {
    std::ostringstream err;
    if (static_cast<int>(lists_.size()) != spec_.ranks) {
      err << "spec: " << spec_.ranks << " ranks but " << lists_.size() << " lists";
      return err.str();
    }
    if (!spec_.stage_of) return "spec: no stage_of";
    std::map<std::pair<int, int>, std::pair<int, int>> holder;  // (pipe, stage) -> (rank, chunk)
    places_.assign(spec_.ranks, std::vector<Place>(spec_.chunks));
    for (int r = 0; r < spec_.ranks; ++r) {
      for (int c = 0; c < spec_.chunks; ++c) {
        Place& pl = places_[r][c];
        pl.pipe = spec_.pipe_of(r, c);
        pl.stage = spec_.stage_of(r, c);
        auto [it, fresh] = holder.insert({{pl.pipe, pl.stage}, {r, c}});
        if (pl.stage < 0 || !fresh) {
          err << "spec: stage " << pl.stage << " of pipe " << pl.pipe << " on rank " << r
              << " chunk " << c << (fresh ? " is negative" : " is held twice");
          return err.str();
        }
      }
    }
    std::map<int, int> stages;  // pipe -> stages held
    for (const auto& held : holder) ++stages[held.first.first];
    for (const auto& held : holder) {
      const auto [pipe, stage] = held.first;
      if (stage >= stages[pipe]) {
        err << "spec: pipe " << pipe << " has " << stages[pipe] << " stages but one numbered "
            << stage;
        return err.str();
      }
    }
    for (const auto& [pipe_stage, rank_chunk] : holder) {
      const auto [pipe, stage] = pipe_stage;
      Place& pl = places_[rank_chunk.first][rank_chunk.second];
      if (stage > 0) pl.prev = holder.at({pipe, stage - 1}).first;
      if (stage + 1 < stages[pipe]) pl.next = holder.at({pipe, stage + 1}).first;
    }
    return "";
  }

  Step& stepOf(int r, int chunk, int mb) {
    return steps_[(static_cast<size_t>(r) * spec_.chunks + chunk) * spec_.microbatches + mb];
  }

  bool fail(int r, const Action& a, const std::string& why) {
    std::ostringstream err;
    err << "rank " << r << " action " << next_[r] << " " << actionName(a.kind) << " mb "
        << a.microbatch << " chunk " << a.chunk << ": " << why;
    error_ = err.str();
    return true;  // the action is over (the run stops on the error)
  }

  // Runs rank r's next action. False when it blocks (a receive whose message is not posted yet).
  bool step(int r) {
    const Action& a = lists_[r][next_[r]];
    if (a.kind == ActionKind::kApplyUpdate) {
      if (!spec_.allow_updates) return fail(r, a, "a weight update in a list without updates");
    } else {
      if (a.chunk < 0 || a.chunk >= spec_.chunks) return fail(r, a, "no such chunk on the rank");
      if (a.microbatch < 0 || a.microbatch >= spec_.microbatches ||
          !spec_.expected(r, a.chunk, a.microbatch)) {
        return fail(r, a, "not this rank's to run (wrong pipeline, chunk or microbatch)");
      }
    }
    std::string why;
    if (isReceive(a.kind) || isSend(a.kind)) {
      why = checkPeer(r, a);
      if (why.empty() && isReceive(a.kind)) {
        auto it = posted_.find(Message{a.peer, r, a.tag});
        if (it == posted_.end()) return false;  // blocks
        why = receive(r, a, it->second);
        posted_.erase(it);
      } else if (why.empty()) {
        why = send(r, a);
      }
    } else if (a.kind != ActionKind::kApplyUpdate) {
      why = compute(r, a);
    }
    if (why.empty() && spec_.extra_check) why = spec_.extra_check(r, a);
    if (!why.empty()) return fail(r, a, why);
    ++res_.ran[r][a.kind];
    ++next_[r];
    return true;
  }

  // The peer must hold the neighbouring stage of the same pipe.
  std::string checkPeer(int r, const Action& a) const {
    const Place& pl = places_[r][a.chunk];
    const bool towards_loss =
        a.kind == ActionKind::kSendForward || a.kind == ActionKind::kRecvBackward;
    const int want = towards_loss ? pl.next : pl.prev;
    std::ostringstream err;
    if (want < 0) {
      err << "stage " << pl.stage << " of pipe " << pl.pipe << " has no "
          << (towards_loss ? "next" : "previous") << " stage";
    } else if (a.peer != want) {
      err << "peer " << a.peer << ", but stage " << pl.stage + (towards_loss ? 1 : -1)
          << " of pipe " << pl.pipe << " is on rank " << want;
    }
    return err.str();
  }

  std::string receive(int r, const Action& a, const Posted& msg) {
    const Place& pl = places_[r][a.chunk];
    const bool fwd = a.kind == ActionKind::kRecvForward;
    if (msg.forward != fwd || msg.microbatch != a.microbatch || msg.pipe != pl.pipe ||
        msg.stage != pl.stage + (fwd ? -1 : 1)) {
      std::ostringstream err;
      err << "got the " << (msg.forward ? "activation" : "gradient") << " of mb " << msg.microbatch
          << " from stage " << msg.stage << " of pipe " << msg.pipe;
      return err.str();
    }
    Step& st = stepOf(r, a.chunk, a.microbatch);
    if (st != (fwd ? Step::kNone : Step::kForwarded)) {
      return fwd ? "input received twice or after its forward" : "gradient received out of order";
    }
    st = fwd ? Step::kInput : Step::kGradient;
    return "";
  }

  std::string send(int r, const Action& a) {
    const Place& pl = places_[r][a.chunk];
    const bool fwd = a.kind == ActionKind::kSendForward;
    const Message msg{r, a.peer, a.tag};
    if (!sent_.insert(msg).second) return "message tag sent twice";
    const Step st = stepOf(r, a.chunk, a.microbatch);
    if (fwd ? st != Step::kForwarded : (st != Step::kInputGradient && st != Step::kComplete)) {
      return "sent before its compute";
    }
    posted_[msg] = Posted{fwd, pl.pipe, pl.stage, a.microbatch};
    return "";
  }

  std::string compute(int r, const Action& a) {
    const Place& pl = places_[r][a.chunk];
    const bool first = pl.prev < 0, last = pl.next < 0;
    Step& st = stepOf(r, a.chunk, a.microbatch);
    const Step backward_ready = last ? Step::kForwarded : Step::kGradient;
    const bool split =
        a.kind == ActionKind::kBackwardInput || a.kind == ActionKind::kBackwardWeight;
    if (split && !spec_.allow_split_backward) return "a split backward (B / W) in this list";
    switch (a.kind) {
      case ActionKind::kForward:
        if (st != (first ? Step::kNone : Step::kInput))
          return "forward without its input (or twice)";
        st = Step::kForwarded;
        res_.in_flight[r] = std::max(res_.in_flight[r], ++live_[r]);
        break;
      case ActionKind::kBackward:
        if (st != backward_ready) return "backward without forward or gradient (or twice)";
        st = Step::kComplete;
        --live_[r];
        break;
      case ActionKind::kBackwardInput:
        if (st != backward_ready) return "B without forward or gradient (or twice)";
        st = Step::kInputGradient;
        break;
      case ActionKind::kBackwardWeight:
        if (st != Step::kInputGradient) return "W before its B (or twice)";
        st = Step::kComplete;
        --live_[r];
        break;
      default:
        return "not a compute action";
    }
    return "";
  }

  // The lists' times with the spec's costs (messages and updates free): the library's replay.
  void time() {
    const auto cost = [this](int, const Action& a) {
      switch (a.kind) {
        case ActionKind::kForward:
          return spec_.costs.forward;
        case ActionKind::kBackward:
          return spec_.costs.backward;
        case ActionKind::kBackwardInput:
          return spec_.costs.backward_input;
        case ActionKind::kBackwardWeight:
          return spec_.costs.backward_weight;
        default:
          return 0.0;
      }
    };
    const ScheduleTimes t = replaySchedule(lists_, cost);
    res_.busy = t.busy;
    res_.end = t.end_time;
  }

  // After the last move: nothing stuck, everything expected complete, every message received.
  std::string finish() {
    std::ostringstream err;
    for (int r = 0; r < spec_.ranks; ++r) {
      if (next_[r] < lists_[r].size()) {
        const Action& a = lists_[r][next_[r]];
        err << "deadlock: rank " << r << " stuck at action " << next_[r] << " ("
            << actionName(a.kind) << " mb " << a.microbatch << " chunk " << a.chunk << ")";
        return err.str();
      }
    }
    for (int r = 0; r < spec_.ranks; ++r) {
      for (int c = 0; c < spec_.chunks; ++c) {
        for (int mb = 0; mb < spec_.microbatches; ++mb) {
          if (spec_.expected(r, c, mb) && stepOf(r, c, mb) != Step::kComplete) {
            err << "rank " << r << " chunk " << c << " mb " << mb
                << " not complete (forward, then backward or B and W)";
            return err.str();
          }
        }
      }
    }
    if (!posted_.empty()) err << posted_.size() << " messages never received";
    return err.str();
  }

  const std::vector<std::vector<Action>>& lists_;
  const SimSpec& spec_;
  std::vector<std::vector<Place>> places_;  // per rank and chunk
  std::vector<size_t> next_;                // per rank: the next action to run
  std::vector<int> live_;                   // per rank: forwards run and not yet completed
  std::vector<Step> steps_;                 // per rank, chunk, microbatch
  std::map<Message, Posted> posted_;
  std::set<Message> sent_;
  std::string error_;
  SimResult res_;
};

}  // namespace

SimResult simulateSchedules(const std::vector<std::vector<Action>>& lists, const SimSpec& spec) {
  return Replay(lists, spec).run();
}

}  // namespace tracerun::schedule::testing
