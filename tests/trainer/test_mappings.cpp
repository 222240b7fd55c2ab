// The autograd mappings and the vocab-parallel cross-entropy on 2 real ranks (mapping_check.cpp
// holds the closed forms); the test fails when any rank reports a mismatch.
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

using namespace gpttrain::testing;

TEST_CASE("mappings give exact sums on rank-valued tensors (2 ranks)", "[trainer][mappings]") {
  auto run = launchRanks(MAPPING_CHECK_EXE, {}, 2, scratchDir("mappings"));
  INFO(run.summary() << "rank 0 log:\n" << run.logs[0] << "rank 1 log:\n" << run.logs[1]);
  CHECK(run.ok());
}
