// `tracerun export run.db --chrome out.json`: the trace as Chrome trace-event JSON (Perfetto,
// chrome://tracing). A thin front to trace::exportChrome; no formats of its own.
#include <sys/stat.h>

#include <cstdio>

#include "commands.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/chrome_export.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

namespace {

struct ExportOptions {
  std::string path;
  std::string chrome;
  bool quiet = false;
};

int runExport(const ExportOptions& o) {
  const int64_t t0 = core::nowNs();
  auto reader = trace::TraceReader::open(o.path);
  Progress progress("exporting " + o.chrome, !o.quiet);
  const auto s = trace::exportChrome(reader, o.chrome, [&](double f) { progress.update(f); });
  progress.done();
  struct stat st;
  const double bytes = ::stat(o.chrome.c_str(), &st) == 0 ? double(st.st_size) : 0.0;
  if (!o.quiet) {
    std::printf(
        "wrote %s: %lld spans, %lld instants, %lld counter samples, %lld memory samples, "
        "%lld flows (%s) in %s\n",
        o.chrome.c_str(), static_cast<long long>(s.spans), static_cast<long long>(s.instants),
        static_cast<long long>(s.counters), static_cast<long long>(s.memory),
        static_cast<long long>(s.flows), formatBytes(bytes).c_str(),
        formatDuration(core::nowNs() - t0).c_str());
  }
  return kExitOk;
}

}  // namespace

Command addExportCommand(CLI::App& parent) {
  auto opts = std::make_shared<ExportOptions>();
  CLI::App* app = parent.add_subcommand(
      "export", "Write a trace in another format (Chrome trace JSON for Perfetto)");
  app->add_option("trace", opts->path, "the trace file (run.db)")->required();
  app->add_option("--chrome", opts->chrome,
                  "write Chrome trace-event JSON here (opens in ui.perfetto.dev, chrome://tracing)")
      ->required();
  app->add_flag("-q,--quiet", opts->quiet, "no progress and no summary line");
  return {app, [opts] { return withPath(opts->path, [&] { return runExport(*opts); }); }};
}

}  // namespace tracerun::tools
