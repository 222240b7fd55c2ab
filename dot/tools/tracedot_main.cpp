// tracedot: Graphviz pictures of a tracerun trace (call graphs, pipeline dependency graphs, model
// diagrams, autograd graphs). The subcommand table only; each command is its own tools/cmd_*.cpp,
// and the plumbing (exit codes, one-line errors, --version) is trace/tools' runTool.
#include <vector>

#include "dot_commands.h"

int main(int argc, char** argv) {
  using namespace tracerun::tools;
  return runTool(argc, argv, "tracedot",
                 "tracedot: Graphviz pictures of a tracerun trace (SVG, PNG, PDF, dot, text)",
                 [](CLI::App& app) {
                   std::vector<Command> commands;
                   commands.push_back(addCallgraphCommand(app));
                   commands.push_back(addPipelineCommand(app));
                   commands.push_back(addModelCommand(app));
                   commands.push_back(addAutogradCommand(app));
                   return commands;
                 });
}
