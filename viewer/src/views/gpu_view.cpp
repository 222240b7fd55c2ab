// The GPU tab (see gpu_view.h): analyzeGpu runs once per trace on its own thread; a click on a
// kernel row looks for its longest instance on another. Draws the bars gpu_data.h lays out and an
// ImGui table; computes no number itself.
#include "views/gpu_view.h"

#include <imgui.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "app/palette.h"
#include "data/background_query.h"
#include "tracerun/trace/format.h"
#include "views/gpu_data.h"

namespace tracerun::viewer {
namespace {

namespace an = trace::analysis;

constexpr float kLabelW = 96;
constexpr float kTemporalH = 22, kIdleH = 16;

std::string dur(int64_t ns) {
  return trace::formatDuration(static_cast<double>(ns));
}

std::string pct(int64_t part, int64_t whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%",
                whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0);
  return b;
}

uint32_t partColour(const std::string& part) {
  if (part == "compute") return palette::gpuKind(0, false);
  if (part == "comm") return palette::gpuKind(1, false);
  if (part == "memory") return palette::gpuKind(2, false);
  if (part == "host_wait") return palette::kGpuIdlePart[0];
  if (part == "kernel_wait") return palette::kGpuIdlePart[1];
  if (part == "other") return palette::kGpuIdlePart[2];
  return palette::kGpuIdle;
}

const char* partLabel(const std::string& part) {
  if (part == "comm") return "comm (not under compute)";
  if (part == "memory") return "memory (alone)";
  if (part == "host_wait") return "host wait";
  if (part == "kernel_wait") return "kernel wait";
  return part.c_str();
}

struct Pick {
  std::string name;
  std::optional<trace::SpanRow> span;
};

class GpuView final : public View {
 public:
  const char* word() const override { return "gpu"; }
  const char* title() const override { return "GPU"; }

  bool settled() const override {
    if (!drawn_ || noGpu_) return true;
    if (!query_.ready() || !shown_) return false;  // the result drawn, not only arrived
    if (!pick_.started()) return true;
    // The pick has arrived, and its span has reached the shared selection.
    return pick_.ready() && pickApplied_ &&
           (pickedSpan_ < 0 || (host_ && host_->selectedSpan() == pickedSpan_));
  }

  std::string dumpText() const override {
    const auto* g = query_.result();
    if (noGpu_ || (g && !g->present())) return "no-gpu\n";
    if (!g) return {};
    std::string out = gpuDumpText(*g, barW_);
    char b[96];
    for (const auto& [row, r] : rowRects_) {  // where the rows are, for scripts that click them
      std::snprintf(b, sizeof b, "row %d %.1f %.1f %.1f %.1f\n", row, r.x, r.y, r.z, r.w);
      out += b;
    }
    if (host_ && host_->selectedSpan())
      out += "selected " + std::to_string(*host_->selectedSpan()) + "\n";
    return out;
  }

