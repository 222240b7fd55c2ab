// The critical path: the longest chain through lane order and waits, ties to the first found.
#include <catch2/catch.hpp>

#include "tracerun/schedule/critical_path.h"

using namespace tracerun::schedule;

TEST_CASE("critical path: the longest chain of lane order and waits", "[schedule][critical]") {
  // lane 0: a (2), b (1); lane 1: c (3) waits for a, d (1) waits for b.
  const std::vector<TimedStep> steps{{0, 2, -1}, {0, 1, -1}, {1, 3, 0}, {1, 1, 1}};
  const CriticalPath cp = criticalPath(steps);
  CHECK(cp.length == 6);  // a, c, d
  CHECK(cp.on_path == std::vector<bool>{true, false, true, true});
  CHECK(cp.via == std::vector<long>{-1, 0, 0, 2});
}

TEST_CASE("critical path: a cycle leaves its steps at their own cost, and empty is empty",
          "[schedule][critical]") {
  const CriticalPath cyclic = criticalPath({{0, 1, 1}, {1, 5, 0}});
  CHECK(cyclic.length == 5);
  CHECK(cyclic.on_path == std::vector<bool>{false, true});
  const CriticalPath none = criticalPath({});
  CHECK(none.length == 0);
  CHECK(none.on_path.empty());
}
