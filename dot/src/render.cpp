// Renderers (see render.h): Graphviz formats through the layout service, the indented text tree,
// and writing the bytes out atomically.
#include "tracerun/dot/render.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <stdexcept>

namespace tracerun::dot {

namespace {

std::string oneLine(const std::string& label) {
  std::string out;
  for (char c : label) {
    if (c == '\n') {
      out += " | ";
    } else {
      out += c;
    }
  }
  return out;
}

bool isTreeEdge(const Edge& e) {
  return e.constraint && (e.style == EdgeStyle::kSolid || e.style == EdgeStyle::kBold);
}

}  // namespace

std::string renderGraph(const Graph& graph, Format format, const LayoutOptions& options) {
  if (format == Format::kTxt) return renderText(graph);
  return LaidOutGraph::layout(graph, options).render(format);
}

std::string renderText(const Graph& graph) {
  std::string out;
  if (!graph.title.empty()) out += graph.title + "\n";
  if (!graph.caption.empty()) out += graph.caption + "\n";
  if (!out.empty()) out += "\n";

  const size_t n = graph.nodes.size();
  std::vector<std::vector<int>> children(n);
  std::vector<int> incoming(n, 0);
  for (const Edge& e : graph.edges) {
    if (!isTreeEdge(e)) continue;
    children[static_cast<size_t>(e.from)].push_back(e.to);
    ++incoming[static_cast<size_t>(e.to)];
  }
  std::vector<bool> printed(n, false);
  // Iterative depth-first walk: a 20,000-deep chain must not overflow the stack.
  struct Frame {
    int node;
    int depth;
  };
  auto walk = [&](int start) {
    std::vector<Frame> stack{{start, 0}};
    while (!stack.empty()) {
      const Frame f = stack.back();
      stack.pop_back();
      const auto& node = graph.nodes[static_cast<size_t>(f.node)];
      out.append(static_cast<size_t>(f.depth) * 2, ' ');
      if (printed[static_cast<size_t>(f.node)]) {
        out += "-> " + oneLine(node.label) + " (above)\n";
        continue;
      }
      printed[static_cast<size_t>(f.node)] = true;
      out += oneLine(node.label) + "\n";
      const auto& kids = children[static_cast<size_t>(f.node)];
      for (size_t k = kids.size(); k-- > 0;) stack.push_back({kids[k], f.depth + 1});
    }
  };
  for (size_t i = 0; i < n; ++i) {
    if (incoming[i] == 0 && !printed[i]) walk(static_cast<int>(i));
  }
  for (size_t i = 0; i < n; ++i) {
    if (!printed[i]) walk(static_cast<int>(i));  // cycles with no root
  }
  bool header = false;
  for (const Edge& e : graph.edges) {
    if (isTreeEdge(e)) continue;
    if (!header) {
      out += "\nlinks:\n";
      header = true;
    }
    out += "  " + oneLine(graph.nodes[static_cast<size_t>(e.from)].label) + " ~> " +
           oneLine(graph.nodes[static_cast<size_t>(e.to)].label);
    if (!e.label.empty()) out += " (" + oneLine(e.label) + ")";
    out += "\n";
  }
  return out;
}

void writeOutput(const std::string& path, const std::string& bytes) {
  if (path == "-") {
    std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    std::cout.flush();
    if (!std::cout) throw std::runtime_error("-: could not write to standard output");
    return;
  }
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) throw std::runtime_error(path + ": cannot write (" + std::strerror(errno) + ")");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) {
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": write failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(path + ": cannot write (" + std::strerror(err) + ")");
  }
}

}  // namespace tracerun::dot
