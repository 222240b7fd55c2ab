// Small helpers shared by the suite's commands (tracerun, tracedot, traceview): error wrapping, the
// bounds check of numeric flags, the stderr progress line. No trace access.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "commands.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/error.h"

namespace tracerun::tools {

int withPath(const std::string& path, const std::function<int()>& fn) {
  try {
    return fn();
  } catch (const trace::TraceError&) {
    throw;
  } catch (const std::exception& e) {
    throw trace::TraceError(path + ": " + e.what());
  }
}

CLI::Validator atLeast(int min, bool whole) {
  const std::string what = std::string(whole ? "a whole number" : "a number");
  auto check = [=](std::string& value) -> std::string {
    errno = 0;
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    const bool number = !value.empty() && end && *end == '\0' && errno == 0 && std::isfinite(v) &&
                        (!whole || v == std::floor(v));
    const std::string shown = value.size() > 40 ? value.substr(0, 40) + "..." : value;
    if (!number || v < min)
      return "must be " + what + " >= " + std::to_string(min) + ", not '" + shown + "'";
    if (v > INT_MAX) {
      return "must be " + what + " from " + std::to_string(min) + " to " + std::to_string(INT_MAX) +
             ", not '" + shown + "'";
    }
    return std::string();
  };
  return CLI::Validator(check, what + " >= " + std::to_string(min), "AT_LEAST");
}

Progress::Progress(std::string label, bool enabled)
    : label_(std::move(label)), enabled_(enabled && isatty(STDERR_FILENO)) {
  startNs_ = core::nowNs();
}

Progress::~Progress() {
  done();
}

void Progress::update(double fraction) {
  if (!enabled_) return;
  const int64_t now = core::nowNs();
  // Quiet for quick jobs; then at most ten updates a second.
  if (now - startNs_ < 500'000'000 || now - lastNs_ < 100'000'000) return;
  lastNs_ = now;
  std::fprintf(stderr, "\r%s %3d%%", label_.c_str(), static_cast<int>(fraction * 100));
  std::fflush(stderr);
  shown_ = true;
}

void Progress::done() {
  if (!shown_) return;
  std::fprintf(stderr, "\r%*s\r", static_cast<int>(label_.size()) + 6, "");
  std::fflush(stderr);
  shown_ = false;
}

}  // namespace tracerun::tools
