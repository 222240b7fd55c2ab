// Pipeline analysis (see pipeline.h): collect the actions, infer the shape and the schedule, split
// each stage's step time, then replay the dependency graph with median durations. Schedule kinds,
// closed forms and the replay are the schedule library's (tracerun/schedule/).
//
// Sections: collecting actions · shape and schedule · measured split · model replay · analysis
//           steps · entry point · the pass's consumer · one step's actions
#include "tracerun/trace/analysis/pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

#include "attempt_ranks.h"
#include "span_consumers.h"
#include "span_pass.h"
#include "span_select.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/schedule/closed_form.h"
#include "tracerun/schedule/replay.h"

namespace tracerun::trace::analysis {

namespace {

using schedule::ScheduleKind;

constexpr int kMaxVirtualStages = 1 << 14;  // beyond this the arguments are not a pipeline's
constexpr int kMaxMicrobatches = 1 << 24;

enum Code : int {
  kNone = 0,
  kStep,
  kForward,
  kBackward,
  kRecvForward,
  kRecvBackward,
  kSendForward,
  kSendBackward,
  kBackwardInput,   // zb-h1's B
  kBackwardWeight,  // zb-h1's W
};

bool isCompute(int k) {
  return k == kForward || k == kBackward || k == kBackwardInput || k == kBackwardWeight;
}
// Backward work for the per-stage split: a whole backward, or zb-h1's B or W.
bool isBackward(int k) {
  return k == kBackward || k == kBackwardInput || k == kBackwardWeight;
}
bool isRecv(int k) {
  return k == kRecvForward || k == kRecvBackward;
}
bool isSend(int k) {
  return k == kSendForward || k == kSendBackward;
}
// Forward messages (activations) are 0, backward ones (gradients) 1.
int direction(int k) {
  return (k == kRecvForward || k == kSendForward) ? 0 : 1;
}

struct Action {
  int rank = 0;
  int kind = kNone;
  int stage = -1;  // virtual stage (compute actions)
  int chunk = 0, microbatch = 0;
  int peer = -1;     // global rank on the other side (messages)
  int step = 0;      // the step number it belongs to
  int version = -1;  // 2bw: the weight version a forward/backward used (-1: not recorded)
  int64_t start = 0, end = 0;
  long match = -1;   // receives: index of the matching send in the step's action list
  int64_t span = 0;  // the span's id
  int64_t dur() const { return satSub(end, start); }
};

struct StepSpan {
  int step = 0;
  int64_t start = 0, end = 0;
};

struct Collected {
  std::map<int, std::vector<Action>> by_rank;  // in start order
};

// ---------------------------------------------------------------------------------------------
// collecting actions

// The pipeline's span codes, step spans and picked actions, track by track (the shared pass hands
// them in; collectActions turns them into per-rank action lists).
struct Picks {
  std::map<int, std::vector<StepSpan>> steps;
  std::map<int, std::vector<PickedSpan>> picked;
};

int codeOfName(const std::string& s) {
  if (s == vocab::phase::kStep) return kStep;
  if (s == vocab::phase::kForward) return kForward;
  if (s == vocab::phase::kBackward) return kBackward;
  if (s == vocab::phase::kBackwardInput) return kBackwardInput;
  if (s == vocab::phase::kBackwardWeight) return kBackwardWeight;
  if (s == vocab::scope::kRecvForward) return kRecvForward;
  if (s == vocab::scope::kRecvBackward) return kRecvBackward;
  if (s == vocab::scope::kSendForward) return kSendForward;
  if (s == vocab::scope::kSendBackward) return kSendBackward;
  return kNone;
}

struct ArgKeys {
  core::StringId step, stage, chunk, microbatch, peer, version;
  explicit ArgKeys(const TraceReader& reader)
      : step(NameCodes::find(reader, vocab::arg::kStep)),
        stage(NameCodes::find(reader, vocab::arg::kStage)),
        chunk(NameCodes::find(reader, vocab::arg::kChunk)),
        microbatch(NameCodes::find(reader, vocab::arg::kMicrobatch)),
        peer(NameCodes::find(reader, vocab::arg::kPeer)),
        version(NameCodes::find(reader, vocab::arg::kWeightVersion)) {}
};

// A thread track's picked spans: step spans to `steps`, the rest to `picked`.
void addTrackPicks(const TrackRow& t, const ArgKeys& keys, std::vector<PickedSpan>& spans,
                   Picks& picks) {
  auto& dst = picks.picked[t.rank];
  for (auto& p : spans) {
    if (p.code == kStep) {
      auto& st = picks.steps[t.rank];
      st.push_back({static_cast<int>(p.arg(keys.step, static_cast<int64_t>(st.size()) + 1)),
                    p.span.start_ns, p.span.end_ns()});
    } else {
      dst.push_back(std::move(p));
    }
  }
}

Collected collectActions(Picks& picks, const ArgKeys& keys, const AttemptRanks& attempts) {
  Collected out;
  for (auto& [rank, spans] : picks.picked) {
    auto& st = picks.steps[rank];
    std::sort(st.begin(), st.end(),
              [](const StepSpan& a, const StepSpan& b) { return a.start < b.start; });
    auto& actions = out.by_rank[rank];
    for (const PickedSpan& p : spans) {
      // The innermost step containing the action; actions outside steps (validation) are skipped.
      auto it = std::upper_bound(st.begin(), st.end(), p.span.start_ns,
                                 [](int64_t t, const StepSpan& s) { return t < s.start; });
      if (it == st.begin()) continue;
      --it;
      if (p.span.end_ns() > it->end) continue;
      Action a;
      a.rank = rank;
      a.kind = p.code;
      a.step = it->step;
      a.start = p.span.start_ns;
      a.end = p.span.end_ns();
      a.span = p.span.id;
      a.chunk = static_cast<int>(p.arg(keys.chunk, 0));
      a.microbatch = static_cast<int>(p.arg(keys.microbatch, 0));
      if (isCompute(a.kind)) {
        a.stage = static_cast<int>(p.arg(keys.stage, -1));
        a.version = static_cast<int>(p.arg(keys.version, -1));
        if (a.stage < 0) continue;  // a phase without pipeline arguments
      } else {
        // peer is the other side's RANK in this rank's attempt: its trace rank is looked up.
        a.peer = attempts.traceRank(rank, static_cast<int>(p.arg(keys.peer, -1)));
        if (a.peer < 0) continue;
      }
      actions.push_back(a);
    }
    // Ties keep the reader's order (start, depth, id: ids follow the order actions began), so a
    // zero-length send stays before the receive that starts at the same nanosecond.
    std::stable_sort(actions.begin(), actions.end(),
                     [](const Action& a, const Action& b) { return a.start < b.start; });
    if (actions.empty()) out.by_rank.erase(rank);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// shape and schedule

int findRoot(std::map<int, int>& parent, int x) {
  while (parent[x] != x) x = parent[x] = parent[parent[x]];
  return x;
}

// Pipelines (replicas) are the ranks connected by messages.
std::vector<std::vector<int>> replicasOf(const Collected& c, int p,
                                         std::map<int, int>* pipelineRank) {
  std::map<int, int> parent;
  for (const auto& [rank, actions] : c.by_rank) parent[rank] = rank;
  for (const auto& [rank, actions] : c.by_rank) {
    for (const Action& a : actions) {
      if (a.peer >= 0 && parent.count(a.peer)) {
        parent[findRoot(parent, a.peer)] = findRoot(parent, rank);
      }
    }
  }
  for (const auto& [rank, actions] : c.by_rank) {
    int prank = -1;
    for (const Action& a : actions) {
      if (isCompute(a.kind)) {
        prank = a.stage % p;
        break;
      }
    }
    (*pipelineRank)[rank] = prank;
  }
  std::map<int, std::vector<int>> groups;
  for (const auto& [rank, actions] : c.by_rank) groups[findRoot(parent, rank)].push_back(rank);
  std::vector<std::vector<int>> out;
  for (auto& [root, ranks] : groups) {
    std::sort(ranks.begin(), ranks.end(), [&](int a, int b) {
      return std::make_pair((*pipelineRank)[a], a) < std::make_pair((*pipelineRank)[b], b);
    });
    out.push_back(ranks);
  }
  return out;
}

// Programs record `stage` either as the virtual stage (chunk x p + pipeline rank) or as the
// pipeline rank itself (gpttrain). With one chunk per rank the two agree; with several, the
// pipeline rank is the same on every chunk of a rank while the virtual stage is not. Rewrites the
// pipeline-rank form to virtual stages (p = highest stage + 1) and says whether it did.
bool stageIsPipelineRank(Collected& c) {
  int maxStage = -1;
  bool severalChunks = false;
  for (const auto& [rank, actions] : c.by_rank) {
    int stage = -1, chunk = -1;
    for (const Action& a : actions) {
      if (!isCompute(a.kind)) continue;
      maxStage = std::max(maxStage, a.stage);
      if (stage < 0) {
        stage = a.stage;
        chunk = a.chunk;
        continue;
      }
      if (a.stage != stage) return false;  // a rank with two stage values: virtual stages
      severalChunks = severalChunks || a.chunk != chunk;
    }
  }
  if (!severalChunks || maxStage < 0 || maxStage >= kMaxVirtualStages) return false;
  const int p = maxStage + 1;
  for (auto& [rank, actions] : c.by_rank) {
    for (Action& a : actions) {
      if (isCompute(a.kind) && a.chunk >= 0 && a.chunk < kMaxVirtualStages) {
        a.stage = a.chunk * p + a.stage;
      }
    }
  }
  return true;
}

// Chimera (two pipelines in opposite directions, two chunks per rank): each microbatch runs on one
// chunk of a rank only, where interleaving runs every microbatch through every chunk.
bool oneChunkPerMicrobatch(const Collected& c) {
  for (const auto& [rank, actions] : c.by_rank) {
    std::map<std::pair<int, int>, int> chunkOf;  // (step, microbatch) -> chunk
    for (const Action& a : actions) {
      if (!isCompute(a.kind)) continue;
      auto [it, fresh] = chunkOf.emplace(std::make_pair(a.step, a.microbatch), a.chunk);
      if (!fresh && it->second != a.chunk) return false;
    }
  }
  return true;
}

ScheduleKind inferSchedule(const Collected& c, int v, int m, std::vector<std::string>* notes) {
  if (v == 2 && oneChunkPerMicrobatch(c)) return ScheduleKind::kChimera;
  if (v > 1) return ScheduleKind::kInterleaved;
  for (const auto& [rank, actions] : c.by_rank) {  // weight versions: PipeDream-2BW
    for (const Action& a : actions) {
      if (isCompute(a.kind) && a.version >= 0) return ScheduleKind::kTwoBw;
    }
  }
  bool backwardBeforeForward = false;
  for (const auto& [rank, actions] : c.by_rank) {
    std::map<int, bool> sawBackward;  // per step
    for (const Action& a : actions) {
      if (a.kind == kBackwardInput || a.kind == kBackwardWeight) {
        return ScheduleKind::kZbH1;  // split backward
      }
      if (a.kind == kBackward) sawBackward[a.step] = true;
      if (a.kind == kForward && sawBackward[a.step]) backwardBeforeForward = true;
    }
  }
  if (backwardBeforeForward) return ScheduleKind::kOneFOneB;
  if (m <= 1) {
    notes->push_back("one microbatch per step: gpipe and 1f1b are the same schedule");
    return ScheduleKind::kOneFOneB;
  }
  return ScheduleKind::kGpipe;
}

// ---------------------------------------------------------------------------------------------
// measured split and send/receive matching

struct RankStep {
  int64_t forward = 0, backward = 0, send = 0, recv = 0;
};

// Gives each receive the index of its send: k-th message from src to dst in one direction for one
// microbatch pairs with the k-th receive of it. `all` holds one step's actions of every rank.
void matchMessages(std::vector<Action>& all, int64_t* unmatched) {
  std::map<std::tuple<int, int, int, int>, std::vector<long>> sends, recvs;
  for (size_t i = 0; i < all.size(); ++i) {
    const Action& a = all[i];
    if (isSend(a.kind)) sends[{a.rank, a.peer, direction(a.kind), a.microbatch}].push_back(long(i));
    if (isRecv(a.kind)) recvs[{a.peer, a.rank, direction(a.kind), a.microbatch}].push_back(long(i));
  }
  for (auto& [key, list] : recvs) {
    auto it = sends.find(key);
    for (size_t k = 0; k < list.size(); ++k) {
      if (it != sends.end() && k < it->second.size()) {
        all[static_cast<size_t>(list[k])].match = it->second[k];
      } else {
        ++*unmatched;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// model replay

// Every duration of one step per replica, keyed as the model costs them.
struct Durations {
  std::map<std::pair<int, int>, std::vector<int64_t>> compute;   // (virtual stage, kind)
  std::map<std::pair<int, int>, std::vector<int64_t>> send;      // (pipeline rank, direction)
  std::map<std::pair<int, int>, std::vector<int64_t>> transfer;  // (pipeline rank, direction)
  // The mean duration of one compute kind over every stage (0 when none ran).
  double meanOf(int kind) const {
    double sum = 0;
    int64_t count = 0;
    for (const auto& [key, d] : compute) {
      if (key.second != kind) continue;
      for (int64_t x : d) sum += double(x);
      count += static_cast<int64_t>(d.size());
    }
    return count > 0 ? sum / double(count) : 0.0;
  }
};

struct MedianCosts {
  std::map<std::pair<int, int>, int64_t> compute;   // (virtual stage, kind)
  std::map<std::pair<int, int>, int64_t> send;      // (pipeline rank, direction)
  std::map<std::pair<int, int>, int64_t> transfer;  // (pipeline rank, direction) of receives
  int64_t cost(const Action& a, int prank) const {
    const std::map<std::pair<int, int>, int64_t>* m = nullptr;
    std::pair<int, int> key;
    if (isCompute(a.kind)) {
      m = &compute;
      key = {a.stage, a.kind};
    } else {
      m = isSend(a.kind) ? &send : &transfer;
      key = {prank, direction(a.kind)};
    }
    auto it = m->find(key);
    return it == m->end() ? 0 : it->second;
  }
};

MedianCosts mediansOf(Durations d) {
  MedianCosts costs;
  for (auto& [k, x] : d.compute) costs.compute[k] = median(x);
  for (auto& [k, x] : d.send) costs.send[k] = median(x);
  for (auto& [k, x] : d.transfer) costs.transfer[k] = std::max<int64_t>(0, median(x));
  return costs;
}

// Replays one step of one replica with the schedule library's replay: each rank runs its recorded
// order; a receive waits for the modeled end of its send (a cycle in a damaged trace is broken).
// Returns the modeled bubble; `rank_bubble` gets each rank's own (1 - its modeled compute / the
// modeled step), whose mean is the returned one.
double replayModel(const std::vector<Action>& all, const std::vector<int>& ranks,
                   const MedianCosts& costs, const std::map<int, int>& prank,
                   std::map<int, double>* rank_bubble) {
  std::map<int, int> lane;
  for (size_t i = 0; i < ranks.size(); ++i) lane[ranks[i]] = static_cast<int>(i);
  std::vector<schedule::TimedStep> steps;
  for (const Action& a : all) {
    const bool waits = isRecv(a.kind) && a.match >= 0;
    steps.push_back(
        {lane.at(a.rank), double(costs.cost(a, prank.at(a.rank))), waits ? a.match : -1});
  }
  const schedule::ReplayTimes t =
      schedule::replay(steps, static_cast<int>(ranks.size()), 0, schedule::OnDeadlock::kBreak);
  double compute = 0;
  std::map<int, double> rank_compute;
  for (size_t i = 0; i < all.size(); ++i) {
    if (!isCompute(all[i].kind)) continue;
    compute += steps[i].cost;
    rank_compute[all[i].rank] += steps[i].cost;
  }
  const double makespan = t.end_time;
  if (makespan <= 0 || ranks.empty()) return 0;
  for (int r : ranks) (*rank_bubble)[r] = 1.0 - rank_compute[r] / makespan;
  return 1.0 - compute / (double(ranks.size()) * makespan);
}

// ---------------------------------------------------------------------------------------------
// analysis steps

std::string formatMs(double ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g ms", ns / 1e6);
  return buf;
}

// p, v and m from the compute actions' arguments; false (with a note when damaged) when the trace
// has no pipeline of two or more virtual stages.
bool inferShape(const Collected& c, PipelineAnalysis* out) {
  int maxStage = -1, maxChunk = 0, maxMicrobatch = 0;
  for (const auto& [rank, actions] : c.by_rank) {
    for (const Action& a : actions) {
      if (!isCompute(a.kind)) continue;
      maxStage = std::max(maxStage, a.stage);
      maxChunk = std::max(maxChunk, a.chunk);
      maxMicrobatch = std::max(maxMicrobatch, a.microbatch);
    }
  }
  if (maxStage < 1) return false;  // no pipeline, or one stage only
  if (maxStage >= kMaxVirtualStages || maxChunk >= kMaxVirtualStages ||
      maxMicrobatch >= kMaxMicrobatches) {
    out->notes.push_back(
        "stage, chunk or microbatch arguments out of range (damaged trace?): no pipeline analysed");
    return false;
  }
  const int v = maxChunk + 1;
  const int vstages = maxStage + 1;
  int p = vstages / v;
  if (p * v != vstages) {
    out->notes.push_back("virtual stages (" + std::to_string(vstages) +
                         ") not a multiple of the chunks per rank (" + std::to_string(v) + ")");
    p = std::max(1, p);
  }
  out->present = true;
  out->stages = p;
  out->virtual_stages = v;
  out->microbatches = maxMicrobatch + 1;
  return true;
}

// One step of one replica: its actions of every rank, messages matched.
struct Unit {
  int step, replica;
  std::vector<Action> all;
};

// Every schedule gives each rank of a replica the same number of forward and backward phases in a
// step (m x v of each; zb-h1's B and W alike). A step where they differ was cut short on some
// rank (a run ended mid-step, a shard lost its last spans): measured as it is, the missing work
// would read as idle time, so such a step is left out (`incomplete`: step, replica).
bool completeUnit(const Unit& u, const std::vector<int>& ranks) {
  std::map<int, int> phases;
  for (int r : ranks) phases[r] = 0;
  for (const Action& a : u.all) {
    if (isCompute(a.kind)) ++phases[a.rank];
  }
  for (const auto& [rank, n] : phases) {
    if (n != phases.begin()->second) return false;
  }
  return true;
}

std::vector<Unit> unitsOf(const Collected& c, const std::vector<std::vector<int>>& replicas,
                          int64_t* unmatched, std::vector<std::pair<int, int>>* incomplete) {
  std::set<int> stepNumbers;
  for (const auto& [rank, actions] : c.by_rank) {
    for (const Action& a : actions) stepNumbers.insert(a.step);
  }
  std::vector<Unit> units;
  for (int step : stepNumbers) {
    for (size_t ri = 0; ri < replicas.size(); ++ri) {
      Unit u{step, static_cast<int>(ri), {}};
      for (int r : replicas[ri]) {
        for (const Action& a : c.by_rank.at(r)) {
          if (a.step == step) u.all.push_back(a);
        }
      }
      if (u.all.empty()) continue;
      if (!completeUnit(u, replicas[ri])) {
        incomplete->emplace_back(step, u.replica);
        continue;
      }
      matchMessages(u.all, unmatched);
      units.push_back(std::move(u));
    }
  }
  return units;
}

Durations durationsOf(const std::vector<Unit>& units, const std::map<int, int>& prank) {
  Durations d;
  for (const Unit& u : units) {
    for (const Action& a : u.all) {
      const int pr = prank.at(a.rank);
      if (isCompute(a.kind)) d.compute[{a.stage, a.kind}].push_back(a.dur());
      if (isSend(a.kind)) d.send[{pr, direction(a.kind)}].push_back(a.dur());
      if (isRecv(a.kind) && a.match >= 0) {
        const Action& s = u.all[static_cast<size_t>(a.match)];
        d.transfer[{pr, direction(a.kind)}].push_back(satSub(a.end, std::max(a.start, s.start)));
      }
    }
  }
  return d;
}

// 2bw: one step span is a whole drained run of batches, its microbatch indices over all of them
// (k = batch * m + j); m is per batch (weight version); the fill comes once per run.
void twoBwClosedForm(const Collected& c, PipelineAnalysis* out) {
  std::set<int> versions, spans;
  int per_run = 0;
  for (const auto& [rank, actions] : c.by_rank) {
    std::set<std::pair<int, int>> seen;
    for (const Action& a : actions) {
      if (!isCompute(a.kind)) continue;
      versions.insert(a.version);
      spans.insert(a.step);
      seen.insert({a.step, a.microbatch});
    }
    per_run = std::max(per_run, static_cast<int>(seen.size()));
  }
  const int runs = std::max<int>(1, static_cast<int>(spans.size()));
  const int n = per_run / runs;  // microbatches per drained run
  out->microbatches =
      std::max<int>(1, static_cast<int>(per_run / std::max<size_t>(1, versions.size())));
  out->bubble_theory = schedule::idealBubbleFraction(ScheduleKind::kTwoBw, {out->stages, 1, n});
  out->bubble_formula = "2bw fill once per drained run: (p-1)/(N+p-1), N = " + std::to_string(n) +
                        " microbatches per run";
}

// The closed form of the inferred schedule (the library's), with what it needs from the trace,
// and a note where the measured costs leave it only a lower bound (5 %: sleeps and clocks jitter).
void closedForm(ScheduleKind kind, const Collected& c, const Durations& d, PipelineAnalysis* out) {
  const schedule::PipelineShape shape{out->stages, out->virtual_stages, out->microbatches};
  out->bubble_theory = schedule::idealBubbleFraction(kind, shape);
  out->bubble_formula = schedule::closedFormName(kind);
  const double f = d.meanOf(kForward);
  if (kind == ScheduleKind::kTwoBw) twoBwClosedForm(c, out);
  if (kind == ScheduleKind::kChimera) {  // Table 1's form is exact only when F = B
    const double b = d.meanOf(kBackward);
    if (f > 0 && std::abs(b - f) > 0.05 * f) {
      out->notes.push_back(
          "chimera's closed form (p-2)/(2m+p-2) is exact when forward and backward "
          "cost the same; here F " +
          formatMs(f) + ", B " + formatMs(b) + ": it is only a lower bound");
    }
  }
  if (kind == ScheduleKind::kZbH1) {  // its closed form depends on F, B and W: their means
    const double b = d.meanOf(kBackwardInput), w = d.meanOf(kBackwardWeight);
    out->bubble_theory = schedule::zbH1BubbleFraction(shape, f, b, w);
    if (out->microbatches < out->stages || w > 1.05 * std::min(f, b)) {
      out->notes.push_back("zb-h1's closed form holds for m >= p and W <= min(F, B); here m " +
                           std::to_string(out->microbatches) + ", p " +
                           std::to_string(out->stages) + ", F " + formatMs(f) + ", B " +
                           formatMs(b) + ", W " + formatMs(w) + ": it is only a lower bound");
    }
  }
}

// The measured split per unit, accumulated per pipeline rank, and the modeled replay of each.
void measure(const std::vector<Unit>& units, const MedianCosts& costs,
             const std::map<int, int>& prank, PipelineAnalysis* out) {
  const int p = out->stages;
  std::vector<PipelineStage> stages(static_cast<size_t>(p));
  std::vector<int> samples(static_cast<size_t>(p), 0);
  for (int k = 0; k < p; ++k) stages[static_cast<size_t>(k)].stage = k;
  for (const auto& [rank, pr] : prank) {
    if (pr >= 0 && pr < p) stages[static_cast<size_t>(pr)].ranks.push_back(rank);
  }
  std::map<int, std::vector<double>> bubblesOfStep, modeledOfStep;
  for (const Unit& u : units) {
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    std::map<int, RankStep> per;
    for (const Action& a : u.all) {
      lo = std::min(lo, a.start);
      hi = std::max(hi, a.end);
      RankStep& rs = per[a.rank];
      if (a.kind == kForward) rs.forward = satAdd(rs.forward, a.dur());
      if (isBackward(a.kind)) rs.backward = satAdd(rs.backward, a.dur());
      if (isSend(a.kind)) rs.send = satAdd(rs.send, a.dur());
      if (isRecv(a.kind)) rs.recv = satAdd(rs.recv, a.dur());
    }
    const int64_t window = satSub(hi, lo);
    if (window <= 0) continue;
    const auto& ranks = out->replicas[static_cast<size_t>(u.replica)];
    std::map<int, double> modeledOfRank;
    const double modeled = replayModel(u.all, ranks, costs, prank, &modeledOfRank);
    int64_t compute = 0;
    for (int r : ranks) {
      const RankStep& rs = per[r];
      compute = satAdd(compute, satAdd(rs.forward, rs.backward));
      const int pr = prank.at(r);
      if (pr < 0 || pr >= p) continue;
      PipelineStage& st = stages[static_cast<size_t>(pr)];
      st.window_ns += double(window);
      st.forward_ns += double(rs.forward);
      st.backward_ns += double(rs.backward);
      st.send_ns += double(rs.send);
      st.recv_wait_ns += double(rs.recv);
      st.modeled_bubble += modeledOfRank[r];
      ++samples[static_cast<size_t>(pr)];
    }
    PipelineStep ps;
    ps.step = u.step;
    ps.replica = u.replica;
    ps.start_ns = lo;
    ps.end_ns = hi;
    ps.bubble = 1.0 - double(compute) / (double(ranks.size()) * double(window));
    ps.modeled_bubble = modeled;
    bubblesOfStep[u.step].push_back(ps.bubble);
    modeledOfStep[u.step].push_back(ps.modeled_bubble);
    out->per_step.push_back(ps);
  }
  for (size_t k = 0; k < stages.size(); ++k) {
    PipelineStage& st = stages[k];
    const double n = samples[k];
    if (n > 0) {
      st.window_ns /= n;
      st.forward_ns /= n;
      st.backward_ns /= n;
      st.send_ns /= n;
      st.recv_wait_ns /= n;
      st.modeled_bubble /= n;
    }
    st.idle_ns =
        std::max(0.0, st.window_ns - st.forward_ns - st.backward_ns - st.send_ns - st.recv_wait_ns);
    st.bubble = st.window_ns > 0 ? 1.0 - (st.forward_ns + st.backward_ns) / st.window_ns : 0;
  }
  out->per_stage = std::move(stages);
  std::vector<double> measured, modeled;
  auto mean = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / double(v.size());
  };
  for (const auto& [step, b] : bubblesOfStep) measured.push_back(mean(b));
  for (const auto& [step, b] : modeledOfStep) modeled.push_back(mean(b));
  out->steps = static_cast<int>(measured.size());
  out->bubble_measured = median(measured);
  out->bubble_modeled = median(modeled);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// entry point

double zbH1Bubble(int p, int m, double f, double b, double w) {
  return schedule::zbH1BubbleFraction({p, 1, m}, f, b, w);
}

std::string closedFormName(const std::string& name) {
  return schedule::closedFormName(
      schedule::findScheduleKind(name).value_or(ScheduleKind::kOneFOneB));
}

double closedFormBubble(const std::string& name, int p, int m, int v) {
  const auto kind = schedule::findScheduleKind(name).value_or(ScheduleKind::kOneFOneB);
  return schedule::idealBubbleFraction(kind, {p, v, m});
}

// ---------------------------------------------------------------------------------------------
// the pass's consumer

struct PipelineSpans::State {
  explicit State(const TraceReader& reader)
      : codes(reader, codeOfName), keys(reader), attempts(reader) {}
  NameCodes codes;
  ArgKeys keys;
  AttemptRanks attempts;
  Picks picks;
  Collected c;
  bool finished = false;
  bool stage_is_pipeline_rank = false;
};

PipelineSpans::PipelineSpans(const TraceReader& reader) : s_(std::make_unique<State>(reader)) {}
PipelineSpans::~PipelineSpans() = default;

bool PipelineSpans::wantsTrack(const TrackRow& track) {
  // Nothing pipeline-shaped was ever recorded without a stage or peer argument name.
  if (s_->keys.stage == 0 && s_->keys.peer == 0) return false;
  return track.kind == core::TrackKind::kThread;
}

int PipelineSpans::onSpan(const SpanRow& s) {
  const int c = s_->codes(s.name);
  if (c == kStep || isCompute(c)) return s.category == core::Category::kPhase ? c : kNone;
  if (isRecv(c) || isSend(c)) return s.category == core::Category::kUser ? c : kNone;
  return kNone;
}

void PipelineSpans::endTrack(const TrackRow& track, std::vector<PickedSpan>& picked) {
  addTrackPicks(track, s_->keys, picked, s_->picks);
}

void PipelineSpans::finish() {
  if (s_->finished) return;
  s_->finished = true;
  s_->c = collectActions(s_->picks, s_->keys, s_->attempts);
  s_->picks = Picks{};
  s_->stage_is_pipeline_rank = stageIsPipelineRank(s_->c);
}

PipelineAnalysis PipelineSpans::analysis() {
  finish();
  const Collected& c = s_->c;
  PipelineAnalysis out;
  if (s_->stage_is_pipeline_rank) {
    out.notes.push_back("stage arguments are pipeline ranks (equal for every chunk of a rank)");
  }
  if (!inferShape(c, &out)) return out;
  out.schedule_kind = inferSchedule(c, out.virtual_stages, out.microbatches, &out.notes);
  out.schedule = schedule::scheduleName(out.schedule_kind);
  std::map<int, int> prank;
  out.replicas = replicasOf(c, out.stages, &prank);
  std::vector<std::pair<int, int>> incomplete;
  const std::vector<Unit> units = unitsOf(c, out.replicas, &out.unmatched_recvs, &incomplete);
  if (!incomplete.empty()) {
    std::string which;
    for (const auto& [step, replica] : incomplete) {
      if (!which.empty()) which += ", ";
      which += std::to_string(step);
      if (out.replicas.size() > 1) which += " (replica " + std::to_string(replica) + ")";
    }
    out.notes.push_back(
        "left out as incomplete (its ranks did unequal numbers of forward and "
        "backward phases: a run ended mid-step or a shard lost spans): step " +
        which);
  }
  if (out.unmatched_recvs > 0) {
    out.notes.push_back(std::to_string(out.unmatched_recvs) +
                        " receives without their send in the trace (modeled without a dependency)");
  }
  const Durations durations = durationsOf(units, prank);
  closedForm(out.schedule_kind, c, durations, &out);
  measure(units, mediansOf(durations), prank, &out);
  return out;
}

PipelineAnalysis analyzePipeline(const TraceReader& reader) {
  PipelineSpans pass(reader);
  runSpanPass(reader, reader.tracks(), {&pass});
  return pass.analysis();
}

// ---------------------------------------------------------------------------------------------
// one step's actions (pictures)

PipelineStepActions pipelineStepActions(const TraceReader& reader, int step, int replica) {
  PipelineSpans pass(reader);
  runSpanPass(reader, reader.tracks(), {&pass});
  return pass.stepActions(step, replica);
}

PipelineStepActions PipelineSpans::stepActions(int step, int replica) {
  finish();
  const Collected& c = s_->c;
  PipelineStepActions out;
  int maxStage = -1, maxChunk = 0;
  std::set<int> steps;
  for (const auto& [rank, actions] : c.by_rank) {
    for (const Action& a : actions) {
      steps.insert(a.step);
      if (!isCompute(a.kind)) continue;
      maxStage = std::max(maxStage, a.stage);
      maxChunk = std::max(maxChunk, a.chunk);
    }
  }
  if (maxStage < 1 || maxStage >= kMaxVirtualStages || maxChunk >= kMaxVirtualStages) return out;
  out.steps.assign(steps.begin(), steps.end());
  const int p = std::max(1, (maxStage + 1) / (maxChunk + 1));
  std::map<int, int> prank;
  const auto replicas = replicasOf(c, p, &prank);
  out.replicas = static_cast<int>(replicas.size());
  if (replica < 0 || replica >= out.replicas || !steps.count(step)) return out;
  out.ranks = replicas[static_cast<size_t>(replica)];
  std::vector<Action> all;
  for (int r : out.ranks) {
    for (const Action& a : c.by_rank.at(r)) {
      if (a.step == step) all.push_back(a);
    }
  }
  if (all.empty()) return out;
  int64_t unmatched = 0;
  matchMessages(all, &unmatched);
  out.found = true;
  for (const Action& a : all) {
    PipelineAction x;
    switch (a.kind) {
      case kForward:
        x.kind = PipelineActionKind::kForward;
        break;
      case kBackward:
        x.kind = PipelineActionKind::kBackward;
        break;
      case kBackwardInput:
        x.kind = PipelineActionKind::kBackwardInput;
        break;
      case kBackwardWeight:
        x.kind = PipelineActionKind::kBackwardWeight;
        break;
      case kSendForward:
        x.kind = PipelineActionKind::kSendForward;
        break;
      case kSendBackward:
        x.kind = PipelineActionKind::kSendBackward;
        break;
      case kRecvForward:
        x.kind = PipelineActionKind::kRecvForward;
        break;
      default:
        x.kind = PipelineActionKind::kRecvBackward;
        break;
    }
    x.rank = a.rank;
    x.stage = prank[a.rank];
    x.virtual_stage = isCompute(a.kind) ? a.stage : -1;
    x.chunk = a.chunk;
    x.microbatch = a.microbatch;
    x.peer = a.peer;
    x.start_ns = a.start;
    x.end_ns = a.end;
    x.match = a.match;
    x.span_id = a.span;
    out.actions.push_back(x);
  }
  return out;
}

}  // namespace tracerun::trace::analysis
