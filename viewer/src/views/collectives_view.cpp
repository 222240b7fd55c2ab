// The collectives tab (see collectives_view.h). The analysis runs once per trace on its own thread;
// when it arrives the heatmap's colours are built (one per rank and instance), so a frame only
// walks the visible columns. Not a data layer: every number comes from comm_instances / comm.
#include "views/collectives_view.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "app/palette.h"
#include "data/background_query.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/analysis/comm_instances.h"
#include "tracerun/trace/format.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {
namespace {

namespace an = trace::analysis;

struct Result {
  an::CommInstances inst;
  an::CommAnalysis comm;
};

// Heatmap colours of one group, built when the result arrives.
struct GroupCells {
  std::vector<int> rows;         // ranks, top to bottom
  std::vector<uint32_t> colour;  // [column * rows + row]
  std::vector<float> lag;        // 0..1 of the group's scale, -1 when the rank is absent
  std::vector<int> lastRow;      // per column, the last to arrive's row (-1 none)
  int64_t scale_ns = 1;          // lag shown in the hottest colour
};

uint32_t lagColour(float t) {
  using palette::kCollLagRamp;
  t = std::clamp(t, 0.0f, 1.0f) * 2.0f;
  const int i = t >= 1.0f ? 1 : 0;
  const float f = t - static_cast<float>(i);
  auto mix = [f](uint32_t a, uint32_t b, int shift) {
    const float x = static_cast<float>((a >> shift) & 0xFF),
                y = static_cast<float>((b >> shift) & 0xFF);
    return static_cast<uint32_t>(std::lround(x + (y - x) * f)) << shift;
  };
  const uint32_t a = kCollLagRamp[i], b = kCollLagRamp[i + 1];
  return mix(a, b, 0) | mix(a, b, 8) | mix(a, b, 16) | 0xFF000000u;
}

std::string dur(int64_t ns) {
  return trace::formatDuration(static_cast<double>(ns));
}

class CollectivesView final : public View {
 public:
  const char* word() const override { return "collectives"; }
  const char* title() const override { return "Collectives"; }

  bool settled() const override {
    if (!query_.started()) return true;
    if (!query_.ready()) return false;
    // The timeline's selection has reached this view (the dump shows its instance).
    return !host_ || (!pending_ && host_->selectedSpan() == seenSelection_);
  }

  void draw(ViewHost& host, float width, float height) override {
    host_ = &host;
    if (!query_.started()) {
      const std::string path = host.tracePath();
      query_.start(
          [path](const std::atomic<bool>& cancel) {
            const trace::TraceReader reader = trace::TraceReader::open(path);
            Result r;
            r.inst = an::analyzeCommInstances(reader, &cancel);
            if (!cancel.load()) r.comm = an::analyzeComm(reader);
            return r;
          },
          host.waker());
    }
    if (!query_.ready()) {
      ImGui::TextUnformatted("Matching collectives across ranks...");
      return;
    }
    const Result* r = query_.result();
    if (!r) {
      ImGui::TextColored(ImColor(palette::kError), "%s", query_.error().c_str());
      return;
    }
    if (!built_) build(*r);
    followSelection(host, *r);
    const an::CommInstances& in = r->inst;
    if (in.groups.empty()) {
      ImGui::TextUnformatted("No collectives in this trace.");
    } else {
      drawHeader(*r);
      drawInstance(host, *r);
      drawHeatmap(host, *r, width);
    }
    drawTables(host, *r, width, height);
  }

