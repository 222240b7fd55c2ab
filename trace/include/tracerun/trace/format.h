// Numbers for people: durations, byte sizes, counts and device names, spelled one way by every
// command, the report, the Chrome export and the launcher. Not for values meant to be read back
// (JSON keeps raw numbers); no trace access.
#pragma once

#include <cstdint>
#include <string>

namespace tracerun::trace {

// "1.235 s", "1.234 ms", "56.700 us", "12 ns" (three decimals above 1 us; whole ns below).
std::string formatDuration(double ns);
// "512 B", "12.3 KiB", "1.5 GiB" (binary units up to TiB; one decimal above bytes).
std::string formatBytes(double bytes);
// "1,234,567", "-1,000"
std::string formatCount(int64_t n);
// A fraction as a share: 0.456 -> "45.6%" (two decimals under 1%, none from 100%).
std::string formatShare(double share);
// printf into a string, for the report's fixed-width table rows (at most 511 characters).
std::string formatPrintf(const char* format, ...) __attribute__((format(printf, 1, 2)));

// How a device is spelled: as PyTorch writes it ("cpu", "cuda:0": the report's text and JSON), or
// as a title ("CPU", "CUDA:0": the Chrome export's track names).
enum class DeviceSpelling { kTorch, kTitle };
// core::MemoryRecord's device_type (0 CPU, 1 CUDA, others "device N") and device_index (-1: none;
// shown only when >= 0).
std::string deviceName(int type, int index, DeviceSpelling spelling = DeviceSpelling::kTorch);

}  // namespace tracerun::trace
