// The memory view (see memory_view.h): one chart per rank, stacked vertically, on the timeline's
// time axis. Per chart: per pixel column the min/max of each category's cumulative live bytes
// (MemorySeries::reduce, recomputed only when the range or the width changes), the peak, the
// closed-form line; a click lists what was live then. Not an analysis: numbers come from trace/.
//
// Sections: data · geometry and input · drawing · dump
#include "views/memory_view.h"

#include <imgui.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app/palette.h"
#include "data/background_query.h"
#include "data/time_axis.h"
#include "tracerun/trace/analysis/activation_form.h"
#include "tracerun/trace/analysis/memory.h"
#include "tracerun/trace/analysis/memory_live.h"
#include "tracerun/trace/analysis/memory_summary.h"
#include "tracerun/trace/format.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {

namespace {

namespace an = trace::analysis;

// ---------------------------------------------------------------------------------------------
// data

struct RankChart {
  int rank = 0;
  std::string device;
  an::MemorySeries series;  // the rank's primary device (the report's)
  std::vector<an::MemoryClosedForm> forms;
  bool activation_forms = false;  // forms include activationClosedForms' lines
  std::shared_ptr<const std::vector<core::MemoryCategory>> categories;
};

struct MemoryData {
  std::vector<RankChart> ranks;
  int64_t events = 0;
  double ymax = 1;      // bytes at the top of every chart (shared scale)
  bool stored = false;  // every rank read from the stored summary (false: some replayed)
  bool forms = false;   // some chart has a closed-form line (the legend names them only then)
  bool activation_forms = false;  // ... and some an activation line
};

struct LiveRow {
  int64_t bytes = 0, ts = 0;
  int stack = 0;
  std::string op, scope, module;
};

struct LiveList {
  int rank = 0;
  int64_t t = 0;
  int64_t total = 0;
  std::vector<LiveRow> rows;  // on the chart's device, largest first
};

constexpr size_t kLiveRows = 500;  // rows listed (count and total cover all)

// One rank's charts, read through its own reader (so ranks load on parallel threads): from the
// stored per-category summary when the trace has one (O(blocks) rows), else replayed from the
// events (memory_summary.h). The report's primary device first, with the closed forms, then each
// other device of the rank (an offload device: "nvme", "cpu-offload", with the line of the states
// it holds), each on a chart of its own.
std::vector<RankChart> loadRank(const std::string& path, int rank, const std::atomic<bool>& cancel,
                                bool& stored) {
  const auto reader = trace::TraceReader::open(path);
  an::MemoryCategorySummary summary = an::memorySummary(reader, rank, &cancel);
  stored = summary.stored;
  std::vector<RankChart> charts;
  const an::MemorySeries* primary = summary.primary(rank);
  if (primary == nullptr || cancel.load()) return charts;  // no memory events: no chart
  const auto categories = std::make_shared<const std::vector<core::MemoryCategory>>(
      std::move(summary.categories[rank]));
  const auto chart = [&](an::MemorySeries& series) {
    RankChart c;
    c.rank = rank;
    c.device = trace::deviceName(series.device_type, series.device_index);
    c.series = std::move(series);
    c.categories = categories;
    return c;
  };
  // Before the series move into charts: an offload device's series takes the states off the line.
  std::vector<an::MemoryClosedForm> forms = an::memoryClosedForms(reader, rank, summary.series);
  charts.push_back(chart(summary.series[static_cast<size_t>(primary - summary.series.data())]));
  charts.back().forms = std::move(forms);
  for (an::MemoryClosedForm& f : an::activationClosedForms(reader, rank, charts.back().forms)) {
    charts.back().forms.push_back(std::move(f));  // the activation lines (activation_form.h)
    charts.back().activation_forms = true;
  }
  for (an::MemorySeries& series : summary.series) {
    if (&series != primary && series.rank == rank && series.size() > 0) {
      std::vector<an::MemoryClosedForm> offloaded = an::offloadClosedForms(reader, series);
      charts.push_back(chart(series));
      charts.back().forms = std::move(offloaded);  // an offload device's 12 psi/N
    }
  }
  return charts;
}

MemoryData loadMemory(const std::string& path, const std::atomic<bool>& cancel) {
  std::vector<int> ranks;
  for (const trace::RankInfo& r : trace::TraceReader::open(path).ranks()) ranks.push_back(r.rank);
  std::vector<std::vector<RankChart>> charts(ranks.size());
  std::vector<std::string> errors(ranks.size());
  std::vector<char> stored(ranks.size(), 0);
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < ranks.size() && !cancel.load(); i = next++) {
      try {
        bool fromTables = false;
        charts[i] = loadRank(path, ranks[i], cancel, fromTables);
        stored[i] = fromTables;
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const size_t n =
      std::min<size_t>(ranks.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t i = 1; i < n; ++i) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw std::runtime_error(e);
  }
  MemoryData d;
  d.stored = std::all_of(stored.begin(), stored.end(), [](char x) { return x != 0; });
  std::vector<RankChart> all;  // rank by rank, each rank's devices in turn
  for (auto& rankCharts : charts) {
    for (RankChart& c : rankCharts) all.push_back(std::move(c));
  }
  for (RankChart& c : all) {
    if (c.categories == nullptr) continue;
    d.events += static_cast<int64_t>(c.series.size());
    d.ymax = std::max(d.ymax, static_cast<double>(c.series.peak_bytes));
    for (const auto& f : c.forms) d.ymax = std::max(d.ymax, f.bytes);
    d.forms = d.forms || !c.forms.empty();
    d.activation_forms = d.activation_forms || c.activation_forms;
    d.ranks.push_back(std::move(c));
  }
  d.ymax *= 1.08;  // room above the peak for its marker
  return d;
}

LiveList loadLive(const std::string& path, const RankChart& chart, int64_t t) {
  const auto reader = trace::TraceReader::open(path);
  const auto blocks = an::liveAt(reader, chart.rank, t, *chart.categories, kLiveRows);
  LiveList l;
  l.rank = chart.rank;
  l.t = t;
  for (const an::LiveBlock& b : blocks) {
    if (b.device_type != chart.series.device_type || b.device_index != chart.series.device_index) {
      continue;
    }
    l.total += b.bytes;
    if (l.rows.size() >= kLiveRows) continue;
    l.rows.push_back(LiveRow{b.bytes, b.ts_ns, an::stackIndex(b.category), reader.str(b.op),
                             reader.str(b.scope), b.module});
  }
  return l;
}

const char* const kStackNames[an::kStackCount] = {
    "parameter", "gradient", "optimizer state", "activation", "temporary", "input", "other"};

// ---------------------------------------------------------------------------------------------
// geometry and input

struct ChartGeometry {
  float x = 0, y = 0, w = 0, h = 0;  // the plot area, screen pixels
};

class MemoryView final : public View {
 public:
  const char* word() const override { return "memory"; }
  const char* title() const override { return "Memory"; }
  bool settled() const override {
    if (!data_.started()) return true;
    // The result drawn, not only arrived: a dump between its arrival and the next frame had no
    // chart geometry (viewer_memory_tests read the peak marker at x 0 once under ctest -j2).
    if (!data_.ready() || !shown_) return false;
    return !live_.started() || live_.ready();
  }
  void draw(ViewHost& host, float width, float height) override;
  std::string dumpText() const override;

