// The pipeline view's data (see pipeline_chart.h): the report's analysis, one step's measured
// bars, and the trainer's schedule replayed with the measured mean costs.
#include "pipeline_chart.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

#include "schedule.h"

namespace tracerun::viewer {

namespace ta = trace::analysis;

const ta::PipelineStep* PipelineChartData::stepNumbers() const {
  for (const auto& s : analysis.per_step) {
    if (s.step == step && s.replica == replica) return &s;
  }
  return nullptr;
}

int steadyStep(const ta::PipelineAnalysis& a) {
  std::map<int, std::pair<double, int>> sum;  // step -> (bubble sum, replicas)
  for (const auto& s : a.per_step) {
    auto& e = sum[s.step];
    e.first += s.bubble;
    ++e.second;
  }
  if (sum.empty()) return -1;
  std::vector<std::pair<double, int>> byBubble;  // (mean bubble, step)
  for (const auto& [step, e] : sum) byBubble.emplace_back(e.first / e.second, step);
  std::sort(byBubble.begin(), byBubble.end());
  return byBubble[(byBubble.size() - 1) / 2].second;
}

namespace {

// The four kinds of bar a plan costs separately.
int partOf(const PipelineBar& b) {
  return !b.backward ? 0 : b.weight ? 3 : 1;  // a split B costs as a backward of its own stage
}

}  // namespace

std::vector<PipelineBar> plannedBars(const std::string& schedule, int p, int v, int m,
                                     const std::vector<PipelineBar>& measured, int64_t t0,
                                     std::string* note) {
  gpttrain::ScheduleKind kind = gpttrain::ScheduleKind::kOneFOneB;
  try {
    kind = gpttrain::parseScheduleKind(schedule);
  } catch (const std::exception&) {
    *note = "no plan: the schedule '" + schedule + "' is not one the trainer runs";
    return {};
  }
  if (kind == gpttrain::ScheduleKind::kTwoBw) {  // one step span = 1F1B over the whole run
    kind = gpttrain::ScheduleKind::kOneFOneB;
    for (const PipelineBar& b : measured) m = std::max(m, b.microbatch + 1);
  }
  // Chimera's two chunks per rank are its two pipelines, not --vp chunks: its shape has one.
  const gpttrain::PipelineShape shape{p, kind == gpttrain::ScheduleKind::kChimera ? 1 : v, m};
  if (const std::string err = gpttrain::scheduleError(kind, shape); !err.empty()) {
    *note = "no plan: " + err;
    return {};
  }
  // Mean measured cost per (stage, chunk, part); a missing one falls back to the part's mean over
  // all stages.
  std::map<std::tuple<int, int, int>, std::pair<double, int>> cost;
  std::map<int, std::pair<double, int>> costOfPart;
  for (const PipelineBar& b : measured) {
    auto& c = cost[{b.lane, b.chunk, partOf(b)}];
    c.first += double(b.t1 - b.t0);
    ++c.second;
    auto& k = costOfPart[partOf(b)];
    k.first += double(b.t1 - b.t0);
    ++k.second;
  }
  auto costOf = [&](int lane, int chunk, int part) -> int64_t {
    auto it = cost.find({lane, chunk, part});
    if (it != cost.end()) return static_cast<int64_t>(it->second.first / it->second.second);
    auto k = costOfPart.find(part);
    return k == costOfPart.end() ? 0 : static_cast<int64_t>(k->second.first / k->second.second);
  };

  using gpttrain::ActionKind;
  std::vector<std::vector<gpttrain::Action>> lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    lists[static_cast<size_t>(r)] = gpttrain::buildSchedule(kind, shape, r);
  std::map<std::tuple<int, int, int>, int64_t> sent;  // (from, to, tag) -> the send's time
  std::vector<size_t> next(static_cast<size_t>(p), 0);
  std::vector<int64_t> clock(static_cast<size_t>(p), t0);
  std::vector<std::vector<PipelineBar>> lanes(static_cast<size_t>(p));
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      const auto& list = lists[static_cast<size_t>(r)];
      size_t& n = next[static_cast<size_t>(r)];
      int64_t& now = clock[static_cast<size_t>(r)];
      for (; n < list.size(); ++n, moved = true) {
        const gpttrain::Action& a = list[n];
        switch (a.kind) {
          case ActionKind::kRecvForward:
          case ActionKind::kRecvBackward: {
            const auto it = sent.find({a.peer, r, a.tag});
            if (it == sent.end()) goto blocked;  // its sender has not come that far
            now = std::max(now, it->second);
            continue;
          }
          case ActionKind::kSendForward:
          case ActionKind::kSendBackward:
            sent[{r, a.peer, a.tag}] = now;
            continue;
          case ActionKind::kApplyUpdate:
            continue;
          case ActionKind::kForward:
          case ActionKind::kBackward:
          case ActionKind::kBackwardInput:
          case ActionKind::kBackwardWeight:
            break;
        }
        PipelineBar b;
        b.lane = r;
        b.backward = a.kind != ActionKind::kForward;
        b.weight = a.kind == ActionKind::kBackwardWeight;
        b.microbatch = a.microbatch;
        b.chunk = a.chunk;
        b.t0 = now;
        b.t1 = now + costOf(r, a.chunk, partOf(b));
        now = b.t1;
        lanes[static_cast<size_t>(r)].push_back(b);
      }
    blocked:;
    }
  }
  std::vector<PipelineBar> out;
  for (int r = 0; r < p; ++r) {
    if (next[static_cast<size_t>(r)] < lists[static_cast<size_t>(r)].size()) {
      *note = "no plan: the schedule's action lists deadlock (a bug in the schedule)";
      return {};
    }
    out.insert(out.end(), lanes[static_cast<size_t>(r)].begin(),
               lanes[static_cast<size_t>(r)].end());
  }
  return out;
}

