// SVG reading for the tracedot tests (see dot_test_util.h).
#include "dot_test_util.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "run_process.h"

namespace tracerun::dottest {

int64_t SvgNode::num(const std::string& key) const {
  auto it = fields.find(key);
  if (it == fields.end()) throw std::runtime_error("no field '" + key + "' in " + id);
  return std::stoll(it->second);
}

const SvgNode* Svg::byId(const std::string& id) const {
  for (const auto& n : nodes) {
    if (n.id == id) return &n;
  }
  return nullptr;
}

Svg parseSvg(const std::string& path, const std::string& scratchDir) {
  const auto r = e2e::runProcess("/usr/bin/python3", {SVG_NODES_PY, path}, scratchDir);
  if (!r.exited || r.exit_code != 0) throw std::runtime_error("svg_nodes.py: " + r.describe());
  const auto j = nlohmann::json::parse(r.out);
  Svg svg;
  for (const auto& c : j["caption"]) svg.caption.push_back(c.get<std::string>());
  auto read = [](const nlohmann::json& list, std::vector<SvgNode>& out) {
    for (const auto& n : list) {
      SvgNode s;
      s.id = n["id"].get<std::string>();
      s.tooltip = n["tooltip"].get<std::string>();
      for (const auto& t : n["text"]) s.text.push_back(t.get<std::string>());
      size_t start = 0;
      while (start <= s.tooltip.size()) {
        size_t end = s.tooltip.find('\n', start);
        if (end == std::string::npos) end = s.tooltip.size();
        const std::string line = s.tooltip.substr(start, end - start);
        const size_t colon = line.find(": ");
        if (colon != std::string::npos) s.fields[line.substr(0, colon)] = line.substr(colon + 2);
        start = end + 1;
      }
      out.push_back(std::move(s));
    }
  };
  read(j["nodes"], svg.nodes);
  read(j["clusters"], svg.clusters);
  svg.edges = j["edges"].get<int>();
  return svg;
}

}  // namespace tracerun::dottest