 private:
  void drawChart(ViewHost& host, ImDrawList* dl, const RankChart& c, size_t index, float x, float y,
                 float w, float h);
  void handleInput(ViewHost& host, const RankChart& c, const ChartGeometry& g);
  void drawLiveList(float width, float height);
  float xOf(double t, const ChartGeometry& g) const {
    return g.x + static_cast<float>((t - t0_) / (t1_ - t0_) * g.w);
  }

  BackgroundQuery<MemoryData> data_;
  BackgroundQuery<LiveList> live_;
  std::string path_;
  bool shown_ = false;      // a frame has drawn the loaded result (settled waits for it)
  double t0_ = 0, t1_ = 1;  // the range drawn this frame
  double ymax_ = 1;
  int64_t origin_ = 0;  // the trace's first time (labels are relative to it, as the ruler's)
  // Per rank: the columns of the last reduction and what they were reduced for.
  std::vector<std::vector<an::MemorySeries::Column>> columns_;
  std::vector<ChartGeometry> geometry_;
  double reducedT0_ = 0, reducedT1_ = 0;
  float reducedW_ = -1;
  // Drag: the range and mouse x when the button went down.
  bool pressed_ = false, dragging_ = false;
  float pressX_ = 0;
  double pressT0_ = 0, pressT1_ = 0;
  int pressChart_ = -1;
  // The chosen time (a click) and its rank.
  int chosenChart_ = -1;
  int64_t chosenT_ = 0;
};

void MemoryView::handleInput(ViewHost& host, const RankChart& c, const ChartGeometry& g) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 m = io.MousePos;
  const bool over =
      ImGui::IsWindowHovered() && m.x >= g.x && m.x < g.x + g.w && m.y >= g.y && m.y < g.y + g.h;
  const size_t index = static_cast<size_t>(&c - &data_.result()->ranks[0]);
  const double span = t1_ - t0_;
  const double tMouse = t0_ + (m.x - g.x) / g.w * span;
  if (over && io.MouseWheel != 0) {
    const double f = std::pow(0.8, io.MouseWheel);
    host.showTimeRange(tMouse - (tMouse - t0_) * f, tMouse + (t1_ - tMouse) * f);
  }
  if (over && ImGui::IsMouseClicked(0)) {
    pressed_ = true;
    dragging_ = false;
    pressX_ = m.x;
    pressT0_ = t0_;
    pressT1_ = t1_;
    pressChart_ = static_cast<int>(index);
  }
  if (pressed_ && pressChart_ == static_cast<int>(index) && ImGui::IsMouseDown(0) &&
      std::fabs(m.x - pressX_) >= 3) {
    dragging_ = true;
    const double dt = (m.x - pressX_) / g.w * (pressT1_ - pressT0_);
    host.showTimeRange(pressT0_ - dt, pressT1_ - dt);
  }
  if (pressed_ && pressChart_ == static_cast<int>(index) && ImGui::IsMouseReleased(0)) {
    if (!dragging_ && over) {
      chosenChart_ = static_cast<int>(index);
      chosenT_ = static_cast<int64_t>(std::llround(tMouse));
      const std::string path = path_;
      const RankChart* chart = &c;  // data_ outlives live_'s thread (stopped first, see below)
      const int64_t t = chosenT_;
      live_.start([path, chart, t](const std::atomic<bool>&) { return loadLive(path, *chart, t); },
                  host.waker());
      char b[96];
      std::snprintf(b, sizeof b, "memory live rank %d at %lld", c.rank,
                    static_cast<long long>(chosenT_));
      host.log(b);
    }
    pressed_ = dragging_ = false;
  }
  if (over && !ImGui::IsMouseDown(0)) {
    const auto& cols = columns_[index];
    const int col = static_cast<int>(m.x - g.x);
    if (col >= 0 && static_cast<size_t>(col) < cols.size()) {
      const auto& k = cols[static_cast<size_t>(col)];
      ImGui::BeginTooltip();
      ImGui::Text("rank %d at %s", c.rank,
                  durationText(static_cast<int64_t>(tMouse) - host.trace().range.first).c_str());
      for (int s = an::kStackCount - 1; s >= 0; --s) {
        const int64_t hi = k.hi[s] - (s > 0 ? k.hi[s - 1] : 0);
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kMemoryCategory[s]), "%-16s %s",
                           kStackNames[s], trace::formatBytes(double(hi)).c_str());
      }
      ImGui::Text("total %s .. %s in this column", trace::formatBytes(double(k.lo[5])).c_str(),
                  trace::formatBytes(double(k.hi[5])).c_str());
      ImGui::TextDisabled("click: what was live then; wheel: zoom; drag: pan");
      ImGui::EndTooltip();
    }
  }
}