  std::string dumpText() const override {
    const Result* r = query_.result();
    if (!r) return {};
    std::ostringstream o;
    const an::CommInstances& in = r->inst;
    o << "collectives groups " << in.groups.size() << " instances " << in.instances.size() << "\n";
    for (size_t g = 0; g < in.groups.size(); ++g) {
      o << "group " << g << " members " << join(in.groups[g].members) << " instances "
        << in.groups[g].instances.size() << " name " << in.groups[g].name << "\n";
    }
    for (const an::StragglerRow& s : in.stragglers) {
      o << "straggler rank " << s.rank << " last " << s.last << " instances " << s.instances
        << " caused_wait_ns " << s.caused_wait_ns << "\n";
    }
    for (const an::PointToPointStats& p : r->comm.p2p) {
      o << "p2p src " << p.src << " dst " << p.dst << " kind " << p.kind << " messages "
        << p.messages << " matched " << p.matched << " wait_ns " << p.wait_ns << " transfer_ns "
        << p.transfer_ns << "\n";
    }
    if (selected_ >= 0) {
      const an::CollectiveInstance& x = in.instances[static_cast<size_t>(selected_)];
      o << "selected group " << x.group << " seq " << x.seq << " op " << x.op << " last "
        << x.last_rank << " spread_ns " << x.spread_ns << "\n";
      for (const an::InstanceRank& k : x.ranks) {
        o << "rank " << k.rank << " span " << k.span_id << " arrival " << k.arrival_ns << " start "
          << k.start_ns << " end " << k.end_ns << " wait " << k.wait_ns << " lag " << k.lag_ns
          << " last " << (k.rank == x.last_rank ? 1 : 0) << "\n";
      }
    }
    if (plotW_ > 0 && group_ >= 0) {
      o << "heatmap group " << group_ << " x " << plotX_ << " y " << plotY_ << " w " << plotW_
        << " col_w " << colW_ << " row_h " << rowH_ << " first_col " << firstCol_ << " rows "
        << join(cells_[static_cast<size_t>(group_)].rows) << "\n";
    }
    return o.str();
  }

 private:
  static std::string join(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
  }

  // Colours of every group's cells; the group shown first is the one with the most instances.
  void build(const Result& r) {
    built_ = true;
    const an::CommInstances& in = r.inst;
    cells_.resize(in.groups.size());
    size_t most = 0;
    for (size_t g = 0; g < in.groups.size(); ++g) {
      const an::CollectiveGroup& grp = in.groups[g];
      GroupCells& c = cells_[g];
      c.rows = grp.members;
      const size_t n = c.rows.size();
      std::vector<int64_t> spreads;
      for (size_t i : grp.instances) {
        if (in.instances[i].spread_ns > 0) spreads.push_back(in.instances[i].spread_ns);
      }
      // The 95th percentile of the spreads: one slow first call does not wash out the rest.
      if (!spreads.empty()) {
        const size_t k = std::min(spreads.size() - 1, spreads.size() * 95 / 100);
        std::nth_element(spreads.begin(), spreads.begin() + static_cast<ptrdiff_t>(k),
                         spreads.end());
        c.scale_ns = std::max<int64_t>(1, spreads[k]);
      }
      c.colour.assign(grp.instances.size() * n, palette::kCollAbsent);
      c.lag.assign(grp.instances.size() * n, -1.0f);
      c.lastRow.assign(grp.instances.size(), -1);
      for (size_t col = 0; col < grp.instances.size(); ++col) {
        const an::CollectiveInstance& x = in.instances[grp.instances[col]];
        for (const an::InstanceRank& k : x.ranks) {
          const auto it = std::find(c.rows.begin(), c.rows.end(), k.rank);
          if (it == c.rows.end()) continue;
          const size_t row = static_cast<size_t>(it - c.rows.begin());
          const float t =
              static_cast<float>(static_cast<double>(k.lag_ns) / static_cast<double>(c.scale_ns));
          c.lag[col * n + row] = std::min(t, 1.0f);
          c.colour[col * n + row] = lagColour(t);
          if (k.rank == x.last_rank && x.ranks.size() >= 2) c.lastRow[col] = static_cast<int>(row);
        }
      }
      if (grp.instances.size() > in.groups[most].instances.size()) most = g;
    }
    if (!in.groups.empty()) group_ = static_cast<int>(most);
  }

  void followSelection(ViewHost& host, const Result& r) {
    const std::optional<int64_t> sel = host.selectedSpan();
    if (pending_) {  // a click here asked the timeline for this span: until it is selected there,
      if (sel != pending_) return;  // the older selection does not count
      pending_.reset();
      seenSelection_ = sel;
      return;
    }
    if (sel == seenSelection_) return;
    seenSelection_ = sel;
    if (!sel) return;
    const an::CollectiveInstance* x = r.inst.instanceOfSpan(*sel);
    if (!x) return;
    showInstance(r, static_cast<int>(x - r.inst.instances.data()));
  }

