// The compare tab (see compare_view.h): one DataWorker per run (its tracks, its steps and the
// strip's windows, latest wins), one background comparison (trace/analysis/compare.h) and the
// tab's drawing: header (paths, step), the two strips on one relative time axis, the step table
// and the sortable per-name table. Texts are built when results arrive, not per frame.
#include "views/compare_view.h"

#include <imgui.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "app/file_picker.h"
#include "app/palette.h"
#include "data/background_query.h"
#include "data/data_worker.h"
#include "data/time_axis.h"
#include "timeline/track.h"
#include "tracerun/trace/analysis/compare.h"
#include "tracerun/trace/format.h"

namespace tracerun::viewer {
namespace {

namespace fs = std::filesystem;
using trace::analysis::NameDiff;
using trace::analysis::RunComparison;

constexpr float kGutterW = 130;
constexpr float kRulerH = 20;
constexpr float kMaxRowH = 14, kMinRowH = 4;
constexpr int kNameColumns = 12;

std::string signedDuration(int64_t ns) {
  return (ns > 0 ? "+" : "") + trace::formatDuration(static_cast<double>(ns));
}
std::string signedCount(int64_t n) {
  return (n > 0 ? "+" : "") + trace::formatCount(n);
}
std::string ratioText(int64_t a, int64_t b) {
  if (a == b) return "1.000x";
  if (a == 0) return "new";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fx", static_cast<double>(b) / static_cast<double>(a));
  return buf;
}
// A name on one line of dumpText: tab, newline and backslash escaped.
std::string escaped(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out;
}
uint32_t diffColour(int64_t d) {
  return d > 0 ? palette::kCompareSlower : d < 0 ? palette::kCompareFaster : palette::kTextDim;
}

// One run: its own data thread for tracks, steps and the strip's windows.
struct Run {
  std::string path;
  std::unique_ptr<DataWorker> worker;
  std::optional<OpenResult> info;
  std::string error;
  std::vector<Step> steps;
  bool stepsDone = false;
  std::map<int64_t, TrackWindow> windows;
  uint64_t requested = 0, done = 0;
  LodWindow fetched;
  bool haveFetched = false;
  std::vector<const TrackInfo*> tracks;  // span tracks, by rank then id (into info->tracks)
  double origin = 0;                     // trace-axis ns of relative time 0 (the aligned step)

  void open(const std::string& p, std::function<void()> wake) {
    worker.reset();  // joins the old data thread before its state goes
    *this = Run{};
    path = p;
    worker = std::make_unique<DataWorker>(p, std::move(wake));
    worker->requestSteps();
  }
  bool opened() const { return info.has_value(); }
  bool ok() const { return info && info->ok; }
  bool ready() const { return info && (!info->ok || stepsDone); }
  const std::string& name(core::StringId id) const {
    static const std::string kNone;
    return ok() && id < info->strings.size() ? info->strings[id] : kNone;
  }
  // Takes the data thread's answers.
  void poll() {
    if (!worker) return;
    WorkerOutput o = worker->take();
    if (o.empty()) return;
    if (o.opened) {
      info = std::move(*o.opened);
      if (!info->ok) error = info->error;
      for (const TrackInfo& t : info->tracks)
        if (!t.counter() && t.events > 0) tracks.push_back(&t);
      std::stable_sort(tracks.begin(), tracks.end(), [](const TrackInfo* x, const TrackInfo* y) {
        return x->rank != y->rank ? x->rank < y->rank : x->id < y->id;
      });
    }
    for (TrackWindow& w : o.windows) {
      const int64_t id = w.track;
      windows[id] = std::move(w);
    }
    if (o.view_done) done = *o.view_done;
    if (o.steps) {
      steps = std::move(*o.steps);
      stepsDone = true;
    }
    if (!o.errors.empty() && error.empty()) error = o.errors.front();
  }
  int depthOf(const TrackInfo& t) const {
    auto it = windows.find(t.id);
    return std::max(t.max_depth, it == windows.end() ? 0 : it->second.max_depth);
  }
  // Start and end of aligned step `n` (the n-th step span of each rank, from 0) over all ranks.
  std::optional<std::pair<int64_t, int64_t>> step(int64_t n) const {
    std::optional<std::pair<int64_t, int64_t>> r;
    for (const Step& s : steps) {
      if (s.number != n) continue;
      if (!r) r = std::make_pair(s.start, s.end);
      r->first = std::min(r->first, s.start);
      r->second = std::max(r->second, s.end);
    }
    return r;
  }
};

struct StepPair {
  int64_t number = 0;  // ordinal on its rank, from 0 (shown from 1)
  int rank = 0;
  std::optional<int64_t> a, b;  // durations
  std::string cells[5];         // A, B, B-A, B/A, label
};

struct StripRow {
  char run = 'A';
  int rank = 0;
  int64_t track = 0;
  int depth = 0;
  float y = 0, h = 0;
};

struct Hover {
  const Run* run = nullptr;
  char which = 'A';
  DrawItem item;
};

class CompareView final : public View {
 public:
  const char* word() const override { return "compare"; }
  const char* title() const override { return "Compare"; }
  void draw(ViewHost& host, float width, float height) override;
  bool settled() const override;
  std::string dumpText() const override;