// ---------------------------------------------------------------------------------------------
// drawing

void MemoryView::draw(ViewHost& host, float width, float height) {
  if (!data_.started()) {
    path_ = host.tracePath();
    const std::string path = path_;
    data_.start([path](const std::atomic<bool>& cancel) { return loadMemory(path, cancel); },
                host.waker());
  }
  if (!data_.ready()) {
    ImGui::TextDisabled("Reading the memory events ...");
    return;
  }
  shown_ = true;  // this frame draws the result (charts, an error or "no memory events")
  if (data_.result() == nullptr) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kError), "memory: %s",
                       data_.error().c_str());
    return;
  }
  const MemoryData& d = *data_.result();
  if (d.ranks.empty()) {
    ImGui::TextDisabled("No memory events in this trace (tracerun records them by default).");
    return;
  }
  const auto [t0, t1] = host.timelineRange();
  t0_ = t0;
  t1_ = t1 > t0 ? t1 : t0 + 1;
  ymax_ = d.ymax;
  origin_ = host.trace().range.first;

  // Legend.
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (int s = 0; s < an::kStackCount; ++s) {
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float sz = ImGui::GetTextLineHeight();
    dl->AddRectFilled(p, ImVec2(p.x + sz, p.y + sz), palette::kMemoryCategory[s]);
    ImGui::Dummy(ImVec2(sz, sz));
    ImGui::SameLine();
    ImGui::TextUnformatted(kStackNames[s]);
    ImGui::SameLine(0, 14);
  }
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kMemoryPeak), "| peak");
  ImGui::SameLine(0, 14);
  if (d.forms) {
    ImGui::TextColored(
        ImGui::ColorConvertU32ToFloat4(palette::kMemoryClosedForm), "%s",
        d.activation_forms
            ? "- - closed forms (parameter + gradient + optimizer state; + activations)"
            : "- - closed form (parameter + gradient + optimizer state)");
    ImGui::SameLine(0, 14);
  }
  ImGui::TextDisabled("%s memory events", trace::formatCount(d.events).c_str());

  const bool listing = live_.started();
  const float top = ImGui::GetCursorPosY();
  const float listH = listing ? std::max(120.0f, (height - top) * 0.35f) : 0;
  const float chartsH = height - top - listH;
  const float labelW = 150, rulerH = 20;
  const float n = static_cast<float>(d.ranks.size());
  const float chartH = std::max(90.0f, (chartsH - rulerH - 4) / n - 6);
  const float plotW = std::max(50.0f, width - labelW - 12);

  ImGui::BeginChild("memory charts", ImVec2(width, chartsH), false);
  dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float px = origin.x + labelW;

  // Ruler, in the timeline's units (relative to the trace's first event).
  dl->AddRectFilled(ImVec2(px, origin.y), ImVec2(px + plotW, origin.y + rulerH), palette::kRuler);
  const int64_t it0 = static_cast<int64_t>(std::floor(t0_));
  const int64_t it1 = static_cast<int64_t>(std::ceil(t1_));
  const ImVec4 clip(px, origin.y, px + plotW, origin.y + rulerH);
  const ChartGeometry rulerG{px, origin.y, plotW, rulerH};
  for (const Tick& t : rulerTicks(it0, it1, plotW, 110, host.trace().range.first)) {
    const float tx = xOf(static_cast<double>(t.t), rulerG);
    dl->AddLine(ImVec2(tx, origin.y + (t.major ? 0 : rulerH * 0.6f)), ImVec2(tx, origin.y + rulerH),
                t.major ? palette::kTickMajor : palette::kTickMinor);
    if (t.major) {
      dl->AddText(nullptr, 0, ImVec2(tx + 3, origin.y + 2), palette::kText, t.label.c_str(),
                  nullptr, 0, &clip);
    }
  }

  // Reduce again only when the range or the width changed.
  columns_.resize(d.ranks.size());
  geometry_.resize(d.ranks.size());
  if (t0_ != reducedT0_ || t1_ != reducedT1_ || plotW != reducedW_) {
    for (size_t i = 0; i < d.ranks.size(); ++i) {
      d.ranks[i].series.reduce(t0_, t1_, static_cast<size_t>(plotW), columns_[i]);
    }
    reducedT0_ = t0_;
    reducedT1_ = t1_;
    reducedW_ = plotW;
  }
  float y = origin.y + rulerH + 4;
  for (size_t i = 0; i < d.ranks.size(); ++i) {
    drawChart(host, dl, d.ranks[i], i, origin.x, y, labelW + plotW, chartH);
    y += chartH + 6;
  }
  ImGui::Dummy(ImVec2(width, y - origin.y));
  ImGui::EndChild();
  if (listing) drawLiveList(width, listH);
}

