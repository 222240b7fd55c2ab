// Starts gpttrain as N processes on loopback (the torchrun environment by hand, no launcher) for
// the gpttrain benchmarks, and reads back the step times it logs. It times nothing itself.
#pragma once

#include <string>
#include <vector>

namespace bench {

struct GpttrainRun {
  bool ok = false;                   // every process exited 0
  std::vector<double> step_ms;       // rank 0's --log-json "ms", in step order
  std::vector<std::string> stdout_;  // each rank's standard output, when captured
};

// Runs `args` (args[0] is the gpttrain binary; `--log-json FILE` is added here) as `ranks`
// processes (0: one process without the rank environment) with `threads` intra-op and OpenBLAS
// threads each. With capture_stdout each rank's standard output is returned instead of shown.
GpttrainRun runGpttrainRanks(std::vector<std::string> args, int ranks, int threads,
                             bool capture_stdout);

// The median of the step times after the first (allocation and warm-up), or -1 with fewer than 2.
double medianAfterFirstStep(std::vector<double> step_ms);

}  // namespace bench
