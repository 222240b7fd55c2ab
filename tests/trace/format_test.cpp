// Tests of trace/format.h: durations, bytes, counts and device names against hand-worked values
// (unit boundaries, rounding, signs). The commands' and report's use of it: tests/e2e.
#include <catch2/catch.hpp>

#include <cstdint>
#include <limits>

#include "tracerun/trace/format.h"

using namespace tracerun::trace;

TEST_CASE("durations: whole ns below 1 us, three decimals in us, ms and s") {
  CHECK(formatDuration(0) == "0 ns");
  CHECK(formatDuration(12) == "12 ns");
  CHECK(formatDuration(999) == "999 ns");
  CHECK(formatDuration(1000) == "1.000 us");
  CHECK(formatDuration(56700) == "56.700 us");
  CHECK(formatDuration(999999) == "999.999 us");
  CHECK(formatDuration(1234000) == "1.234 ms");
  CHECK(formatDuration(1e9) == "1.000 s");
  CHECK(formatDuration(1234567890) == "1.235 s");
  CHECK(formatDuration(-5) == "-5 ns");
  CHECK(formatDuration(-2500000) == "-2.500 ms");
  CHECK(formatDuration(12.4) == "12 ns");  // a mean of integer ns (the report's) rounds
  // int64 values (info's times) print as their integers did.
  CHECK(formatDuration(static_cast<double>(int64_t{750})) == "750 ns");
}

TEST_CASE("bytes: whole bytes below 1 KiB, one decimal in binary units up to TiB") {
  CHECK(formatBytes(0) == "0 B");
  CHECK(formatBytes(1023) == "1023 B");
  CHECK(formatBytes(1024) == "1.0 KiB");
  CHECK(formatBytes(1536) == "1.5 KiB");
  CHECK(formatBytes(262.0 * 1024) == "262.0 KiB");
  CHECK(formatBytes(12.3 * 1024 * 1024) == "12.3 MiB");
  CHECK(formatBytes(1.5 * 1024 * 1024 * 1024) == "1.5 GiB");
  CHECK(formatBytes(2048.0 * 1024 * 1024 * 1024 * 1024) == "2048.0 TiB");  // no unit above TiB
  CHECK(formatBytes(-2048) == "-2.0 KiB");  // a negative delta keeps its unit
}

TEST_CASE("counts: thousands separated by commas") {
  CHECK(formatCount(0) == "0");
  CHECK(formatCount(999) == "999");
  CHECK(formatCount(1000) == "1,000");
  CHECK(formatCount(1234567) == "1,234,567");
  CHECK(formatCount(-1000) == "-1,000");
  CHECK(formatCount(std::numeric_limits<int64_t>::min()) == "-9,223,372,036,854,775,808");
}

TEST_CASE("device names: PyTorch's spelling or a title, the index only when known") {
  CHECK(deviceName(0, -1) == "cpu");
  CHECK(deviceName(1, 0) == "cuda:0");
  CHECK(deviceName(1, 3, DeviceSpelling::kTorch) == "cuda:3");
  CHECK(deviceName(1, -1) == "cuda");
  CHECK(deviceName(0, -1, DeviceSpelling::kTitle) == "CPU");
  CHECK(deviceName(1, 0, DeviceSpelling::kTitle) == "CUDA:0");
  CHECK(deviceName(7, 2) == "device 7:2");
  CHECK(deviceName(7, 2, DeviceSpelling::kTitle) == "device 7:2");
}

TEST_CASE("shares: one decimal from 1%, two below, none from 100%") {
  CHECK(formatShare(0) == "0.0%");
  CHECK(formatShare(0.456) == "45.6%");
  CHECK(formatShare(0.01) == "1.0%");
  CHECK(formatShare(0.00123) == "0.12%");
  CHECK(formatShare(1.0) == "100%");
  CHECK(formatShare(2.5) == "250%");
  CHECK(formatShare(-0.2) == "-20.0%");
}