PipelineChartData loadPipelineChart(const trace::TraceReader& reader, int step, int replica,
                                    const PipelineChartData* known) {
  PipelineChartData d;
  d.analysis = known ? known->analysis : ta::analyzePipeline(reader);
  if (!d.analysis.present) return d;
  const auto first = ta::pipelineStepActions(reader, -1, 0);
  d.steps = first.steps;
  d.replicas = first.replicas;
  d.step = step >= 0 ? step : steadyStep(d.analysis);
  if (d.step < 0 && !d.steps.empty()) d.step = d.steps.front();
  d.replica = std::clamp(replica, 0, std::max(0, d.replicas - 1));
  const auto sa = ta::pipelineStepActions(reader, d.step, d.replica);
  if (!sa.found) return d;
  for (size_t i = 0; i < sa.ranks.size(); ++i) {
    d.lanes.push_back(PipelineLane{static_cast<int>(i), sa.ranks[i]});
  }
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& a : sa.actions) {
    lo = std::min(lo, a.start_ns);
    hi = std::max(hi, a.end_ns);
    if (a.kind != ta::PipelineActionKind::kForward && a.kind != ta::PipelineActionKind::kBackward &&
        a.kind != ta::PipelineActionKind::kBackwardInput &&
        a.kind != ta::PipelineActionKind::kBackwardWeight) {
      continue;
    }
    PipelineBar b;
    b.lane = a.stage;
    b.t0 = a.start_ns;
    b.t1 = a.end_ns;
    b.backward = a.kind != ta::PipelineActionKind::kForward;
    b.weight = a.kind == ta::PipelineActionKind::kBackwardWeight;
    b.microbatch = a.microbatch;
    b.chunk = a.chunk;
    b.span_id = a.span_id;
    d.bars.push_back(b);
  }
  d.t0 = lo;
  d.t1 = hi;
  d.plan = plannedBars(d.analysis.schedule, d.analysis.stages, d.analysis.virtual_stages,
                       d.analysis.microbatches, d.bars, lo, &d.plan_note);
  return d;
}

}  // namespace tracerun::viewer
