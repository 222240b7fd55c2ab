// Test helper: starts N copies of a program as the ranks of one job on loopback, with the
// torchrun environment (until tracerun can launch them, issue 6), and waits for all of them.
// It does not restart ranks or merge traces.
#pragma once

#include <string>
#include <vector>

namespace gpttrain::testing {

struct RankRun {
  std::vector<int> exit_codes;    // per rank; -1 when killed by the hang guard or a signal
  std::vector<std::string> logs;  // per rank: stdout and stderr
  bool ok() const;
  // Every rank's exit code and the tail of every non-zero rank's log, for failure messages.
  std::string summary() const;
};

// Runs `program args...` as ranks 0..n-1 (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR=127.0.0.1, MASTER_PORT=<free port>, OMP_NUM_THREADS=1, OPENBLAS_NUM_THREADS=1).
// Ranks still running after `hang_guard_s` seconds are killed (a hang, not a timing check).
// n == 0 runs one process without the rank variables.
RankRun launchRanks(const std::string& program, const std::vector<std::string>& args, int n,
                    const std::string& log_dir, int hang_guard_s = 120);

// A port on 127.0.0.1 that was free a moment ago.
int freeLoopbackPort();

// The whole content of a file ("" when missing).
std::string readFile(const std::string& path);

}  // namespace gpttrain::testing
