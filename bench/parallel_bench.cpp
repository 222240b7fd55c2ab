// gpttrain's pipeline and ZeRO benchmark: step time and tokens/s for PP=2 with each schedule and
// for DP=2 with ZeRO 0-3, beside the single-process figure from the same run, plus each rank's
// bytes held at the optimizer step (the trainer's own accounting) and peak RSS. It prints a
// table; it asserts nothing.
//
// Usage: parallel_bench [--quick] [--steps N] [--only PREFIX]   (the gpttrain binary: the
// environment's GPTTRAIN_EXE, else the one built beside it)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpttrain_ranks.h"

namespace {

struct Result {
  double ms = -1;                        // median step time after the first step
  std::vector<long long> held, rss_kib;  // per rank: bytes at the optimizer step, peak RSS
};

// Runs gpttrain as `ranks` processes (0: one process without the rank environment), one thread
// each, and reads the step times (rank 0's --log-json) and every rank's end-of-run line.
Result run(const std::vector<std::string>& model, const std::vector<std::string>& layout,
           int ranks) {
  const char* exe = std::getenv("GPTTRAIN_EXE");
  std::vector<std::string> args{exe != nullptr ? exe : GPTTRAIN_EXE, "--quiet", "--threads", "1"};
  args.insert(args.end(), model.begin(), model.end());
  args.insert(args.end(), layout.begin(), layout.end());
  const bench::GpttrainRun ran =
      bench::runGpttrainRanks(std::move(args), ranks, /*threads=*/1, /*capture_stdout=*/true);
  Result res;
  for (const std::string& log : ran.stdout_) {
    long long p = 0, g = 0, o = 0, rss = 0;
    const size_t at = log.find("holds parameters ");
    const size_t rss_at = log.find("peak RSS ");
    if (at == std::string::npos || rss_at == std::string::npos) continue;
    std::sscanf(log.c_str() + at,
                "holds parameters %lld B, gradients %lld B, optimizer states %lld", &p, &g, &o);
    std::sscanf(log.c_str() + rss_at, "peak RSS %lld", &rss);
    res.held.push_back(p + g + o);
    res.rss_kib.push_back(rss);
  }
  if (ran.ok) res.ms = bench::medianAfterFirstStep(ran.step_ms);
  return res;
}

std::string join(const std::vector<long long>& v, double scale) {
  std::string out;
  for (long long x : v) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.0f", out.empty() ? "" : " / ", x * scale);
    out += buf;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int steps = 4;
  std::string only;  // run only the layouts whose name starts with this
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::max(2, std::atoi(argv[++i]));
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];
    } else {
      std::fprintf(stderr,
                   "parallel_bench: unknown argument %s (use --quick, --steps N, --only PREFIX)\n",
                   argv[i]);
      return 2;
    }
  }
  // 4 layers, hidden 384, 6 heads, seq 128, vocab 256; global batch 16 of micro-batches of 2:
  // 8 microbatches per step on one pipeline, 4 per DP rank. fp32, dropout 0, synthetic data.
  const int layers = 4, hidden = quick ? 192 : 384, seq = 128, global = 16;
  const std::vector<std::string> model{"--layers",
                                       std::to_string(layers),
                                       "--hidden",
                                       std::to_string(hidden),
                                       "--heads",
                                       "6",
                                       "--seq-len",
                                       std::to_string(seq),
                                       "--vocab",
                                       "256",
                                       "--dropout",
                                       "0",
                                       "--global-batch",
                                       std::to_string(global),
                                       "--micro-batch-size",
                                       "2",
                                       "--steps",
                                       std::to_string(steps)};
  struct Case {
    const char* name;
    int ranks;
    std::vector<std::string> flags;
  };
  const std::vector<Case> cases{
      {"1 process", 0, {}},
      {"pp=2 gpipe", 2, {"--pp", "2", "--schedule", "gpipe"}},
      {"pp=2 1f1b", 2, {"--pp", "2", "--schedule", "1f1b"}},
      {"pp=2 zb-h1", 2, {"--pp", "2", "--schedule", "zb-h1"}},
      {"pp=2 interleaved v=2", 2, {"--pp", "2", "--schedule", "interleaved", "--vp", "2"}},
      // 2bw: one continuous pipeline over all steps (its ms/step is the run's mean, fill included).
      {"pp=2 2bw", 2, {"--pp", "2", "--schedule", "2bw", "--clip-grad", "0"}},
      {"pp=2 chimera", 2, {"--pp", "2", "--schedule", "chimera"}},
      {"dp=2 zero-0", 2, {}},
      {"dp=2 zero-1", 2, {"--zero", "1"}},
      {"dp=2 zero-2", 2, {"--zero", "2"}},
      {"dp=2 zero-3", 2, {"--zero", "3"}},
      {"tp=2", 2, {"--tp", "2"}},
      {"tp=2 sp", 2, {"--tp", "2", "--sp"}},
  };
  std::printf(
      "gpttrain, %d layers, hidden %d, seq %d, global batch %d x micro-batch 2, %d steps, "
      "1 thread per process\n\n",
      layers, hidden, seq, global, steps);
  std::printf("%-22s %9s %10s %8s  %-28s %s\n", "layout", "ms/step", "tokens/s", "vs 1 proc",
              "MiB held at step (per rank)", "peak RSS MiB (per rank)");
  double single = -1;
  for (const Case& c : cases) {
    if (std::string(c.name).rfind(only, 0) != 0) continue;
    const Result r = run(model, c.flags, c.ranks);
    if (r.ms < 0) {
      std::printf("%-22s failed\n", c.name);
      continue;
    }
    if (single < 0) single = r.ms;
    const double tokens = double(global) * seq / (r.ms / 1e3);
    std::printf("%-22s %9.1f %10.0f %7.2fx  %-28s %s\n", c.name, r.ms, tokens, single / r.ms,
                join(r.held, 1.0 / (1 << 20)).c_str(), join(r.rss_kib, 1.0 / 1024).c_str());
    std::fflush(stdout);
  }
  std::printf(
      "\n'vs 1 proc' = single-process ms/step / this layout's (2 processes share the "
      "machine's 2 cores).\n");
  return 0;
}
