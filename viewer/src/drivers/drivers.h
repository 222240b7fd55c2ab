// traceview's five ways to run a Viewer in its window, one function each: the interactive window,
// --screenshot (one settled frame into a PNG), --script (input events replayed frame by frame,
// drive_script.cpp), --bench-sweep (a scripted zoom, frame times) and --bench-views (tab switches).
// main.cpp parses the flags, opens the window and picks one; a driver owns the frame loop and when
// it stops, nothing else (no flag parsing, no trace reading).
#pragma once

#include <string>
#include <vector>

#include "app/viewer_app.h"
#include "drivers/gl_window.h"
#include "drivers/script.h"

namespace tracerun::viewer {

// What the drivers read of traceview's command line.
struct DriverFlags {
  std::string path, size;    // the trace and the window size as given (for the bench headers)
  std::string screenshot;    // --screenshot PNG
  std::string dump_layout;   // --dump-layout: the timeline's geometry at each settle
  std::string dump_view;     // --dump-view: the front tab's numbers at each settle
  std::string script;        // --script FILE
  bool log_actions = false;  // --log-actions
  double timeout_s = 120;    // --settle-timeout
  int bench_steps = 0, bench_views = 0;
};

// Each returns the exit code, or throws with one line (TraceError, std::runtime_error).
int driveWindow(GlWindow& window, Viewer& viewer, const DriverFlags& f);
int driveScreenshot(GlWindow& window, Viewer& viewer, const DriverFlags& f);
int driveScript(GlWindow& window, Viewer& viewer, const DriverFlags& f,
                const std::vector<ScriptEvent>& script);
int driveBenchSweep(GlWindow& window, Viewer& viewer, const DriverFlags& f);
int driveBenchViews(GlWindow& window, Viewer& viewer, const DriverFlags& f);

}  // namespace tracerun::viewer
