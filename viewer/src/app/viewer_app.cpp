// traceview's shell (see viewer_app.h for the section index): the window's menu, tab bar, file
// picker and status line, and the routing of the data thread's answers. ImGui 1.86, pre-1.87 key
// API: letter keys are GLFW key codes, which equal their upper-case ASCII letters.
#include "app/viewer_app.h"

#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "app/palette.h"
#include "app/views.h"
#include "data/time_axis.h"
#include "timeline/timeline_view.h"

namespace tracerun::viewer {

namespace {

constexpr int kKeyF12 = 301;  // GLFW_KEY_F12

bool keyPressed(int key) {
  return ImGui::IsKeyPressed(key, true);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// options

Viewer::Viewer(ViewerOptions options, std::function<void()> wake)
    : options_(std::move(options)),
      wake_(std::move(wake)),
      recent_(options_.recent_file),
      session_(options_.log_actions, options_.record_boxes) {
  if (!options_.path.empty()) open(options_.path);
}

Viewer::~Viewer() {
  session_.worker.reset();  // joins the data thread before the views it answers go
}

// ---------------------------------------------------------------------------------------------
// opening and answers

void Viewer::open(const std::string& path) {
  session_.worker.reset();
  session_.path = path;
  session_.info.reset();
  session_.problem.clear();
  session_.notice.clear();
  session_.selected.reset();
  session_.details.reset();
  session_.pendingById = false;
  // The timeline first, then the views beside it (views.h), all fresh for the new trace.
  auto timeline = std::make_unique<TimelineView>(session_);
  timeline_ = timeline.get();
  views_.clear();
  views_.push_back(std::move(timeline));
  for (auto& v : makeViews()) views_.push_back(std::move(v));
  wantedTab_ = kTimelineTab;
  for (size_t i = 0; i < views_.size(); ++i)
    if (options_.view == views_[i]->word()) wantedTab_ = static_cast<int>(i);
  requestTab_ = wantedTab_;
  session_.worker = std::make_unique<DataWorker>(path, wake_);
}

void Viewer::applyOpened(OpenResult opened) {
  Session& s = session_;
  s.info = std::move(opened);
  if (!s.info->ok) {
    s.problem = s.info->error;
    log("error " + s.problem);
    return;
  }
  const auto& c = s.info->counts;
  if (c.spans + c.counters + c.memory + c.instants == 0 || s.info->tracks.empty()) {
    s.problem = s.path + ": the trace holds no events (no spans, counters or memory)";
  }
  std::vector<std::string> notes;
  if (s.info->ranks.size() == 1) notes.push_back("one rank");
  if (c.memory == 0) notes.push_back("no memory events");
  if (c.flows == 0) notes.push_back("no flows");
  for (size_t i = 0; i < notes.size(); ++i) s.notice += (i ? ", " : "") + notes[i];
  recent_.add(s.path);
  log("opened " + s.path + " (" + std::to_string(s.info->ranks.size()) + " ranks, " +
      std::to_string(s.info->tracks.size()) + " tracks)");
  if (!s.problem.empty()) {
    log("error " + s.problem);
    return;
  }
  timeline_->opened(options_.range);
  if (options_.go) {
    s.worker->requestSpanById(options_.go->second, options_.go->first, true);
    s.pendingById = true;
  } else if (options_.select) {
    s.worker->requestSpanById(*options_.select, -1, false);
    s.pendingById = true;
  }
}

void Viewer::applyResults() {
  Session& s = session_;
  if (!s.worker) return;
  WorkerOutput out = s.worker->take();
  if (out.opened) applyOpened(std::move(*out.opened));
  for (auto& [tag, d] : out.details) {
    if (tag == Session::kTagSelect && s.selected && d.span.id == s.selected->id)
      s.details = std::move(d);
  }
  timeline_->apply(out);  // windows, steps, the hovered span's details, find
  if (out.by_id) {
    s.pendingById = false;
    if (out.by_id->span) {
      if (out.by_id->center) timeline_->gotoSpan(*out.by_id->span);
      s.select(*out.by_id->span);
    } else {
      const std::string msg = "no span with id " + std::to_string(out.by_id->id) + " in " + s.path;
      if (options_.headless) s.problem = msg;
      s.notice = msg;
      log("error " + msg);
    }
  }
  for (const auto& e : out.errors) {
    s.notice = e;
    log("error " + e);
  }
}

// ---------------------------------------------------------------------------------------------
// the shell's queries

std::string Viewer::layoutText() const {
  std::string out = timeline_ ? timeline_->dumpText() : std::string();
  char b[256];
  for (const auto& t : tabRects_) {
    std::snprintf(b, sizeof b, "tab %s %.1f %.1f %.1f %.1f\n", t.word, t.x, t.y, t.w, t.h);
    out += b;
  }
  return out;
}

bool Viewer::settled() const {
  const Session& s = session_;
  if (!s.worker) return true;
  if (!s.info) return false;
  if (!s.problem.empty()) return !s.worker->busy() || !s.info->ok;
  const bool viewSettled =
      activeTab_ == wantedTab_ && views_[static_cast<size_t>(activeTab_)]->settled();
  return !s.worker->busy() && !s.pendingById && timeline_->settled() &&
         (!s.selected || s.details) && viewSettled;
}

int64_t Viewer::primitivesLastFrame() const {
  return timeline_ && drawnTab_ == kTimelineTab ? timeline_->primitives() : 0;
}

void Viewer::showRange(double t0, double t1) {
  if (timeline_) timeline_->showRange(t0, t1, nullptr);
}

float Viewer::timeAreaWidth() const {
  return timeline_ ? timeline_->areaWidth() : 1000;
}

std::string Viewer::activeViewWord() const {
  return views_.empty() ? kTimelineWord : views_[static_cast<size_t>(activeTab_)]->word();
}

std::string Viewer::activeViewText() const {
  if (views_.empty() || activeTab_ == kTimelineTab) return layoutText();
  return views_[static_cast<size_t>(activeTab_)]->dumpText();
}

bool Viewer::showView(const std::string& word) {
  int tab = kNoRequest;
  for (size_t i = 0; i < views_.size(); ++i)
    if (word == views_[i]->word()) tab = static_cast<int>(i);
  if (tab == kNoRequest) return false;
  requestTab_ = wantedTab_ = tab;
  return true;
}

void Viewer::selectSpan(int64_t id, bool centre) {
  if (!session_.worker) return;
  session_.worker->requestSpanById(id, -1, centre);
  session_.pendingById = true;
}

std::optional<int64_t> Viewer::selectedSpan() const {
  if (!session_.selected) return std::nullopt;
  return session_.selected->id;
}

std::pair<double, double> Viewer::timelineRange() const {
  return timeline_->range();
}

void Viewer::showTimeRange(double t0, double t1) {
  timeline_->showRange(t0, t1, "view");
}

const RangeSelection* Viewer::rangeSelection() const {
  return timeline_ ? timeline_->rangeSelection() : nullptr;
}

// ---------------------------------------------------------------------------------------------
// the frame

void Viewer::frame() {
  applyResults();
  if (timeline_) timeline_->beginFrame();
  drawnTab_ = kNoRequest;
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
  // --log-actions: each key that went down or up this frame ("key down N", "key up N", GLFW's
  // code). ImGui 1.86 keeps no key queue: a key pressed and released between two frames is never
  // seen, and nor is a release followed by the next press, so a driver holds a key until a frame
  // has read it down and waits until one has read it up (tests/viewer/viewer_test_util.cpp, press).
  if (session_.logsActions()) {
    for (int k = 0; k < IM_ARRAYSIZE(io.KeysDown); ++k) {
      if (io.KeysDownDuration[k] == 0.0f) session_.log("key down " + std::to_string(k));
      if (io.KeysDownDurationPrev[k] >= 0.0f && io.KeysDownDuration[k] < 0.0f)
        session_.log("key up " + std::to_string(k));
    }
  }
  // Global keys.
  if (io.KeyCtrl && keyPressed('O')) pickerOpen_ = true;
  if (io.KeyCtrl && keyPressed('Q')) quit_ = true;
  if (keyPressed(kKeyF12)) screenshotKey_ = true;
  if (io.KeyCtrl && keyPressed('F') && timeline_) timeline_->openFind();

  const float statusH = ImGui::GetFrameHeightWithSpacing();
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bodyH = avail.y - statusH;
  const Session& s = session_;
  if (!s.worker) {
    drawPicker(true);
  } else if (!s.info) {
    drawMessage("Opening " + s.path + " ...", palette::kText);
  } else if (!s.problem.empty()) {
    drawMessage(
        s.problem + "\n\nOpen another file with Ctrl+O (tracerun writes traces with -o run.db).",
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
  if (timeline_) timeline_->ensureData();
}

void Viewer::drawTabs(float width, float height) {
  const float top = ImGui::GetCursorPosY();
  if (!ImGui::BeginTabBar("views")) return;
  tabRects_.clear();  // capacity kept: no allocation after the first frame
  for (size_t i = 0; i < views_.size(); ++i) {
    View& v = *views_[i];
    const int tab = static_cast<int>(i);
    const bool open = ImGui::BeginTabItem(
        v.title(), nullptr,
        requestTab_ == tab ? ImGuiTabItemFlags_SetSelected : ImGuiTabItemFlags_None);
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    tabRects_.push_back({v.word(), a.x, a.y, b.x - a.x, b.y - a.y});
    if (open) {
      if (activeTab_ != tab && tab != kTimelineTab) log(std::string("view ") + v.word());
      activeTab_ = drawnTab_ = tab;
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
    if (ImGui::MenuItem("Fit the whole run", "F") && timeline_) timeline_->fit("fit");
    if (ImGui::MenuItem("Zoom to selection", "Z", false, session_.selected.has_value()))
      timeline_->gotoSpan(*session_.selected);
    if (ImGui::MenuItem("Expand all ranks") && timeline_) timeline_->expandAll();
    if (ImGui::MenuItem("Collapse all ranks") && timeline_) timeline_->collapseAll();
    ImGui::EndMenu();
  }
  if (ImGui::MenuItem("Find", "Ctrl+F") && timeline_) timeline_->openFind();
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

// The start screen (inline) and File > Open's popup: the one file picker, opening what it returns.
void Viewer::drawPicker(bool inlinePanel) {
  if (inlinePanel) {
    const ImVec2 avail = ImGui::GetContentRegionAvail();
    ImGui::BeginChild("picker", ImVec2(avail.x, avail.y - ImGui::GetFrameHeightWithSpacing()),
                      true);
    ImGui::TextUnformatted("Open a trace (a run.db written by tracerun -o run.db)");
    ImGui::Separator();
  }
  const auto chosen =
      picker_.draw(recent_.paths(), inlinePanel ? 0 : -ImGui::GetFrameHeightWithSpacing());
  if (!inlinePanel && ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
  if (inlinePanel) ImGui::EndChild();
  if (chosen) {
    log("open " + *chosen);
    if (!inlinePanel) ImGui::CloseCurrentPopup();
    open(*chosen);
  }
}

void Viewer::drawStatus() {
  ImGui::Separator();
  const Session& s = session_;
  if (!s.info) {
    ImGui::TextDisabled("%s", s.path.empty() ? "no trace open" : ("opening " + s.path).c_str());
    return;
  }
  const bool loading = s.worker && (s.worker->busy() || (timeline_ && timeline_->loading()));
  ImGui::TextDisabled(
      "%s  |  %zu ranks, %zu tracks, %s spans  |  %s/px  |  %" PRId64 " primitives%s%s%s",
      s.path.c_str(), s.info->ranks.size(), s.info->tracks.size(),
      std::to_string(s.info->counts.spans).c_str(),
      durationText(static_cast<int64_t>(std::max(1.0, timeline_->nsPerPx()))).c_str(),
      primitivesLastFrame(), loading ? "  |  loading..." : "", s.notice.empty() ? "" : "  |  ",
      s.notice.c_str());
}

}  // namespace tracerun::viewer
