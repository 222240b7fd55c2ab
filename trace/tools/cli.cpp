// The main() of every command-line program of the suite (runTool): builds the CLI11 app from the
// commands it is given, gives each --version, and turns every failure into one line on stderr
// ("NAME: PATH: problem") and an exit code. The commands themselves live in cmd_*.cpp; nothing here
// reads a trace.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"
#include "tracerun/trace/error.h"

namespace tracerun::tools {

namespace {

std::string oneLine(std::string s) {
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Messages may quote a damaged file or an argument: control bytes are printed as \xNN.
void printError(const std::string& name, const std::string& message) {
  std::fprintf(stderr, "%s: %s\n", name.c_str(), trace::printable(oneLine(message)).c_str());
}

std::string commandList(const std::vector<Command>& commands, const CLI::App& app) {
  std::string names;
  for (const auto& c : commands) {
    if (c.app == &app) continue;
    names += (names.empty() ? "" : ", ") + c.app->get_name();
  }
  return names;
}

int runCommand(const std::string& name, const Command& c) {
  try {
    return c.run();
  } catch (const std::exception& e) {
    printError(name, e.what());
  } catch (...) {
    printError(name, "unexpected error");
  }
  return kExitBadInput;
}

}  // namespace

std::vector<Command> addTraceCommands(CLI::App& parent) {
  return {addInfoCommand(parent), addExportCommand(parent), addMergeCommand(parent),
          addReportCommand(parent)};
}

std::string programName(const CLI::App& app) {
  const CLI::App* root = &app;
  while (root->get_parent() != nullptr) root = root->get_parent();
  return root->get_name();
}

std::string versionText() {
  return std::string("tracerun ") + TRACERUN_VERSION;
}

int runTool(int argc, char** argv, const std::string& name, const std::string& description,
            const std::function<std::vector<Command>(CLI::App&)>& addCommands) {
  CLI::App app{description, name};
  app.set_version_flag("--version", versionText());
  app.require_subcommand(0, 1);
  // A command that runs without a subcommand name (tracerun's launcher) registers as a Command
  // whose app is `app` itself; it runs when no subcommand name is given.
  const std::vector<Command> commands = addCommands(app);
  for (const auto& c : commands) {
    // The flag's callback throws CallForVersion before the subcommand's required arguments are
    // checked, so `tracerun report --version` needs no trace.
    if (c.app != &app) c.app->set_version_flag("--version", versionText());
  }

  const std::string names = commandList(commands, app);
  bool known = false;
  for (const auto& c : commands)
    known = known || (c.app != &app && argc > 1 && c.app->check_name(argv[1]));
  if (argc > 1 && argv[1][0] != '-' && !known) {
    printError(name, std::string("unknown command '") + argv[1] + "' (commands: " + names +
                         "; see " + name + " --help)");
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
    std::string where = name;
    for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
    printError(name, std::string(e.what()) + " (see " + where + " --help)");
    return kExitUsage;
  }
  for (const auto& c : commands) {
    if (c.app != &app && c.app->parsed()) return runCommand(name, c);
  }
  for (const auto& c : commands) {
    if (c.app == &app) return runCommand(name, c);
  }
  printError(name, "no command given (commands: " + names + "; see " + name + " --help)");
  return kExitUsage;
}

}  // namespace tracerun::tools
