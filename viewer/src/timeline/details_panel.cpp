// The Details side tab (details_panel.h).
#include "timeline/details_panel.h"

#include <imgui.h>

#include <cinttypes>
#include <optional>
#include <string>

#include "data/time_axis.h"

namespace tracerun::viewer {

namespace {

std::string shortName(const std::string& s, size_t max) {
  return s.size() <= max ? s : s.substr(0, max) + "...";
}

void drawChildren(const SpanDetails& d) {
  ImGui::Text("%" PRId64 " children, %s (%.1f%% of the span)", d.children,
              durationText(d.children_ns).c_str(),
              d.span.dur_ns > 0
                  ? 100.0 * static_cast<double>(d.children_ns) / static_cast<double>(d.span.dur_ns)
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

}  // namespace

void drawDetailsPanel(Session& s, const std::function<void(const SpanRef&)>& zoomTo) {
  if (!s.selected) {
    ImGui::TextWrapped(
        "Click a span to select it. Wheel: zoom at the cursor. Drag: pan. "
        "F: fit. Ctrl+F: find.");
    if (!s.notice.empty()) ImGui::TextDisabled("%s", s.notice.c_str());
    return;
  }
  if (!s.details || s.details->span.id != s.selected->id) {
    ImGui::TextUnformatted(s.name(s.selected->name).c_str());
    ImGui::TextDisabled("loading...");
    return;
  }
  const SpanDetails& d = *s.details;
  std::optional<SpanRef> next;  // selected after drawing: select() drops these details
  ImGui::PushTextWrapPos(0);
  ImGui::TextUnformatted(d.name.c_str());
  ImGui::PopTextWrapPos();
  ImGui::Separator();
  const int64_t origin = s.info ? s.info->range.first : 0;
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
  if (d.launch) {  // a kernel, copy or set with its launch (trace/analysis/gpu_launch.h)
    ImGui::Text("launch delay  %s %s", durationText(d.launch->delay_ns).c_str(),
                d.launch->record ? "after the launch call" : "after its op's start (estimate)");
  }
  if (ImGui::Button("Zoom to span (Z)")) zoomTo(*s.selected);
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
      if (ImGui::Selectable(label.c_str()))
        next = SpanRef{p.id, p.track, p.start_ns, p.end_ns(), p.depth, p.name};
      ImGui::PopID();
    }
  }
  if (ImGui::CollapsingHeader("Children", ImGuiTreeNodeFlags_DefaultOpen)) drawChildren(d);
  if (!d.flows.empty() && ImGui::CollapsingHeader("Flows", ImGuiTreeNodeFlags_DefaultOpen)) {
    for (size_t i = 0; i < d.flows.size(); ++i) {
      const auto& f = d.flows[i];
      ImGui::PushID(static_cast<int>(1000 + i));
      std::string label = std::string(f.outgoing ? "-> " : "<- ") + core::flowKindName(f.kind) +
                          ": " + shortName(f.other_name, 50);
      if (ImGui::Selectable(label.c_str())) next = f.other;
      ImGui::PopID();
    }
  }
  if (next) s.select(*next);
}

}  // namespace tracerun::viewer