void MemoryView::drawChart(ViewHost& host, ImDrawList* dl, const RankChart& c, size_t index,
                           float x, float y, float w, float h) {
  const float labelW = 150;
  const ChartGeometry g{x + labelW, y, w - labelW, h};
  geometry_[index] = g;
  dl->AddRectFilled(ImVec2(x, y), ImVec2(x + labelW - 4, y + h), palette::kRankHeader);
  char b[160];
  std::snprintf(b, sizeof b, "rank %d  %s\npeak %s\nat %s", c.rank, c.device.c_str(),
                trace::formatBytes(double(c.series.peak_bytes)).c_str(),
                durationText(c.series.peak_ts_ns - host.trace().range.first).c_str());
  dl->AddText(ImVec2(x + 6, y + 4), palette::kText, b);
  dl->AddRectFilled(ImVec2(g.x, g.y), ImVec2(g.x + g.w, g.y + g.h), palette::kMemoryPlot);
  const auto yOf = [&](double bytes) {
    return g.y + g.h - static_cast<float>(bytes / ymax_ * static_cast<double>(g.h));
  };
  // Stacked areas from each column's maxima, the minimum of the total as a dark mark.
  const auto& cols = columns_[index];
  for (size_t col = 0; col < cols.size(); ++col) {
    const auto& k = cols[col];
    const float cx = g.x + static_cast<float>(col);
    float below = g.y + g.h;
    for (int s = 0; s < an::kStackCount; ++s) {
      const float top = yOf(double(k.hi[static_cast<size_t>(s)]));
      if (below - top >= 0.5f) {
        dl->AddRectFilled(ImVec2(cx, top), ImVec2(cx + 1, below), palette::kMemoryCategory[s]);
      }
      below = std::min(below, top);
    }
    const float lo = yOf(double(k.lo[5]));
    if (lo - below >= 2)
      dl->AddRectFilled(ImVec2(cx, lo), ImVec2(cx + 1, lo + 1), palette::kMemoryLow);
  }
  // Closed forms.
  for (const auto& f : c.forms) {
    const float fy = std::round(yOf(f.bytes));
    for (float fx = g.x; fx < g.x + g.w; fx += 10) {
      dl->AddLine(ImVec2(fx, fy), ImVec2(std::min(fx + 6, g.x + g.w), fy),
                  palette::kMemoryClosedForm, 1.5f);
    }
    dl->AddText(ImVec2(g.x + 6, fy - ImGui::GetTextLineHeight() - 1), palette::kMemoryClosedForm,
                f.label.c_str());
  }
  // The peak: a 2-px line over the chart's height at its time, and its bytes beside it.
  const double pt = static_cast<double>(c.series.peak_ts_ns);
  if (c.series.peak_bytes > 0 && pt >= t0_ && pt <= t1_) {
    const float pxl = std::floor(xOf(pt, g));
    dl->AddRectFilled(ImVec2(pxl, g.y), ImVec2(pxl + 2, g.y + g.h), palette::kMemoryPeak);
    std::snprintf(b, sizeof b, "peak %s", trace::formatBytes(double(c.series.peak_bytes)).c_str());
    const float tw = ImGui::CalcTextSize(b).x;
    const float tx = pxl + 6 + tw < g.x + g.w ? pxl + 6 : pxl - 6 - tw;
    dl->AddText(ImVec2(tx, g.y + 2), palette::kMemoryPeak, b);
  }
  // The chosen time.
  if (chosenChart_ == static_cast<int>(index)) {
    const double ct = static_cast<double>(chosenT_);
    if (ct >= t0_ && ct <= t1_) {
      const float cx = std::floor(xOf(ct, g));
      dl->AddRectFilled(ImVec2(cx, g.y), ImVec2(cx + 1, g.y + g.h), palette::kMemoryCursor);
    }
  }
  handleInput(host, c, g);
}

