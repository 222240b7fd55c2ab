// traceview: the desktop viewer's entry point. Parses flags (the suite's runTool plumbing), opens
// the window (gl_window.h) and hands it to one of the four drivers (drivers.h: the window,
// --screenshot, --bench-sweep, --bench-views). The UI itself is in viewer_app.cpp; nothing here
// draws a frame or reads a trace beyond checking that the files given are there.
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "app/viewer_app.h"
#include "app/views.h"
#include "commands.h"
#include "data/time_axis.h"
#include "drivers/drivers.h"
#include "drivers/gl_window.h"
#include "tracerun/trace/reader.h"

namespace {

using tracerun::viewer::DriverFlags;
using tracerun::viewer::GlWindow;
using tracerun::viewer::Viewer;
using tracerun::viewer::ViewerOptions;

struct Flags {
  std::string path, screenshot, size = "1600x900", range, go, dump_layout, view = "timeline",
                                dump_view, compare, script;
  std::vector<std::string> view_options;
  int64_t select = -1;
  bool log_actions = false;
  double timeout_s = 120;
  int bench_steps = 0, bench_views = 0;
};

std::optional<std::pair<int, int>> parseSize(const std::string& s) {
  int w = 0, h = 0;
  char x = 0, extra = 0;
  if (std::sscanf(s.c_str(), "%d%c%d%c", &w, &x, &h, &extra) != 3 || (x != 'x' && x != 'X') ||
      w < 64 || h < 64 || w > 16384 || h > 16384) {
    return std::nullopt;
  }
  return std::make_pair(w, h);
}

std::optional<std::pair<int64_t, int64_t>> parseRange(const std::string& r) {
  const auto colon = r.find(':');
  if (colon == std::string::npos) return std::nullopt;
  const auto a = tracerun::viewer::parseTime(r.substr(0, colon));
  const auto b = tracerun::viewer::parseTime(r.substr(colon + 1));
  if (!a || !b || *b <= *a) return std::nullopt;
  return std::make_pair(*a, *b);
}

std::optional<std::pair<int, int64_t>> parseGoto(const std::string& g) {
  int rank = -1;
  long long id = -1;
  char extra = 0;
  if (std::sscanf(g.c_str(), "%d:%lld%c", &rank, &id, &extra) != 2 || rank < 0 || id < 0) {
    return std::nullopt;
  }
  return std::make_pair(rank, static_cast<int64_t>(id));
}

// A CLI11 check from a parser: a usage error (exit 2) with `what` when the parser says no.
template <typename Parse>
CLI::Validator checkWith(Parse parse, std::string what) {
  return CLI::Validator(
      [parse, what](std::string& v) {
        return parse(v) ? std::string() : what + ", not '" + v + "'";
      },
      "", "");
}

ViewerOptions viewerOptions(const Flags& f) {
  ViewerOptions o;
  o.path = f.path;
  o.log_actions = f.log_actions;
  o.headless = !f.screenshot.empty() || !f.script.empty() || f.bench_steps > 0 || f.bench_views > 0;
  o.view = f.view;
  o.compare = f.compare;
  o.view_options = f.view_options;
  o.record_boxes = !f.dump_layout.empty() || !f.dump_view.empty() || !f.script.empty();
  if (!f.range.empty()) o.range = parseRange(f.range);
  if (f.select >= 0) o.select = f.select;
  if (!f.go.empty()) o.go = parseGoto(f.go);
  return o;
}

// The trace and the --compare trace exist (and the latter is a trace) before a window opens.
void checkFiles(const Flags& f) {
  if (!f.path.empty() && !std::filesystem::exists(f.path)) {
    throw tracerun::trace::TraceError(f.path + ": no such file");
  }
  if (!f.compare.empty()) {
    if (!std::filesystem::exists(f.compare)) {
      throw tracerun::trace::TraceError(f.compare + ": no such file (--compare)");
    }
    tracerun::trace::TraceReader::open(f.compare);  // one line naming the problem when not a trace
  }
}

DriverFlags driverFlags(const Flags& f) {
  DriverFlags d;
  d.path = f.path;
  d.size = f.size;
  d.screenshot = f.screenshot;
  d.dump_layout = f.dump_layout;
  d.dump_view = f.dump_view;
  d.script = f.script;
  d.log_actions = f.log_actions;
  d.timeout_s = f.timeout_s;
  d.bench_steps = f.bench_steps;
  d.bench_views = f.bench_views;
  return d;
}

// Opens the window, then runs the one driver the flags ask for (drivers.h).
int runViewer(const Flags& f) {
  const ViewerOptions o = viewerOptions(f);
  checkFiles(f);
  // A malformed script fails here, in one line naming file:line, before a window opens.
  const auto script = f.script.empty() ? std::vector<tracerun::viewer::ScriptEvent>()
                                       : tracerun::viewer::readScript(f.script);
  const auto [width, height] = *parseSize(f.size);
  GlWindow window(width, height, f.path.empty() ? "traceview" : "traceview - " + f.path,
                  o.headless);
  Viewer viewer(o, [] { tracerun::viewer::wakeEventLoop(); });
  const DriverFlags d = driverFlags(f);
  if (f.bench_views > 0) return tracerun::viewer::driveBenchViews(window, viewer, d);
  if (f.bench_steps > 0) return tracerun::viewer::driveBenchSweep(window, viewer, d);
  if (!f.script.empty()) return tracerun::viewer::driveScript(window, viewer, d, script);
  if (o.headless) return tracerun::viewer::driveScreenshot(window, viewer, d);
  return tracerun::viewer::driveWindow(window, viewer, d);
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  return tracerun::tools::runTool(
      argc, argv, "traceview", "traceview: the desktop viewer of tracerun traces",
      [&](CLI::App& app) {
        app.add_option("trace", flags.path,
                       "trace to open (run.db); none: start with the file picker");
        app.add_option(
            "--screenshot", flags.screenshot,
            "render one settled frame to this PNG and exit (needs a display: xvfb-run -a)");
        app.add_option("--size", flags.size, "window size WIDTHxHEIGHT (default 1600x900)")
            ->check(checkWith(parseSize, "--size: expected WIDTHxHEIGHT between 64 and 16384"));
        app.add_option(
               "--range", flags.range,
               "time window T0:T1 from the trace's start (ns, or 1.5ms:3ms; units ns us ms s)")
            ->check(
                checkWith(parseRange, "--range: expected T0:T1 with T0 < T1 (ns, or 1.5ms:3ms)"));
        app.add_option("--select", flags.select, "select the span with this id")
            ->check(tracerun::tools::atLeast(0));
        app.add_option("--goto", flags.go, "open at span SPAN_ID of rank RANK (RANK:SPAN_ID)")
            ->check(checkWith(parseGoto, "--goto: expected RANK:SPAN_ID (two whole numbers)"));
        app.add_flag("--log-actions", flags.log_actions,
                     "print one line on stdout per user action");
        app.add_option(
            "--dump-layout", flags.dump_layout,
            "write the timeline's geometry to this file each time the view settles (tests)");
        std::string words;
        for (const auto& w : tracerun::viewer::viewWords()) words += (words.empty() ? "" : "|") + w;
        app.add_option("--view", flags.view, "the tab in front at open: " + words)
            ->check(CLI::IsMember(tracerun::viewer::viewWords()));
        app.add_option("--dump-view", flags.dump_view,
                       "write the numbers the tab in front shows to this file each time the view "
                       "settles (tests; the timeline writes its geometry)");
        app.add_option("--compare", flags.compare,
                       "a second trace to compare with the first (the compare tab: steps aligned, "
                       "per-name differences, both timelines)");
        std::vector<std::string> optionWords;
        std::string optionHelp;
        for (const auto& v : tracerun::viewer::makeViews()) {
          for (const auto& [word, help] : v->options()) {
            optionWords.push_back(word);
            optionHelp += "; " + word + " (" + v->word() + "): " + help;
          }
        }
        app.add_option("--view-option", flags.view_options,
                       "a tab's option at open, repeatable" + optionHelp)
            ->check(CLI::IsMember(optionWords));
        app.add_option("--bench-sweep", flags.bench_steps,
                       "benchmark: zoom in STEPS steps from the whole run to 1 us/px, print frame "
                       "times, primitives and memory, exit (bench/viewer_bench.sh)")
            ->check(tracerun::tools::atLeast(1));
        app.add_option("--bench-views", flags.bench_views,
                       "benchmark: switch through every tab ROUNDS times, print how long each "
                       "takes to show its data and the frame times, exit")
            ->check(tracerun::tools::atLeast(1));
        app.add_option("--script", flags.script,
                       "replay the input events of FILE frame by frame in a hidden window, then "
                       "exit: one 'FRAME EVENT ARGS' a line (FRAME: N or +N; EVENT: move X Y, "
                       "click/press/release [left|right|middle], drag X0 Y0 X1 Y1 [FRAMES], "
                       "wheel N, key/keydown/keyup KEY (ctrl+f, F12, Return), type TEXT, tab "
                       "WORD, settle, screenshot PNG, dump-layout FILE, dump-view FILE, quit); "
                       "frame 0 is the first settled frame (docs/viewer.md)");
        app.add_option("--settle-timeout", flags.timeout_s,
                       "--screenshot, --script: seconds to wait before giving up (default 120)");
        return std::vector<tracerun::tools::Command>{
            {&app, [&] {
               if (!flags.screenshot.empty() && flags.path.empty()) {
                 throw CLI::ValidationError(
                     "--screenshot needs a trace: traceview run.db --screenshot out.png");
               }
               if (!flags.script.empty() && flags.path.empty()) {
                 throw CLI::ValidationError(
                     "--script needs a trace: traceview run.db --script input.txt");
               }
               if (!flags.script.empty() &&
                   (!flags.screenshot.empty() || flags.bench_steps > 0 || flags.bench_views > 0)) {
                 throw CLI::ValidationError(
                     "--script runs alone: take screenshots with the script's screenshot event");
               }
               if (!flags.compare.empty() && flags.path.empty()) {
                 throw CLI::ValidationError(
                     "--compare needs a trace first: traceview a.db --compare b.db");
               }
               return runViewer(flags);
             }}};
      });
}
