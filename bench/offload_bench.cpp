// Issue 31's benchmark: gpttrain on 2 ranks, ZeRO 1, with the optimizer states on the rank
// (baseline) and in files (--offload-optimizer nvme:DIR), and plain DDP's all-reduce (baseline)
// against ByteGrad and decentralized SGD (--dp-algorithm): per configuration the median step time
// after the first step, rank 0's peak RSS and optimizer-state bytes held, each a median over
// interleaved repeats, with the ratio to its baseline from the same run. Prints a table; asserts
// nothing.
//
// Usage: offload_bench [--repeats N] [--steps N] [--dir DIR]   (the gpttrain binary: the
// environment's GPTTRAIN_EXE, else the one built beside it; DIR holds the state files, default
// /tmp)
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "gpttrain_ranks.h"

namespace {

struct Sample {
  double ms = -1;
  long long rss_kib = -1, states = -1;  // rank 0
};

Sample run(const std::vector<std::string>& flags, int steps) {
  const char* exe = std::getenv("GPTTRAIN_EXE");
  std::vector<std::string> args{exe != nullptr ? exe : GPTTRAIN_EXE,
                                "--quiet",
                                "--threads",
                                "1",
                                "--layers",
                                "4",
                                "--hidden",
                                "384",
                                "--heads",
                                "6",
                                "--seq-len",
                                "64",
                                "--vocab",
                                "256",
                                "--dropout",
                                "0",
                                "--global-batch",
                                "4",
                                "--micro-batch-size",
                                "2",
                                "--steps",
                                std::to_string(steps)};
  args.insert(args.end(), flags.begin(), flags.end());
  const bench::GpttrainRun ran =
      bench::runGpttrainRanks(std::move(args), 2, /*threads=*/1, /*capture_stdout=*/true);
  Sample s;
  if (!ran.ok || ran.stdout_.empty()) return s;
  s.ms = bench::medianAfterFirstStep(ran.step_ms);
  const std::string& log = ran.stdout_[0];
  const size_t st = log.find("optimizer states "), rss = log.find("peak RSS ");
  if (st != std::string::npos) s.states = std::atoll(log.c_str() + st + 17);
  if (rss != std::string::npos) s.rss_kib = std::atoll(log.c_str() + rss + 9);
  return s;
}

template <typename T>
T median(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? T(-1) : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 3, steps = 6;
  std::string dir = "/tmp";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeats") == 0 && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else {
      std::fprintf(stderr, "offload_bench: unknown argument '%s' (see the file's header)\n",
                   argv[i]);
      return 2;
    }
  }
  struct Config {
    const char* name;
    std::vector<std::string> flags;
    int baseline;  // index of its baseline
  };
  const std::vector<Config> configs = {
      {"zero 1", {"--zero", "1"}, 0},
      {"zero 1 + nvme offload", {"--zero", "1", "--offload-optimizer", "nvme:" + dir}, 0},
      {"zero 1, 1 MiB buckets", {"--zero", "1", "--bucket-mb", "1"}, 2},
      {"  + nvme offload",
       {"--zero", "1", "--bucket-mb", "1", "--offload-optimizer", "nvme:" + dir},
       2},
      {"ddp all-reduce", {"--zero", "0"}, 4},
      {"ddp bytegrad", {"--zero", "0", "--dp-algorithm", "bytegrad"}, 4},
      {"ddp decentralized", {"--zero", "0", "--dp-algorithm", "decentralized"}, 4},
  };
  std::vector<std::vector<Sample>> samples(configs.size());
  for (int r = 0; r < repeats; ++r) {  // interleaved: the machine's load drifts alike for all
    for (size_t c = 0; c < configs.size(); ++c) samples[c].push_back(run(configs[c].flags, steps));
  }
  std::printf(
      "gpttrain, 2 ranks, 4 layers, hidden 384, seq 64, global batch 4, %d steps, medians of "
      "%d interleaved runs\n",
      steps, repeats);
  std::printf("%-24s %10s %8s %14s %8s %16s\n", "configuration", "step ms", "x base",
              "peak RSS KiB", "x base", "opt. states B");
  std::vector<double> ms(configs.size()), rss(configs.size());
  for (size_t c = 0; c < configs.size(); ++c) {
    std::vector<double> m;
    std::vector<long long> k, st;
    for (const Sample& s : samples[c]) {
      m.push_back(s.ms);
      k.push_back(s.rss_kib);
      st.push_back(s.states);
    }
    ms[c] = median(m);
    rss[c] = double(median(k));
    const size_t b = size_t(configs[c].baseline);
    std::printf("%-24s %10.1f %8.2f %14.0f %8.3f %16lld\n", configs[c].name, ms[c], ms[c] / ms[b],
                rss[c], rss[c] / rss[b], median(st));
  }
  return 0;
}
