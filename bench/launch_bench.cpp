// launch_bench: the launcher's start-up time per rank. For N ranks (default 1, 2, 4, 8) it starts
// a probe (a tiny program that records CLOCK_MONOTONIC at main: launch_probe without libtorch,
// launch_probe_torch linked to it like a real rank) three ways and measures, from just before the
// first fork, when each rank reached main:
//   direct    N fork/execs from this process, no tracerun (the baseline);
//   preload   the same with LD_PRELOAD=libtracerun.so (the injected library's own start-up cost,
//             its libtorch dependencies included);
//   tracerun  `tracerun -q --status off --nproc-per-node N -o DIR/run.db -- launch_probe`;
// plus when tracerun itself exited (it merges the shards the ranks left). Medians over the
// repetitions, the three ways alternated so that load changes hit them alike. Prints a table;
// asserts nothing. Built by default, never run by CI. Results and the command:
// docs/performance.md.
//
//   launch_bench [--ranks 1,2,4,8] [--repeat K] [--dir DIR] [--probe plain|torch|both]
//
// Sections: options · running · main
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

namespace {

// ---- options ------------------------------------------------------------------------------------

struct Options {
  std::vector<int> ranks = {1, 2, 4, 8};
  int repeat = 7;
  std::string dir = "/tmp";
  std::string probe = "both";
};

Options parse(int argc, char** argv) {
  Options o;
  CLI::App app{
      "launch_bench: time from start to each rank's main, with tracerun --nproc-per-node N, "
      "directly (fork/exec) and directly with libtracerun.so preloaded."};
  app.add_option("--ranks", o.ranks, "rank counts to measure, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--repeat", o.repeat, "repetitions (medians are printed)")
      ->check(CLI::PositiveNumber);
  app.add_option("--dir", o.dir, "scratch folder");
  app.add_option("--probe", o.probe, "the started program: without libtorch, with it, or both")
      ->check(CLI::IsMember({"plain", "torch", "both"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  return o;
}

int64_t monotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// ---- running ------------------------------------------------------------------------------------

enum class Way { kDirect, kPreload, kTracerun };

// fork + exec with extra environment; stdout and stderr to /dev/null. Returns the pid.
pid_t start(const std::vector<std::string>& argv,
            const std::vector<std::pair<std::string, std::string>>& env) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

struct Sample {
  double firstMs = 0, lastMs = 0;  // first and last rank at main, after the start
  double exitMs = 0;               // when everything had exited
  bool ok = false;
};

Sample runOnce(Way way, int n, const std::string& dir, const std::string& probe) {
  const std::string probeDir = dir + "/launch_bench_probe";
  ::mkdir(probeDir.c_str(), 0755);
  for (int r = 0; r < n; ++r) ::unlink((probeDir + "/rank" + std::to_string(r)).c_str());
  std::vector<pid_t> pids;
  const int64_t t0 = monotonicNs();
  if (way == Way::kTracerun) {
    pids.push_back(start({TRACERUN_BIN, "-q", "--status", "off", "--nproc-per-node",
                          std::to_string(n), "-o", dir + "/launch_bench_run.db", "--", probe},
                         {{"PROBE_DIR", probeDir}}));
  } else {
    for (int r = 0; r < n; ++r) {
      std::vector<std::pair<std::string, std::string>> env = {{"PROBE_DIR", probeDir},
                                                              {"RANK", std::to_string(r)}};
      if (way == Way::kPreload) env.emplace_back("LD_PRELOAD", TRACERUN_LIB);
      pids.push_back(start({probe}, env));
    }
  }
  for (pid_t pid : pids) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
    }
  }
  Sample s;
  s.exitMs = static_cast<double>(monotonicNs() - t0) / 1e6;
  std::vector<double> at;
  for (int r = 0; r < n; ++r) {
    std::ifstream in(probeDir + "/rank" + std::to_string(r));
    long long ns = 0;
    if (!(in >> ns)) return s;  // a rank never reached main
    at.push_back(static_cast<double>(ns - t0) / 1e6);
  }
  s.firstMs = *std::min_element(at.begin(), at.end());
  s.lastMs = *std::max_element(at.begin(), at.end());
  s.ok = true;
  return s;
}

}  // namespace

// ---- main ---------------------------------------------------------------------------------------

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  double load[3] = {0, 0, 0};
  if (::getloadavg(load, 3) < 0) load[0] = -1;
  std::vector<std::pair<std::string, std::string>> probes;
  if (o.probe != "torch") probes.emplace_back("plain (no libtorch)", PROBE_BIN);
  if (o.probe != "plain") probes.emplace_back("linked to libtorch", PROBE_TORCH_BIN);
  for (const auto& [label, probe] : probes) {
    runOnce(Way::kTracerun, 1, o.dir, probe);  // warm the page cache for every way
    runOnce(Way::kPreload, 1, o.dir, probe);
    std::printf(
        "launch_bench, probe %s: ms from start to a rank's main, median of %d; load "
        "average %.2f at start\n",
        label.c_str(), o.repeat, load[0]);
    std::printf(
        "| N | direct: last rank at main | preload: last rank | tracerun: first rank | "
        "tracerun: last rank | tracerun overhead per rank | library cost per rank | "
        "tracerun exited |\n");
    std::printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (int n : o.ranks) {
      std::vector<double> direct, preload, first, last, exited;
      int failed = 0;
      for (int i = 0; i < o.repeat; ++i) {
        const Sample d = runOnce(Way::kDirect, n, o.dir, probe);
        const Sample p = runOnce(Way::kPreload, n, o.dir, probe);
        const Sample t = runOnce(Way::kTracerun, n, o.dir, probe);
        if (!d.ok || !p.ok || !t.ok) {
          ++failed;
          continue;
        }
        direct.push_back(d.lastMs);
        preload.push_back(p.lastMs);
        first.push_back(t.firstMs);
        last.push_back(t.lastMs);
        exited.push_back(t.exitMs);
      }
      if (direct.empty()) {
        std::printf("| %d | a rank never reached main in any repetition |\n", n);
        continue;
      }
      const double d = median(direct), p = median(preload), l = median(last);
      std::printf("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f |%s\n", n, d, p,
                  median(first), l, (l - d) / n, (p - d) / n, median(exited),
                  failed > 0 ? " (some repetitions failed)" : "");
      std::fflush(stdout);
    }
    if (::getloadavg(load, 3) < 0) load[0] = -1;
    std::printf("load average %.2f at the end\n\n", load[0]);
  }
  return 0;
}
