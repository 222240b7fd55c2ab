// Rank 0's peak bytes of each model-state category in a traced run of the tiny gpttrain: the
// fine-tuning, prefix and other trace tests' one way to read them (`tracerun report --json`'s
// category_peaks). Header-only, for test files that have TRACERUN_EXE; it asserts (Catch2).
#pragma once

#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

namespace gpttrain::testing {

// Traces `ranks` processes of gpttrain with tinyModelArgs() + extra for 2 steps into
// DIR/NAME.db and returns its parameter, gradient and optimizer_state peaks.
inline std::map<std::string, long long> tracedPeaks(const std::string& dir, const std::string& name,
                                                    int ranks,
                                                    const std::vector<std::string>& extra) {
  const std::string db = dir + "/" + name + ".db";
  auto traced = launchRanks(TRACERUN_EXE,
                            std::vector<std::string>{"--nproc-per-node", std::to_string(ranks),
                                                     "-o", db, "-q", "--", kGpttrain} +
                                tinyModelArgs() + extra + std::vector<std::string>{"--steps", "2"},
                            0, dir + "/" + name);
  INFO(traced.summary() << traced.logs[0]);
  REQUIRE(traced.ok());
  auto report = launchRanks(TRACERUN_EXE, {"report", "--json", db}, 0, dir + "/report_" + name);
  REQUIRE(report.ok());
  const auto out = categoryPeaks(report.logs[0]);
  INFO(report.logs[0]);
  REQUIRE(out.size() == 3);
  return out;
}

}  // namespace gpttrain::testing
