// The one Catch2 main shared by every test executable. After a run in which every test case passed
// it removes the process's scratch (tests/support/process_scratch.h); a failure keeps it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdlib>

#include "support/process_scratch.h"

int main(int argc, char* argv[]) {
  const int failed = Catch::Session().run(argc, argv);
  const char* keep = std::getenv("TRACERUN_KEEP_SCRATCH");
  if (failed == 0 && (keep == nullptr || std::string(keep) != "1")) {
    tracerun::testing::removeProcessScratch();
  }
  return failed;
}
