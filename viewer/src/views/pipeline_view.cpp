// The pipeline tab (see pipeline_view.h): one step of one replica as lanes per stage, forwards and
// backwards as bars coloured by microbatch over the stage's bubble; the plan as outlines; the
// report's bubble fractions in a table. Data arrives from pipeline_chart.h on a background query.
#include "views/pipeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <optional>

#include "app/palette.h"
#include "data/background_query.h"
#include "data/time_axis.h"
#include "tracerun/trace/format.h"
#include "views/pipeline_chart.h"

namespace tracerun::viewer {

namespace {

constexpr float kLabelW = 150;  // stage labels left of the chart
constexpr float kRulerH = 22;
constexpr float kLaneH = 44;  // one stage, including the gap below it
constexpr float kLaneGap = 6;

std::string share(double s) {
  return trace::formatShare(s);
}

constexpr float kHatchStep = 8;  // px between a backward bar's stripes (along x)

// Diagonal stripes ("/", 2 px) over the box (x0, y0)-(x1, y1), placed on a grid fixed to the
// screen so neighbouring bars continue one pattern; clipped by arithmetic, not a clip rectangle.
void hatch(ImDrawList* dl, float x0, float y0, float x1, float y1, uint32_t colour) {
  x0 += 1, y0 += 1, x1 -= 1, y1 -= 1;  // the line's antialiased ends stay inside the bar
  if (x1 <= x0 || y1 <= y0) return;
  for (float k = std::ceil((x0 + y0) / kHatchStep) * kHatchStep; k < x1 + y1; k += kHatchStep) {
    const float xa = std::max(x0, k - y1), xb = std::min(x1, k - y0);  // on the line x + y = k
    if (xb - xa < 0.5f) continue;
    dl->AddLine(ImVec2(xa, k - xa), ImVec2(xb, k - xb), colour, 2.0f);
  }
}

// zb-h1's W: horizontal stripes (2 px every kHatchStep / 2), told apart from B's diagonals.
void hatchWeight(ImDrawList* dl, float x0, float y0, float x1, float y1, uint32_t colour) {
  x0 += 1, x1 -= 1;
  if (x1 <= x0) return;
  for (float y = y0 + kHatchStep / 2; y + 1 < y1; y += kHatchStep / 2) {
    dl->AddLine(ImVec2(x0, y), ImVec2(x1, y), colour, 2.0f);
  }
}

char barLetter(const PipelineBar& b) {
  return !b.backward ? 'F' : b.weight ? 'W' : 'B';
}

class PipelineView final : public View {
 public:
  const char* word() const override { return "pipeline"; }
  const char* title() const override { return "Pipeline"; }
  void draw(ViewHost& host, float width, float height) override;
  bool settled() const override { return !waiting_; }
  std::string dumpText() const override;
  std::vector<std::pair<std::string, std::string>> options() const override {
    return {{"plan", "overlay the planned schedule (the tab's plan overlay box ticked)"}};
  }

 private:
  void start(ViewHost& host, int step, int replica);
  void drawHeader(ViewHost& host);
  void drawChart(ViewHost& host, float width);
  void drawTable();

