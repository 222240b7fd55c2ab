// traceview's per-frame UI (see viewer_app.h for the section index). ImGui 1.86, pre-1.87 key API:
// letter keys are GLFW key codes, which equal their upper-case ASCII letters.
#include "viewer_app.h"

#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "palette.h"
#include "time_axis.h"
#include "views.h"

namespace tracerun::viewer {

namespace {

namespace fs = std::filesystem;

constexpr float kLabelW = 180;
constexpr float kSideW = 400;
constexpr float kRankHeaderH = 22;
constexpr float kCounterH = 44;
constexpr float kStepStripRankH = 7;
constexpr float kRulerH = 26;
constexpr int kKeyF3 = 292;        // GLFW_KEY_F3
constexpr int kKeyF12 = 301;       // GLFW_KEY_F12
constexpr int kKeyPageUp = 266;    // GLFW_KEY_PAGE_UP
constexpr int kKeyPageDown = 267;  // GLFW_KEY_PAGE_DOWN
constexpr int kKeyMinus = 45, kKeyEqual = 61, kKeyKpAdd = 334, kKeyKpSub = 333;
constexpr uint64_t kTagSelect = 1, kTagHover = 2;
constexpr int kHistBins = 32;

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

// Duration histogram bin of d over [lo, hi] on a log scale.
int binOf(int64_t d, double logLo, double logHi) {
  if (logHi <= logLo) return 0;
  const double v = std::log(static_cast<double>(std::max<int64_t>(d, 1)));
  const int b = static_cast<int>((v - logLo) / (logHi - logLo) * kHistBins);
  return std::clamp(b, 0, kHistBins - 1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// options and logging

Viewer::Viewer(ViewerOptions options, std::function<void()> wake)
    : options_(std::move(options)), wake_(std::move(wake)), recent_(options_.recent_file) {
  std::error_code ec;
  pickerDir_ = fs::current_path(ec).string();
  if (!options_.path.empty()) open(options_.path);
}

Viewer::~Viewer() = default;

void Viewer::log(const std::string& line) const {
  if (!options_.log_actions) return;
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

const std::string& Viewer::name(core::StringId id) const {
  static const std::string kEmpty;
  if (!info_ || id >= info_->strings.size()) return kEmpty;
  return info_->strings[id];
}

// ---------------------------------------------------------------------------------------------
// opening and worker results

void Viewer::open(const std::string& path) {
  worker_.reset();
  path_ = path;
  info_.reset();
  problem_.clear();
  notice_.clear();
  windows_.clear();
  trackState_.clear();
  collapsed_.clear();
  steps_.clear();
  stepsDone_ = false;
  selected_.reset();
  details_.reset();
  hovered_.reset();
  hoverDetails_.reset();
  find_.reset();
  highlightBin_ = -1;
  haveFetched_ = false;
  requestedGen_ = doneGen_ = 0;
  pendingById_ = false;
  views_ = makeViews();
  wantedTab_ = kTimelineTab;
  for (size_t i = 0; i < views_.size(); ++i)
    if (options_.view == views_[i]->word()) wantedTab_ = static_cast<int>(i);
  requestTab_ = wantedTab_;
  worker_ = std::make_unique<DataWorker>(path, wake_);
}

void Viewer::applyResults() {
  if (!worker_) return;
  WorkerOutput out = worker_->take();
  if (out.opened) {
    info_ = std::move(*out.opened);
    for (const auto& t : info_->tracks) trackState_[t.id].max_depth = t.max_depth;
    if (!info_->ok) {
      problem_ = info_->error;
      log("error " + problem_);
    } else {
      const auto& c = info_->counts;
      if (c.spans + c.counters + c.memory + c.instants == 0 || info_->tracks.empty()) {
        problem_ = path_ + ": the trace holds no events (no spans, counters or memory)";
      }
      std::vector<std::string> notes;
      if (info_->ranks.size() == 1) notes.push_back("one rank");
      if (c.memory == 0) notes.push_back("no memory events");
      if (c.flows == 0) notes.push_back("no flows");
      for (size_t i = 0; i < notes.size(); ++i) notice_ += (i ? ", " : "") + notes[i];
      recent_.add(path_);
      log("opened " + path_ + " (" + std::to_string(info_->ranks.size()) + " ranks, " +
          std::to_string(info_->tracks.size()) + " tracks)");
      if (problem_.empty()) {
        const auto [a, b] = info_->range;
        if (options_.range) {
          setView(static_cast<double>(a + options_.range->first),
                  static_cast<double>(a + options_.range->second), nullptr);
        } else {
          fit(nullptr);
        }
        worker_->requestSteps();
        if (options_.go) {
          worker_->requestSpanById(options_.go->second, options_.go->first, true);
          pendingById_ = true;
        } else if (options_.select) {
          worker_->requestSpanById(*options_.select, -1, false);
          pendingById_ = true;
        }
      } else {
        log("error " + problem_);
      }
    }
  }
  for (auto& w : out.windows) {
    if (!w.items.empty()) {
      int& md = trackState_[w.track].max_depth;
      md = std::max(md, w.max_depth);
    }
    windows_[w.track] = std::move(w);
  }
  if (out.view_done) doneGen_ = std::max(doneGen_, *out.view_done);
  for (auto& [tag, d] : out.details) {
    if (tag == kTagSelect && selected_ && d.span.id == selected_->id) details_ = std::move(d);
    if (tag == kTagHover && hovered_ && d.span.id == hovered_->id) hoverDetails_ = std::move(d);
  }
  if (out.by_id) {
    pendingById_ = false;
    if (out.by_id->span) {
      if (out.by_id->center) gotoSpan(*out.by_id->span);
      select(*out.by_id->span, "by id");
    } else {
      const std::string msg = "no span with id " + std::to_string(out.by_id->id) + " in " + path_;
      if (options_.headless) problem_ = msg;
      notice_ = msg;
      log("error " + msg);
    }
  }
  if (out.steps) {
    steps_ = std::move(*out.steps);
    // By rank, then time: the strip folds each rank's sub-pixel steps into one box per column.
    std::sort(steps_.begin(), steps_.end(), [](const Step& a, const Step& b) {
      return a.rank != b.rank ? a.rank < b.rank : a.start < b.start;
    });
    stepRow_.clear();
    for (const auto& r : info_->ranks) stepRow_.emplace(r.rank, static_cast<int>(stepRow_.size()));
    stepsDone_ = true;
  }
  if (out.find) {
    findPending_ = false;
    find_ = std::move(*out.find);
    findIndex_ = 0;
    highlightBin_ = -1;
    log("find '" + find_->needle + "': " + std::to_string(find_->matches.size()) + " matches");
  }
  for (const auto& e : out.errors) {
    notice_ = e;
    log("error " + e);
  }
}

std::string Viewer::layoutText() const {
  char b[256];
  std::snprintf(b, sizeof b, "area %.2f %.2f %.3f %.3f %.2f %lld\n", areaX_, lastAreaW_, viewT0_,
                viewT1_, rowH(), static_cast<long long>(info_ ? info_->range.first : 0));
  std::string out = b;
  for (const auto& r : rows_) {
    int rank = -1;
    if (info_) {
      for (const auto& t : info_->tracks)
        if (t.id == r.track) rank = t.rank;
    }
    std::snprintf(b, sizeof b, "track %lld %d %.2f %.2f\n", static_cast<long long>(r.track), rank,
                  r.y, r.h);
    out += b;
  }
  for (const auto& t : tabRects_) {
    std::snprintf(b, sizeof b, "tab %s %.1f %.1f %.1f %.1f\n", t.word, t.x, t.y, t.w, t.h);
    out += b;
  }
  return out;
}

bool Viewer::settled() const {
  if (!worker_) return true;
  if (!info_) return false;
  if (!problem_.empty()) return !worker_->busy() || !info_->ok;
  const bool viewSettled = activeTab_ == wantedTab_ &&
                           (activeTab_ < 0 || views_[static_cast<size_t>(activeTab_)]->settled());
  return !worker_->busy() && !pendingById_ && doneGen_ >= requestedGen_ && haveFetched_ &&
         stepsDone_ && (!selected_ || details_) && !findPending_ && viewSettled;
}

std::string Viewer::activeViewWord() const {
  return activeTab_ < 0 ? kTimelineWord : views_[static_cast<size_t>(activeTab_)]->word();
}

std::string Viewer::activeViewText() const {
  return activeTab_ < 0 ? layoutText() : views_[static_cast<size_t>(activeTab_)]->dumpText();
}

bool Viewer::showView(const std::string& word) {
  int tab = word == kTimelineWord ? kTimelineTab : kNoRequest;
  for (size_t i = 0; i < views_.size(); ++i)
    if (word == views_[i]->word()) tab = static_cast<int>(i);
  if (tab == kNoRequest) return false;
  requestTab_ = wantedTab_ = tab;
  return true;
}

void Viewer::selectSpan(int64_t id, bool centre) {
  if (!worker_) return;
  worker_->requestSpanById(id, -1, centre);
  pendingById_ = true;
}

std::optional<int64_t> Viewer::selectedSpan() const {
  if (!selected_) return std::nullopt;
  return selected_->id;
}

// ---------------------------------------------------------------------------------------------
// view arithmetic and data requests

double Viewer::nsPerPx() const {
  return (viewT1_ - viewT0_) / std::max(1.0f, lastAreaW_);
}

float Viewer::xOf(double t, float areaX, float areaW) const {
  return areaX + static_cast<float>((t - viewT0_) / (viewT1_ - viewT0_) * areaW);
}

void Viewer::setView(double t0, double t1, const char* why) {
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
    std::snprintf(b, sizeof b, "%s view %.0f..%.0f ns (%.3g ns/px)", why,
                  t0 - static_cast<double>(info_ ? info_->range.first : 0),
                  t1 - static_cast<double>(info_ ? info_->range.first : 0), nsPerPx());
    log(b);
  }
}

void Viewer::fit(const char* why) {
  if (!info_) return;
  const auto [a, b] = info_->range;
  const double pad = std::max(1.0, static_cast<double>(b - a) * 0.01);
  setView(static_cast<double>(a) - pad, static_cast<double>(b) + pad, why);
}

void Viewer::zoomAt(double t, double factor, const char* why) {
  setView(t - (t - viewT0_) * factor, t + (viewT1_ - t) * factor, why);
}

std::vector<int64_t> Viewer::visibleTracks() const {
  std::vector<int64_t> out;
  if (!info_) return out;
  for (const auto& t : info_->tracks)
    if (!collapsed_.count(t.rank)) out.push_back(t.id);
  return out;
}

void Viewer::ensureData() {
  if (!worker_ || !info_ || !info_->ok || !problem_.empty()) return;
  const double npp = nsPerPx();
  const std::vector<int64_t> tracks = visibleTracks();
  const bool covers = haveFetched_ && static_cast<double>(fetched_.t0) <= viewT0_ &&
                      static_cast<double>(fetched_.t1) >= viewT1_ &&
                      fetched_.ns_per_px <= npp * 1.5 && fetched_.ns_per_px >= npp / 1.5;
  if (covers && tracks == fetchedTracks_) return;
  // One screen of margin on each side, so a pan shows data at once while the next answer comes.
  const double w = viewT1_ - viewT0_;
  LodWindow lw;
  lw.t0 =
      static_cast<int64_t>(std::floor(std::max(viewT0_ - w, static_cast<double>(INT64_MIN / 4))));
  lw.t1 =
      static_cast<int64_t>(std::ceil(std::min(viewT1_ + w, static_cast<double>(INT64_MAX / 4))));
  lw.ns_per_px = std::max(npp, 1e-3);
  lw.min_px = 3;
  // Tracks already drawn keep their old primitives until the new ones come.
  std::vector<int64_t> order = tracks;
  requestedGen_ = worker_->requestView(order, lw);
  fetched_ = lw;
  fetchedTracks_ = tracks;
  haveFetched_ = true;
}

// ---------------------------------------------------------------------------------------------
// selection

void Viewer::select(const SpanRef& s, const char* how) {
  selected_ = s;
  details_.reset();
  if (worker_) worker_->requestDetails(s, kTagSelect);
  sideTab_ = 0;
  log("selected span " + std::to_string(s.id) + " " + name(s.name));
  (void)how;
}

void Viewer::gotoSpan(const SpanRef& s) {
  if (info_) {
    for (const auto& t : info_->tracks)
      if (t.id == s.track) collapsed_.erase(t.rank);
  }
  const double d = std::max<double>(static_cast<double>(s.end - s.start), 1000.0);
  setView(static_cast<double>(s.start) - d, static_cast<double>(s.end) + d, "goto");
}

void Viewer::gotoMatch(size_t i) {
  if (!find_ || find_->matches.empty()) return;
  findIndex_ = i % find_->matches.size();
  const SpanRef& m = find_->matches[findIndex_];
  gotoSpan(m);
  select(m, "find");
}

// ---------------------------------------------------------------------------------------------
// frame

void Viewer::frame() {
  ++frames_;
  applyResults();
  primitives_ = 0;
  const ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(0, 0));
  ImGui::SetNextWindowSize(io.DisplaySize);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowRounding, 0);
  ImGui::PushStyleVar(ImGuiStyleVar_WindowPadding, ImVec2(4, 4));
  ImGui::Begin("traceview", nullptr,
               ImGuiWindowFlags_NoDecoration | ImGuiWindowFlags_NoMove | ImGuiWindowFlags_NoResize |
                   ImGuiWindowFlags_MenuBar | ImGuiWindowFlags_NoBringToFrontOnFocus |
                   ImGuiWindowFlags_NoSavedSettings);
  drawMenu();
  // Global keys.
  if (io.KeyCtrl && keyPressed('O')) pickerOpen_ = true;
  if (io.KeyCtrl && keyPressed('Q')) quit_ = true;
  if (keyPressed(kKeyF12)) screenshotKey_ = true;
  if (io.KeyCtrl && keyPressed('F')) {
    findOpen_ = focusFind_ = true;
    sideTab_ = 1;
    log("find opened");
  }

  const float statusH = ImGui::GetFrameHeightWithSpacing();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bodyH = avail.y - statusH;
  if (!worker_) {
    drawPicker(true);
  } else if (!info_) {
    drawMessage("Opening " + path_ + " ...", palette::kText);
  } else if (!problem_.empty()) {
    drawMessage(
        problem_ + "\n\nOpen another file with Ctrl+O (tracerun writes traces with -o run.db).",
        palette::kError);
  } else {
    drawTabs(avail.x, bodyH);
  }
  drawStatus();
  if (pickerOpen_) {
    ImGui::OpenPopup("Open trace");
    pickerOpen_ = false;
  }
  ImGui::SetNextWindowSize(
      ImVec2(std::min(io.DisplaySize.x - 40, 760.0f), std::min(io.DisplaySize.y - 40, 520.0f)));
  if (ImGui::BeginPopupModal("Open trace", nullptr, ImGuiWindowFlags_NoSavedSettings)) {
    drawPicker(false);
    ImGui::EndPopup();
  }
  ImGui::End();
  ImGui::PopStyleVar(2);
  ensureData();
}

void Viewer::drawTabs(float width, float height) {
  const float top = ImGui::GetCursorPosY();
  if (!ImGui::BeginTabBar("views")) return;
  const auto flags = [&](int tab) {
    return requestTab_ == tab ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None;
  };
  tabRects_.clear();  // capacity kept: no allocation after the first frame
  const auto noteTab = [&](const char* word) {
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    tabRects_.push_back({word, a.x, a.y, b.x - a.x, b.y - a.y});
  };
  const bool timelineOpen = ImGui::BeginTabItem("Timeline", nullptr, flags(kTimelineTab));
  noteTab(kTimelineWord);
  if (timelineOpen) {
    activeTab_ = kTimelineTab;
    const float h = height - (ImGui::GetCursorPosY() - top);
    const float sideW = std::min(kSideW, width * 0.4f);
    drawTimeline(width - sideW - 4, h);
    ImGui::SameLine(0, 4);
    drawSidePanel(sideW, h);
    ImGui::EndTabItem();
  }
  for (size_t i = 0; i < views_.size(); ++i) {
    View& v = *views_[i];
    const bool open = ImGui::BeginTabItem(v.title(), nullptr, flags(static_cast<int>(i)));
    noteTab(v.word());
    if (open) {
      if (activeTab_ != static_cast<int>(i)) log(std::string("view ") + v.word());
      activeTab_ = static_cast<int>(i);
      const float h = height - (ImGui::GetCursorPosY() - top);
      ImGui::BeginChild(v.word(), ImVec2(width, h), false);
      v.draw(*this, width, h);
      ImGui::EndChild();
      ImGui::EndTabItem();
    }
  }
  // A requested tab is in front once ImGui drew it; until then keep asking.
  if (requestTab_ != kNoRequest && activeTab_ == requestTab_) requestTab_ = kNoRequest;
  if (requestTab_ == kNoRequest) wantedTab_ = activeTab_;  // then settled() follows the user's tab
  ImGui::EndTabBar();
}

void Viewer::drawMenu() {
  if (!ImGui::BeginMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Open...", "Ctrl+O")) pickerOpen_ = true;
    if (ImGui::BeginMenu("Recent", !recent_.paths().empty())) {
      for (const auto& p : recent_.paths()) {
        if (ImGui::MenuItem(p.c_str())) {
          log("open " + p);
          open(p);
        }
      }
      ImGui::EndMenu();
    }
    if (ImGui::MenuItem("Quit", "Ctrl+Q")) quit_ = true;
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    if (ImGui::MenuItem("Fit the whole run", "F")) fit("fit");
    if (ImGui::MenuItem("Zoom to selection", "Z", false, selected_.has_value()))
      gotoSpan(*selected_);
    if (ImGui::MenuItem("Expand all ranks")) collapsed_.clear();
    if (ImGui::MenuItem("Collapse all ranks") && info_) {
      for (const auto& r : info_->ranks) collapsed_.insert(r.rank);
    }
    ImGui::EndMenu();
  }
  if (ImGui::MenuItem("Find", "Ctrl+F")) {
    findOpen_ = focusFind_ = true;
    sideTab_ = 1;
  }
  ImGui::EndMenuBar();
}

void Viewer::drawMessage(const std::string& text, uint32_t colour) {
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  ImGui::BeginChild("message", ImVec2(avail.x, avail.y - ImGui::GetFrameHeightWithSpacing()), true);
  ImGui::SetCursorPos(ImVec2(24, 24));
  ImGui::PushStyleColor(ImGuiCol_Text, colour);
  ImGui::PushTextWrapPos(avail.x - 24);
  ImGui::TextUnformatted(text.c_str());
  ImGui::PopTextWrapPos();
  ImGui::PopStyleColor();
  ImGui::EndChild();
}

// ---------------------------------------------------------------------------------------------
// the timeline

void Viewer::drawTimeline(float width, float height) {
  ImGui::BeginChild("timeline", ImVec2(width, height), false,
                    ImGuiWindowFlags_NoScrollbar | ImGuiWindowFlags_NoScrollWithMouse);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float areaX = p.x + kLabelW, areaW = std::max(10.0f, width - kLabelW - 14);
  lastAreaW_ = areaW;
  areaX_ = areaX;
  const size_t nRanks = info_ ? info_->ranks.size() : 0;
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

void Viewer::drawStepStrip(ImDrawList* dl, float x, float y, float w, float h) {
  dl->AddRectFilled(ImVec2(x, y), ImVec2(x + w, y + h), palette::kRuler);
  if (!info_) return;
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

void Viewer::drawRuler(ImDrawList* dl, float x, float y, float w, float h) {
  dl->AddRectFilled(ImVec2(x, y), ImVec2(x + w, y + h), palette::kRuler);
  if (!info_) return;
  const int64_t t0 = static_cast<int64_t>(std::floor(viewT0_));
  const int64_t t1 = static_cast<int64_t>(std::ceil(viewT1_));
  const ImVec4 clip(x, y, x + w, y + h);
  for (const Tick& t : rulerTicks(t0, t1, w, 110, info_->range.first)) {
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

void Viewer::drawTracks(float areaX, float areaW) {
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
  for (const auto& t : info_->tracks) {
    if (t.rank != prevRank) {
      prevRank = t.rank;
      const bool isCollapsed = collapsed_.count(t.rank) > 0;
      if (y + kRankHeaderH >= winTop && y <= winBottom) {
        dl->AddRectFilled(ImVec2(origin.x, y), ImVec2(areaX + areaW, y + kRankHeaderH - 1),
                          palette::kRankHeader);
        std::string label =
            std::string(isCollapsed ? "+ " : "- ") + "rank " + std::to_string(t.rank);
        for (const auto& r : info_->ranks) {
          if (r.rank == t.rank) label += "   " + r.host + "  pid " + std::to_string(r.pid);
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
        log(std::string(isCollapsed ? "expanded" : "collapsed") + " rank " +
            std::to_string(t.rank));
      }
      y += kRankHeaderH;
    }
    if (collapsed_.count(t.rank)) continue;
    const float h =
        t.counter() ? kCounterH : rowH() * static_cast<float>(trackState_[t.id].max_depth + 1) + 4;
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
      dl->AddText(nullptr, 0, ImVec2(origin.x + 14, y + 3), palette::kTextDim, label.c_str(),
                  nullptr, 0, &labelClip);
      ++primitives_;
      if (t.counter()) {
        drawCounterTrack(dl, t, areaX, y, areaW, h);
      } else {
        drawSpanTrack(dl, t, areaX, y, areaW);
      }
    }
    y += h;
  }
  drawFlowsAndHighlights(dl, areaX, areaW);
  ImGui::SetCursorScreenPos(ImVec2(origin.x, y));
  ImGui::Dummy(ImVec2(1, 40));  // room under the last track
  handleTimelineInput(areaX, areaW, hoveredWin);
}

void Viewer::drawSpanTrack(ImDrawList* dl, const TrackInfo& t, float x, float y, float w) {
  auto it = windows_.find(t.id);
  if (it == windows_.end()) return;
  const float rh = rowH();
  const ImVec2 mouse = ImGui::GetMousePos();
  const bool mouseHere =
      ImGui::IsWindowHovered() && mouse.y >= y && mouse.x >= x && mouse.x < x + w;
  const ImVec4 clip(x, y, x + w, y + rh * 64);
  float lastX1 = -1e9f;
  int lastDepth = -1;
  for (const DrawItem& item : it->second.items) {
    const Primitive& p = item.prim;
    float x0 = xOf(static_cast<double>(p.start), x, w);
    float x1 = xOf(static_cast<double>(p.end), x, w);
    if (x1 < x || x0 > x + w) continue;
    x0 = std::max(x0, x - 1);
    x1 = std::min(std::max(x1, x0 + 1), x + w + 1);
    // Old primitives drawn at a new zoom can pile into one column: draw one per column and depth.
    if (p.depth == lastDepth && x1 <= lastX1 + 0.5f) continue;
    lastX1 = p.depth == lastDepth ? std::max(x1, lastX1) : x1;
    lastDepth = p.depth;
    const float y0 = y + 2 + rh * static_cast<float>(p.depth);
    const bool fold = p.fold;
    const uint32_t colour = fold ? palette::kFold : palette::category(item.span.category);
    dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1, y0 + rh - 1), colour);
    ++primitives_;
    const bool sel = !fold && selected_ && selected_->id == item.span.id;
    if (sel) {
      dl->AddRect(ImVec2(x0 - 1, y0 - 1), ImVec2(x1 + 1, y0 + rh), palette::kSelection, 0, 0, 2);
      ++primitives_;
    }
    if (x1 - x0 > 28) {
      char buf[64];
      const char* text;
      if (fold) {
        std::snprintf(buf, sizeof buf, "%" PRId64 " spans", p.count);
        text = buf;
      } else {
        text = name(item.span.name).c_str();
      }
      const ImVec4 c(std::max(x0, x) + 3, y0, std::min(x1, x + w) - 2, y0 + rh);
      dl->AddText(nullptr, 0, ImVec2(std::max(x0, x) + 3, y0 + 2),
                  fold ? palette::kText : palette::kTextDark, text, nullptr, 0, &c);
      ++primitives_;
    }
    if (mouseHere && mouse.x >= x0 && mouse.x < std::max(x1, x0 + 2) && mouse.y >= y0 &&
        mouse.y < y0 + rh) {
      // Tooltip: what is known at once, then self time and arguments when the data thread answers.
      const LodSpan& s = item.span;
      if (fold) {
        ImGui::SetTooltip("%" PRId64 " spans folded (%s)\nlongest: %s (%s)\nclick to zoom in",
                          p.count, durationText(p.end - p.start).c_str(),
                          shortName(name(s.name)).c_str(), durationText(s.end - s.start).c_str());
        if (ImGui::IsMouseReleased(0) && !dragging_) {
          const double d = static_cast<double>(p.end - p.start);
          setView(static_cast<double>(p.start) - d * 0.05, static_cast<double>(p.end) + d * 0.05,
                  "zoom into fold");
        }
      } else {
        SpanRef ref{s.id, t.id, s.start, s.end, s.depth, s.name};
        hovered_ = ref;
        if (!hoverDetails_ || hoverDetails_->span.id != s.id)
          worker_->requestDetails(ref, kTagHover);
        ImGui::BeginTooltip();
        ImGui::TextUnformatted(shortName(name(s.name), 120).c_str());
        ImGui::Text("duration %s   %s", durationText(s.end - s.start).c_str(),
                    categoryLabel(static_cast<core::Category>(s.category)).c_str());
        if (hoverDetails_ && hoverDetails_->span.id == s.id) {
          const SpanDetails& d = *hoverDetails_;
          ImGui::Text("self %s   children %" PRId64, durationText(d.self_ns).c_str(), d.children);
          if (!d.detail.empty())
            ImGui::TextUnformatted(("shapes " + shortName(d.detail, 160)).c_str());
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
        if (ImGui::IsMouseReleased(0) && !dragging_) select(ref, "click");
      }
    }
  }
}

void Viewer::drawCounterTrack(ImDrawList* dl, const TrackInfo& t, float x, float y, float w,
                              float h) {
  auto it = windows_.find(t.id);
  if (it == windows_.end() || it->second.counter.empty()) return;
  const TrackWindow& tw = it->second;
  const double lo = std::min(0.0, tw.lo), hi = tw.hi > lo ? tw.hi : lo + 1;
  auto yOf = [&](double v) {
    return y + h - 3 - static_cast<float>((v - lo) / (hi - lo)) * (h - 18);
  };
  const uint32_t line =
      t.kind == core::TrackKind::kMemory ? palette::kMemoryLine : palette::kCounterLine;
  float px = -1, py = 0;
  for (const CounterColumn& c : tw.counter) {
    const double tc =
        static_cast<double>(tw.window.t0) + static_cast<double>(c.column) * tw.window.ns_per_px;
    const float cx = std::clamp(xOf(tc, x, w), x, x + w);
    if (px >= 0) {
      dl->AddLine(ImVec2(px, py), ImVec2(cx, py), line);  // held value
      ++primitives_;
    }
    dl->AddLine(ImVec2(cx, yOf(c.min)), ImVec2(cx, yOf(c.max) - 1), line);
    ++primitives_;
    px = cx;
    py = yOf(c.last);
  }
  if (px >= 0 && px < x + w) {
    dl->AddLine(ImVec2(px, py), ImVec2(x + w, py), line);
    ++primitives_;
  }
  char b[96];
  if (t.kind == core::TrackKind::kMemory) {
    std::snprintf(b, sizeof b, "max %.1f MiB", tw.hi / (1024.0 * 1024.0));
  } else {
    std::snprintf(b, sizeof b, "%.4g .. %.4g", tw.lo, tw.hi);
  }
  dl->AddText(ImVec2(x - kLabelW + 14, y + 3 + ImGui::GetFontSize()), palette::kTextDim, b);
}

void Viewer::drawFlowsAndHighlights(ImDrawList* dl, float x, float w) {
  auto rowY = [&](int64_t track, int depth) -> std::optional<float> {
    for (const auto& r : rows_)
      if (r.track == track) return r.y + 2 + rowH() * (static_cast<float>(depth) + 0.5f);
    return std::nullopt;
  };
  dl->PushClipRect(ImVec2(x, ImGui::GetWindowPos().y),
                   ImVec2(x + w, ImGui::GetWindowPos().y + ImGui::GetWindowSize().y), true);
  for (const auto& row : rows_) {  // the range selection (Shift+drag) over its ranks' rows
    for (const auto& t : info_->tracks) {
      if (rangeSel_ && t.id == row.track &&
          (rangeSel_->ranks.empty() ||
           std::count(rangeSel_->ranks.begin(), rangeSel_->ranks.end(), t.rank)))
        dl->AddRectFilled(
            ImVec2(xOf(rangeSel_->t0, x, w), row.y),
            ImVec2(std::max(xOf(rangeSel_->t1, x, w), xOf(rangeSel_->t0, x, w) + 1), row.y + row.h),
            palette::kRangeBand);
    }
  }
  if (find_ && highlightBin_ >= 0) {
    // Highlighted matches in view, one mark per pixel column and track.
    auto first = std::lower_bound(
        find_->matches.begin(), find_->matches.end(), viewT0_ - 1e12,
        [](const SpanRef& m, double t) { return static_cast<double>(m.start) < t; });
    std::map<int64_t, float> lastX;
    int drawn = 0;
    for (auto it = first; it != find_->matches.end() && static_cast<double>(it->start) <= viewT1_;
         ++it) {
      const int64_t d = it->end - it->start;
      if (d < highlightLo_ || d > highlightHi_ || static_cast<double>(it->end) < viewT0_) continue;
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
  if (selected_ && details_ && details_->span.id == selected_->id) {
    const auto from = rowY(selected_->track, selected_->depth);
    for (const auto& f : details_->flows) {
      const auto to = rowY(f.other.track, f.other.depth);
      if (!from || !to) continue;
      ImVec2 a(xOf(static_cast<double>(selected_->start), x, w), *from);
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

void Viewer::handleTimelineInput(float areaX, float areaW, bool hovered) {
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
      for (const auto& t : info_->tracks)
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
      log(b);
    }
    dragging_ = false;
  }
  if (ImGui::IsMouseDown(0) && ImGui::IsMouseDragging(0, 3) && hovered && !rangeFrom_) {
    const double span = viewT1_ - viewT0_;
    const double t0 = dragStartT0_ - (mouse.x - dragStartX_) / areaW * span;
    if (!dragging_) log("drag pan");
    dragging_ = true;
    setView(t0, t0 + span, nullptr);
    ImGui::SetScrollY(ImGui::GetScrollY() - io.MouseDelta.y);
  }
  if (ImGui::IsMouseReleased(0)) {
    if (dragging_) {
      char b[96];
      std::snprintf(b, sizeof b, "pan");
      setView(viewT0_, viewT1_, b);
    } else if (overArea && !hovered_ && selected_ && ImGui::IsMouseReleased(0) &&
               std::fabs(mouse.x - dragStartX_) < 3) {
      // A click on empty timeline keeps the selection (Esc clears it).
    }
    dragging_ = false;
  }
  // Keyboard: only when no text field has the focus.
  if (io.WantTextInput) return;
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
  if (namedKey(ImGuiKey_Home) && info_)
    setView(static_cast<double>(info_->range.first), static_cast<double>(info_->range.first) + span,
            "home");
  if (namedKey(ImGuiKey_End) && info_)
    setView(static_cast<double>(info_->range.second) - span,
            static_cast<double>(info_->range.second), "end");
  if (!io.KeyCtrl && keyPressed('F')) fit("fit");
  if (!io.KeyCtrl && keyPressed('Z') && selected_) gotoSpan(*selected_);
  if (namedKey(ImGuiKey_Escape) && selected_) {
    selected_.reset();
    details_.reset();
    log("cleared selection");
  }
  if (keyPressed(kKeyF3) || (!io.KeyCtrl && keyPressed('N')))
    gotoMatch(io.KeyShift ? findIndex_ + (find_ ? find_->matches.size() : 0) - 1 : findIndex_ + 1);
  if (!io.KeyCtrl && keyPressed('P') && find_ && !find_->matches.empty())
    gotoMatch(findIndex_ + find_->matches.size() - 1);
}

// ---------------------------------------------------------------------------------------------
// the side panel

void Viewer::drawSidePanel(float width, float height) {
  ImGui::BeginChild("side", ImVec2(width, height), true);
  if (ImGui::BeginTabBar("sidetabs")) {
    const ImGuiTabItemFlags detFlags = sideTab_ == 0 ? ImGuiTabItemFlags_SetSelected : 0;
    const ImGuiTabItemFlags findFlags = sideTab_ == 1 ? ImGuiTabItemFlags_SetSelected : 0;
    if (ImGui::BeginTabItem("Details", nullptr, detFlags)) {
      drawDetails();
      ImGui::EndTabItem();
    }
    if (ImGui::BeginTabItem("Find", nullptr, findFlags)) {
      drawFind();
      ImGui::EndTabItem();
    }
    sideTab_ = -1;  // applied once; the user's clicks pick tabs afterwards
    ImGui::EndTabBar();
  }
  ImGui::EndChild();
}

void Viewer::drawDetails() {
  if (!selected_) {
    ImGui::TextWrapped(
        "Click a span to select it. Wheel: zoom at the cursor. Drag: pan. "
        "F: fit. Ctrl+F: find.");
    if (!notice_.empty()) ImGui::TextDisabled("%s", notice_.c_str());
    return;
  }
  if (!details_ || details_->span.id != selected_->id) {
    ImGui::TextUnformatted(name(selected_->name).c_str());
    ImGui::TextDisabled("loading...");
    return;
  }
  const SpanDetails& d = *details_;
  ImGui::PushTextWrapPos(0);
  ImGui::TextUnformatted(d.name.c_str());
  ImGui::PopTextWrapPos();
  ImGui::Separator();
  const int64_t origin = info_ ? info_->range.first : 0;
  ImGui::Text("span %" PRId64 "   %s   depth %d", d.span.id, d.category.c_str(), d.span.depth);
  ImGui::Text("rank %d   %s", d.rank, d.track_name.c_str());
  ImGui::Text("start     %s", durationText(d.span.start_ns - origin).c_str());
  ImGui::Text("duration  %s", durationText(d.span.dur_ns).c_str());
  ImGui::Text("self      %s", durationText(d.self_ns).c_str());
  if (!d.detail.empty()) {
    ImGui::PushTextWrapPos(0);
    ImGui::Text("shapes    %s", d.detail.c_str());
    ImGui::PopTextWrapPos();
  }
  if (d.span.seq >= 0) ImGui::Text("sequence  %" PRId64, d.span.seq);
  if (ImGui::Button("Zoom to span (Z)")) gotoSpan(*selected_);
  if (!d.args.empty() && ImGui::CollapsingHeader("Arguments", ImGuiTreeNodeFlags_DefaultOpen)) {
    for (const auto& a : d.args) ImGui::BulletText("%s = %s", a.first.c_str(), a.second.c_str());
  }
  if (ImGui::CollapsingHeader("Parents", ImGuiTreeNodeFlags_DefaultOpen)) {
    if (d.parents.empty()) ImGui::TextDisabled("(a root span)");
    for (size_t i = 0; i < d.parents.size(); ++i) {
      const auto& p = d.parents[i];
      ImGui::PushID(static_cast<int>(i));
      std::string label = std::string(i * 2, ' ') + shortName(d.parent_names[i], 60) + "  " +
                          durationText(p.dur_ns);
      if (ImGui::Selectable(label.c_str())) {
        select(SpanRef{p.id, p.track, p.start_ns, p.end_ns(), p.depth, p.name}, "parent");
      }
      ImGui::PopID();
    }
  }
  if (ImGui::CollapsingHeader("Children", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::Text("%" PRId64 " children, %s (%.1f%% of the span)", d.children,
                durationText(d.children_ns).c_str(),
                d.span.dur_ns > 0 ? 100.0 * static_cast<double>(d.children_ns) /
                                        static_cast<double>(d.span.dur_ns)
                                  : 0.0);
    if (ImGui::BeginTable("kids", 3, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
      size_t shown = 0;
      for (const auto& c : d.child_stats) {
        if (++shown > 12) break;
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(shortName(c.name, 40).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%" PRId64 "x", c.count);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(durationText(c.total_ns).c_str());
      }
      ImGui::EndTable();
    }
  }
  if (!d.flows.empty() && ImGui::CollapsingHeader("Flows", ImGuiTreeNodeFlags_DefaultOpen)) {
    for (size_t i = 0; i < d.flows.size(); ++i) {
      const auto& f = d.flows[i];
      ImGui::PushID(static_cast<int>(1000 + i));
      std::string label = std::string(f.outgoing ? "-> " : "<- ") + core::flowKindName(f.kind) +
                          ": " + shortName(f.other_name, 50);
      if (ImGui::Selectable(label.c_str())) select(f.other, "flow");
      ImGui::PopID();
    }
  }
}

void Viewer::drawFind() {
  if (focusFind_) {
    ImGui::SetKeyboardFocusHere();
    focusFind_ = false;
  }
  ImGui::SetNextItemWidth(-70);
  const bool enter =
      ImGui::InputText("##find", findText_, sizeof findText_, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if (enter) focusFind_ = true;  // Enter again: the next match
  if ((ImGui::Button("Find") || enter) && worker_) {
    if (find_ && find_->needle == findText_ && !find_->matches.empty()) {
      gotoMatch(findIndex_ + (enter ? 1 : 0));
    } else {
      worker_->requestFind(findText_);
      findPending_ = true;
      log(std::string("find '") + findText_ + "'");
    }
  }
  if (findPending_) {
    ImGui::TextDisabled("searching every rank...");
    if (ImGui::Button("Cancel") && worker_) {
      worker_->requestFind("");
      log("find cancelled");
    }
    return;
  }
  if (!find_) {
    ImGui::TextDisabled("Names containing the text, across every rank (Enter: search, then next).");
    return;
  }
  const auto& m = find_->matches;
  if (m.empty()) {
    ImGui::Text("no span name contains '%s'", find_->needle.c_str());
    return;
  }
  int64_t total = 0, lo = INT64_MAX, hi = 0;
  for (const auto& s : m) {
    const int64_t d = s.end - s.start;
    total += d;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  ImGui::Text("%zu matches%s, %s in all", m.size(), find_->truncated ? " (first)" : "",
              durationText(total).c_str());
  if (ImGui::ArrowButton("prev", ImGuiDir_Left)) gotoMatch(findIndex_ + m.size() - 1);
  ImGui::SameLine();
  if (ImGui::ArrowButton("next", ImGuiDir_Right)) gotoMatch(findIndex_ + 1);
  ImGui::SameLine();
  ImGui::Text("%zu / %zu  (N / P, F3)", findIndex_ + 1, m.size());
  // Histogram of durations (log bins); a click on a bar highlights those spans.
  const double logLo = std::log(static_cast<double>(std::max<int64_t>(lo, 1)));
  const double logHi = std::log(static_cast<double>(std::max<int64_t>(hi, 1))) + 1e-9;
  std::vector<int64_t> bins(kHistBins, 0);
  for (const auto& s : m) ++bins[static_cast<size_t>(binOf(s.end - s.start, logLo, logHi))];
  const int64_t peak = *std::max_element(bins.begin(), bins.end());
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float hw = ImGui::GetContentRegionAvail().x, hh = 110;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + hw, p.y + hh), palette::kRuler);
  ImGui::InvisibleButton("hist", ImVec2(hw, hh));
  const float bw = hw / kHistBins;
  const int hoverBin =
      ImGui::IsItemHovered()
          ? std::clamp(static_cast<int>((ImGui::GetMousePos().x - p.x) / bw), 0, kHistBins - 1)
          : -1;
  auto binEdge = [&](int b) {
    return static_cast<int64_t>(std::exp(logLo + (logHi - logLo) * b / kHistBins));
  };
  for (int b = 0; b < kHistBins; ++b) {
    if (bins[static_cast<size_t>(b)] == 0) continue;
    const float bh =
        static_cast<float>(std::log1p(static_cast<double>(bins[static_cast<size_t>(b)])) /
                           std::log1p(static_cast<double>(peak))) *
        (hh - 6);
    const uint32_t colour = b == highlightBin_ ? palette::kHighlight : palette::kHistogram;
    dl->AddRectFilled(ImVec2(p.x + b * bw + 1, p.y + hh - bh),
                      ImVec2(p.x + (b + 1) * bw - 1, p.y + hh), colour);
  }
  if (hoverBin >= 0) {
    ImGui::SetTooltip("%" PRId64 " spans of %s .. %s\nclick: highlight them",
                      bins[static_cast<size_t>(hoverBin)], durationText(binEdge(hoverBin)).c_str(),
                      durationText(binEdge(hoverBin + 1)).c_str());
    if (ImGui::IsItemClicked()) {
      if (highlightBin_ == hoverBin) {
        highlightBin_ = -1;
        log("highlight cleared");
      } else {
        highlightBin_ = hoverBin;
        // Bin membership is decided by binOf, so the range covers exactly the bar's spans.
        highlightLo_ = INT64_MAX;
        highlightHi_ = 0;
        for (const auto& s : m) {
          if (binOf(s.end - s.start, logLo, logHi) != hoverBin) continue;
          highlightLo_ = std::min(highlightLo_, s.end - s.start);
          highlightHi_ = std::max(highlightHi_, s.end - s.start);
        }
        log("highlighted " + std::to_string(bins[static_cast<size_t>(hoverBin)]) + " spans of " +
            durationText(highlightLo_) + " .. " + durationText(highlightHi_));
      }
    }
  }
  ImGui::Text("%s", durationText(lo).c_str());
  ImGui::SameLine(hw - ImGui::CalcTextSize(durationText(hi).c_str()).x);
  ImGui::Text("%s", durationText(hi).c_str());
  // The matches, virtualised.
  ImGui::BeginChild("matches", ImVec2(0, 0), true);
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(m.size()));
  const int64_t origin = info_ ? info_->range.first : 0;
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const SpanRef& s = m[static_cast<size_t>(i)];
      const TrackInfo* t = nullptr;
      for (const auto& tr : info_->tracks)
        if (tr.id == s.track) t = &tr;
      char b[256];
      std::snprintf(b, sizeof b, "%10s  r%d  %10s  %s##%d", durationText(s.start - origin).c_str(),
                    t ? t->rank : -1, durationText(s.end - s.start).c_str(),
                    shortName(name(s.name), 40).c_str(), i);
      if (ImGui::Selectable(b, static_cast<size_t>(i) == findIndex_))
        gotoMatch(static_cast<size_t>(i));
    }
  }
  ImGui::EndChild();
}

// ---------------------------------------------------------------------------------------------
// the file picker

void Viewer::drawPicker(bool inlinePanel) {
  if (inlinePanel) {
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ImGui::BeginChild("picker", ImVec2(avail.x, avail.y - ImGui::GetFrameHeightWithSpacing()),
                      true);
    ImGui::TextUnformatted("Open a trace (a run.db written by tracerun -o run.db)");
    ImGui::Separator();
  }
  std::string chosen;
  if (!recent_.paths().empty()) {
    ImGui::TextDisabled("Recent");
    for (const auto& p : recent_.paths()) {
      if (ImGui::Selectable(p.c_str())) chosen = p;
    }
    ImGui::Separator();
  }
  ImGui::SetNextItemWidth(-80);
  if (ImGui::InputText("##path", pickerPath_, sizeof pickerPath_,
                       ImGuiInputTextFlags_EnterReturnsTrue) ||
      (ImGui::SameLine(), ImGui::Button("Open"))) {
    if (pickerPath_[0] != '\0') chosen = pickerPath_;
  }
  ImGui::TextDisabled("%s", pickerDir_.c_str());
  ImGui::BeginChild("entries", ImVec2(0, inlinePanel ? 0 : -ImGui::GetFrameHeightWithSpacing()),
                    true);
  std::error_code ec;
  std::vector<fs::directory_entry> dirs, files;
  for (fs::directory_iterator it(pickerDir_, ec), end; !ec && it != end; it.increment(ec)) {
    const auto& e = *it;
    const std::string n = e.path().filename().string();
    if (n.empty() || n[0] == '.') continue;
    if (e.is_directory(ec)) {
      dirs.push_back(e);
    } else if (e.path().extension() == ".db") {
      files.push_back(e);
    }
  }
  std::sort(dirs.begin(), dirs.end());
  std::sort(files.begin(), files.end());
  if (ImGui::Selectable("../", false, ImGuiSelectableFlags_AllowDoubleClick) &&
      ImGui::IsMouseDoubleClicked(0)) {
    pickerDir_ = fs::path(pickerDir_).parent_path().string();
  }
  for (const auto& d : dirs) {
    const std::string label = d.path().filename().string() + "/";
    if (ImGui::Selectable(label.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick) &&
        ImGui::IsMouseDoubleClicked(0)) {
      pickerDir_ = d.path().string();
    }
  }
  for (const auto& f : files) {
    const std::string label = f.path().filename().string();
    if (ImGui::Selectable(label.c_str(), false, ImGuiSelectableFlags_AllowDoubleClick)) {
      std::snprintf(pickerPath_, sizeof pickerPath_, "%s", f.path().string().c_str());
      if (ImGui::IsMouseDoubleClicked(0)) chosen = f.path().string();
    }
  }
  ImGui::EndChild();
  if (!inlinePanel && ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
  if (inlinePanel) ImGui::EndChild();
  if (!chosen.empty()) {
    log("open " + chosen);
    if (!inlinePanel) ImGui::CloseCurrentPopup();
    open(chosen);
  }
}

// ---------------------------------------------------------------------------------------------
// the status line

void Viewer::drawStatus() {
  ImGui::Separator();
  if (!info_) {
    ImGui::TextDisabled("%s", path_.empty() ? "no trace open" : ("opening " + path_).c_str());
    return;
  }
  const bool loading = worker_ && (worker_->busy() || doneGen_ < requestedGen_);
  ImGui::TextDisabled(
      "%s  |  %zu ranks, %zu tracks, %s spans  |  %s/px  |  %" PRId64 " primitives%s%s%s",
      path_.c_str(), info_->ranks.size(), info_->tracks.size(),
      std::to_string(info_->counts.spans).c_str(),
      durationText(static_cast<int64_t>(std::max(1.0, nsPerPx()))).c_str(), primitives_,
      loading ? "  |  loading..." : "", notice_.empty() ? "" : "  |  ", notice_.c_str());
}

}  // namespace tracerun::viewer
