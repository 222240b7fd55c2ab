// The test binaries' scratch contract (process_scratch.h): which names are a process's scratch, and
// that the shared Catch2 main removes them after a passing run and keeps them after a failing one,
// checked by running this binary's own hidden cases as a child with TMPDIR pointed at a fresh
// directory.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <climits>
#include <filesystem>
#include <fstream>
#include <string>

#include "child_process.h"
#include "process_scratch.h"
#include "temp_dir.h"

using namespace tracerun::testing;
namespace fs = std::filesystem;

TEST_CASE("process scratch: a name is the process's by its tracerun_ prefix and _PID ending",
          "[scratch]") {
  CHECK(isProcessScratch("tracerun_outer_123", 123));
  CHECK(isProcessScratch("tracerun_capture_ops_123.db", 123));
  CHECK(isProcessScratch("tracerun_capture_ops_123.db-wal", 123));
  CHECK(isProcessScratch("tracerun_nccl_trace_123.db.raw", 123));
  CHECK(isProcessScratch("tracerun_123_x_123", 123));
  CHECK_FALSE(isProcessScratch("tracerun_outer_1234", 123));  // another process's
  CHECK_FALSE(isProcessScratch("tracerun_outer_0123", 123));
  CHECK_FALSE(isProcessScratch("tracerun_123x1", 123));
  CHECK_FALSE(isProcessScratch("tracerun-test-123", 123));  // TempDir's, removed by its owner
  CHECK_FALSE(isProcessScratch("other_123", 123));
  CHECK(processScratchPath("what").rfind(scratchRoot() + "/tracerun_what_", 0) == 0);
}

// Run as a child by the case below: leaves a directory and a file of this process's scratch.
TEST_CASE("process scratch: child leaves scratch and passes", "[.scratch_child]") {
  fs::create_directories(processScratchPath("self") + "/inner");
  std::ofstream(processScratchPath("self") + ".db") << "x";
  SUCCEED();
}

TEST_CASE("process scratch: child leaves scratch and fails", "[.scratch_child]") {
  fs::create_directories(processScratchPath("self") + "/inner");
  CHECK(false);
}

namespace {

std::string selfPath() {
  char buf[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  REQUIRE(n > 0);
  return std::string(buf, static_cast<size_t>(n));
}

int entries(const fs::path& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string() != "out";
  return n;
}

}  // namespace

TEST_CASE("process scratch: removed after a passing run, kept after a failing one", "[scratch]") {
  TempDir tmp("tracerun-scratch-test");
  fs::create_directories(tmp.path / "out");
  const auto run = [&](const std::string& name, const char* keep) {
    return Child({"/usr/bin/env", "TMPDIR=" + tmp.path.string(),
                  std::string("TRACERUN_KEEP_SCRATCH=") + keep, selfPath(), name},
                 tmp.file("out"))
        .wait();
  };
  const ProcessResult passed = run("process scratch: child leaves scratch and passes", "");
  INFO(passed.describe());
  REQUIRE(passed.code == 0);
  CHECK(entries(tmp.path) == 0);

  const ProcessResult kept = run("process scratch: child leaves scratch and passes", "1");
  REQUIRE(kept.code == 0);
  CHECK(entries(tmp.path) == 2);  // the directory and the .db file
  for (const auto& e : fs::directory_iterator(tmp.path)) {
    if (e.path().filename() != "out") fs::remove_all(e.path());
  }

  const ProcessResult failed = run("process scratch: child leaves scratch and fails", "");
  CHECK(failed.code != 0);
  CHECK(entries(tmp.path) == 1);
}
