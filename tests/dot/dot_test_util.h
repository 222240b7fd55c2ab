// Shared by the tracedot tests: reading an SVG through svg_nodes.py (python3's xml.etree, an
// independent XML parser) and the "key: value" lines of tooltips. No knowledge of the builders.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tracerun::dottest {

struct SvgNode {
  std::string id, tooltip;
  std::vector<std::string> text;
  // "calls: 12" -> fields["calls"] == "12"
  std::map<std::string, std::string> fields;
  int64_t num(const std::string& key) const;  // fields[key] as an integer; throws when absent
};

struct Svg {
  std::vector<std::string> caption;
  std::vector<SvgNode> nodes, clusters;
  int edges = 0;
  const SvgNode* byId(const std::string& id) const;
};

// Parses the file; throws std::runtime_error with the parser's message when it is not XML.
Svg parseSvg(const std::string& path, const std::string& scratchDir);

}  // namespace tracerun::dottest
