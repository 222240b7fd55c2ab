// gpttrain's throughput benchmark: tokens/s and model FLOPs utilisation (MFU) against the fp32
// GEMM peak measured in the same run, for one process at a few sizes and thread counts, and for
// TP=2 and DP=2 (two processes, one thread each). It prints a table; it asserts nothing.
//
// Usage: gpt_bench [--quick] [--steps N]   (GPTTRAIN is the gpttrain binary next to this one)
#include <torch/torch.h>

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gpttrain_ranks.h"

namespace {

struct Size {
  const char* name;
  int layers, hidden, heads, seq, micro_batch, vocab;
};

void pinThreads(int threads) {
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

// Best of several fp32 n x n matrix products, in FLOP/s, with `threads` threads.
double gemmPeak(int threads, int n = 1024) {
  pinThreads(threads);
  at::Tensor a = at::randn({n, n}), b = at::randn({n, n}), c = at::empty({n, n});
  double best = 0.0;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::mm_out(c, a, b);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::max(best, 2.0 * n * n * n / s);
  }
  return best;
}

// Training FLOPs per token: 3 x forward; forward = 2 x (12 L H^2) dense + 4 L S H attention
// scores and values + 2 H V logits (Megatron's accounting, causal mask not discounted).
double flopsPerToken(const Size& s) {
  const double l = s.layers, h = s.hidden, seq = s.seq, v = s.vocab;
  return 3.0 * (24.0 * l * h * h + 4.0 * l * seq * h + 2.0 * h * v);
}

// The 1, 5 and 15 minute load averages ("?" where unreadable): other work on this machine
// distorts every timing here, so the table says how busy the machine was.
std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  if (!(in >> one >> five >> fifteen)) return "?";
  return one + " " + five + " " + fifteen;
}

// Runs gpttrain as `ranks` processes (0: one process without the rank environment) and returns
// the median step time in ms over steps after the first, or -1 on failure.
double runGpttrain(const std::string& exe, const Size& s, int ranks, int threads,
                   const std::vector<std::string>& layout, int steps) {
  // One flag and its value a line.
  // clang-format off
  std::vector<std::string> args{exe,
                                "--layers", std::to_string(s.layers),
                                "--hidden", std::to_string(s.hidden),
                                "--heads", std::to_string(s.heads),
                                "--seq-len", std::to_string(s.seq),
                                "--vocab", std::to_string(s.vocab),
                                "--micro-batch-size", std::to_string(s.micro_batch),
                                "--global-batch", std::to_string(s.micro_batch * std::max(1, ranks)),
                                "--steps", std::to_string(steps),
                                "--dropout", "0",
                                "--threads", std::to_string(threads),
                                "--quiet"};
  // clang-format on
  args.insert(args.end(), layout.begin(), layout.end());
  const bench::GpttrainRun ran =
      bench::runGpttrainRanks(std::move(args), ranks, threads, /*capture_stdout=*/false);
  return ran.ok ? bench::medianAfterFirstStep(ran.step_ms) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  int steps = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::max(2, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "gpt_bench: unknown argument %s (use --quick, --steps N)\n", argv[i]);
      return 2;
    }
  }
  std::string exe = GPTTRAIN_EXE;
  std::printf("load average at start: %s\n", loadAverage().c_str());
  const double peak1 = gemmPeak(1), peak2 = gemmPeak(2);
  std::printf(
      "fp32 GEMM peak (1024^3 at::mm, best of 7): 1 thread %.1f GFLOP/s, 2 threads %.1f "
      "GFLOP/s\n\n",
      peak1 / 1e9, peak2 / 1e9);
  std::vector<Size> sizes{{"small", 2, 128, 4, 128, 8, 256}, {"target", 6, 384, 6, 256, 8, 256}};
  if (quick) sizes = {{"tiny", 2, 64, 4, 64, 4, 256}};
  std::printf("%-7s %-22s %-9s %7s %10s %10s %6s\n", "size", "layout", "threads", "ms/step",
              "tokens/s", "GFLOP/s", "MFU");
  for (const Size& s : sizes) {
    struct Run {
      const char* layout;
      int ranks, threads;
      std::vector<std::string> flags;
    };
    std::vector<Run> runs{{"1 process", 0, 1, {}},
                          {"1 process", 0, 2, {}},
                          {"tp=2 (2 processes)", 2, 1, {"--tp", "2"}},
                          {"tp=2 sp (2 processes)", 2, 1, {"--tp", "2", "--sp"}},
                          {"dp=2 (2 processes)", 2, 1, {}}};
    for (const Run& run : runs) {
      const double ms = runGpttrain(exe, s, run.ranks, run.threads, run.flags, steps);
      const int processes = std::max(1, run.ranks);
      // Tokens per step: the global batch is micro-batch x DP (tp runs: micro-batch).
      const bool dp = run.ranks > 0 && run.flags.empty();
      const double tokens = double(s.micro_batch) * s.seq * (dp ? 2 : 1);
      const double flops = flopsPerToken(s) * tokens / (ms / 1e3);
      const double peak = processes * run.threads == 1 ? peak1 : peak2;
      if (ms < 0) {
        std::printf("%-7s %-22s %-9d failed\n", s.name, run.layout, run.threads);
        continue;
      }
      std::printf("%-7s %-22s %-9d %7.1f %10.0f %10.1f %5.0f%%\n", s.name, run.layout, run.threads,
                  ms, tokens / (ms / 1e3), flops / 1e9, 100.0 * flops / peak);
      std::fflush(stdout);
    }
  }
  std::printf("\nload average at end: %s\n", loadAverage().c_str());
  std::printf(
      "MFU = model FLOPs/s (6N + attention + logits per token, see flopsPerToken) over "
      "the GEMM peak of the same total thread count.\n");
  return 0;
}
