// See gpttrain_ranks.h.
#include "gpttrain_ranks.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

extern char** environ;

namespace bench {
namespace {

int freePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

GpttrainRun runGpttrainRanks(std::vector<std::string> args, int ranks, int threads,
                             bool capture_stdout) {
  const std::string base = "/tmp/gpttrain_ranks_" + std::to_string(getpid());
  const std::string json = base + ".json";
  args.insert(args.end(), {"--log-json", json});
  const int port = freePort();
  GpttrainRun run;
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int r = 0; r < std::max(1, ranks); ++r) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      if (std::strncmp(*e, "RANK=", 5) && std::strncmp(*e, "WORLD_SIZE=", 11)) env.emplace_back(*e);
    }
    env.push_back("OPENBLAS_NUM_THREADS=" + std::to_string(threads));
    env.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
    if (ranks > 0) {
      for (std::string v :
           {"RANK=" + std::to_string(r), "LOCAL_RANK=" + std::to_string(r),
            "WORLD_SIZE=" + std::to_string(ranks), "LOCAL_WORLD_SIZE=" + std::to_string(ranks),
            std::string("MASTER_ADDR=127.0.0.1"), "MASTER_PORT=" + std::to_string(port)}) {
        env.push_back(v);
      }
    }
    std::vector<char*> argv, envp;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (capture_stdout) {
      logs.push_back(base + ".rank" + std::to_string(r) + ".log");
      posix_spawn_file_actions_addopen(&actions, 1, logs.back().c_str(),
                                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
    }
    pid_t pid = 0;
    const int err = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (err != 0) break;
    pids.push_back(pid);
  }
  run.ok = pids.size() == size_t(std::max(1, ranks));
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    run.ok = run.ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  std::istringstream lines(slurp(json));
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("\"ms\":");
    if (at != std::string::npos) run.step_ms.push_back(std::stod(line.substr(at + 5)));
  }
  std::remove(json.c_str());
  for (const auto& path : logs) {
    run.stdout_.push_back(slurp(path));
    std::remove(path.c_str());
  }
  return run;
}

double medianAfterFirstStep(std::vector<double> step_ms) {
  if (step_ms.size() < 2) return -1;
  step_ms.erase(step_ms.begin());
  std::sort(step_ms.begin(), step_ms.end());
  return step_ms[step_ms.size() / 2];
}

}  // namespace bench
