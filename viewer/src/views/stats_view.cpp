// The statistics view: three sortable, clipped ImGui tables (ops, collectives, ranks), filled by a
// whole-run query at first draw and by a range query per range selection, each on its own thread.
// Not the numbers themselves (stats_tables.h, trace/analysis/range_stats.h).
#include "views/stats_view.h"

#include <imgui.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "app/palette.h"
#include "data/background_query.h"
#include "tracerun/trace/format.h"
#include "views/stats_tables.h"

namespace tracerun::viewer {
namespace {

struct RangeResult {
  trace::analysis::RangeStats stats;
  double ms = 0;
};

// A table as drawn: the data and the row order its sort specs give.
struct ShownTable {
  StatsTable table;
  std::vector<size_t> order;
  std::vector<std::string> labels;  // the columns without their unit suffix ("total_ns" -> "total")
};

class StatsView : public View {
 public:
  const char* word() const override { return "stats"; }
  const char* title() const override { return "Statistics"; }

  void draw(ViewHost& host, float width, float height) override {
    drawn_ = true;
    if (!whole_.started()) {
      const std::string path = host.tracePath();
      whole_.start(
          [path](const std::atomic<bool>& cancel) {
            const auto reader = trace::TraceReader::open(path);
            return computeWholeRun(reader, &cancel);
          },
          host.waker());
    }
    startRangeIfNew(host);
    collect(host);

    if (!error_.empty()) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kError), "%s", error_.c_str());
    }
    const bool haveRange = !rangeTables_.empty();
    if (haveRange) {
      ImGui::RadioButton("Whole run", &scope_, 0);
      ImGui::SameLine();
      ImGui::RadioButton("Range", &scope_, 1);
      ImGui::SameLine();
    }
    if (scope_ == 1 && haveRange) {
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(palette::kStatsRangeNote), "%s",
                         rangeNote_.c_str());
    } else if (range_.running()) {
      ImGui::TextDisabled("computing the range...");
    } else {
      ImGui::TextDisabled("Whole run. Shift+drag on the timeline over some ranks for a range.");
    }
    if (range_.running() && scope_ == 1) {
      ImGui::SameLine();
      ImGui::TextDisabled("(computing the new range...)");
    }
    auto& tables = scope_ == 1 && haveRange ? rangeTables_ : wholeTables_;
    if (tables.empty()) {
      ImGui::TextDisabled("reading the trace...");
      return;
    }
    const float avail = height - ImGui::GetCursorPosY() - 8;
    // Heights: ops, collectives, ranks (and kernels when the trace has them).
    const float share3[3] = {0.55f, 0.2f, 0.25f}, share4[4] = {0.4f, 0.15f, 0.15f, 0.3f};
    const float* share = tables.size() > 3 ? share4 : share3;
    for (size_t i = 0; i < tables.size(); ++i) {
      drawTable(host, tables[i], width,
                std::max(80.0f, avail * share[std::min<size_t>(i, 3)] - 30));
    }
    // --view-option export-csv: each whole-run table as its Export CSV button writes it, once
    // drawn (sorted as shown).
    if (!csvOptionDone_ && &tables == &wholeTables_ && host.viewOption("export-csv")) {
      csvOptionDone_ = true;
      for (const ShownTable& t : wholeTables_) exportCsv(host, t);
    }
  }

  std::vector<std::pair<std::string, std::string>> options() const override {
    return {{"export-csv",
             "write each whole-run table to TRACE.stats-whole-NAME.csv, as Export CSV does"}};
  }

  bool settled() const override {
    if (!drawn_) return true;
    return whole_.ready() && wholeBuilt_ &&
           (!range_.started() || (range_.ready() && rangeBuiltGen_ == rangeGen_));
  }

  std::string dumpText() const override {
    std::string out;
    if (!wholeTables_.empty()) out += statsDumpText("whole", toTables(wholeTables_));
    if (!rangeTables_.empty()) out += statsDumpText(rangeScope_, toTables(rangeTables_));
    return out;
  }

 private:
  static std::vector<StatsTable> toTables(const std::vector<ShownTable>& shown) {
    std::vector<StatsTable> out;
    for (const auto& s : shown) out.push_back(s.table);
    return out;
  }
  static std::vector<ShownTable> toShown(std::vector<StatsTable> tables) {
    std::vector<ShownTable> out;
    for (auto& t : tables) {
      ShownTable s;
      s.order.resize(t.rows.size());
      for (size_t i = 0; i < s.order.size(); ++i) s.order[i] = i;
      for (const std::string& c : t.columns) {
        const bool ns = c.size() > 3 && c.compare(c.size() - 3, 3, "_ns") == 0;
        s.labels.push_back(ns ? c.substr(0, c.size() - 3) : c);
      }
      s.table = std::move(t);
      out.push_back(std::move(s));
    }
    return out;
  }

  void startRangeIfNew(ViewHost& host) {
    const RangeSelection* sel = host.rangeSelection();
    if (!sel || sel->generation == 0 || sel->generation == rangeGen_) return;
    rangeGen_ = sel->generation;
    trace::analysis::RangeQuery q;
    q.t0 = static_cast<int64_t>(std::floor(sel->t0));
    q.t1 = static_cast<int64_t>(std::ceil(sel->t1));
    q.ranks = sel->ranks;
    const std::string path = host.tracePath();
    range_.start(
        [path, q](const std::atomic<bool>& cancel) {
          const auto t = std::chrono::steady_clock::now();
          RangeResult r;
          r.stats = trace::analysis::rangeStatsParallel(path, q, 2, &cancel);
          r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
                     .count();
          return r;
        },
        host.waker());
  }

  void collect(ViewHost& host) {
    if (whole_.ready() && !wholeBuilt_) {
      wholeBuilt_ = true;
      if (const WholeRunStats* s = whole_.result()) {
        wholeTables_ = toShown(wholeRunTables(*s));
      } else {
        error_ = "statistics: " + whole_.error();
      }
    }
    if (range_.ready() && rangeBuiltGen_ != rangeGen_) {
      rangeBuiltGen_ = rangeGen_;
      if (const RangeResult* r = range_.result()) {
        if (r->stats.cancelled) return;
        rangeTables_ = toShown(rangeTables(r->stats, host.trace().strings));
        const auto& q = r->stats.query;
        std::string ranks;
        for (int k : q.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(k);
        if (ranks.empty()) ranks = "all";
        rangeScope_ = "range " + std::to_string(q.t0) + " " + std::to_string(q.t1) + " ranks " +
                      ranks + " inside";
        char b[256];
        // From the trace's first event, as the timeline's ruler counts.
        const auto from = static_cast<double>(q.t0 - host.trace().range.first);
        std::snprintf(b, sizeof b, "Range from %s for %s over ranks %s: %s spans inside, %.1f ms",
                      trace::formatDuration(from).c_str(),
                      trace::formatDuration(static_cast<double>(q.t1 - q.t0)).c_str(),
                      ranks.c_str(), trace::formatCount(r->stats.spans).c_str(), r->ms);
        rangeNote_ = b;
        scope_ = 1;
        host.log("stats range " + std::to_string(r->stats.spans) + " spans");
      } else {
        error_ = "range statistics: " + range_.error();
      }
    }
  }

  void exportCsv(ViewHost& host, const ShownTable& t) {
    namespace fs = std::filesystem;
    const fs::path trace(host.tracePath());
    const std::string scope = scope_ == 1 && !rangeTables_.empty() ? "range" : "whole";
    fs::path out = trace.parent_path() /
                   (trace.stem().string() + ".stats-" + scope + "-" + t.table.name + ".csv");
    std::ofstream f(out, std::ios::binary);
    if (!f) {
      out = fs::path(out.filename());  // a read-only trace folder: the working directory
      f.open(out, std::ios::binary);
    }
    f << t.table.csv(t.order);
    f.close();
    if (!f) {
      error_ = "cannot write " + out.string() + " (is the folder writable?)";
      return;
    }
    exported_ = "wrote " + out.string();
    host.log("exported " + t.table.name + " " + out.string());
  }

  static void sortRows(ShownTable& t, const ImGuiTableSortSpecs* specs) {
    auto& rows = t.table.rows;
    std::stable_sort(t.order.begin(), t.order.end(), [&](size_t a, size_t b) {
      for (int i = 0; i < specs->SpecsCount; ++i) {
        const ImGuiTableColumnSortSpecs& s = specs->Specs[i];
        const auto& ca = rows[a][static_cast<size_t>(s.ColumnIndex)];
        const auto& cb = rows[b][static_cast<size_t>(s.ColumnIndex)];
        int c = 0;
        if (ca.numeric && cb.numeric) {
          c = ca.key < cb.key ? -1 : (ca.key > cb.key ? 1 : 0);
        } else {
          c = ca.text.compare(cb.text);
        }
        if (c != 0) return s.SortDirection == ImGuiSortDirection_Ascending ? c < 0 : c > 0;
      }
      return a < b;
    });
  }

  void drawTable(ViewHost& host, ShownTable& t, float width, float height) {
    ImGui::PushID(t.table.name.c_str());
    ImGui::Text("%s (%zu rows)", t.table.name.c_str(), t.table.rows.size());
    ImGui::SameLine();
    if (ImGui::SmallButton("Export CSV")) exportCsv(host, t);
    if (!exported_.empty()) {
      ImGui::SameLine();
      ImGui::TextDisabled("%s", exported_.c_str());
    }
    const ImGuiTableFlags flags = ImGuiTableFlags_Sortable | ImGuiTableFlags_SortMulti |
                                  ImGuiTableFlags_ScrollY | ImGuiTableFlags_RowBg |
                                  ImGuiTableFlags_BordersOuter | ImGuiTableFlags_BordersV |
                                  ImGuiTableFlags_Resizable | ImGuiTableFlags_Reorderable |
                                  ImGuiTableFlags_Hideable | ImGuiTableFlags_ScrollX;
    const int cols = static_cast<int>(t.table.columns.size());
    if (cols > 0 && ImGui::BeginTable("table", cols, flags, ImVec2(width - 8, height))) {
      ImGui::TableSetupScrollFreeze(1, 1);
      for (int c = 0; c < cols; ++c) {
        ImGuiTableColumnFlags f = ImGuiTableColumnFlags_None;
        if (c == 0) f |= ImGuiTableColumnFlags_WidthFixed | ImGuiTableColumnFlags_NoHide;
        // ops and kernels open sorted by total time (as stored), the others by their first
        // column.
        const bool byTotal = t.table.name == "ops" || t.table.name == "kernels";
        if (c == (byTotal ? 3 : 0)) {
          f |= ImGuiTableColumnFlags_DefaultSort |
               (byTotal ? ImGuiTableColumnFlags_PreferSortDescending
                        : ImGuiTableColumnFlags_PreferSortAscending);
        }
        ImGui::TableSetupColumn(t.labels[static_cast<size_t>(c)].c_str(), f,
                                c == 0 ? 280.0f : 0.0f);
      }
      ImGui::TableHeadersRow();
      if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs()) {
        if (specs->SpecsDirty) {
          sortRows(t, specs);
          specs->SpecsDirty = false;
        }
      }
      ImGuiListClipper clipper;
      clipper.Begin(static_cast<int>(t.order.size()));
      while (clipper.Step()) {
        for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
          const auto& row = t.table.rows[t.order[static_cast<size_t>(r)]];
          ImGui::TableNextRow();
          for (size_t c = 0; c < row.size(); ++c) {
            ImGui::TableSetColumnIndex(static_cast<int>(c));
            ImGui::TextUnformatted(row[c].text.c_str());
          }
        }
      }
      ImGui::EndTable();
    }
    ImGui::PopID();
  }

  BackgroundQuery<WholeRunStats> whole_;
  BackgroundQuery<RangeResult> range_;
  bool drawn_ = false, wholeBuilt_ = false, csvOptionDone_ = false;
  uint64_t rangeGen_ = 0, rangeBuiltGen_ = 0;
  std::vector<ShownTable> wholeTables_, rangeTables_;
  std::string rangeNote_, rangeScope_, error_, exported_;
  int scope_ = 0;  // 0 whole run, 1 range
};

}  // namespace

std::unique_ptr<View> makeStatsView() {
  return std::make_unique<StatsView>();
}

}  // namespace tracerun::viewer
