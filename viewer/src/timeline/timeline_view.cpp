// TimelineView (timeline_view.h; section index there). ImGui 1.86, pre-1.87 key API: letter keys
// are GLFW key codes, which equal their upper-case ASCII letters.
#include "timeline/timeline_view.h"

#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "app/palette.h"
#include "data/time_axis.h"
#include "timeline/details_panel.h"
#include "timeline/restart_overlay.h"
#include "timeline/track.h"

namespace tracerun::viewer {

namespace {

constexpr float kLabelW = 180;
constexpr float kSideW = 400;
constexpr float kRankHeaderH = 22;
constexpr float kStepStripRankH = 7;
constexpr float kRulerH = 26;
constexpr int kKeyF3 = 292;        // GLFW_KEY_F3
constexpr int kKeyPageUp = 266;    // GLFW_KEY_PAGE_UP
constexpr int kKeyPageDown = 267;  // GLFW_KEY_PAGE_DOWN
constexpr int kKeyMinus = 45, kKeyEqual = 61, kKeyKpAdd = 334, kKeyKpSub = 333;

float rowH() {
  return ImGui::GetFontSize() + 6;
}

bool keyPressed(int key) {
  return ImGui::IsKeyPressed(key, true);
}
bool namedKey(ImGuiKey k) {
  return ImGui::IsKeyPressed(ImGui::GetKeyIndex(k), true);
}

std::string shortName(const std::string& s, size_t max = 80) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// opening and answers

void TimelineView::opened(const std::optional<std::pair<int64_t, int64_t>>& range) {
  for (const auto& t : s_.info->tracks) {
    maxDepth_[t.id] = t.max_depth;
    tracks_.push_back(makeTrack(t));
  }
  const auto a = s_.info->range.first;
  if (range) {
    setView(static_cast<double>(a + range->first), static_cast<double>(a + range->second), nullptr);
  } else {
    fit(nullptr);
  }
  s_.worker->requestSteps();
}

void TimelineView::apply(WorkerOutput& out) {
  for (auto& w : out.windows) {
    if (!w.items.empty()) {
      int& md = maxDepth_[w.track];
      md = std::max(md, w.max_depth);
    }
    windows_[w.track] = std::move(w);
  }
  if (out.view_done) doneGen_ = std::max(doneGen_, *out.view_done);
  for (auto& [tag, d] : out.details) {
    if (tag == Session::kTagHover && hovered_ && d.span.id == hovered_->id)
      hoverDetails_ = std::move(d);
  }
  if (out.steps) {
    steps_ = std::move(*out.steps);
    // By rank, then time: the strip folds each rank's sub-pixel steps into one box per column.
    std::sort(steps_.begin(), steps_.end(), [](const Step& a, const Step& b) {
      return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
    });
    stepRow_.clear();
    for (const auto& r : s_.info->ranks)
      stepRow_.emplace(r.rank, static_cast<int>(stepRow_.size()));
    stepsDone_ = true;
  }
  if (out.find) find_.apply(std::move(*out.find), s_);
}

bool TimelineView::settled() const {
  return doneGen_ >= requestedGen_ && haveFetched_ && stepsDone_ && !find_.pending();
}

std::string TimelineView::dumpText() const {
  char b[256];
  std::snprintf(b, sizeof b, "area %.2f %.2f %.3f %.3f %.2f %lld\n", areaX_, lastAreaW_, viewT0_,
                viewT1_, rowH(), static_cast<long long>(s_.info ? s_.info->range.first : 0));
  std::string out = b;
  for (const auto& r : rows_) {
    int rank = -1;
    if (s_.info) {
      for (const auto& t : s_.info->tracks)
        if (t.id == r.track) rank = t.rank;
    }
    std::snprintf(b, sizeof b, "track %lld %d %.2f %.2f\n", static_cast<long long>(r.track), rank,
                  r.y, r.h);
    out += b;
  }
  return out + boxes_ + hoverValue_;
}

void TimelineView::openFind() {
  find_.open();
  sideTab_ = 1;
  s_.log("find opened");
}

void TimelineView::collapseAll() {
  if (!s_.info) return;
  for (const auto& r : s_.info->ranks) collapsed_.insert(r.rank);
}

// ---------------------------------------------------------------------------------------------
// view arithmetic and data requests

double TimelineView::nsPerPx() const {
  return (viewT1_ - viewT0_) / std::max(1.0f, lastAreaW_);
}

float TimelineView::xOf(double t, float areaX, float areaW) const {
  return areaX + static_cast<float>((t - viewT0_) / (viewT1_ - viewT0_) * areaW);
}

void TimelineView::setView(double t0, double t1, const char* why) {
  if (!(t1 > t0)) t1 = t0 + 1;
  // Never zoom below 1 ns across 10 px, never further out than 1000x the trace.
  const double minSpan = std::max(10.0, lastAreaW_ * 0.001);
  if (t1 - t0 < minSpan) {
    const double c = (t0 + t1) / 2;
    t0 = c - minSpan / 2;
    t1 = c + minSpan / 2;
  }
  viewT0_ = t0;
  viewT1_ = t1;
  if (why != nullptr) {
    char b[160];
    const double origin = static_cast<double>(s_.info ? s_.info->range.first : 0);
    std::snprintf(b, sizeof b, "%s view %.0f..%.0f ns (%.3g ns/px)", why, t0 - origin, t1 - origin,
                  nsPerPx());
    s_.log(b);
  }
}

void TimelineView::fit(const char* why) {
  if (!s_.info) return;
  const auto [a, b] = s_.info->range;
  const double pad = std::max(1.0, static_cast<double>(b - a) * 0.01);
  setView(static_cast<double>(a) - pad, static_cast<double>(b) + pad, why);
}

void TimelineView::zoomAt(double t, double factor, const char* why) {
  setView(t - (t - viewT0_) * factor, t + (viewT1_ - t) * factor, why);
}

std::vector<int64_t> TimelineView::visibleTracks() const {
  std::vector<int64_t> out;
  if (!s_.info) return out;
  for (const auto& t : s_.info->tracks)
    if (!collapsed_.count(t.rank)) out.push_back(t.id);
  return out;
}

void TimelineView::ensureData() {
  if (!s_.worker || !s_.info || !s_.info->ok || !s_.problem.empty()) return;
  const double npp = nsPerPx();
  const std::vector<int64_t> tracks = visibleTracks();
  const bool covers = haveFetched_ && static_cast<double>(fetched_.t0) <= viewT0_ &&
                      static_cast<double>(fetched_.t1) >= viewT1_ &&
                      fetched_.ns_per_px <= npp * 1.5 && fetched_.ns_per_px >= npp / 1.5;
  if (covers && tracks == fetchedTracks_) return;
  const LodWindow lw = spanWindow(viewT0_, viewT1_, lastAreaW_);
  // Tracks already drawn keep their old primitives until the new ones come.
  requestedGen_ = s_.worker->requestView(tracks, lw);
  fetched_ = lw;
  fetchedTracks_ = tracks;
  haveFetched_ = true;
}

void TimelineView::gotoSpan(const SpanRef& s) {
  if (s_.info) {
    for (const auto& t : s_.info->tracks)
      if (t.id == s.track) collapsed_.erase(t.rank);
  }
  const double d = std::max<double>(static_cast<double>(s.end - s.start), 1000.0);
  setView(static_cast<double>(s.start) - d, static_cast<double>(s.end) + d, "goto");
}

// ---------------------------------------------------------------------------------------------
// the frame

void TimelineView::draw(ViewHost& host, float width, float height) {
  (void)host;
  const float sideW = std::min(kSideW, width * 0.4f);
  drawTimeline(width - sideW - 4, height);
  ImGui::SameLine(0, 4);
  drawSidePanel(sideW, height);
}

void TimelineView::drawTimeline(float width, float height) {
  ImGui::BeginChild("timeline", ImVec2(width, height), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float areaX = p.x + kLabelW, areaW = std::max(10.0f, width - kLabelW - 14);
  lastAreaW_ = areaW;
  areaX_ = areaX;
  const size_t nRanks = s_.info ? s_.info->ranks.size() : 0;
  const float stripH = std::max(16.0f, kStepStripRankH * static_cast<float>(nRanks)) + 4;
  drawStepStrip(dl, areaX, p.y, areaW, stripH);
  drawRuler(dl, areaX, p.y + stripH, areaW, kRulerH);
  dl->AddText(ImVec2(p.x + 4, p.y + 2), palette::kTextDim, "steps");
  ImGui::SetCursorScreenPos(ImVec2(p.x, p.y + stripH + kRulerH));
  ImGui::BeginChild("tracks", ImVec2(width, height - stripH - kRulerH), false,
                    ImGuiWindowFlags_NoScrollWithMouse);
  drawTracks(areaX, areaW);
  ImGui::EndChild();
  ImGui::EndChild();
}

void TimelineView::drawStepStrip(ImDrawList* dl, float x, float y, float w, float h) {
  dl->AddRectFilled(ImVec2(x, y), ImVec2(x + w, y + h), palette::kRuler);
  if (!s_.info) return;
  if (stepsDone_ && steps_.empty()) {
    dl->AddText(ImVec2(x + 6, y + 1), palette::kTextDim, "no \"step\" phase spans in this trace");
    return;
  }
  const ImVec2 mouse = ImGui::GetMousePos();
  const bool inStrip = mouse.x >= x && mouse.x < x + w && mouse.y >= y && mouse.y < y + h &&
                       ImGui::IsWindowHovered(ImGuiHoveredFlags_ChildWindows);
  const float rh = (h - 4) / std::max<size_t>(1, stepRow_.size());
  const Step* hit = nullptr;
  // Steps are by rank, then time. A step under 2 px wide that starts within a pixel of the box
  // drawn last on its row widens that box instead of adding one: at most one box per pixel column
  // and rank, whatever the number of steps (a 100M-event trace has ~100k).
  int openRank = INT32_MIN;
  float openX0 = 0, openX1 = 0, openY0 = 0;
  uint32_t openColour = 0;
  const auto flush = [&] {
    if (openRank == INT32_MIN) return;
    dl->AddRectFilled(ImVec2(openX0, openY0), ImVec2(openX1, openY0 + rh - 1), openColour);
    ++primitives_;
    openRank = INT32_MIN;
  };
  for (const auto& s : steps_) {
    float x0 = xOf(static_cast<double>(s.start), x, w), x1 = xOf(static_cast<double>(s.end), x, w);
    if (x1 < x || x0 > x + w) continue;
    x0 = std::max(x0, x);
    x1 = std::min(std::max(x1, x0 + 1), x + w);
    const auto row = stepRow_.find(s.rank);
    const float y0 = y + 2 + rh * static_cast<float>(row == stepRow_.end() ? 0 : row->second);
    if (openRank == s.rank && x1 - x0 < 2 && x0 <= openX1 + 1) {
      openX1 = std::max(openX1, x1);
      openColour = palette::kStep;
    } else {
      flush();
      openRank = s.rank;
      openX0 = x0;
      openX1 = x1;
      openY0 = y0;
      openColour = s.number % 2 ? palette::kStepAlt : palette::kStep;
    }
    if (inStrip && mouse.x >= x0 && mouse.x < x1 && mouse.y >= y0 && mouse.y < y0 + rh) hit = &s;
  }
  flush();
  if (hit != nullptr) {
    ImGui::SetTooltip("rank %d, step %" PRId64 ": %s\nclick: zoom every rank to this step",
                      hit->rank, hit->number, durationText(hit->end - hit->start).c_str());
    if (ImGui::IsMouseClicked(0)) {
      const double d = static_cast<double>(hit->end - hit->start);
      char b[96];
      std::snprintf(b, sizeof b, "step %d:%" PRId64, hit->rank, hit->number);
      setView(static_cast<double>(hit->start) - d * 0.02, static_cast<double>(hit->end) + d * 0.02,
              b);
    }
  }
}

void TimelineView::drawRuler(ImDrawList* dl, float x, float y, float w, float h) {
  dl->AddRectFilled(ImVec2(x, y), ImVec2(x + w, y + h), palette::kRuler);
  if (!s_.info) return;
  const int64_t t0 = static_cast<int64_t>(std::floor(viewT0_));
  const int64_t t1 = static_cast<int64_t>(std::ceil(viewT1_));
  const ImVec4 clip(x, y, x + w, y + h);
  for (const Tick& t : rulerTicks(t0, t1, w, 110, s_.info->range.first)) {
    const float tx = xOf(static_cast<double>(t.t), x, w);
    dl->AddLine(ImVec2(tx, y + (t.major ? 0 : h * 0.6f)), ImVec2(tx, y + h),
                t.major ? palette::kTickMajor : palette::kTickMinor);
    if (t.major) {
      dl->AddText(nullptr, 0, ImVec2(tx + 3, y + 2), palette::kText, t.label.c_str(), nullptr, 0,
                  &clip);
    }
    primitives_ += t.major ? 2 : 1;
  }
  char b[64];
  std::snprintf(b, sizeof b, "%s / px",
                durationText(static_cast<int64_t>(std::max(1.0, nsPerPx()))).c_str());
  ImGui::GetWindowDrawList()->AddText(ImVec2(x - kLabelW + 4, y + 4), palette::kTextDim, b);
}

void TimelineView::drawTracks(float areaX, float areaW) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float winTop = ImGui::GetWindowPos().y, winBottom = winTop + ImGui::GetWindowSize().y;
  const ImVec4 labelClip(origin.x, winTop, areaX - 4, winBottom);
  float y = origin.y;
  rows_.clear();
  int prevRank = -1;
  const ImVec2 mouse = ImGui::GetMousePos();
  const bool hoveredWin = ImGui::IsWindowHovered();
  hovered_.reset();
  bool stripe = false;
  TrackCanvas canvas;
  canvas.dl = dl;
  canvas.axis = TrackAxis{viewT0_, viewT1_, areaX, areaW};
  canvas.row_h = rowH();
  canvas.label_x = areaX - kLabelW + 14;
  canvas.name = [this](core::StringId id) -> const std::string& { return s_.name(id); };
  canvas.selected = s_.selected ? s_.selected->id : -1;
  canvas.mouse_x = mouse.x;
  canvas.mouse_y = mouse.y;
  boxes_.clear();
  hoverValue_.clear();
  if (s_.recordBoxes) canvas.boxes = &boxes_;
  for (size_t i = 0; i < s_.info->tracks.size(); ++i) {
    const TrackInfo& t = s_.info->tracks[i];
    if (t.rank != prevRank) {
      prevRank = t.rank;
      const bool isCollapsed = collapsed_.count(t.rank) > 0;
      if (y + kRankHeaderH >= winTop && y <= winBottom) {
        dl->AddRectFilled(ImVec2(origin.x, y), ImVec2(areaX + areaW, y + kRankHeaderH - 1),
                          palette::kRankHeader);
        std::string label =
            std::string(isCollapsed ? "+ " : "- ") + "rank " + std::to_string(t.rank);
        const bool attempts = std::any_of(s_.info->ranks.begin(), s_.info->ranks.end(),
                                          [](const trace::RankInfo& r) { return r.attempt != 0; });
        for (const auto& r : s_.info->ranks) {
          if (r.rank != t.rank) continue;
          if (attempts) {  // restarts in one file: which run, and the rank it had there
            label += " = attempt " + std::to_string(r.attempt) + "'s rank " +
                     std::to_string(r.attempt_rank);
          }
          label += "   " + r.host + "  pid " + std::to_string(r.pid);
        }
        dl->AddText(ImVec2(origin.x + 4, y + 3), palette::kText, label.c_str());
        primitives_ += 2;
      }
      if (hoveredWin && ImGui::IsMouseClicked(0) && mouse.y >= y && mouse.y < y + kRankHeaderH &&
          mouse.x < areaX + areaW) {
        if (isCollapsed) {
          collapsed_.erase(t.rank);
        } else {
          collapsed_.insert(t.rank);
        }
        s_.log(std::string(isCollapsed ? "expanded" : "collapsed") + " rank " +
               std::to_string(t.rank));
      }
      y += kRankHeaderH;
    }
    if (collapsed_.count(t.rank)) continue;
    const float h = tracks_[i]->height(maxDepth_[t.id], rowH());
    rows_.push_back({t.id, y, h});
    if (y + h >= winTop && y <= winBottom) {
      stripe = !stripe;
      if (stripe) {
        dl->AddRectFilled(ImVec2(origin.x, y), ImVec2(areaX + areaW, y + h), palette::kTrackAlt);
        ++primitives_;
      }
      std::string label = t.name.empty() ? trackKindName(t.kind) : t.name;
      if (t.kind == core::TrackKind::kAsync) label += " (async)";
      if (t.kind == core::TrackKind::kStream) label += " (stream)";
      if (t.queue_of) label = "  launch queue";  // under its stream's row
      dl->AddText(nullptr, 0, ImVec2(origin.x + 14, y + 3), palette::kTextDim, label.c_str(),
                  nullptr, 0, &labelClip);
      ++primitives_;
      TrackCanvas c = canvas;
      c.y = t.counter() ? y : y + 2;
      c.h = h;
      c.mouse_here = hoveredWin && mouse.y >= y && mouse.x >= areaX && mouse.x < areaX + areaW;
      const TrackWindow* w = nullptr;
      if (const auto it = windows_.find(t.id); it != windows_.end()) w = &it->second;
      if (const DrawItem* hit = tracks_[i]->draw(c, t, w)) hoverSpan(*hit, t);
      primitives_ += c.primitives;
      if (!c.hover.empty()) {  // a counter's value under the mouse
        ImGui::SetTooltip("%s\n%s", t.name.c_str(), c.hover.c_str());
        hoverValue_ = "hover " + std::to_string(t.id) + " " + c.hover + "\n";
      }
    }
    y += h;
  }
  drawFlowsAndHighlights(dl, areaX, areaW);
  if (!s_.info->restarts.empty()) {  // elastic restarts: a line across the rows at each
    RestartCanvas rc;
    rc.dl = dl;
    rc.axis = canvas.axis;
    rc.top = std::max(origin.y, winTop);
    rc.bottom = std::min(y, winBottom);
    rc.mouse_x = mouse.x;
    rc.mouse_y = mouse.y;
    rc.mouse_here = hoveredWin;
    rc.dump = canvas.boxes;
    dl->PushClipRect(ImVec2(areaX, winTop), ImVec2(areaX + areaW, winBottom), true);
    const auto* hit = drawRestartMarks(rc, s_.info->restarts);
    dl->PopClipRect();
    primitives_ += rc.primitives;
    if (hit != nullptr) {
      restartTooltip(*hit, s_.info->range.first);
      if (s_.recordBoxes)
        hoverValue_ +=
            "restart-hover " + std::to_string(hit->rank) + " " + std::to_string(hit->round) + "\n";
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, y));
  ImGui::Dummy(ImVec2(1, 40));  // room under the last track
  handleMouse(areaX, areaW, hoveredWin);
  handleKeys();
}

// The span under the mouse: its tooltip (what is known at once, then self time and arguments
// when the data thread answers); a click selects it, or zooms into a fold.
void TimelineView::hoverSpan(const DrawItem& item, const TrackInfo& t) {
  const Primitive& p = item.prim;
  const LodSpan& s = item.span;
  if (p.fold) {
    ImGui::SetTooltip("%" PRId64 " spans folded (%s)\nlongest: %s (%s)\nclick to zoom in", p.count,
                      durationText(p.end - p.start).c_str(), shortName(s_.name(s.name)).c_str(),
                      durationText(s.end - s.start).c_str());
    if (ImGui::IsMouseReleased(0) && !dragging_) {
      const double d = static_cast<double>(p.end - p.start);
      setView(static_cast<double>(p.start) - d * 0.05, static_cast<double>(p.end) + d * 0.05,
              "zoom into fold");
    }
    return;
  }
  SpanRef ref{s.id, t.id, s.start, s.end, s.depth, s.name};
  hovered_ = ref;
  if (!hoverDetails_ || hoverDetails_->span.id != s.id)
    s_.worker->requestDetails(ref, Session::kTagHover);
  ImGui::BeginTooltip();
  ImGui::TextUnformatted(shortName(s_.name(s.name), 120).c_str());
  ImGui::Text("duration %s   %s", durationText(s.end - s.start).c_str(),
              categoryLabel(static_cast<core::Category>(s.category)).c_str());
  if (hoverDetails_ && hoverDetails_->span.id == s.id) {
    const SpanDetails& d = *hoverDetails_;
    ImGui::Text("self %s   children %" PRId64, durationText(d.self_ns).c_str(), d.children);
    if (!d.detail.empty()) ImGui::TextUnformatted(("shapes " + shortName(d.detail, 160)).c_str());
    if (d.launch) ImGui::Text("launch delay %s", durationText(d.launch->delay_ns).c_str());
    for (const auto& a : d.args) {
      ImGui::TextUnformatted((a.first + " = " + shortName(a.second, 160)).c_str());
    }
    if (!d.parent_names.empty()) {
      ImGui::TextUnformatted(("in " + shortName(d.parent_names.back())).c_str());
    }
  } else {
    ImGui::TextDisabled("loading self time and arguments...");
  }
  ImGui::EndTooltip();
  if (ImGui::IsMouseReleased(0) && !dragging_) s_.select(ref);
}

void TimelineView::drawFlowsAndHighlights(ImDrawList* dl, float x, float w) {
  auto rowY = [&](int64_t track, int depth) -> std::optional<float> {
    for (const auto& r : rows_)
      if (r.track == track) return r.y + 2 + rowH() * (static_cast<float>(depth) + 0.5f);
    return std::nullopt;
  };
  dl->PushClipRect(ImVec2(x, ImGui::GetWindowPos().y),
                   ImVec2(x + w, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y), true);
  for (const auto& row : rows_) {  // the range selection (Shift+drag) over its ranks' rows
    for (const auto& t : s_.info->tracks) {
      if (rangeSel_ && t.id == row.track &&
          (rangeSel_->ranks.empty() ||
           std::count(rangeSel_->ranks.begin(), rangeSel_->ranks.end(), t.rank)))
        dl->AddRectFilled(
            ImVec2(xOf(rangeSel_->t0, x, w), row.y),
            ImVec2(std::max(xOf(rangeSel_->t1, x, w), xOf(rangeSel_->t0, x, w) + 1), row.y + row.h),
            palette::kRangeBand);
    }
  }
  const FindResult* found = find_.result();
  if (const auto hl = find_.highlight()) {
    // Highlighted matches in view, one mark per pixel column and track.
    auto first = std::lower_bound(
        found->matches.begin(), found->matches.end(), viewT0_ - 1e12,
        [](const SpanRef& m, double t) { return static_cast<double>(m.start) < t; });
    std::map<int64_t, float> lastX;
    int drawn = 0;
    for (auto it = first; it != found->matches.end() && static_cast<double>(it->start) <= viewT1_;
         ++it) {
      const int64_t d = it->end - it->start;
      if (d < hl->first || d > hl->second || static_cast<double>(it->end) < viewT0_) continue;
      const auto yy = rowY(it->track, it->depth);
      if (!yy) continue;
      const float x0 = xOf(static_cast<double>(it->start), x, w);
      const float x1 = std::max(xOf(static_cast<double>(it->end), x, w), x0 + 2);
      auto& lx = lastX[it->track * 64 + it->depth];
      if (drawn > 0 && x0 < lx + 1) continue;
      lx = x1;
      const float half = rowH() / 2;
      dl->AddRect(ImVec2(x0 - 1, *yy - half - 1), ImVec2(x1 + 1, *yy + half), palette::kHighlight,
                  0, 0, 2);
      ++primitives_;
      if (++drawn > 20000) break;
    }
  }
  const auto& sel = s_.selected;
  if (sel && s_.details && s_.details->span.id == sel->id) {
    const auto from = rowY(sel->track, sel->depth);
    for (const auto& f : s_.details->flows) {
      const auto to = rowY(f.other.track, f.other.depth);
      if (!from || !to) continue;
      ImVec2 a(xOf(static_cast<double>(sel->start), x, w), *from);
      ImVec2 b(xOf(static_cast<double>(f.other.start), x, w), *to);
      if (!f.outgoing) std::swap(a, b);
      const float dx = std::max(30.0f, std::fabs(b.x - a.x) * 0.3f);
      dl->AddBezierCubic(a, ImVec2(a.x + dx, a.y), ImVec2(b.x - dx, b.y), b, palette::kFlow, 2);
      dl->AddTriangleFilled(b, ImVec2(b.x - 9, b.y - 5), ImVec2(b.x - 9, b.y + 5), palette::kFlow);
      primitives_ += 2;
    }
  }
  dl->PopClipRect();
}

void TimelineView::handleMouse(float areaX, float areaW, bool hovered) {
  ImGuiIO& io = ImGui::GetIO();
  const ImVec2 mouse = io.MousePos;
  const bool overArea = hovered && mouse.x >= areaX && mouse.x < areaX + areaW;
  const double tMouse = viewT0_ + (mouse.x - areaX) / areaW * (viewT1_ - viewT0_);
  if (overArea && io.MouseWheel != 0) {
    if (io.KeyShift) {
      ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseWheel * rowH() * 3);
    } else {
      zoomAt(tMouse, std::pow(0.8, io.MouseWheel),
             io.MouseWheel > 0 ? "wheel zoom in" : "wheel zoom out");
    }
  }
  if (overArea && ImGui::IsMouseClicked(0)) {
    dragStartX_ = mouse.x;
    dragStartT0_ = viewT0_;
    dragging_ = false;
  }
  // Shift+drag: a range selection over the ranks whose rows the drag crosses (view.h).
  if (overArea && ImGui::IsMouseClicked(0) && io.KeyShift) rangeFrom_.emplace(tMouse, mouse.y);
  if (rangeFrom_ && ImGui::IsMouseDragging(0, 3)) {
    RangeSelection r{std::min(rangeFrom_->first, tMouse),
                     std::max(rangeFrom_->first, tMouse),
                     {},
                     rangeSel_ ? rangeSel_->generation : 0};
    const auto [y0, y1] = std::minmax(rangeFrom_->second, mouse.y);
    for (const auto& row : rows_)
      for (const auto& t : s_.info->tracks)
        if (t.id == row.track && row.y < y1 && row.y + row.h > y0 &&
            std::find(r.ranks.begin(), r.ranks.end(), t.rank) == r.ranks.end())
          r.ranks.push_back(t.rank);
    rangeSel_ = std::move(r);
    dragging_ = true;  // no click selection on release
  }
  if (rangeFrom_ && ImGui::IsMouseReleased(0)) {
    rangeFrom_.reset();
    if (dragging_ && rangeSel_ && ++rangeSel_->generation) {
      char b[96];
      std::snprintf(b, sizeof b, "range selected %.0f..%.0f ns, %zu ranks", rangeSel_->t0,
                    rangeSel_->t1, rangeSel_->ranks.size());
      s_.log(b);
    }
    dragging_ = false;
  }
  if (ImGui::IsMouseDown(0) && ImGui::IsMouseDragging(0, 3) && hovered && !rangeFrom_) {
    const double span = viewT1_ - viewT0_;
    const double t0 = dragStartT0_ - (mouse.x - dragStartX_) / areaW * span;
    if (!dragging_) s_.log("drag pan");
    dragging_ = true;
    setView(t0, t0 + span, nullptr);
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
  if (ImGui::IsMouseReleased(0)) {
    if (dragging_) {
      char b[96];
      std::snprintf(b, sizeof b, "pan");
      setView(viewT0_, viewT1_, b);
    }  // a click on empty timeline keeps the selection (Esc clears it)
    dragging_ = false;
  }
}

void TimelineView::handleKeys() {
  const ImGuiIO& io = ImGui::GetIO();
  // Only when no text field has the focus.
  if (io.WantTextInput) return;
  const auto goTo = [this](const SpanRef& m) { gotoSpan(m); };
  const double span = viewT1_ - viewT0_;
  const double c = (viewT0_ + viewT1_) / 2;
  if (namedKey(ImGuiKey_LeftArrow) || keyPressed('A'))
    setView(viewT0_ - span * 0.1, viewT1_ - span * 0.1, "key pan left");
  if (namedKey(ImGuiKey_RightArrow) || keyPressed('D'))
    setView(viewT0_ + span * 0.1, viewT1_ + span * 0.1, "key pan right");
  if (!io.KeyCtrl && (keyPressed('W') || keyPressed(kKeyEqual) || keyPressed(kKeyKpAdd)))
    zoomAt(c, 0.8, "key zoom in");
  if (!io.KeyCtrl && (keyPressed('S') || keyPressed(kKeyMinus) || keyPressed(kKeyKpSub)))
    zoomAt(c, 1.25, "key zoom out");
  if (namedKey(ImGuiKey_UpArrow)) ImGui::SetScrollY(ImGui::GetScrollY() - rowH() * 2);
  if (namedKey(ImGuiKey_DownArrow)) ImGui::SetScrollY(ImGui::GetScrollY() + rowH() * 2);
  if (keyPressed(kKeyPageUp))
    ImGui::SetScrollY(ImGui::GetScrollY() - ImGui::GetWindowHeight() * 0.8f);
  if (keyPressed(kKeyPageDown))
    ImGui::SetScrollY(ImGui::GetScrollY() + ImGui::GetWindowHeight() * 0.8f);
  if (namedKey(ImGuiKey_Home) && s_.info)
    setView(static_cast<double>(s_.info->range.first),
            static_cast<double>(s_.info->range.first) + span, "home");
  if (namedKey(ImGuiKey_End) && s_.info)
    setView(static_cast<double>(s_.info->range.second) - span,
            static_cast<double>(s_.info->range.second), "end");
  if (!io.KeyCtrl && keyPressed('F')) fit("fit");
  if (!io.KeyCtrl && keyPressed('Z') && s_.selected) gotoSpan(*s_.selected);
  if (namedKey(ImGuiKey_Escape) && s_.selected) s_.clearSelection();
  if (keyPressed(kKeyF3) || (!io.KeyCtrl && keyPressed('N')))
    find_.step(io.KeyShift ? -1 : 1, s_, goTo);
  if (!io.KeyCtrl && keyPressed('P')) find_.step(-1, s_, goTo);
}

// ---------------------------------------------------------------------------------------------
// the side panel

void TimelineView::drawSidePanel(float width, float height) {
  if (s_.selections != seenSelections_) {  // a new selection: show its details
    seenSelections_ = s_.selections;
    sideTab_ = 0;
  }
  ImGui::BeginChild("side", ImVec2(width, height), true);
  if (ImGui::BeginTabBar("sidetabs")) {
    const ImGuiTabItemFlags detFlags = sideTab_ == 0 ? ImGuiTabItemFlags_SetSelected : 0;
    const ImGuiTabItemFlags findFlags = sideTab_ == 1 ? ImGuiTabItemFlags_SetSelected : 0;
    if (ImGui::BeginTabItem("Details", nullptr, detFlags)) {
      drawDetailsPanel(s_, [this](const SpanRef& r) { gotoSpan(r); });
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Find", nullptr, findFlags)) {
      find_.draw(s_, [this](const SpanRef& m) { gotoSpan(m); });
      ImGui::EndTabItem();
    }
    sideTab_ = -1;  // applied once; the user's clicks pick tabs afterwards
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
}

}  // namespace tracerun::viewer
