// Small helpers shared by tracerun's subcommands: error wrapping, human-readable numbers and the
// stderr progress line. No parsing and no trace access here.
#include <unistd.h>

#include <cmath>
#include <cstdio>

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

std::string formatDuration(int64_t ns) {
  char b[64];
  const double a = std::fabs(static_cast<double>(ns));
  if (a >= 1e9) {
    std::snprintf(b, sizeof b, "%.3f s", double(ns) / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(b, sizeof b, "%.3f ms", double(ns) / 1e6);
  } else if (a >= 1e3) {
    std::snprintf(b, sizeof b, "%.3f us", double(ns) / 1e3);
  } else {
    std::snprintf(b, sizeof b, "%lld ns", static_cast<long long>(ns));
  }
  return b;
}

std::string formatBytes(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::fabs(bytes) >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char b[48];
  std::snprintf(b, sizeof b, unit ? "%.1f %s" : "%.0f %s", bytes, kUnits[unit]);
  return b;
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
