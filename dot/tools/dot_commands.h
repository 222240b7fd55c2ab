// tracedot's subcommands and what they share: the output flags (-o, -T, --max-nodes), parsing
// "0.5%" thresholds, and writing a graph in the format asked. Each subcommand lives in its own
// tools/cmd_*.cpp and is registered by one line in tracedot_main.cpp. Builds no graph itself.
#pragma once

#include <string>

#include "commands.h"
#include "tracerun/dot/graph.h"

namespace tracerun::tools {

Command addCallgraphCommand(CLI::App& parent);
Command addPipelineCommand(CLI::App& parent);
Command addModelCommand(CLI::App& parent);
Command addAutogradCommand(CLI::App& parent);

// -o/--output (required; "-" is stdout), -T/--format (default: from the output's extension, else
// svg) and --max-nodes, shared by every subcommand.
struct GraphOutput {
  std::string path;
  std::string format;  // "" = from the extension
  int max_nodes = 600;
};
void addOutputOptions(CLI::App* app, GraphOutput& out);

// Lays out (unless txt), renders and writes the graph. Throws with a one-line message.
void writeGraph(const dot::Graph& graph, const GraphOutput& out);

// "0.5%" -> 0.005, "0.005" -> 0.005 (a fraction when there is no %). A CLI11 check that accepts
// the same forms, from 0 to 100%.
double parseShare(const std::string& text);
CLI::Validator shareCheck();

}  // namespace tracerun::tools
