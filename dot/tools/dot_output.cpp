// The output half every tracedot subcommand shares (see dot_commands.h): flags, format choice,
// rendering and writing. No trace reading.
#include <cmath>
#include <cstdlib>

#include "dot_commands.h"
#include "tracerun/dot/render.h"

namespace tracerun::tools {

void addOutputOptions(CLI::App* app, GraphOutput& out) {
  app->add_option("-o,--output", out.path, "write the picture here ('-' for standard output)")
      ->required();
  app->add_option("-T,--format", out.format,
                  "svg, png, pdf, dot or txt (an indented tree); default: the output's extension, "
                  "else svg")
      ->check(CLI::IsMember({"svg", "png", "pdf", "dot", "gv", "txt"}));
  app->add_option("--max-nodes", out.max_nodes,
                  "node budget: thresholds rise until the graph fits (default 600)")
      ->check(atLeast(10));
}

void writeGraph(const dot::Graph& graph, const GraphOutput& out) {
  const dot::Format format = out.format.empty() ? dot::formatOfPath(out.path, dot::Format::kSvg)
                                                : dot::parseFormat(out.format);
  dot::LayoutOptions lo;
  lo.max_nodes = out.max_nodes + 64;  // headroom for captions and "other" nodes the budget counts
  dot::writeOutput(out.path, dot::renderGraph(graph, format, lo));
}

double parseShare(const std::string& text) {
  std::string t = text;
  const bool percent = !t.empty() && t.back() == '%';
  if (percent) t.pop_back();
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || !end || *end != '\0' || !std::isfinite(v) || v < 0) return -1;
  const double share = percent ? v / 100.0 : v;
  return share > 1.0 ? -1 : share;
}

CLI::Validator shareCheck() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (parseShare(value) >= 0) return std::string();
        const std::string shown = value.size() > 40 ? value.substr(0, 40) + "..." : value;
        return "must be a share such as 0.5% or 0.005 (0 to 100%), not '" + shown + "'";
      },
      "SHARE", "SHARE");
}

}  // namespace tracerun::tools