void MemoryView::drawLiveList(float width, float height) {
  ImGui::BeginChild("memory live", ImVec2(width, height), true);
  if (!live_.ready()) {
    ImGui::TextDisabled("Replaying the memory events up to the chosen time ...");
  } else if (live_.result() == nullptr) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kError), "live set: %s",
                       live_.error().c_str());
  } else {
    const LiveList& l = *live_.result();
    ImGui::Text("Live on rank %d at %s: %s in %zu%s block%s, largest first", l.rank,
                durationText(l.t - origin_).c_str(), trace::formatBytes(double(l.total)).c_str(),
                l.rows.size(), l.rows.size() >= kLiveRows ? "+" : "",
                l.rows.size() == 1 ? "" : "s");
    const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                  ImGuiTableFlags_Resizable | ImGuiTableFlags_BordersInnerV;
    if (ImGui::BeginTable("live", 6, flags)) {
      ImGui::TableSetupScrollFreeze(0, 1);
      for (const char* h : {"bytes", "category", "op", "scope", "module", "age"}) {
        ImGui::TableSetupColumn(h);
      }
      ImGui::TableHeadersRow();
      ImGuiListClipper clip;
      clip.Begin(static_cast<int>(l.rows.size()));
      while (clip.Step()) {
        for (int i = clip.DisplayStart; i < clip.DisplayEnd; ++i) {
          const LiveRow& r = l.rows[static_cast<size_t>(i)];
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(trace::formatBytes(double(r.bytes)).c_str());
          ImGui::TableNextColumn();
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kMemoryCategory[r.stack]),
                             "%s", kStackNames[r.stack]);
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(r.op.c_str());
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(r.scope.c_str());
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(r.module.c_str());
          ImGui::TableNextColumn();
          ImGui::TextUnformatted(trace::formatDuration(double(l.t - r.ts)).c_str());
        }
      }
      ImGui::EndTable();
    }
  }
  ImGui::EndChild();
}

