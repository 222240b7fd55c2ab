// `tracerun report run.db [--json]`: pipeline bubbles, memory peaks by category, top ops and
// communication, as tables or one JSON object (trace/analysis/report.h builds them, report_text.h
// and report_json.h format them; this file only chooses and prints). Exits 3, after printing, when
// the trace's stats say the capture lost data.
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "tracerun/trace/analysis/report.h"
#include "tracerun/trace/analysis/report_json.h"
#include "tracerun/trace/analysis/report_text.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

namespace {

struct ReportOptions {
  std::string path;
  bool json = false;
  size_t top = 15;
};

}  // namespace

Command addReportCommand(CLI::App& parent) {
  auto opts = std::make_shared<ReportOptions>();
  CLI::App* app = parent.add_subcommand(
      "report", "Bubbles, memory peaks by category, top ops and communication of a trace");
  app->add_option("trace", opts->path, "the trace file (run.db or a rank shard)")->required();
  app->add_flag("--json", opts->json, "print one JSON object instead of tables");
  app->add_option("--top", opts->top, "ops listed by self time (default 15)")->check(atLeast(1));
  return {app, [opts, app] {
            return withPath(opts->path, [&] {
              const auto reader = trace::TraceReader::open(opts->path);
              reader.quickCheck();  // a damaged page fails here with one line, before any output
              trace::analysis::ReportOptions ro;
              ro.top_ops = opts->top;
              const auto report = trace::analysis::buildReport(reader, ro);
              if (opts->json) {
                std::cout << trace::analysis::reportJson(report);
              } else {
                std::cout << trace::analysis::reportText(report);
              }
              std::cout.flush();
              if (report.lost.empty()) return kExitOk;
              std::string what;
              for (const auto& l : report.lost) what += (what.empty() ? "" : "; ") + l;
              // Stat names come from the file: printed escaped, like every error line.
              std::fprintf(stderr, "%s: %s: the capture lost data (%s): the report is incomplete\n",
                           programName(*app).c_str(), trace::printable(opts->path).c_str(),
                           trace::printable(what).c_str());
              return kExitLostData;
            });
          }};
}

}  // namespace tracerun::tools
