// tracerun's entry point: builds the CLI11 app from the commands in commands.h and turns every
// failure into one line on stderr ("tracerun: PATH: problem") and an exit code. The commands
// themselves live in cmd_*.cpp; nothing here reads a trace.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "launch_command.h"
#include "tracerun/trace/error.h"

namespace {

using tracerun::tools::Command;

std::string oneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Messages may quote a damaged file or an argument: control bytes are printed as \xNN.
void printError(const std::string& message) {
  std::fprintf(stderr, "tracerun: %s\n", tracerun::trace::printable(oneLine(message)).c_str());
}

std::string commandList(const std::vector<Command>& commands, const CLI::App& app) {
  std::string names;
  for (const auto& c : commands) {
    if (c.app == &app) continue;
    names += (names.empty() ? "" : ", ") + c.app->get_name();
  }
  return names;
}

int runCommand(const Command& c) {
  try {
    return c.run();
  } catch (const std::exception& e) {
    printError(e.what());
  } catch (...) {
    printError("unexpected error");
  }
  return tracerun::tools::kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tracerun::tools;
  CLI::App app{"tracerun: records parallel libtorch jobs into one SQLite trace, and reads traces.",
               "tracerun"};
  app.set_version_flag("--version", std::string("tracerun ") + TRACERUN_VERSION);
  app.require_subcommand(0, 1);
  std::vector<Command> commands = {addInfoCommand(app), addExportCommand(app), addMergeCommand(app),
                                   addReportCommand(app), addLaunchCommand(app)};
  // The launcher (`tracerun [-o run.db] -- PROGRAM ARGS`) registers here as one more Command
  // whose app is `app` itself; it runs when no subcommand name is given.

  const std::string names = commandList(commands, app);
  bool known = false;
  for (const auto& c : commands)
    known = known || (c.app != &app && argc > 1 && c.app->check_name(argv[1]));
  if (argc > 1 && argv[1][0] != '-' && !known) {
    printError(std::string("unknown command '") + argv[1] + "' (commands: " + names +
               "; see tracerun --help)");
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string where = "tracerun";
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    printError(std::string(e.what()) + " (see " + where + " --help)");
    return kExitUsage;
  }
  for (const auto& c : commands) {
    if (c.app != &app && c.app->parsed()) return runCommand(c);
  }
  for (const auto& c : commands) {
    if (c.app == &app) return runCommand(c);
  }
  printError("no command given (commands: " + names + "; see tracerun --help)");
  return kExitUsage;
}
