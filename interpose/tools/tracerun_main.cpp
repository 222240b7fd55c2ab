// tracerun's entry point: the trace-reading commands of trace/tools (info, export, merge, report)
// plus the launcher mode (`tracerun [-o run.db] -- PROGRAM ARGS`), which only interpose/ adds.
// Parsing, the one-line errors and the exit codes are runTool's (trace/tools/cli.cpp), not here.
#include "commands.h"
#include "launch_command.h"

int main(int argc, char** argv) {
  using namespace tracerun::tools;
  return runTool(
      argc, argv, "tracerun",
      "tracerun: records parallel libtorch jobs into one SQLite trace, and reads traces.",
      [](CLI::App& app) {
        std::vector<Command> commands = addTraceCommands(app);
        commands.push_back(addLaunchCommand(app));
        return commands;
      });
}