  // Selects instance i, shows its group and scrolls the heatmap to it.
  void showInstance(const Result& r, int i) {
    selected_ = i;
    const an::CollectiveInstance& x = r.inst.instances[static_cast<size_t>(i)];
    group_ = x.group;
    const auto& list = r.inst.groups[static_cast<size_t>(x.group)].instances;
    selectedCol_ = static_cast<int>(
        std::lower_bound(list.begin(), list.end(), static_cast<size_t>(i)) - list.begin());
    wantCol_ = selectedCol_;
  }

  void drawHeader(const Result& r) {
    const an::CommInstances& in = r.inst;
    ImGui::Text("%zu collective instances in %zu groups", in.instances.size(), in.groups.size());
    ImGui::SameLine();
    const char* cur = group_ >= 0 ? in.groups[static_cast<size_t>(group_)].name.c_str() : "";
    // As wide as the shown group's name, whose members come last ("...|group 1 [0,3]"), within
    // the row's room; never narrower than 320 px.
    const ImGuiStyle& style = ImGui::GetStyle();
    const float want =
        ImGui::CalcTextSize(cur).x + 2 * style.FramePadding.x + ImGui::GetFrameHeight();
    const float room = ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("group").x -
                       style.ItemInnerSpacing.x;
    ImGui::SetNextItemWidth(std::clamp(want, 320.0f, std::max(320.0f, room)));
    if (ImGui::BeginCombo("group", cur)) {
      for (size_t g = 0; g < in.groups.size(); ++g) {
        if (ImGui::Selectable(in.groups[g].name.c_str(), static_cast<int>(g) == group_)) {
          group_ = static_cast<int>(g);
          firstCol_ = 0;
          autoZoom_ = true;
        }
      }
      ImGui::EndCombo();
    }
  }

  void drawInstance(ViewHost& host, const Result& r) {
    if (selected_ < 0) {
      ImGui::TextColored(
          ImColor(palette::kTextDim),
          "Click a cell of the heatmap, or select a collective span in the timeline, "
          "to see that call on every rank.");
      return;
    }
    const an::CommInstances& in = r.inst;
    const an::CollectiveInstance& x = in.instances[static_cast<size_t>(selected_)];
    ImGui::Text("%s #%lld in %s: last to arrive rank %d, %s after the first", x.op.c_str(),
                static_cast<long long>(x.seq), in.groups[static_cast<size_t>(x.group)].name.c_str(),
                x.last_rank, dur(x.spread_ns).c_str());
    const ImGuiTableFlags flags =
        ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    if (!ImGui::BeginTable("instance", 7, flags)) return;
    for (const char* h : {"rank", "span", "arrival", "start", "end", "wait", ""}) {
      ImGui::TableSetupColumn(h);
    }
    ImGui::TableHeadersRow();
    int64_t first = INT64_MAX;
    for (const an::InstanceRank& k : x.ranks) first = std::min(first, k.arrival_ns);
    for (const an::InstanceRank& k : x.ranks) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      char label[48];
      std::snprintf(label, sizeof label, "rank %d##r%d", k.rank, k.rank);
      if (ImGui::Selectable(label, false, ImGuiSelectableFlags_SpanAllColumns)) {
        host.log("selected span " + std::to_string(k.span_id) + " of collective " + x.op + " #" +
                 std::to_string(x.seq) + " on rank " + std::to_string(k.rank));
        host.selectSpan(k.span_id, true);
        pending_ = k.span_id;
      }
      ImGui::TableNextColumn();
      ImGui::Text("%lld", static_cast<long long>(k.span_id));
      // Times after the instance's first arrival.
      for (int64_t t : {k.arrival_ns, k.start_ns, k.end_ns}) {
        ImGui::TableNextColumn();
        ImGui::Text("+%s", dur(t - first).c_str());
      }
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(dur(k.wait_ns).c_str());
      ImGui::TableNextColumn();
      if (k.rank == x.last_rank && x.ranks.size() >= 2) {
        ImGui::TextColored(ImColor(palette::kCollLast), "last to arrive");
      }
    }
    ImGui::EndTable();
  }

