// trace_schema_doc: rewrites the generated reference section of docs/trace-format.md (between the
// schema:begin / schema:end marker lines) from schema::markdown(). Touches nothing else in the file.
//
//   trace_schema_doc docs/trace-format.md     # rewrite in place
//   trace_schema_doc --print                  # print the section to stdout
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "tracerun/trace/schema.h"

int main(int argc, char** argv) {
  using tracerun::trace::schema::markdown;
  if (argc != 2) {
    std::cerr << "usage: trace_schema_doc docs/trace-format.md | --print\n";
    return 2;
  }
  if (std::strcmp(argv[1], "--print") == 0) {
    std::cout << markdown();
    return 0;
  }
  const std::string path = argv[1];
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << path << ": cannot open\n";
    return 1;
  }
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string doc = buf.str();
  const std::string begin = "<!-- schema:begin -->\n";
  const std::string end = "<!-- schema:end -->";
  const auto b = doc.find(begin);
  const auto e = doc.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) {
    std::cerr << path << ": no '<!-- schema:begin -->' ... '<!-- schema:end -->' section\n";
    return 1;
  }
  const std::string out = doc.substr(0, b + begin.size()) + markdown() + doc.substr(e);
  if (out == doc) {
    std::cout << path << ": schema section already up to date\n";
    return 0;
  }
  std::ofstream(path, std::ios::binary | std::ios::trunc) << out;
  std::cout << path << ": schema section rewritten\n";
  return 0;
}
