// Shared pieces of the end-to-end tests: a scratch directory, the fixture trace (made once per test
// process through the real writer and merge), and running the built tracerun binary.
#pragma once

#include <string>
#include <vector>

#include "fixture_trace.h"
#include "run_process.h"

namespace tracerun::e2e {

// A fresh directory under $TMPDIR, removed when destroyed.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const noexcept { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// The fixture trace: 3 ranks with clock offsets, 3 threads each, merged into run.db.
const fixture::Generated& fixtureTrace();
// A directory for this test process's scratch files (removed at exit).
const ScratchDir& scratch();

// Runs the built tracerun with args.
ProcessResult runTracerun(const std::vector<std::string>& args);

// `tracerun LAUNCHER_ARGS -- GPTTRAIN GPT_ARGS --threads 1`, with one intra-op and one BLAS
// thread per rank: quick and repeatable on a small machine.
ProcessResult runGpttrain(const std::vector<std::string>& launcher_args,
                          const std::string& gpttrain, const std::vector<std::string>& gpt_args);

// Copies a file byte for byte.
void copyFile(const std::string& from, const std::string& to);
std::string readFile(const std::string& path);
void writeFile(const std::string& path, const std::string& bytes);

}  // namespace tracerun::e2e
