// Session (session.h): logging, names and the selection's requests.
#include "app/session.h"

#include <cstdio>

namespace tracerun::viewer {

void Session::log(const std::string& line) const {
  if (!logActions_) return;
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

const std::string& Session::name(core::StringId id) const {
  static const std::string kEmpty;
  if (!info || id >= info->strings.size()) return kEmpty;
  return info->strings[id];
}

void Session::select(const SpanRef& s) {
  selected = s;
  details.reset();
  if (worker) worker->requestDetails(s, kTagSelect);
  ++selections;
  log("selected span " + std::to_string(s.id) + " " + name(s.name));
}

void Session::clearSelection() {
  selected.reset();
  details.reset();
  log("cleared selection");
}

}  // namespace tracerun::viewer
