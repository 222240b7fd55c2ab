// Runs a built binary for end-to-end tests and captures how it ended: exit code or signal,
// stdout and stderr. POSIX only (posix_spawn + waitpid); no shell in between.
#pragma once

#include <string>
#include <vector>

namespace tracerun::e2e {

struct ProcessResult {
  bool exited = false;  // ended by exit(); false when a signal ended it
  int exit_code = -1;
  int signal = 0;
  std::string out, err;
  std::vector<std::string> errLines() const;  // stderr split into non-empty lines
  std::string describe() const;               // for test messages
};

// Runs `program args...`; stdout and stderr go through temporary files in `scratchDir`.
ProcessResult runProcess(const std::string& program, const std::vector<std::string>& args,
                         const std::string& scratchDir);

}  // namespace tracerun::e2e