  void drawHeatmap(ViewHost& host, const Result& r, float width) {
    if (group_ < 0) return;
    const an::CommInstances& in = r.inst;
    const an::CollectiveGroup& grp = in.groups[static_cast<size_t>(group_)];
    const GroupCells& c = cells_[static_cast<size_t>(group_)];
    const int rows = static_cast<int>(c.rows.size());
    const int cols = static_cast<int>(grp.instances.size());
    ImGui::Spacing();
    ImGui::Text(
        "Arrival lag by rank and sequence (0 to %s; a red mark: the last to arrive). "
        "Wheel: zoom, drag: pan, click: select.",
        dur(c.scale_ns).c_str());
    constexpr float kLabelW = 64, kAxisH = 18;
    rowH_ = std::clamp(std::floor(220.0f / static_cast<float>(std::max(rows, 1))), 12.0f, 28.0f);
    const ImVec2 origin = ImGui::GetCursorScreenPos();
    plotX_ = origin.x + kLabelW;
    plotY_ = origin.y;
    plotW_ = std::max(50.0f, width - kLabelW - 16);
    const float plotH = rowH_ * static_cast<float>(rows);
    if (autoZoom_) {
      autoZoom_ = false;
      colW_ = std::clamp(plotW_ / static_cast<float>(std::max(cols, 1)), 12.0f, 40.0f);
    }
    if (wantCol_ >= 0) {  // bring a selected instance into view
      const double visible = plotW_ / colW_;
      if (wantCol_ < firstCol_ || wantCol_ + 1 > firstCol_ + visible) {
        firstCol_ = wantCol_ - visible / 2 + 0.5;
      }
      wantCol_ = -1;
    }
    clampScroll(cols);

    ImGui::InvisibleButton("heatmap", ImVec2(plotW_ + kLabelW, plotH + kAxisH));
    const bool hovered = ImGui::IsItemHovered();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    dl->AddRectFilled(ImVec2(plotX_, plotY_), ImVec2(plotX_ + plotW_, plotY_ + plotH),
                      palette::kBackground);
    for (int row = 0; row < rows; ++row) {
      char label[24];
      std::snprintf(label, sizeof label, "rank %d", c.rows[static_cast<size_t>(row)]);
      dl->AddText(ImVec2(origin.x + 4, plotY_ + rowH_ * row + (rowH_ - ImGui::GetFontSize()) / 2),
                  palette::kText, label);
    }
    dl->PushClipRect(ImVec2(plotX_, plotY_), ImVec2(plotX_ + plotW_, plotY_ + plotH + kAxisH),
                     true);
    const int c0 = std::max(0, static_cast<int>(std::floor(firstCol_)));
    const int c1 = std::min(cols, static_cast<int>(std::ceil(firstCol_ + plotW_ / colW_)));
    if (colW_ >= 1.0f) {
      for (int col = c0; col < c1; ++col) {
        const float x0 = colX(col), x1 = x0 + colW_;
        const float gap = colW_ >= 6 ? 1.0f : 0.0f;
        for (int row = 0; row < rows; ++row) {
          const float y0 = plotY_ + rowH_ * row;
          dl->AddRectFilled(ImVec2(x0, y0), ImVec2(x1 - gap, y0 + rowH_ - 1),
                            c.colour[static_cast<size_t>(col * rows + row)]);
        }
        const int last = c.lastRow[static_cast<size_t>(col)];
        if (last >= 0 && colW_ >= 6) {
          const float m = std::max(2.0f, std::min(colW_, rowH_) * 0.25f);
          const float cx = x0 + (colW_ - gap) / 2, cy = plotY_ + rowH_ * last + (rowH_ - 1) / 2;
          dl->AddRectFilled(ImVec2(cx - m, cy - m), ImVec2(cx + m, cy + m), palette::kCollLast);
        }
      }
    } else {
      // Several instances per pixel column: the largest lag of each rank in that column.
      for (int px = 0; px < static_cast<int>(plotW_); ++px) {
        const int a = std::max(c0, static_cast<int>(std::floor(firstCol_ + px / colW_)));
        if (a >= cols) break;  // past the last instance
        const int b = std::min(cols, static_cast<int>(std::floor(firstCol_ + (px + 1) / colW_)));
        for (int row = 0; row < rows; ++row) {
          float worst = -1;
          for (int col = a; col < std::max(b, a + 1) && col < cols; ++col) {
            worst = std::max(worst, c.lag[static_cast<size_t>(col * rows + row)]);
          }
          const float y0 = plotY_ + rowH_ * row;
          dl->AddRectFilled(ImVec2(plotX_ + px, y0), ImVec2(plotX_ + px + 1, y0 + rowH_ - 1),
                            worst < 0 ? palette::kCollAbsent : lagColour(worst));
        }
      }
    }
    if (selectedCol_ >= 0 && selected_ >= 0 &&
        in.instances[static_cast<size_t>(selected_)].group == group_) {
      const float x0 = colX(selectedCol_);
      dl->AddRect(ImVec2(x0 - 1, plotY_ - 1), ImVec2(x0 + std::max(colW_, 1.0f), plotY_ + plotH),
                  palette::kSelection, 0, 0, 1.5f);
    }
    // Sequence axis: a label every ~80 px.
    const int every = std::max(1, static_cast<int>(std::ceil(80.0f / colW_)));
    for (int col = (c0 / every) * every; col < c1; col += every) {
      const float x = colX(col) + std::max(colW_, 1.0f) / 2;
      dl->AddLine(ImVec2(x, plotY_ + plotH), ImVec2(x, plotY_ + plotH + 4), palette::kTickMajor);
      char label[24];
      std::snprintf(
          label, sizeof label, "%lld",
          static_cast<long long>(in.instances[grp.instances[static_cast<size_t>(col)]].seq));
      dl->AddText(ImVec2(x + 2, plotY_ + plotH + 2), palette::kTextDim, label);
    }
    dl->PopClipRect();

    if (!hovered) return;
    const ImGuiIO& io = ImGui::GetIO();
    const float mx = io.MousePos.x, my = io.MousePos.y;
    if (io.MouseWheel != 0 && mx >= plotX_) {  // zoom about the mouse
      const double at = firstCol_ + (mx - plotX_) / colW_;
      // Zoomed out at most until the whole group fits.
      const float fit = std::min(12.0f, plotW_ / static_cast<float>(std::max(cols, 1)));
      colW_ = std::clamp(colW_ * std::pow(1.25f, io.MouseWheel), fit, 60.0f);
      firstCol_ = at - (mx - plotX_) / colW_;
      clampScroll(cols);
    }
    if (ImGui::IsMouseDragging(ImGuiMouseButton_Left, 2.0f)) {
      firstCol_ -= io.MouseDelta.x / colW_;
      clampScroll(cols);
      dragged_ = true;
    }
    const int col = static_cast<int>(std::floor(firstCol_ + (mx - plotX_) / colW_));
    const int row = static_cast<int>(std::floor((my - plotY_) / rowH_));
    if (mx < plotX_ || col < 0 || col >= cols || row < 0 || row >= rows) {
      if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) dragged_ = false;
      return;
    }
    const size_t idx = grp.instances[static_cast<size_t>(col)];
    const an::CollectiveInstance& x = in.instances[idx];
    const int rank = c.rows[static_cast<size_t>(row)];
    const an::InstanceRank* k = nullptr;
    for (const an::InstanceRank& e : x.ranks)
      if (e.rank == rank) k = &e;
    ImGui::BeginTooltip();
    ImGui::Text("%s #%lld, rank %d", x.op.c_str(), static_cast<long long>(x.seq), rank);
    if (k) {
      ImGui::Text("arrived %s after the first, waited %s", dur(k->lag_ns).c_str(),
                  dur(k->wait_ns).c_str());
    } else {
      ImGui::TextUnformatted("not in the trace");
    }
    if (rank == x.last_rank) ImGui::TextColored(ImColor(palette::kCollLast), "last to arrive");
    ImGui::EndTooltip();
    if (ImGui::IsMouseReleased(ImGuiMouseButton_Left)) {
      if (!dragged_ && k) {
        showInstance(r, static_cast<int>(idx));
        wantCol_ = -1;
        pending_ = k->span_id;
        host.log("selected span " + std::to_string(k->span_id) + " of collective " + x.op + " #" +
                 std::to_string(x.seq) + " on rank " + std::to_string(rank));
        host.selectSpan(k->span_id, true);
      }
      dragged_ = false;
    }
  }

  void drawTables(ViewHost& host, const Result& r, float width, float height) {
    (void)height;
    ImGui::Spacing();
    const ImGuiTableFlags flags =
        ImGuiTableFlags_Borders | ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingFixedFit;
    const float half = std::max(200.0f, width / 2 - 8);
    ImGui::BeginGroup();
    ImGui::TextUnformatted("Stragglers: who arrives last most often");
    if (!r.inst.stragglers.empty() && ImGui::BeginTable("stragglers", 4, flags, ImVec2(half, 0))) {
      for (const char* h : {"rank", "last", "of instances", "others waited"}) {
        ImGui::TableSetupColumn(h);
      }
      ImGui::TableHeadersRow();
      for (const an::StragglerRow& s : r.inst.stragglers) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", s.rank);
        ImGui::TableNextColumn();
        ImGui::Text("%lld", static_cast<long long>(s.last));
        ImGui::TableNextColumn();
        ImGui::Text(
            "%lld (%s)", static_cast<long long>(s.instances),
            trace::formatShare(s.instances > 0 ? double(s.last) / double(s.instances) : 0).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(dur(s.caused_wait_ns).c_str());
      }
      ImGui::EndTable();
    } else if (r.inst.stragglers.empty()) {
      ImGui::TextColored(ImColor(palette::kTextDim), "(no collective with two ranks or more)");
    }
    ImGui::EndGroup();
    ImGui::SameLine(0, 16);
    ImGui::BeginGroup();
    ImGui::TextUnformatted("Point-to-point: receive wait versus transfer");
    if (!r.comm.p2p.empty() && ImGui::BeginTable("p2p", 7, flags, ImVec2(half, 0))) {
      for (const char* h :
           {"src", "dst", "kind", "messages", "wait", "transfer", "wait | transfer"}) {
        ImGui::TableSetupColumn(h);
      }
      ImGui::TableHeadersRow();
      for (const an::PointToPointStats& p : r.comm.p2p) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        ImGui::Text("%d", p.src);
        ImGui::TableNextColumn();
        ImGui::Text("%d", p.dst);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(p.kind.c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%lld", static_cast<long long>(p.messages));
        ImGui::TableNextColumn();
        const int64_t total = p.wait_ns + p.transfer_ns;
        ImGui::Text("%s (%s)", dur(p.wait_ns).c_str(),
                    trace::formatShare(total > 0 ? double(p.wait_ns) / double(total) : 0).c_str());
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(dur(p.transfer_ns).c_str());
        ImGui::TableNextColumn();
        // The receive time split: waiting for the send (left), transferring (right).
        const ImVec2 at = ImGui::GetCursorScreenPos();
        const float w = 120, h = ImGui::GetTextLineHeight() - 2;
        const float split =
            total > 0 ? w * static_cast<float>(double(p.wait_ns) / double(total)) : 0.0f;
        ImDrawList* dl = ImGui::GetWindowDrawList();
        dl->AddRectFilled(ImVec2(at.x, at.y + 1), ImVec2(at.x + split, at.y + 1 + h),
                          palette::kCollWait);
        dl->AddRectFilled(ImVec2(at.x + split, at.y + 1), ImVec2(at.x + w, at.y + 1 + h),
                          palette::kCollTransfer);
        ImGui::Dummy(ImVec2(w, h));
      }
      ImGui::EndTable();
    } else if (r.comm.p2p.empty()) {
      ImGui::TextColored(ImColor(palette::kTextDim), "(no sends or receives)");
    }
    ImGui::EndGroup();
    (void)host;
  }

  float colX(int col) const { return plotX_ + static_cast<float>((col - firstCol_) * colW_); }
  void clampScroll(int cols) {
    const double visible = plotW_ / colW_;
    firstCol_ = std::clamp(firstCol_, 0.0, std::max(0.0, cols - visible));
  }

  BackgroundQuery<Result> query_;
  const ViewHost* host_ = nullptr;  // the window that draws this view (it owns the view)
  bool built_ = false;
  std::vector<GroupCells> cells_;
  std::optional<int64_t> seenSelection_;  // the timeline's selection this view last followed
  std::optional<int64_t> pending_;        // a span this view asked the timeline to select
  int group_ = -1, selected_ = -1, selectedCol_ = -1, wantCol_ = -1;
  bool autoZoom_ = true, dragged_ = false;
  double firstCol_ = 0;
  float colW_ = 16, rowH_ = 20, plotX_ = 0, plotY_ = 0, plotW_ = 0;
};

}  // namespace

std::unique_ptr<View> makeCollectivesView() {
  return std::make_unique<CollectivesView>();
}

}  // namespace tracerun::viewer
