// The schedules of issue 18 end to end, beyond equivalence (test_equivalence.cpp) and the dry run
// (test_dry_run.cpp): for zb-h1, 2bw and chimera a job whose ranks are killed mid-run resumes from
// its last checkpoint to the losses of an uninterrupted run; the combinations zb-h1 cannot run are
// one line and exit 2.
#include "trainer_test_util.h"

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace gpttrain::testing;

namespace {

// This process's children (the ranks launchRanks started), from /proc.
std::vector<pid_t> children() {
  std::vector<pid_t> out;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const pid_t pid = std::atoi(e.path().filename().c_str());
    if (pid <= 0) continue;
    const std::string stat = readFile(e.path().string() + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid == getpid()) out.push_back(pid);
  }
  return out;
}

size_t lines(const std::string& path) {
  size_t n = 0;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

std::vector<std::string> scheduleArgs(const std::vector<std::string>& schedule) {
  return tinyModelArgs() + schedule +
         std::vector<std::string>{"--pp",    "2",  "--dropout",        "0.1", "--warmup", "2",
                                  "--steps", "20", "--lr-decay-steps", "20"};
}

// A pp 2 x dp 2 job of `schedule` (gpttrain flags) saving every step, its 4 ranks SIGKILLed
// (wherever they are, a save included) after 5 logged steps as the launcher does when one rank
// dies, then resumed from the checkpoint: the resumed steps' losses equal an uninterrupted run's.
void killedJobResumes(const std::string& name, const std::vector<std::string>& schedule) {
  const std::string dir = scratchDir(name + "_killed");
  const auto args = scheduleArgs(schedule);
  auto full =
      launchRanks(kGpttrain, args + std::vector<std::string>{"--log-json", dir + "/full.json"}, 4,
                  dir + "/full");
  INFO(full.summary());
  REQUIRE(full.ok());
  const std::vector<std::string> saving{"--save", dir + "/ckpt", "--save-interval", "1"};
  RankRun killed;
  std::thread job([&] {
    killed = launchRanks(
        kGpttrain, args + saving + std::vector<std::string>{"--log-json", dir + "/killed.json"}, 4,
        dir + "/killed");
  });
  // A bound for a hang only (the case has 300 s in all): five steps take seconds even under load.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  while (lines(dir + "/killed.json") < 5 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (pid_t pid : children()) kill(pid, SIGKILL);
  job.join();
  const size_t logged = lines(dir + "/killed.json");
  INFO(killed.summary());
  REQUIRE(logged >= 5);
  REQUIRE(logged < 20);  // killed before the end
  REQUIRE(std::filesystem::exists(dir + "/ckpt/latest"));
  auto resumed = launchRanks(
      kGpttrain,
      args + saving +
          std::vector<std::string>{"--load", dir + "/ckpt", "--log-json", dir + "/resumed.json"},
      4, dir + "/resumed");
  INFO(resumed.summary());
  REQUIRE(resumed.ok());
  const auto want = jsonValues(dir + "/full.json", "loss");
  const auto got = jsonValues(dir + "/resumed.json", "loss");
  REQUIRE(want.size() == 20);
  REQUIRE(!got.empty());
  REQUIRE(got.size() < 20);  // resumed, not started over
  const size_t first = want.size() - got.size();
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("step " << first + i + 1 << ": uninterrupted " << want[first + i] << ", resumed "
                 << got[i]);
    CHECK(got[i] == want[first + i]);  // identical: same state, same order of operations
  }
}

}  // namespace

TEST_CASE("zb-h1 pp=2 x dp=2: ranks killed mid-run resume from the checkpoint to the same losses",
          "[trainer][checkpoint][zbh1]") {
  killedJobResumes("zbh1", {"--schedule", "zb-h1"});
}

TEST_CASE("2bw pp=2 x dp=2: ranks killed mid-run resume from the checkpoint to the same losses",
          "[trainer][checkpoint][2bw]") {
  killedJobResumes("twobw", {"--schedule", "2bw", "--clip-grad", "0"});
}

TEST_CASE("chimera pp=2 x dp=2: ranks killed mid-run resume from the checkpoint to the same losses",
          "[trainer][checkpoint][chimera]") {
  killedJobResumes("chimera", {"--schedule", "chimera"});
}

TEST_CASE("zb-h1 with --recompute or --zero 3, or four dry-run costs: one line, exit code 2",
          "[trainer][cli][zbh1]") {
  struct Bad {
    std::vector<std::string> args;
    const char* says;
  };
  const Bad bad[] = {
      {{"--recompute", "full"}, "--recompute"},
      {{"--recompute", "selective"}, "--recompute"},
      {{"--zero", "3"}, "--zero 3"},
      {{"--dry-run-costs", "1,2,3,4"}, "--dry-run-costs"},
  };
  for (const Bad& b : bad) {
    const auto args =
        tinyModelArgs() + std::vector<std::string>{"--pp", "2", "--schedule", "zb-h1"} + b.args;
    auto run = launchRanks(kGpttrain, args, 2, scratchDir("zbh1_bad"));
    INFO(b.says << "\n" << run.logs[0]);
    CHECK(run.exit_codes[0] == 2);
    CHECK(std::count(run.logs[0].begin(), run.logs[0].end(), '\n') == 1);
    CHECK(run.logs[0].find(b.says) != std::string::npos);
  }
}
