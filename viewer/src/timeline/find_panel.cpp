// FindPanel (find_panel.h): the search field, the duration histogram and the match list.
#include "timeline/find_panel.h"

#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <vector>

#include "app/palette.h"
#include "data/time_axis.h"

namespace tracerun::viewer {

namespace {

constexpr int kHistBins = 32;

std::string shortName(const std::string& s, size_t max) {
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

void FindPanel::apply(FindResult result, const Session& s) {
  pending_ = false;
  result_ = std::move(result);
  index_ = 0;
  bin_ = -1;
  s.log("find '" + result_->needle + "': " + std::to_string(result_->matches.size()) + " matches");
}

void FindPanel::gotoMatch(size_t i, Session& s, const GoTo& go) {
  if (!result_ || result_->matches.empty()) return;
  index_ = i % result_->matches.size();
  const SpanRef& m = result_->matches[index_];
  go(m);
  s.select(m);
}

void FindPanel::step(int delta, Session& s, const GoTo& go) {
  const size_t n = result_ ? result_->matches.size() : 0;
  gotoMatch(delta < 0 ? index_ + n - 1 : index_ + 1, s, go);
}

void FindPanel::draw(Session& s, const GoTo& go) {
  if (focus_) {
    ImGui::SetKeyboardFocusHere();
    focus_ = false;
  }
  ImGui::SetNextItemWidth(-70);
  const bool enter =
      ImGui::InputText("##find", text_, sizeof text_, ImGuiInputTextFlags_EnterReturnsTrue);
  if (ImGui::IsItemActivated()) s.log("find focused");  // typed text goes to the box from now
  // Enter deactivates a single-line box: take the focus back at once (the previous widget, this
  // frame), so that Enter again gives the next match.
  if (enter) ImGui::SetKeyboardFocusHere(-1);
  ImGui::SameLine();
  if ((ImGui::Button("Find") || enter) && s.worker) {
    if (result_ && result_->needle == text_ && !result_->matches.empty()) {
      gotoMatch(index_ + (enter ? 1 : 0), s, go);
    } else {
      s.worker->requestFind(text_);
      pending_ = true;
      s.log(std::string("find '") + text_ + "'");
    }
  }
  if (pending_) {
    ImGui::TextDisabled("searching every rank...");
    if (ImGui::Button("Cancel") && s.worker) {
      s.worker->requestFind("");
      s.log("find cancelled");
    }
    return;
  }
  if (!result_) {
    ImGui::TextDisabled("Names containing the text, across every rank (Enter: search, then next).");
    return;
  }
  const auto& m = result_->matches;
  if (m.empty()) {
    ImGui::Text("no span name contains '%s'", result_->needle.c_str());
    return;
  }
  int64_t total = 0, lo = INT64_MAX, hi = 0;
  for (const auto& r : m) {
    const int64_t d = r.end - r.start;
    total += d;
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  ImGui::Text("%zu matches%s, %s in all", m.size(), result_->truncated ? " (first)" : "",
              durationText(total).c_str());
  if (ImGui::ArrowButton("prev", ImGuiDir_Left)) gotoMatch(index_ + m.size() - 1, s, go);
  ImGui::SameLine();
  if (ImGui::ArrowButton("next", ImGuiDir_Right)) gotoMatch(index_ + 1, s, go);
  ImGui::SameLine();
  ImGui::Text("%zu / %zu  (N / P, F3)", index_ + 1, m.size());
  drawHistogram(s, lo, hi);
  // The matches, virtualised.
  ImGui::BeginChild("matches", ImVec2(0, 0), true);
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(m.size()));
  const int64_t origin = s.info ? s.info->range.first : 0;
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const SpanRef& r = m[static_cast<size_t>(i)];
      const TrackInfo* t = nullptr;
      for (const auto& tr : s.info->tracks)
        if (tr.id == r.track) t = &tr;
      char b[256];
      std::snprintf(b, sizeof b, "%10s  r%d  %10s  %s##%d", durationText(r.start - origin).c_str(),
                    t ? t->rank : -1, durationText(r.end - r.start).c_str(),
                    shortName(s.name(r.name), 40).c_str(), i);
      if (ImGui::Selectable(b, static_cast<size_t>(i) == index_))
        gotoMatch(static_cast<size_t>(i), s, go);
    }
  }
  ImGui::EndChild();
}

// Histogram of the matches' durations (log bins); a click on a bar highlights those spans.
void FindPanel::drawHistogram(Session& s, int64_t lo, int64_t hi) {
  const auto& m = result_->matches;
  const double logLo = std::log(static_cast<double>(std::max<int64_t>(lo, 1)));
  const double logHi = std::log(static_cast<double>(std::max<int64_t>(hi, 1))) + 1e-9;
  std::vector<int64_t> bins(kHistBins, 0);
  for (const auto& r : m) ++bins[static_cast<size_t>(binOf(r.end - r.start, logLo, logHi))];
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
    const uint32_t colour = b == bin_ ? palette::kHighlight : palette::kHistogram;
    dl->AddRectFilled(ImVec2(p.x + b * bw + 1, p.y + hh - bh),
                      ImVec2(p.x + (b + 1) * bw - 1, p.y + hh), colour);
  }
  if (hoverBin >= 0) {
    ImGui::SetTooltip("%" PRId64 " spans of %s .. %s\nclick: highlight them",
                      bins[static_cast<size_t>(hoverBin)], durationText(binEdge(hoverBin)).c_str(),
                      durationText(binEdge(hoverBin + 1)).c_str());
    if (ImGui::IsItemClicked()) {
      if (bin_ == hoverBin) {
        bin_ = -1;
        s.log("highlight cleared");
      } else {
        bin_ = hoverBin;
        // Bin membership is decided by binOf, so the range covers exactly the bar's spans.
        lo_ = INT64_MAX;
        hi_ = 0;
        for (const auto& r : m) {
          if (binOf(r.end - r.start, logLo, logHi) != hoverBin) continue;
          lo_ = std::min(lo_, r.end - r.start);
          hi_ = std::max(hi_, r.end - r.start);
        }
        s.log("highlighted " + std::to_string(bins[static_cast<size_t>(hoverBin)]) + " spans of " +
              durationText(lo_) + " .. " + durationText(hi_));
      }
    }
  }
  ImGui::Text("%s", durationText(lo).c_str());
  ImGui::SameLine(hw - ImGui::CalcTextSize(durationText(hi).c_str()).x);
  ImGui::Text("%s", durationText(hi).c_str());
}

}  // namespace tracerun::viewer