  void draw(ViewHost& host, float width, float height) override {
    drawn_ = true;
    host_ = &host;
    if (!query_.started() && !noGpu_) {
      noGpu_ = std::none_of(host.trace().tracks.begin(), host.trace().tracks.end(),
                            [](const TrackInfo& t) { return an::gpuStreamTrack(t.name); });
      if (!noGpu_) {
        const std::string path = host.tracePath();
        query_.start(
            [path](const std::atomic<bool>&) {
              return an::analyzeGpu(trace::TraceReader::open(path));
            },
            host.waker());
      }
    }
    shown_ = query_.ready();
    if (noGpu_ || (query_.result() && !query_.result()->present())) {
      ImGui::TextDisabled(
          "No GPU activity in this trace: no kernel, copy or set on a \"cuda:D stream S\" track "
          "(record with tracerun --capture ...,cuda on a GPU).");
      return;
    }
    if (!query_.error().empty()) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kError), "GPU analysis: %s",
                         query_.error().c_str());
      return;
    }
    const an::GpuAnalysis* g = query_.result();
    if (!g) {
      ImGui::TextDisabled("computing the GPU analysis...");
      return;
    }
    collectPick(host);
    ImGui::TextDisabled(
        "Per rank and device, from the first to the last GPU activity, as Holistic Trace Analysis "
        "computes it (tracerun report's gpu section).");
    drawLegend();
    const float devH = static_cast<float>(g->devices.size()) *
                       (kTemporalH + kIdleH + ImGui::GetTextLineHeightWithSpacing() * 2 + 18);
    const float topH = std::min(devH, (height - ImGui::GetCursorPosY()) * 0.5f);
    ImGui::BeginChild("devices", ImVec2(width - 8, topH), false);
    barW_ = std::max(50.0f, width - kLabelW - 40);
    for (const an::GpuDevice& d : g->devices) drawDevice(d);
    ImGui::EndChild();
    drawKernels(host, *g, width, height - ImGui::GetCursorPosY() - 8);
  }

 private:
  static void drawLegend() {
    const char* parts[] = {"compute",   "comm",        "memory", "idle",
                           "host_wait", "kernel_wait", "other"};
    for (const char* p : parts) {
      const ImVec2 at = ImGui::GetCursorScreenPos();
      const float s = ImGui::GetFontSize() * 0.8f;
      ImGui::GetWindowDrawList()->AddRectFilled(ImVec2(at.x, at.y + 3),
                                                ImVec2(at.x + s, at.y + 3 + s), partColour(p));
      ImGui::Dummy(ImVec2(s + 2, s));
      ImGui::SameLine();
      ImGui::TextUnformatted(partLabel(p));
      ImGui::SameLine(0, 18);
    }
    ImGui::NewLine();
  }

  // One bar: its segments with labels where they fit; the hovered segment's tooltip.
  void drawBar(const char* label, const std::vector<GpuBarSegment>& segs, int64_t whole, float h) {
    ImDrawList* dl = ImGui::GetWindowDrawList();
    const ImVec2 at = ImGui::GetCursorScreenPos();
    dl->AddText(ImVec2(at.x, at.y + (h - ImGui::GetFontSize()) / 2), palette::kTextDim, label);
    const float x = at.x + kLabelW;
    dl->AddRectFilled(ImVec2(x, at.y), ImVec2(x + barW_, at.y + h), palette::kGpuIdle);
    const ImVec2 mouse = ImGui::GetMousePos();
    for (const GpuBarSegment& s : segs) {
      if (s.x1 <= s.x0) continue;
      const ImVec2 a(x + s.x0, at.y), b(x + std::max(s.x1, s.x0 + 1), at.y + h);
      dl->AddRectFilled(a, b, partColour(s.part));
      const std::string text = std::string(partLabel(s.part)) + " " + pct(s.ns, whole);
      const float tw = ImGui::CalcTextSize(text.c_str()).x;
      if (b.x - a.x > tw + 6 && h >= ImGui::GetFontSize()) {
        const bool dark = s.part == "idle" || s.part == "other";
        dl->AddText(ImVec2(a.x + 3, a.y + (h - ImGui::GetFontSize()) / 2),
                    dark ? palette::kText : palette::kTextDark, text.c_str());
      }
      if (ImGui::IsWindowHovered() && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y &&
          mouse.y < b.y)
        ImGui::SetTooltip("%s: %s (%s)", partLabel(s.part), dur(s.ns).c_str(),
                          pct(s.ns, whole).c_str());
    }
    ImGui::Dummy(ImVec2(kLabelW + barW_, h + 2));
  }

  void drawDevice(const an::GpuDevice& d) {
    ImGui::Text("rank %d  cuda:%d   window %s   busy %s (%s)   idle %s   %" PRId64
                " kernels, %" PRId64 " copies/sets on %zu streams",
                d.rank, d.device, dur(d.window_ns).c_str(), dur(d.busy_ns).c_str(),
                pct(d.busy_ns, d.window_ns).c_str(), dur(d.idle_ns).c_str(), d.kernels, d.copies,
                d.streams.size());
    drawBar("time", gpuTemporalBar(d, barW_), d.window_ns, kTemporalH);
    if (d.idle.total() > 0) {
      drawBar("idle", gpuIdleBar(d, barW_), d.idle.total(), kIdleH);
    } else {
      ImGui::TextDisabled("no idle time");
    }
    std::string line;
    if (d.launch.count > 0) {
      line = "launch delay p50 " + dur(d.launch.p50_ns) + ", p95 " + dur(d.launch.p95_ns) +
             ", max " + dur(d.launch.max_ns) + ", " + std::to_string(d.launch.outliers) + " over " +
             dur(launchCutoff_) + " (launch times: " + d.launchSource() + ")   ";
    } else {
      line = "no launching ops recorded   ";
    }
    line += d.comm_ns > 0 ? "comm under compute " + pct(d.comm_compute_overlap_ns, d.comm_ns)
                          : std::string("no communication kernels");
    ImGui::TextDisabled("%s", line.c_str());
    ImGui::Spacing();
  }

  void drawKernels(ViewHost& host, const an::GpuAnalysis& g, float width, float height) {
    ImGui::Text("kernels (%zu names; click a row to select its longest instance on the timeline)",
                g.kernels.size());
    if (!pickNote_.empty()) {
      ImGui::SameLine();
      ImGui::TextDisabled("%s", pickNote_.c_str());
    }
    const ImGuiTableFlags flags = ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg |
                                  ImGuiTableFlags_BordersOuter | ImGuiTableFlags_BordersV |
                                  ImGuiTableFlags_Resizable | ImGuiTableFlags_ScrollX;
    const char* cols[] = {"name", "kind", "count", "total", "mean", "p50", "max", "ranks"};
    if (!ImGui::BeginTable("kernels", 8, flags, ImVec2(width - 8, std::max(80.0f, height)))) return;
    ImGui::TableSetupScrollFreeze(1, 1);
    for (int c = 0; c < 8; ++c) {
      ImGui::TableSetupColumn(
          cols[c], c == 0 ? ImGuiTableColumnFlags_WidthStretch : ImGuiTableColumnFlags_WidthFixed,
          c == 0 ? 0.0f : 80.0f);
    }
    ImGui::TableHeadersRow();
    rowRects_.clear();
    ImGuiListClipper clipper;
    clipper.Begin(static_cast<int>(g.kernels.size()));
    while (clipper.Step()) {
      for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
        const an::GpuKernelRow& k = g.kernels[static_cast<size_t>(r)];
        ImGui::TableNextRow();
        ImGui::TableSetColumnIndex(0);
        ImGui::PushID(r);
        if (ImGui::Selectable(k.name.c_str(), pickedRow_ == r,
                              ImGuiSelectableFlags_SpanAllColumns)) {
          startPick(host, k, r);
        }
        if (rowRects_.size() < 8) {
          const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
          rowRects_.emplace_back(r, ImVec4(a.x, a.y, b.x, b.y));
        }
        if (ImGui::IsItemHovered() && !k.short_name.empty())
          ImGui::SetTooltip("%s\nshort name: %s", k.name.c_str(), k.short_name.c_str());
        ImGui::PopID();
        const std::string cells[] = {an::gpuKindName(k.kind), trace::formatCount(k.count),
                                     dur(k.total_ns),         dur(k.mean_ns),
                                     dur(k.p50_ns),           dur(k.max_ns),
                                     std::to_string(k.ranks)};
        for (int c = 0; c < 7; ++c) {
          ImGui::TableSetColumnIndex(c + 1);
          if (c == 0) {
            ImGui::TextColored(
                ImGui::ColorConvertU32ToFloat4(palette::gpuKind(static_cast<int>(k.kind), false)),
                "%s", cells[c].c_str());
          } else {
            ImGui::TextUnformatted(cells[c].c_str());
          }
        }
      }
    }
    ImGui::EndTable();
  }

  void startPick(ViewHost& host, const an::GpuKernelRow& k, int row) {
    pickedRow_ = row;
    pickApplied_ = false;
    pickedSpan_ = -1;
    pickNote_ = "looking for the longest " + k.short_name + "...";
    const std::string path = host.tracePath();
    const core::StringId id = k.name_id;
    const std::string name = k.name;
    pick_.start(
        [path, id, name](const std::atomic<bool>& cancel) {
          Pick p;
          p.name = name;
          p.span = longestGpuInstance(trace::TraceReader::open(path), id, -1, &cancel);
          return p;
        },
        host.waker());
  }

  void collectPick(ViewHost& host) {
    if (!pick_.ready() || pickApplied_) return;
    pickApplied_ = true;
    const Pick* p = pick_.result();
    if (!p || !p->span) {
      pickNote_ = p ? "no instance found" : "the search failed: " + pick_.error();
      return;
    }
    host.selectSpan(p->span->id, true);
    pickedSpan_ = p->span->id;
    pickNote_ = "selected span " + std::to_string(p->span->id) + " (" + dur(p->span->dur_ns) +
                "); the Timeline tab shows it";
    host.log("gpu kernel longest " + std::to_string(p->span->id) + " " + p->name);
  }

  ViewHost* host_ = nullptr;                      // the last frame's (dumpText names the selection)
  std::vector<std::pair<int, ImVec4>> rowRects_;  // the first rows drawn: index, screen x0 y0 x1 y1
  BackgroundQuery<an::GpuAnalysis> query_;
  BackgroundQuery<Pick> pick_;
  bool drawn_ = false, noGpu_ = false, pickApplied_ = false, shown_ = false;
  int pickedRow_ = -1;
  int64_t pickedSpan_ = -1;
  float barW_ = 800;
  int64_t launchCutoff_ = an::GpuOptions{}.launch_outlier_ns;
  std::string pickNote_;
};

}  // namespace

std::unique_ptr<View> makeGpuView() {
  return std::make_unique<GpuView>();
}

}  // namespace tracerun::viewer