// ---------------------------------------------------------------------------------------------
// dump

std::string MemoryView::dumpText() const {
  const MemoryData* d = data_.result();
  if (d == nullptr) return {};
  std::string out;
  char b[512];
  std::snprintf(
      b, sizeof b,
      "memory ranks %zu events %lld range %.3f %.3f ymax %.3f summary %s legend_forms %d\n",
      d->ranks.size(), static_cast<long long>(d->events), t0_, t1_, ymax_,
      d->stored ? "stored" : "replayed", d->forms ? 1 : 0);
  out += b;
  for (size_t i = 0; i < d->ranks.size(); ++i) {
    const RankChart& c = d->ranks[i];
    std::snprintf(b, sizeof b, "rank %d device %s peak_bytes %lld peak_ts_ns %lld", c.rank,
                  c.device.c_str(), static_cast<long long>(c.series.peak_bytes),
                  static_cast<long long>(c.series.peak_ts_ns));
    out += b;
    for (int s = 0; s < an::kStackCount; ++s) {
      std::snprintf(b, sizeof b, " %s %lld", core::memoryCategoryName(an::kStackOrder[s]),
                    static_cast<long long>(an::at(c.series.at_peak, an::kStackOrder[s])));
      out += b;
    }
    out += "\n";
    if (i < geometry_.size()) {
      const ChartGeometry& g = geometry_[i];
      std::snprintf(b, sizeof b, "chart %d x %.2f y %.2f w %.2f h %.2f\n", c.rank, g.x, g.y, g.w,
                    g.h);
      out += b;
    }
    for (const auto& f : c.forms) {
      std::snprintf(b, sizeof b, "closed_form %d bytes %.1f formula %s\n", c.rank, f.bytes,
                    f.formula.c_str());
      out += b;
    }
  }
  if (const LiveList* l = live_.result()) {
    std::snprintf(b, sizeof b, "live rank %d t %lld bytes %lld rows %zu\n", l->rank,
                  static_cast<long long>(l->t), static_cast<long long>(l->total), l->rows.size());
    out += b;
  }
  return out;
}

}  // namespace

std::unique_ptr<View> makeMemoryView() {
  return std::make_unique<MemoryView>();
}

}  // namespace tracerun::viewer
