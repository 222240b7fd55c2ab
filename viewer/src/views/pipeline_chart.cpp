// The pipeline view's data (see pipeline_chart.h): the report's analysis, one step's measured
// bars, and the schedule's action lists replayed (tracerun/schedule/) with the measured mean costs.
#include "views/pipeline_chart.h"

#include <algorithm>
#include <map>
#include <optional>
#include <tuple>

#include "tracerun/schedule/action_lists.h"
#include "tracerun/schedule/replay.h"

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

std::vector<PipelineBar> plannedBars(const std::string& word, int p, int v, int m,
                                     const std::vector<PipelineBar>& measured, int64_t t0,
                                     std::string* note) {
  const std::optional<schedule::ScheduleKind> found = schedule::findScheduleKind(word);
  if (!found) {
    *note = "no plan: the schedule '" + word + "' is not one the trainer runs";
    return {};
  }
  schedule::ScheduleKind kind = *found;
  if (kind == schedule::ScheduleKind::kTwoBw) {  // one step span = 1F1B over the whole run
    kind = schedule::ScheduleKind::kOneFOneB;
    for (const PipelineBar& b : measured) m = std::max(m, b.microbatch + 1);
  }
  // Chimera's two chunks per rank are its two pipelines, not --vp chunks: its shape has one.
  const schedule::PipelineShape shape{p, kind == schedule::ScheduleKind::kChimera ? 1 : v, m};
  if (const std::string err = schedule::scheduleError(kind, shape); !err.empty()) {
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
  auto barOf = [](int lane, const schedule::Action& a) {
    PipelineBar b;
    b.lane = lane;
    b.backward = a.kind != schedule::ActionKind::kForward;
    b.weight = a.kind == schedule::ActionKind::kBackwardWeight;
    b.microbatch = a.microbatch;
    b.chunk = a.chunk;
    return b;
  };

  std::vector<std::vector<schedule::Action>> lists(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r)
    lists[static_cast<size_t>(r)] = schedule::buildSchedule(kind, shape, r);
  // Messages and updates take no time; replayed from 0 so that t0 + offsets stay integers.
  const schedule::ScheduleTimes times =
      schedule::replaySchedule(lists, [&](int r, const schedule::Action& a) -> double {
        if (!schedule::isCompute(a.kind)) return 0.0;
        return double(costOf(r, a.chunk, partOf(barOf(r, a))));
      });
  if (!times.complete) {
    *note = "no plan: the schedule's action lists deadlock (a bug in the schedule)";
    return {};
  }
  std::vector<PipelineBar> out;
  for (int r = 0; r < p; ++r) {
    const auto& list = lists[static_cast<size_t>(r)];
    for (size_t k = 0; k < list.size(); ++k) {
      if (!schedule::isCompute(list[k].kind)) continue;
      PipelineBar b = barOf(r, list[k]);
      b.t0 = t0 + static_cast<int64_t>(times.start[static_cast<size_t>(r)][k]);
      b.t1 = t0 + static_cast<int64_t>(times.end[static_cast<size_t>(r)][k]);
      out.push_back(b);
    }
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
  d.critical = ta::criticalPathOfActions(sa.actions);  // the report's analysis, on this step
  d.critical.step = d.step;
  d.critical.replica = d.replica;
  for (size_t i = 0; i < sa.ranks.size(); ++i) {
    d.lanes.push_back(PipelineLane{static_cast<int>(i), sa.ranks[i]});
  }
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (size_t i = 0; i < sa.actions.size(); ++i) {
    const ta::PipelineAction& a = sa.actions[i];
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
    b.critical = d.critical.on_path[i];
    d.bars.push_back(b);
  }
  d.t0 = lo;
  d.t1 = hi;
  d.plan = plannedBars(d.analysis.schedule, d.analysis.stages, d.analysis.virtual_stages,
                       d.analysis.microbatches, d.bars, lo, &d.plan_note);
  return d;
}

}  // namespace tracerun::viewer
