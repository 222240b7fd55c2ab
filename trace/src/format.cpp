// The one implementation of format.h's human-readable numbers and device names. Not for parsing.
#include "tracerun/trace/format.h"

#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace tracerun::trace {

std::string formatPrintf(const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  std::vsnprintf(buf, sizeof buf, format, ap);
  va_end(ap);
  return buf;
}

std::string formatDuration(double ns) {
  char b[64];
  const double a = std::fabs(ns);
  if (a >= 1e9) {
    std::snprintf(b, sizeof b, "%.3f s", ns / 1e9);
  } else if (a >= 1e6) {
    std::snprintf(b, sizeof b, "%.3f ms", ns / 1e6);
  } else if (a >= 1e3) {
    std::snprintf(b, sizeof b, "%.3f us", ns / 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.0f ns", ns);
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

std::string formatCount(int64_t n) {
  const uint64_t magnitude = n < 0 ? 0 - static_cast<uint64_t>(n) : static_cast<uint64_t>(n);
  std::string digits = std::to_string(magnitude);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return (n < 0 ? "-" : "") + digits;
}

std::string formatShare(double share) {
  char b[32];
  const double p = share * 100.0;
  if (std::fabs(p) >= 100.0) {
    std::snprintf(b, sizeof b, "%.0f%%", p);
  } else if (std::fabs(p) >= 1.0 || p == 0.0) {
    std::snprintf(b, sizeof b, "%.1f%%", p);
  } else {
    std::snprintf(b, sizeof b, "%.2f%%", p);
  }
  return b;
}

std::string deviceName(int type, int index, DeviceSpelling spelling) {
  const bool title = spelling == DeviceSpelling::kTitle;
  std::string name = type == 0   ? (title ? "CPU" : "cpu")
                     : type == 1 ? (title ? "CUDA" : "cuda")
                     // the offload devices of tracerun/annotate_abi.h (OffloadDevice)
                     : type == 100 ? (title ? "NVMe" : "nvme")
                     : type == 101 ? (title ? "CPU offload" : "cpu-offload")
                                   : "device " + std::to_string(type);
  if (index >= 0) name += ":" + std::to_string(index);
  return name;
}

}  // namespace tracerun::trace
