// Numbers for labels and captions ("1.234 ms", "12.3 MiB", "1,234", "45.6%"), the same units as
// `tracerun report`. Private to dot/src; no trace access.
#pragma once

#include <cstdint>
#include <string>

namespace tracerun::dot {

std::string formatNs(int64_t ns);
std::string formatNs(double ns);
std::string formatBytes(double bytes);
std::string formatCount(int64_t n);
// 0.456 -> "45.6%" (two decimals under 1%, none from 100%)
std::string formatShare(double share);

}  // namespace tracerun::dot
