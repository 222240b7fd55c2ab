// posix_spawn-based launcher for multi-rank tests (see rank_launcher.h).
#include "rank_launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace gpttrain::testing {
namespace {

// TRACERUN_STORE_FILE is never inherited: these ranks rendezvous over the TCPStore.
const char* const kRankVariables[] = {
    "RANK",        "LOCAL_RANK", "WORLD_SIZE",      "LOCAL_WORLD_SIZE",     "MASTER_ADDR",
    "MASTER_PORT", "GROUP_RANK", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "TRACERUN_STORE_FILE"};

std::vector<std::string> rankEnvironment(int rank, int n, int port) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    bool ours = false;
    for (const char* name : kRankVariables) {
      const size_t len = std::strlen(name);
      if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') ours = true;
    }
    if (!ours) env.emplace_back(*e);
  }
  env.emplace_back("OMP_NUM_THREADS=1");
  env.emplace_back("OPENBLAS_NUM_THREADS=1");
  if (n > 0) {
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("GROUP_RANK=0");
    env.push_back("WORLD_SIZE=" + std::to_string(n));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(n));
    env.emplace_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace

bool RankRun::ok() const {
  for (int code : exit_codes) {
    if (code != 0) return false;
  }
  return !exit_codes.empty();
}

std::string RankRun::summary() const {
  std::ostringstream out;
  for (size_t r = 0; r < exit_codes.size(); ++r) {
    out << "rank " << r << " exit " << exit_codes[r] << "\n";
    if (exit_codes[r] != 0) {
      const std::string& log = logs[r];
      out << "  log tail: " << log.substr(log.size() > 2000 ? log.size() - 2000 : 0) << "\n";
    }
  }
  return out.str();
}

int freeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  close(fd);
  return ntohs(addr.sin_port);
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

namespace {

RankRun launchRanksOnPort(const std::string& program, const std::vector<std::string>& args, int n,
                          const std::string& log_dir, int hang_guard_s, int port) {
  const int count = n > 0 ? n : 1;
  std::vector<pid_t> pids;
  std::vector<std::string> log_paths;
  for (int r = 0; r < count; ++r) {
    std::vector<std::string> argv_strings{program};
    argv_strings.insert(argv_strings.end(), args.begin(), args.end());
    std::vector<std::string> env_strings = rankEnvironment(r, n, port);
    auto argv = pointers(argv_strings);
    auto envp = pointers(env_strings);
    log_paths.push_back(log_dir + "/rank" + std::to_string(r) + ".log");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, log_paths.back().c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    pid_t pid = 0;
    const int err = posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) throw std::runtime_error("cannot start " + program + ": " + std::strerror(err));
    pids.push_back(pid);
  }
  RankRun run;
  run.exit_codes.assign(count, -1);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(hang_guard_s);
  size_t running = pids.size();
  while (running > 0) {
    for (int r = 0; r < count; ++r) {
      if (pids[r] == 0) continue;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        run.exit_codes[r] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        pids[r] = 0;
        --running;
      }
    }
    if (running == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (pid_t pid : pids) {
        if (pid != 0) kill(pid, SIGKILL);
      }
      for (pid_t pid : pids) {
        if (pid != 0) waitpid(pid, nullptr, 0);
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (const auto& path : log_paths) run.logs.push_back(readFile(path));
  return run;
}

}  // namespace

RankRun launchRanks(const std::string& program, const std::vector<std::string>& args, int n,
                    const std::string& log_dir, int hang_guard_s) {
  std::filesystem::create_directories(log_dir);
  // The port is free when picked and bound by rank 0's store a moment later: a test running beside
  // this one may take it in between. Then the job fails at its start, and runs again on a new port.
  for (int attempt = 1;; ++attempt) {
    RankRun run =
        launchRanksOnPort(program, args, n, log_dir, hang_guard_s, n > 0 ? freeLoopbackPort() : 0);
    const bool portTaken =
        !run.ok() && std::any_of(run.logs.begin(), run.logs.end(), [](const std::string& log) {
          return log.find("Address already in use") != std::string::npos;
        });
    if (!portTaken || attempt == 3) return run;
  }
}

}  // namespace gpttrain::testing