  BackgroundQuery<PipelineChartData> query_;
  std::optional<PipelineChartData> data_;
  std::string error_;
  bool waiting_ = false;  // a query runs or its result has not been drawn yet
  bool overlay_ = false;
  bool optionsRead_ = false;  // --view-option plan applied at the first draw
  // The chart's geometry in the last frame (screen pixels; --dump-view).
  float areaX_ = 0, areaY_ = 0, areaW_ = 0;
  double viewT0_ = 0, viewT1_ = 1;
  std::vector<float> laneY_;
};

void PipelineView::start(ViewHost& host, int step, int replica) {
  const std::string path = host.tracePath();
  std::optional<PipelineChartData> known;
  if (data_) {
    known.emplace();
    known->analysis = data_->analysis;
  }
  waiting_ = true;
  query_.start(
      [path, step, replica, known = std::move(known)](const std::atomic<bool>&) {
        const auto reader = trace::TraceReader::open(path);
        return loadPipelineChart(reader, step, replica, known ? &*known : nullptr);
      },
      host.waker());
}

void PipelineView::draw(ViewHost& host, float width, float height) {
  (void)height;
  if (!optionsRead_) {
    optionsRead_ = true;
    overlay_ = host.viewOption("plan");
  }
  if (!query_.started() && !data_ && error_.empty()) start(host, -1, 0);
  if (query_.ready()) {
    if (PipelineChartData* r = query_.result()) {
      data_ = std::move(*r);
      error_.clear();
    } else {
      error_ = query_.error();
    }
    query_.stop();
  }
  if (!error_.empty()) {
    ImGui::TextColored(ImColor(palette::kError), "pipeline: %s", error_.c_str());
    waiting_ = false;
    return;
  }
  if (!data_) {
    ImGui::TextUnformatted("reading the pipeline...");
    return;
  }
  if (!data_->analysis.present) {
    ImGui::TextUnformatted(
        "no pipeline in this trace (no forward/backward phases with a stage argument on two or "
        "more stages; gpttrain records them with --pp 2 or more)");
    waiting_ = query_.started();  // until its result is drawn
    return;
  }
  drawHeader(host);
  drawChart(host, width);
  drawTable();
  waiting_ = query_.started();  // until its result is drawn
}

void PipelineView::drawHeader(ViewHost& host) {
  const PipelineChartData& d = *data_;
  const auto& a = d.analysis;
  ImGui::Text("%s schedule, p=%d stages, m=%d microbatches, v=%d, %d replica%s, %d step%s",
              a.schedule.c_str(), a.stages, a.microbatches, a.virtual_stages, d.replicas,
              d.replicas == 1 ? "" : "s", a.steps, a.steps == 1 ? "" : "s");
  // Step selector: the steps with pipeline actions; opens on the report's median step.
  int pick = d.step, replica = d.replica;
  ImGui::SetNextItemWidth(120);
  if (ImGui::BeginCombo("step", std::to_string(d.step).c_str())) {
    for (int s : d.steps) {
      const bool steady = s == steadyStep(a);
      const std::string label = std::to_string(s) + (steady ? " (median bubble)" : "");
      if (ImGui::Selectable(label.c_str(), s == d.step)) pick = s;
    }
    ImGui::EndCombo();
  }
  if (d.replicas > 1) {
    ImGui::SameLine();
    ImGui::SetNextItemWidth(100);
    if (ImGui::InputInt("replica", &replica)) replica = std::clamp(replica, 0, d.replicas - 1);
  }
  ImGui::SameLine();
  ImGui::Checkbox("plan overlay", &overlay_);
  if (ImGui::IsItemHovered()) {
    ImGui::SetTooltip(
        "outlines: the schedule's own action list (tracerun/schedule/) timed with this step's\n"
        "mean forward and backward cost per stage and chunk, starting with the step");
  }
  if (overlay_ && d.plan.empty()) {
    ImGui::SameLine();
    ImGui::TextColored(ImColor(palette::kTextDim), "%s", d.plan_note.c_str());
  }
  if (query_.running()) {
    ImGui::SameLine();
    ImGui::TextColored(ImColor(palette::kTextDim), "reading step...");
  }
  // Legend.
  ImDrawList* dl = ImGui::GetWindowDrawList();
  // stripes: 0 none, 1 a backward's diagonals, 2 a W's horizontals
  auto swatch = [&](uint32_t colour, const char* text, int stripes = 0) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    dl->AddRectFilled(p, ImVec2(p.x + 14, p.y + 14), colour);
    if (stripes == 1) hatch(dl, p.x, p.y, p.x + 14, p.y + 14, palette::pipelineHatch(colour));
    if (stripes == 2) {
      hatchWeight(dl, p.x, p.y, p.x + 14, p.y + 14, palette::pipelineHatch(colour));
    }
    ImGui::Dummy(ImVec2(16, 14));
    ImGui::SameLine();
    ImGui::TextUnformatted(text);
    ImGui::SameLine(0, 14);
  };
  swatch(palette::pipelineBar(0, false, 0, 1), "forward");
  swatch(palette::pipelineBar(0, true, 0, 1), "backward (hatched)", 1);
  if (a.schedule_kind == schedule::ScheduleKind::kZbH1)
    swatch(palette::pipelineBar(0, true, 0, 1), "W (weight gradient)", 2);
  if (a.virtual_stages > 1) {
    swatch(palette::pipelineBar(0, false, a.virtual_stages - 1, a.virtual_stages),
           a.schedule_kind == schedule::ScheduleKind::kChimera ? "up pipeline (chunk 1) lighter"
                                                               : "later chunks lighter");
  }
  swatch(palette::kPipelineBubble, "bubble (idle, messages)");
  ImGui::TextColored(ImColor(palette::kTextDim), "colour = microbatch; click a bar to select it");
  if (pick != d.step || replica != d.replica) start(host, pick, replica);
}

void PipelineView::drawChart(ViewHost& host, float width) {
  const PipelineChartData& d = *data_;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const int lanes = static_cast<int>(d.lanes.size());
  const float chartH = kRulerH + kLaneH * static_cast<float>(lanes);
  areaX_ = origin.x + kLabelW;
  areaY_ = origin.y + kRulerH;
  areaW_ = std::max(50.0f, width - kLabelW - 16);
  const double window = double(std::max<int64_t>(1, d.t1 - d.t0));
  viewT0_ = double(d.t0) - 0.01 * window;
  viewT1_ = double(d.t1) + 0.01 * window;
  const auto xOf = [&](double t) {
    return areaX_ + static_cast<float>((t - viewT0_) / (viewT1_ - viewT0_) * areaW_);
  };
  laneY_.assign(static_cast<size_t>(lanes), 0);
  for (int i = 0; i < lanes; ++i) laneY_[static_cast<size_t>(i)] = areaY_ + kLaneH * float(i);

  // Ruler: times from the step's first action.
  dl->AddRectFilled(ImVec2(areaX_, origin.y), ImVec2(areaX_ + areaW_, origin.y + kRulerH - 2),
                    palette::kRuler);
  const ImVec4 clip(areaX_, origin.y, areaX_ + areaW_, origin.y + chartH);
  for (const Tick& t : rulerTicks(static_cast<int64_t>(viewT0_), static_cast<int64_t>(viewT1_),
                                  areaW_, 100, d.t0)) {
    const float tx = xOf(double(t.t));
    dl->AddLine(ImVec2(tx, origin.y + (t.major ? 0 : kRulerH * 0.6f)),
                ImVec2(tx, origin.y + kRulerH - 2),
                t.major ? palette::kTickMajor : palette::kTickMinor);
    if (t.major) {
      dl->AddText(nullptr, 0, ImVec2(tx + 3, origin.y + 2), palette::kText, t.label.c_str(),
                  nullptr, 0, &clip);
    }
  }
  dl->AddText(ImVec2(origin.x + 4, origin.y + 4), palette::kTextDim,
              ("step " + std::to_string(d.step)).c_str());

  const float laneInner = kLaneH - kLaneGap;
  const float wx0 = xOf(double(d.t0)), wx1 = xOf(double(d.t1));
  for (int i = 0; i < lanes; ++i) {
    const float y = laneY_[static_cast<size_t>(i)];
    const auto& lane = d.lanes[static_cast<size_t>(i)];
    dl->AddRectFilled(ImVec2(origin.x, y), ImVec2(areaX_ + areaW_, y + laneInner),
                      palette::kTrackAlt);
    // The step's window on this stage: everything not covered by a bar is bubble.
    dl->AddRectFilled(ImVec2(wx0, y), ImVec2(wx1, y + laneInner), palette::kPipelineBubble);
    char b[96];
    std::snprintf(b, sizeof b, "stage %d (rank %d)", lane.stage, lane.rank);
    dl->AddText(ImVec2(origin.x + 6, y + 4), palette::kText, b);
    if (static_cast<size_t>(lane.stage) < d.analysis.per_stage.size()) {
      std::snprintf(b, sizeof b, "bubble %s",
                    share(d.analysis.per_stage[static_cast<size_t>(lane.stage)].bubble).c_str());
      dl->AddText(ImVec2(origin.x + 6, y + 20), palette::kTextDim, b);
    }
  }

  const auto selected = host.selectedSpan();
  const PipelineBar* hovered = nullptr;
  const ImVec2 mouse = ImGui::GetMousePos();
  const bool inChart = ImGui::IsWindowHovered() && mouse.x >= areaX_ && mouse.x < areaX_ + areaW_ &&
                       mouse.y >= areaY_ && mouse.y < areaY_ + kLaneH * float(lanes);
  for (const PipelineBar& bar : d.bars) {
    if (bar.lane < 0 || bar.lane >= lanes) continue;
    const float y = laneY_[static_cast<size_t>(bar.lane)];
    const float x0 = xOf(double(bar.t0)), x1 = std::max(x0 + 1, xOf(double(bar.t1)));
    const uint32_t fill =
        palette::pipelineBar(bar.microbatch, bar.backward, bar.chunk, d.analysis.virtual_stages);
    dl->AddRectFilled(ImVec2(x0, y), ImVec2(x1, y + laneInner), fill);
    if (bar.weight) {
      hatchWeight(dl, x0, y, x1, y + laneInner, palette::pipelineHatch(fill));
    } else if (bar.backward) {
      hatch(dl, x0, y, x1, y + laneInner, palette::pipelineHatch(fill));
    }
    // Label, centred, when it fits (the top and bottom rows of the bar keep their colour).
    char b[32];
    if (d.analysis.virtual_stages > 1) {
      std::snprintf(b, sizeof b, "%c%d.%d", barLetter(bar), bar.microbatch, bar.chunk);
    } else {
      std::snprintf(b, sizeof b, "%c%d", barLetter(bar), bar.microbatch);
    }
    const ImVec2 ts = ImGui::CalcTextSize(b);
    if (ts.x + 4 < x1 - x0) {
      dl->AddText(ImVec2((x0 + x1 - ts.x) / 2, y + (laneInner - ts.y) / 2),
                  bar.backward ? palette::kText : palette::kTextDark, b);
    }
    if (bar.critical) {  // in the gap below the bar, so the bar's own pixels stay its colours
      dl->AddRectFilled(ImVec2(x0, y + laneInner + 1), ImVec2(x1, y + laneInner + 4),
                        palette::kPipelineCritical);
    }
    if (selected && *selected == bar.span_id) {
      dl->AddRect(ImVec2(x0, y), ImVec2(x1, y + laneInner), palette::kPipelineSelection, 0, 0, 2);
    }
    if (inChart && mouse.y >= y && mouse.y < y + laneInner && mouse.x >= x0 && mouse.x < x1) {
      hovered = &bar;
    }
  }
  if (overlay_) {
    for (const PipelineBar& bar : d.plan) {
      if (bar.lane < 0 || bar.lane >= lanes) continue;
      // Whole pixels: an outline centred between two pixels would blend to grey over dark bars.
      const float y = std::floor(laneY_[static_cast<size_t>(bar.lane)]);
      const float x0 = std::floor(xOf(double(bar.t0)));
      const float x1 = std::max(x0 + 2, std::floor(xOf(double(bar.t1))));
      dl->AddRect(ImVec2(x0 + 1, y + 3), ImVec2(x1 - 1, std::floor(y + laneInner) - 3),
                  palette::kPipelinePlan, 0, 0, 1.5f);
    }
  }
  // The chart takes its space; clicks on it select the bar under the mouse.
  ImGui::InvisibleButton("chart", ImVec2(width - 8, chartH));
  if (hovered) {
    ImGui::BeginTooltip();
    ImGui::Text("%s of microbatch %d, chunk %d, stage %d (rank %d)",
                !hovered->backward ? "forward"
                : hovered->weight  ? "weight gradient (W)"
                                   : "backward",
                hovered->microbatch, hovered->chunk, hovered->lane,
                d.lanes[static_cast<size_t>(hovered->lane)].rank);
    ImGui::Text("%s, at %s in the step", durationText(hovered->t1 - hovered->t0).c_str(),
                durationText(hovered->t0 - d.t0).c_str());
    ImGui::TextColored(ImColor(palette::kTextDim), "click: select it in the timeline");
    ImGui::EndTooltip();
    if (ImGui::IsItemClicked(ImGuiMouseButton_Left) && hovered->span_id > 0) {
      host.log("pipeline click span " + std::to_string(hovered->span_id));
      host.selectSpan(hovered->span_id, true);
    }
  }
}

void PipelineView::drawTable() {
  const PipelineChartData& d = *data_;
  const auto& a = d.analysis;
  ImGui::Spacing();
  ImGui::Text("bubble: measured %s, closed form %s, modeled %s (report: median over steps)",
              share(a.bubble_measured).c_str(), share(a.bubble_theory).c_str(),
              share(a.bubble_modeled).c_str());
  if (const auto* s = d.stepNumbers()) {
    ImGui::Text("step %d: measured %s, modeled %s", s->step, share(s->bubble).c_str(),
                share(s->modeled_bubble).c_str());
  }
  if (const trace::analysis::PipelineCriticalPath& cp = d.critical; cp.found) {
    ImGui::TextColored(ImColor(palette::kPipelineCritical),
                       "critical path (red strips): %s of the step's %s (%s), %zu actions",
                       trace::formatDuration(double(cp.length_ns)).c_str(),
                       trace::formatDuration(double(cp.step_ns)).c_str(),
                       share(cp.shareOfStep()).c_str(), cp.chain.size());
    ImGui::TextWrapped("%s", trace::analysis::criticalPathChainText(cp, 16).c_str());
  }
  const ImGuiTableFlags flags =
      ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
  if (ImGui::BeginTable("stages", 11, flags)) {
    for (const char* h : {"stage", "ranks", "window", "forward", "backward", "send", "recv wait",
                          "idle", "bubble measured", "closed form", "modeled"}) {
      ImGui::TableSetupColumn(h);
    }
    ImGui::TableHeadersRow();
    for (const auto& s : a.per_stage) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%d", s.stage);
      ImGui::TableNextColumn();
      std::string ranks;
      for (int r : s.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r);
      ImGui::TextUnformatted(ranks.c_str());
      for (double v :
           {s.window_ns, s.forward_ns, s.backward_ns, s.send_ns, s.recv_wait_ns, s.idle_ns}) {
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(trace::formatDuration(v).c_str());
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(share(s.bubble).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(share(a.bubble_theory).c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(share(s.modeled_bubble).c_str());
    }
    ImGui::EndTable();
  }
  ImGui::TextColored(
      ImColor(palette::kTextDim),
      "per stage: averaged over steps and replicas, as tracerun report; modeled: the "
      "stage in the replay of each step at the median costs");
  for (const auto& n : a.notes)
    ImGui::TextColored(ImColor(palette::kTextDim), "note: %s", n.c_str());
}

std::string PipelineView::dumpText() const {
  if (!data_) return error_.empty() ? "" : "error " + error_ + "\n";
  const PipelineChartData& d = *data_;
  const auto& a = d.analysis;
  std::string out;
  char b[256];
  if (!a.present) return "pipeline none\n";
  std::snprintf(
      b, sizeof b, "pipeline %s stages %d microbatches %d virtual %d replicas %d steps %d\n",
      a.schedule.c_str(), a.stages, a.microbatches, a.virtual_stages, d.replicas, a.steps);
  out += b;
  std::snprintf(b, sizeof b, "bubble measured %.17g theory %.17g modeled %.17g\n",
                a.bubble_measured, a.bubble_theory, a.bubble_modeled);
  out += b;
  for (const auto& s : a.per_stage) {
    std::snprintf(b, sizeof b, "stage %d bubble %.17g theory %.17g modeled %.17g\n", s.stage,
                  s.bubble, a.bubble_theory, s.modeled_bubble);
    out += b;
  }
  if (const auto* s = d.stepNumbers()) {
    std::snprintf(b, sizeof b, "step %d replica %d bubble %.17g modeled %.17g\n", s->step,
                  s->replica, s->bubble, s->modeled_bubble);
    out += b;
  }
  if (d.critical.found) {
    std::snprintf(b, sizeof b, "critical length %" PRId64 " step %" PRId64 " actions %zu\n",
                  d.critical.length_ns, d.critical.step_ns, d.critical.chain.size());
    out += b;
    out += "critical chain " + trace::analysis::criticalPathChainText(d.critical) + "\n";
  }
  std::snprintf(b, sizeof b, "window %" PRId64 " %" PRId64 "\n", d.t0, d.t1);
  out += b;
  std::snprintf(b, sizeof b, "area %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", areaX_, areaY_, areaW_,
                kLaneH - kLaneGap, kLaneH, viewT0_, viewT1_);
  out += b;
  for (size_t i = 0; i < d.lanes.size() && i < laneY_.size(); ++i) {
    std::snprintf(b, sizeof b, "lane %d rank %d y %.3f\n", d.lanes[i].stage, d.lanes[i].rank,
                  laneY_[i]);
    out += b;
  }
  std::snprintf(b, sizeof b, "bars %zu plan %zu\n", d.bars.size(), d.plan.size());
  out += b;
  for (const auto& p : d.plan) {
    std::snprintf(b, sizeof b, "plan %d %c %d %d %" PRId64 " %" PRId64 "\n", p.lane, barLetter(p),
                  p.microbatch, p.chunk, p.t0, p.t1);
    out += b;
  }
  return out;
}

}  // namespace

std::unique_ptr<View> makePipelineView() {
  return std::make_unique<PipelineView>();
}

}  // namespace tracerun::viewer