 private:
  void start(ViewHost& host, const std::string& pathB);
  void align();
  void chooseStep(int64_t n, ViewHost* host);
  void buildTable();
  void sortTable(const ImGuiTableSortSpecs& specs);
  void drawHeader(ViewHost& host, float width);
  void drawBrowser(ViewHost& host, float width, float height);
  void drawStrips(ViewHost& host, float width, float height);
  void drawStrip(const Run& run, char which, ImDrawList* dl, float y, float h, bool boxes);
  void drawStepTable(ViewHost& host, float width, float height);
  void drawNameTable(float width, float height);
  void request(Run& run);
  float xOf(double r) const {
    return areaX_ + static_cast<float>((r - r0_) / (r1_ - r0_) * areaW_);
  }
  bool fetchedCurrent(const Run& run) const {
    return run.haveFetched && run.done == run.requested && run.fetched.t0 == wanted(run).t0 &&
           run.fetched.t1 == wanted(run).t1 && run.fetched.ns_per_px == wanted(run).ns_per_px;
  }
  LodWindow wanted(const Run& run) const {
    return spanWindow(run.origin + r0_, run.origin + r1_, areaW_);
  }

  bool started_ = false;
  std::string pathA_;
  Run a_, b_;
  BackgroundQuery<RunComparison> cmp_;
  std::string cmpError_;
  bool tableBuilt_ = false;
  bool resort_ = false;  // a new comparison: apply the table's sort again
  std::vector<std::array<std::string, kNameColumns>> cells_;  // per comparison row
  std::vector<int> order_;                                    // rows in the shown order
  bool aligned_ = false;
  std::vector<StepPair> pairs_;
  int64_t steps_ = 0;  // aligned step ordinals: 0 .. steps_ - 1
  int64_t step_ = 0;   // the one the strips show
  std::string stepSummary_;
  double r0_ = 0, r1_ = 1;  // the strips' window, ns relative to the aligned step's start
  float areaX_ = 0, areaW_ = 0;
  std::vector<StripRow> rows_;  // last frame's strip rows (screen pixels)
  std::string boxes_[2];        // last frame's span boxes of A and B (track.h), when recorded
  float stripY_[2] = {0, 0}, stripH_[2] = {0, 0};
  std::optional<Hover> hover_;
  bool dragged_ = false;
  char field_[1024] = {};
  bool browsing_ = false;
  FilePicker browser_;
  std::function<void()> wake_;
};

// ---------------------------------------------------------------------------------------------
// state

void CompareView::start(ViewHost& host, const std::string& pathB) {
  pathA_ = host.tracePath();
  wake_ = host.waker();
  std::snprintf(field_, sizeof field_, "%s", pathB.c_str());
  a_.open(pathA_, wake_);
  b_.open(pathB, wake_);
  cmp_.start(
      [a = pathA_, b = pathB](const std::atomic<bool>&) {
        const auto ra = trace::TraceReader::open(a);
        const auto rb = trace::TraceReader::open(b);
        return trace::analysis::compareRuns(ra, rb);
      },
      wake_);
  tableBuilt_ = aligned_ = false;
  cells_.clear();
  order_.clear();
  pairs_.clear();
  cmpError_.clear();
  hover_.reset();
  host.log("compare " + pathB);
}

// Steps of both runs arrived: pair them (n-th step of a rank in A with the n-th of that rank in B)
// and show the first one both runs have.
void CompareView::align() {
  std::map<std::pair<int64_t, int>, StepPair> pairs;
  for (const Step& s : a_.steps) {
    StepPair& p = pairs[{s.number, s.rank}];
    p.number = s.number, p.rank = s.rank, p.a = s.end - s.start;
  }
  for (const Step& s : b_.steps) {
    StepPair& p = pairs[{s.number, s.rank}];
    p.number = s.number, p.rank = s.rank, p.b = s.end - s.start;
  }
  pairs_.clear();
  steps_ = 0;
  for (auto& kv : pairs) {
    StepPair& p = kv.second;
    p.cells[0] = p.a ? trace::formatDuration(static_cast<double>(*p.a)) : "-";
    p.cells[1] = p.b ? trace::formatDuration(static_cast<double>(*p.b)) : "-";
    p.cells[2] = p.a && p.b ? signedDuration(*p.b - *p.a) : "-";
    p.cells[3] = p.a && p.b ? ratioText(*p.a, *p.b) : "-";
    p.cells[4] = std::to_string(p.number + 1) + "##step" + std::to_string(p.number) + "r" +
                 std::to_string(p.rank);
    steps_ = std::max(steps_, p.number + 1);
    pairs_.push_back(std::move(p));
  }
  aligned_ = true;
  int64_t first = 0;
  for (; first < steps_; ++first)
    if (a_.step(first) && b_.step(first)) break;
  chooseStep(first < steps_ ? first : 0, nullptr);
}

// Aligns the strips on step n: relative time 0 is each run's start of that step (its earliest
// rank); the window covers the longer of the two steps (or the longer run without steps).
void CompareView::chooseStep(int64_t n, ViewHost* host) {
  step_ = n;
  double len = 1;
  for (Run* run : {&a_, &b_}) {
    if (!run->ok()) continue;
    if (const auto s = run->step(n)) {
      run->origin = static_cast<double>(s->first);
      len = std::max(len, static_cast<double>(s->second - s->first));
    } else {
      run->origin = static_cast<double>(run->info->range.first);
      len = std::max(len, static_cast<double>(run->info->range.second - run->info->range.first));
    }
  }
  r0_ = -0.02 * len;
  r1_ = 1.02 * len;
  const auto sa = a_.step(n), sb = b_.step(n);
  if (sa && sb) {
    const int64_t da = sa->second - sa->first, db = sb->second - sb->first;
    stepSummary_ = "A " + trace::formatDuration(static_cast<double>(da)) + ", B " +
                   trace::formatDuration(static_cast<double>(db)) + " (" + signedDuration(db - da) +
                   ", " + ratioText(da, db) + ")";
  } else if (steps_ == 0) {
    stepSummary_ = "no steps: the runs are aligned at their starts";
  } else {
    stepSummary_ = "step " + std::to_string(n + 1) + " is missing from run " + (sa ? "B" : "A");
  }
  if (host) host->log("compare step " + std::to_string(n + 1));
}

void CompareView::buildTable() {
  const RunComparison* c = cmp_.result();
  tableBuilt_ = true;
  if (!c) {
    cmpError_ = cmp_.error();
    return;
  }
  cells_.clear();
  cells_.reserve(c->rows.size());
  for (const NameDiff& d : c->rows) {
    cells_.push_back({d.name, core::categoryName(d.category), trace::formatCount(d.a.count),
                      trace::formatCount(d.b.count), signedCount(d.countDiff()),
                      trace::formatDuration(static_cast<double>(d.a.total_ns)),
                      trace::formatDuration(static_cast<double>(d.b.total_ns)),
                      signedDuration(d.totalDiff()), ratioText(d.a.total_ns, d.b.total_ns),
                      trace::formatDuration(static_cast<double>(d.a.self_ns)),
                      trace::formatDuration(static_cast<double>(d.b.self_ns)),
                      signedDuration(d.selfDiff())});
  }
  order_.resize(c->rows.size());
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int>(i);
  resort_ = true;
}

// Difference columns sort by magnitude (descending: the largest change first, either way).
void CompareView::sortTable(const ImGuiTableSortSpecs& specs) {
  const RunComparison* c = cmp_.result();
  if (!c || specs.SpecsCount < 1) return;
  const ImGuiTableColumnSortSpecs& s = specs.Specs[0];
  const auto key = [&](const NameDiff& d) -> double {
    switch (s.ColumnUserID) {
      case 2:
        return static_cast<double>(d.a.count);
      case 3:
        return static_cast<double>(d.b.count);
      case 4:
        return std::fabs(static_cast<double>(d.countDiff()));
      case 5:
        return static_cast<double>(d.a.total_ns);
      case 6:
        return static_cast<double>(d.b.total_ns);
      case 7:
        return std::fabs(static_cast<double>(d.totalDiff()));
      case 8:
        return d.ratio();
      case 9:
        return static_cast<double>(d.a.self_ns);
      case 10:
        return static_cast<double>(d.b.self_ns);
      case 11:
        return std::fabs(static_cast<double>(d.selfDiff()));
      default:
        return 0;
    }
  };
  const bool desc = s.SortDirection == ImGuiSortDirection_Descending;
  for (size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<int>(i);
  std::stable_sort(order_.begin(), order_.end(), [&](int x, int y) {
    const NameDiff& dx = c->rows[static_cast<size_t>(x)];
    const NameDiff& dy = c->rows[static_cast<size_t>(y)];
    if (s.ColumnUserID <= 1) {
      const std::string& kx = s.ColumnUserID == 0 ? dx.name : cells_[static_cast<size_t>(x)][1];
      const std::string& ky = s.ColumnUserID == 0 ? dy.name : cells_[static_cast<size_t>(y)][1];
      return desc ? ky < kx : kx < ky;
    }
    const double kx = key(dx), ky = key(dy);
    return desc ? kx > ky : kx < ky;
  });
}

bool CompareView::settled() const {
  if (!started_ || b_.path.empty()) return true;
  if (!a_.ready() || !b_.ready() || !cmp_.ready() || !tableBuilt_) return false;
  if (!a_.ok() || !b_.ok()) return true;
  return aligned_ && fetchedCurrent(a_) && fetchedCurrent(b_);
}

std::string CompareView::dumpText() const {
  std::string out = "compare\t" + pathA_ + "\t" + b_.path + "\n";
  if (b_.path.empty()) return out;
  const auto num = [](const std::optional<int64_t>& v) {
    return v ? std::to_string(*v) : std::string("-");
  };
  for (const StepPair& p : pairs_) {
    out += "step\t" + std::to_string(p.number + 1) + "\t" + std::to_string(p.rank) + "\t" +
           num(p.a) + "\t" + num(p.b) + "\t" +
           (p.a && p.b ? std::to_string(*p.b - *p.a) : std::string("-")) + "\n";
  }
  if (const RunComparison* c = cmp_.result()) {
    for (int i : order_) {
      const NameDiff& d = c->rows[static_cast<size_t>(i)];
      out += "name\t" + escaped(d.name) + "\t" + core::categoryName(d.category) + "\t" +
             std::to_string(d.a.count) + "\t" + std::to_string(d.b.count) + "\t" +
             std::to_string(d.countDiff()) + "\t" + std::to_string(d.a.total_ns) + "\t" +
             std::to_string(d.b.total_ns) + "\t" + std::to_string(d.totalDiff()) + "\t" +
             std::to_string(d.a.self_ns) + "\t" + std::to_string(d.b.self_ns) + "\t" +
             std::to_string(d.selfDiff()) + "\n";
    }
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "aligned\t%" PRId64 "\t%.0f\t%.0f\n", step_ + 1, a_.origin,
                b_.origin);
  out += buf;
  std::snprintf(buf, sizeof buf, "area\t%.1f\t%.1f\t%.1f\t%.1f\n", areaX_, areaW_, r0_, r1_);
  out += buf;
  for (int i = 0; i < 2; ++i) {
    std::snprintf(buf, sizeof buf, "strip\t%c\t%.1f\t%.1f\n", i == 0 ? 'A' : 'B', stripY_[i],
                  stripH_[i]);
    out += buf;
  }
  for (const StripRow& r : rows_) {
    std::snprintf(buf, sizeof buf, "row\t%c\t%d\t%" PRId64 "\t%d\t%.1f\t%.1f\n", r.run, r.rank,
                  r.track, r.depth, r.y, r.h);
    out += buf;
  }
  // The span boxes each strip drew (track.h's lines, prefixed by the run).
  for (int i = 0; i < 2; ++i) {
    for (size_t at = 0; at < boxes_[i].size();) {
      const size_t nl = boxes_[i].find('\n', at);
      out += (i == 0 ? "A " : "B ") + boxes_[i].substr(at, nl - at + 1);
      at = nl + 1;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// drawing

void CompareView::draw(ViewHost& host, float width, float height) {
  if (!started_) {
    started_ = true;
    pathA_ = host.tracePath();
    std::string dir = fs::path(pathA_).parent_path().string();
    browser_.setDir(dir.empty() ? "." : dir);
    if (!host.comparePath().empty()) start(host, host.comparePath());
  }
  a_.poll();
  b_.poll();
  if (!aligned_ && a_.ready() && b_.ready() && a_.ok() && b_.ok()) align();
  if (!tableBuilt_ && cmp_.ready()) buildTable();

  const float top = ImGui::GetCursorPosY();
  drawHeader(host, width);
  const float h = height - (ImGui::GetCursorPosY() - top);
  if (browsing_) {
    drawBrowser(host, width, h);
    return;
  }
  if (b_.path.empty()) {
    ImGui::TextDisabled(
        "Open a second run to compare with this one: a path above, Browse..., or traceview "
        "a.db --compare b.db.");
    return;
  }
  for (const Run* run : {&a_, &b_}) {
    if (!run->error.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, palette::kError);
      ImGui::TextWrapped("%s: %s", run == &a_ ? "A" : "B", run->error.c_str());
      ImGui::PopStyleColor();
    }
  }
  if (!a_.ready() || !b_.ready() || !a_.ok() || !b_.ok()) {
    if (a_.error.empty() && b_.error.empty()) ImGui::TextDisabled("opening both runs...");
    return;
  }
  const float stripsH = std::max(160.0f, h * 0.55f);
  drawStrips(host, width, std::min(stripsH, h));
  const float rest = height - (ImGui::GetCursorPosY() - top);
  if (rest < 40) return;
  const float stepW = std::min(440.0f, width * 0.34f);
  ImGui::BeginChild("compare steps", ImVec2(stepW, rest), false);
  drawStepTable(host, stepW, rest);
  ImGui::EndChild();
  ImGui::SameLine(0, 6);
  ImGui::BeginChild("compare names", ImVec2(width - stepW - 6, rest), false);
  drawNameTable(width - stepW - 6, rest);
  ImGui::EndChild();
}

void CompareView::drawHeader(ViewHost& host, float width) {
  ImGui::TextColored(ImColor(palette::kCompareA), "A");
  ImGui::SameLine();
  ImGui::TextUnformatted(pathA_.c_str());
  ImGui::TextColored(ImColor(palette::kCompareB), "B");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(std::max(200.0f, width * 0.45f));
  const bool enter = ImGui::InputTextWithHint("##compare path", "second trace (b.db)", field_,
                                              sizeof field_, ImGuiInputTextFlags_EnterReturnsTrue);
  ImGui::SameLine();
  if ((ImGui::Button("Compare") || enter) && field_[0] != '\0') {
    browsing_ = false;
    std::error_code ec;
    if (!fs::exists(field_, ec)) {
      b_.error = std::string(field_) + ": no such file";
    } else {
      start(host, field_);
    }
  }
  ImGui::SameLine();
  if (ImGui::Button(browsing_ ? "Close" : "Browse...")) browsing_ = !browsing_;
  if (aligned_) {
    ImGui::SameLine(0, 20);
    int shown = static_cast<int>(step_ + 1);
    ImGui::TextUnformatted("step");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(110);
    if (ImGui::InputInt("##step", &shown, 1, 10)) {
      shown = std::clamp(shown, 1, static_cast<int>(std::max<int64_t>(steps_, 1)));
      if (shown - 1 != step_) chooseStep(shown - 1, &host);
    }
    ImGui::SameLine();
    ImGui::TextUnformatted(stepSummary_.c_str());
  }
}

// Browse...: the viewer's file picker, opening what it returns as run B.
void CompareView::drawBrowser(ViewHost& host, float width, float height) {
  ImGui::BeginChild("compare browse", ImVec2(width, height), true);
  if (const auto chosen = browser_.draw({}, 0)) {
    browsing_ = false;
    std::error_code ec;
    if (!fs::exists(*chosen, ec)) {
      b_.error = *chosen + ": no such file";
    } else {
      start(host, *chosen);
    }
  }
  ImGui::EndChild();
}

void CompareView::request(Run& run) {
  const LodWindow w = wanted(run);
  if (run.haveFetched && w.t0 == run.fetched.t0 && w.t1 == run.fetched.t1 &&
      w.ns_per_px == run.fetched.ns_per_px)
    return;
  std::vector<int64_t> ids;
  ids.reserve(run.tracks.size());
  for (const TrackInfo* t : run.tracks) ids.push_back(t->id);
  run.requested = run.worker->requestView(std::move(ids), w);
  run.fetched = w;
  run.haveFetched = true;
}

void CompareView::drawStrips(ViewHost& host, float width, float height) {
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  areaX_ = origin.x + kGutterW;
  areaW_ = std::max(50.0f, width - kGutterW - 8);
  request(a_);
  request(b_);
  const float stripH = (height - kRulerH - 6) / 2;
  stripY_[0] = origin.y + kRulerH;
  stripY_[1] = stripY_[0] + stripH + 6;
  stripH_[0] = stripH_[1] = stripH;

  // The ruler: ticks relative to the aligned step's start, grid lines through both strips.
  dl->AddRectFilled(ImVec2(origin.x, origin.y), ImVec2(areaX_ + areaW_, origin.y + kRulerH),
                    palette::kRuler);
  dl->AddText(ImVec2(origin.x + 4, origin.y + 3), palette::kTextDim, "from step start");
  for (int i = 0; i < 2; ++i) {
    const uint32_t accent = i == 0 ? palette::kCompareA : palette::kCompareB;
    dl->AddRectFilled(ImVec2(origin.x, stripY_[i]), ImVec2(areaX_ + areaW_, stripY_[i] + stripH),
                      palette::kBackground);
    dl->AddRectFilled(ImVec2(origin.x, stripY_[i]), ImVec2(origin.x + 4, stripY_[i] + stripH),
                      accent);
  }
  const auto ticks = rulerTicks(static_cast<int64_t>(std::floor(r0_)),
                                static_cast<int64_t>(std::ceil(r1_)), areaW_, 90, 0);
  for (const Tick& t : ticks) {
    const float x = xOf(static_cast<double>(t.t));
    dl->AddLine(ImVec2(x, origin.y + (t.major ? 8 : 14)), ImVec2(x, origin.y + kRulerH),
                t.major ? palette::kTickMajor : palette::kTickMinor);
    if (t.major) {
      dl->AddText(ImVec2(x + 3, origin.y + 2), palette::kText, t.label.c_str());
      dl->AddLine(ImVec2(x, stripY_[0]), ImVec2(x, stripY_[1] + stripH), palette::kGrid);
    }
  }

  rows_.clear();
  hover_.reset();
  dl->PushClipRect(ImVec2(origin.x, stripY_[0]), ImVec2(areaX_ + areaW_, stripY_[1] + stripH),
                   true);
  drawStrip(a_, 'A', dl, stripY_[0], stripH, host.recordBoxes());
  drawStrip(b_, 'B', dl, stripY_[1], stripH, host.recordBoxes());
  // The aligned step's start in both runs, and each run's end of it in its own strip.
  const float x0 = xOf(0);
  dl->AddLine(ImVec2(x0, stripY_[0]), ImVec2(x0, stripY_[1] + stripH), palette::kCompareAlign, 2);
  for (int i = 0; i < 2; ++i) {
    const Run& run = i == 0 ? a_ : b_;
    if (const auto s = run.step(step_)) {
      const float xe = xOf(static_cast<double>(s->second) - run.origin);
      dl->AddLine(ImVec2(xe, stripY_[i]), ImVec2(xe, stripY_[i] + stripH), palette::kCompareAlign,
                  2);
    }
  }
  dl->PopClipRect();

  // Pan (drag) and zoom (wheel) move both strips: they share r0_, r1_.
  ImGui::SetCursorScreenPos(ImVec2(areaX_, stripY_[0]));
  ImGui::InvisibleButton("compare strips", ImVec2(areaW_, stripY_[1] + stripH - stripY_[0]));
  const ImGuiIO& io = ImGui::GetIO();
  const double npp = (r1_ - r0_) / areaW_;
  if (ImGui::IsItemActivated()) dragged_ = false;
  if (ImGui::IsItemActive() && ImGui::IsMouseDragging(0, 2)) {
    dragged_ = true;
    r0_ -= io.MouseDelta.x * npp;
    r1_ -= io.MouseDelta.x * npp;
  }
  if (ImGui::IsItemHovered() && io.MouseWheel != 0) {
    const double at = r0_ + (io.MousePos.x - areaX_) * npp;
    const double f = std::pow(0.8, io.MouseWheel);
    const double len = std::max(10.0, (r1_ - r0_) * f);
    r0_ = at - (at - r0_) / (r1_ - r0_) * len;
    r1_ = r0_ + len;
  }
  if (hover_ && ImGui::IsItemHovered()) {
    const DrawItem& it = hover_->item;
    const std::string& nm = hover_->run->name(it.span.name);
    if (it.prim.fold) {
      ImGui::SetTooltip(
          "%c: %" PRId64 " spans folded (%s)\nlongest: %s\nclick to zoom in", hover_->which,
          it.prim.count,
          trace::formatDuration(static_cast<double>(it.prim.end - it.prim.start)).c_str(),
          nm.c_str());
    } else {
      ImGui::SetTooltip(
          "%c: %s\n%s at %s from the step's start%s", hover_->which, nm.c_str(),
          trace::formatDuration(static_cast<double>(it.span.end - it.span.start)).c_str(),
          signedDuration(
              static_cast<int64_t>(static_cast<double>(it.span.start) - hover_->run->origin))
              .c_str(),
          hover_->which == 'A' ? "\nclick: select it in the timeline" : "");
    }
    if (ImGui::IsItemDeactivated() && !dragged_) {
      if (it.prim.fold) {
        const double s = static_cast<double>(it.prim.start) - hover_->run->origin;
        const double e = static_cast<double>(it.prim.end) - hover_->run->origin;
        r0_ = s - (e - s) * 0.05;
        r1_ = e + (e - s) * 0.05 + 10;
      } else if (hover_->which == 'A') {
        host.selectSpan(it.span.id, true);
        host.log("compare selected span " + std::to_string(it.span.id) + " " + nm);
      }
    }
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, stripY_[1] + stripH + 6));
}

// One run's strip: per rank, each span track's depths (as many as fit), boxes from the data
// thread's windows placed on the shared relative axis.
void CompareView::drawStrip(const Run& run, char which, ImDrawList* dl, float y, float h,
                            bool boxes) {
  boxes_[which == 'A' ? 0 : 1].clear();
  const uint32_t accent = which == 'A' ? palette::kCompareA : palette::kCompareB;
  // Depths per track: all of them when they fit at kMinRowH, else the top ones.
  int cap = 64;
  int total = 0;
  for (;;) {
    total = 0;
    for (const TrackInfo* t : run.tracks) total += std::min(run.depthOf(*t) + 1, cap);
    if (total == 0 || static_cast<float>(total) * kMinRowH <= h - 4 || cap == 1) break;
    --cap;
  }
  const float rh =
      total == 0 ? kMaxRowH : std::clamp((h - 4) / static_cast<float>(total), 1.0f, kMaxRowH);
  const ImVec2 mouse = ImGui::GetMousePos();
  float ty = y + 2;
  int lastRank = -1;
  for (const TrackInfo* t : run.tracks) {
    const int depths = std::min(run.depthOf(*t) + 1, cap);
    const float th = rh * static_cast<float>(depths);
    if (t->rank != lastRank) {
      if (lastRank >= 0)
        dl->AddLine(ImVec2(areaX_ - kGutterW, ty - 1), ImVec2(areaX_ + areaW_, ty - 1),
                    palette::kRankHeader);
      lastRank = t->rank;
    }
    if (th >= 11) {
      char label[96];
      std::snprintf(label, sizeof label, "%c  rank %d  %s", which, t->rank, t->name.c_str());
      const ImVec4 clip(areaX_ - kGutterW, ty, areaX_ - 4, ty + th);
      dl->AddText(nullptr, 0, ImVec2(areaX_ - kGutterW + 8, ty), palette::kText, label, nullptr, 0,
                  &clip);
    }
    for (int d = 0; d < depths; ++d)
      rows_.push_back({which, t->rank, t->id, d, ty + rh * static_cast<float>(d), rh});
    // The timeline's span track, on this strip's axis (relative time + the run's origin).
    TrackCanvas c;
    c.dl = dl;
    c.axis = TrackAxis{run.origin + r0_, run.origin + r1_, areaX_, areaW_};
    c.y = ty;
    c.h = th;
    c.row_h = rh;
    c.depths = depths;
    c.name = [&run](core::StringId id) -> const std::string& { return run.name(id); };
    c.mouse_x = mouse.x;
    c.mouse_y = mouse.y;
    c.mouse_here = true;
    if (boxes) c.boxes = &boxes_[which == 'A' ? 0 : 1];
    const auto it = run.windows.find(t->id);
    if (const DrawItem* hit =
            SpanTrack().draw(c, *t, it == run.windows.end() ? nullptr : &it->second))
      hover_ = Hover{&run, which, *hit};
    ty += th;
  }
  dl->AddText(ImVec2(areaX_ + areaW_ - 18, y + 2), accent, which == 'A' ? "A" : "B");
}

void CompareView::drawStepTable(ViewHost& host, float width, float height) {
  ImGui::TextUnformatted("Steps (n-th step of each rank, A against B)");
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("compare step table", 6, flags,
                         ImVec2(width, height - ImGui::GetFrameHeightWithSpacing())))
    return;
  ImGui::TableSetupScrollFreeze(0, 1);
  for (const char* c : {"step", "rank", "A", "B", "B-A", "B/A"}) ImGui::TableSetupColumn(c);
  ImGui::TableHeadersRow();
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(pairs_.size()));
  while (clipper.Step()) {
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i) {
      const StepPair& p = pairs_[static_cast<size_t>(i)];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (ImGui::Selectable(p.cells[4].c_str(), p.number == step_,
                            ImGuiSelectableFlags_SpanAllColumns))
        chooseStep(p.number, &host);
      ImGui::TableNextColumn();
      ImGui::Text("%d", p.rank);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(p.cells[0].c_str());
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(p.cells[1].c_str());
      ImGui::TableNextColumn();
      ImGui::PushStyleColor(ImGuiCol_Text,
                            p.a && p.b ? diffColour(*p.b - *p.a) : palette::kTextDim);
      ImGui::TextUnformatted(p.cells[2].c_str());
      ImGui::PopStyleColor();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(p.cells[3].c_str());
    }
  }
  ImGui::EndTable();
}

void CompareView::drawNameTable(float width, float height) {
  const RunComparison* c = cmp_.result();
  if (!c) {
    if (!cmpError_.empty()) {
      ImGui::PushStyleColor(ImGuiCol_Text, palette::kError);
      ImGui::TextWrapped("comparison failed: %s", cmpError_.c_str());
      ImGui::PopStyleColor();
    } else {
      ImGui::TextDisabled("comparing the runs' op totals...");
    }
    return;
  }
  ImGui::Text("Ops and autograd nodes by name (the report's ops numbers, all ranks): %zu names",
              c->rows.size());
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_ScrollY |
                                ImGuiTableFlags_ScrollX | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_Sortable | ImGuiTableFlags_Resizable |
                                ImGuiTableFlags_SizingFixedFit;
  if (!ImGui::BeginTable("compare name table", kNameColumns, flags,
                         ImVec2(width, height - ImGui::GetFrameHeightWithSpacing())))
    return;
  ImGui::TableSetupScrollFreeze(1, 1);
  const char* heads[kNameColumns] = {"name",      "category", "count A", "count B",
                                     "count B-A", "total A",  "total B", "total B-A",
                                     "B/A",       "self A",   "self B",  "self B-A"};
  for (int i = 0; i < kNameColumns; ++i) {
    ImGuiTableColumnFlags f = ImGuiTableColumnFlags_PreferSortDescending;
    if (i == 7) f |= ImGuiTableColumnFlags_DefaultSort;
    ImGui::TableSetupColumn(heads[i], f, i == 0 ? 260.0f : 0.0f, static_cast<ImGuiID>(i));
  }
  ImGui::TableHeadersRow();
  if (ImGuiTableSortSpecs* specs = ImGui::TableGetSortSpecs()) {
    if (specs->SpecsDirty || resort_) {
      sortTable(*specs);
      resort_ = false;
      specs->SpecsDirty = false;
    }
  }
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(order_.size()));
  while (clipper.Step()) {
    for (int r = clipper.DisplayStart; r < clipper.DisplayEnd; ++r) {
      const size_t i = static_cast<size_t>(order_[static_cast<size_t>(r)]);
      const NameDiff& d = c->rows[i];
      ImGui::TableNextRow();
      for (int col = 0; col < kNameColumns; ++col) {
        ImGui::TableNextColumn();
        const int64_t diff = col == 4    ? d.countDiff()
                             : col == 7  ? d.totalDiff()
                             : col == 11 ? d.selfDiff()
                                         : 0;
        const bool coloured = col == 4 || col == 7 || col == 11;
        if (coloured) ImGui::PushStyleColor(ImGuiCol_Text, diffColour(diff));
        ImGui::TextUnformatted(cells_[i][static_cast<size_t>(col)].c_str());
        if (coloured) ImGui::PopStyleColor();
      }
    }
  }
  ImGui::EndTable();
}

}  // namespace

std::unique_ptr<View> makeCompareView() {
  return std::make_unique<CompareView>();
}

}  // namespace tracerun::viewer
