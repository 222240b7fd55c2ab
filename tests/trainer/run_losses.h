// The losses of one gpttrain run on `ranks` processes (launchRanks with --log-json DIR/NAME.json):
// the checkpoint tests' one way to run and read them (reshard, offload checkpoints). Header-only;
// it asserts (Catch2) that the run succeeded.
#pragma once

#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

namespace gpttrain::testing {

inline std::vector<double> runLosses(const std::string& dir, const std::string& name, int ranks,
                                     const std::vector<std::string>& args) {
  auto run = launchRanks(kGpttrain,
                         args + std::vector<std::string>{"--log-json", dir + "/" + name + ".json"},
                         ranks, dir + "/" + name);
  INFO(name << ": " << run.summary());
  REQUIRE(run.ok());
  return jsonValues(dir + "/" + name + ".json", "loss");
}

}  // namespace gpttrain::testing
