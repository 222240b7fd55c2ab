// The launcher's flags on the top-level app; the work is launcher::launch(). No libtorch.
#include "launch_command.h"

#include <memory>

#include "launch.h"

namespace tracerun::tools {

Command addLaunchCommand(CLI::App& app) {
  auto o = std::make_shared<launcher::LaunchOptions>();
  app.add_option("-o,--output", o->output, "trace to write when running a PROGRAM (run.db)");
  app.add_option("--capture", o->capture,
                 "what to record, comma-separated: ops,scopes,memory (default all)");
  app.add_flag(
      "--no-shapes", [o](int64_t) { o->shapes = false; },
      "do not record input shapes and dtypes of ops (cheaper)");
  app.add_option("--target", o->target,
                 "capture in this program (path or name) instead of PROGRAM: for wrappers and "
                 "scripts that start the real program");
  app.add_flag("--keep-shards", o->keep_shards, "keep OUTPUT.shards/ after merging");
  app.add_flag("-q,--quiet", o->quiet, "no summary after the run");
  app.add_option("program", o->program, "-- PROGRAM ARGS...: the program to run and trace");
  return {&app, [o] { return launcher::launch(*o); }};
}

}  // namespace tracerun::tools
