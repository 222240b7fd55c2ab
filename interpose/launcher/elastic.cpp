// The elastic node agent: `tracerun --nnodes MIN:MAX --nproc-per-node N --master-addr A
// --master-port P -- PROGRAM`. Hosts the membership rendezvous when it can bind A:P
// (elastic_rendezvous.h), joins it, and for every round the host forms starts its N ranks with the
// torchrun environment of that round (RANK from the round's base rank, WORLD_SIZE, a fresh
// MASTER_PORT, TORCHELASTIC_RESTART_COUNT = the round's number), stops them when the host says so
// (a node joined or left, a rank failed somewhere) and reports how they ended. The host's agent
// merges the trace of every round at the end into the output, one attempt per round
// (docs/launcher.md "Elastic jobs"). Not the rendezvous
// protocol itself (elastic_rendezvous.cpp) and not the fixed-size group (group.cpp).
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attempts_merge.h"
#include "elastic_rendezvous.h"
#include "launch.h"
#include "output_guard.h"
#include "rendezvous.h"
#include "supervisor.h"
#include "tracerun/trace/merge.h"

namespace tracerun::launcher {

namespace {

using Env = std::vector<std::pair<std::string, std::string>>;

// This agent's ranks in one round.
class Round {
 public:
  Round(const LaunchOptions& o, Supervisor& sup, const ElasticMessage& m)
      : o_(o), sup_(sup), version_(m.version) {
    sup_.beginRun();
    const std::string dir = m.dir + "/attempt" + std::to_string(m.version);
    for (int local = 0; local < o_.nproc_per_node; ++local) {
      ChildSpec spec;
      spec.rank = true;
      spec.args = o_.program;
      const int rank = m.base_rank + local;
      spec.env = {{"RANK", std::to_string(rank)},
                  {"LOCAL_RANK", std::to_string(local)},
                  {"GROUP_RANK", std::to_string(m.node_rank)},
                  {"WORLD_SIZE", std::to_string(m.world)},
                  {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc_per_node)},
                  {"MASTER_ADDR", o_.master_addr},
                  {"MASTER_PORT", std::to_string(m.port)},
                  {"TORCHELASTIC_RESTART_COUNT", std::to_string(m.version)},
                  {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o_.max_restarts)},
                  {"TRACERUN_RESTART", std::to_string(m.version)},
                  {"TRACERUN_OUTPUT", escapePattern(dir) + "/rank%r.db"},
                  {"TRACERUN_STATUS", escapePattern(dir) + "/status.rank%r"}};
      for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
        if (o_.nproc_per_node > 1 && std::getenv(var) == nullptr) spec.env.emplace_back(var, "1");
      }
      ranks_.push_back(rank);
      specs_.push_back(std::move(spec));
    }
  }

  void start(const std::string& executable) {
    for (auto& spec : specs_) {
      spec.executable = executable;
      if (sup_.start(spec) < 0) {
        std::fprintf(stderr, "tracerun: elastic: cannot start rank: %s\n", std::strerror(errno));
        failed_ = 127;
      }
    }
  }

  // Output, reaping; true once every rank ended and its output is drained.
  bool poll() {
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> who;
    for (size_t i = 0; i < sup_.children(); ++i) {
      for (int s = 0; s < 2; ++s) {
        if (sup_.child(i).fds[s] >= 0) {
          fds.push_back({sup_.child(i).fds[s], POLLIN, 0});
          who.emplace_back(i, s);
        }
      }
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), 0);
    for (size_t k = 0; k < fds.size(); ++k) {
      if (fds[k].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[k].fd, buf, sizeof buf);
      if (n > 0) {
        writeAll(who[k].second == 0 ? 1 : 2, std::string(buf, static_cast<size_t>(n)));
      } else if (n == 0 || errno != EINTR) {
        sup_.closeOutput(who[k].first, who[k].second);
      }
    }
    sup_.reap([&](size_t i, int status) {
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (!ok && failed_ == 0 && !sup_.stop().stopping()) {
        failed_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        std::fprintf(stderr,
                     "tracerun: elastic: rank %d failed (exit code %d); stopping this "
                     "node's ranks\n",
                     ranks_[i], failed_);
        stop();
      }
    });
    sup_.advanceStop();
    bool open = false;
    for (size_t i = 0; i < sup_.children(); ++i) {
      open = open || sup_.child(i).fds[0] >= 0 || sup_.child(i).fds[1] >= 0;
    }
    return !sup_.anyRunning() && !open;
  }

  void stop() {
    if (!sup_.stop().stopping()) sup_.stop().begin(StopSequence::Clock::duration::zero());
  }
  int version() const { return version_; }
  int failed() const { return failed_; }

 private:
  const LaunchOptions& o_;
  Supervisor& sup_;
  int version_;
  std::vector<int> ranks_;
  std::vector<ChildSpec> specs_;
  int failed_ = 0;
};

// The host's end of the job: every round's shards merged into the output, each as its own
// attempt (trace/merge.h: the last round's ranks keep their numbers, an earlier round's are
// numbered after them; the attempts table holds each round's world size). The stats table also
// gets every round's world size (elastic_round_V_world, with rank 0's rows) and the number of
// rounds (elastic_rounds).
// hosted: each round's host's shard directory (after a takeover, earlier rounds' are the dead
// host's).
int mergeRounds(Supervisor& sup, const LaunchOptions& o, const std::string& shardDir,
                const std::vector<int>& worlds, const std::vector<std::string>& hosted, int code) {
  const int lastRound = static_cast<int>(worlds.size()) - 1;
  std::vector<trace::MergeInput> inputs;
  for (int v = 0; v <= lastRound; ++v) {
    const std::string& root =
        hosted[static_cast<size_t>(v)].empty() ? shardDir : hosted[static_cast<size_t>(v)];
    const auto shards = shardFiles(root + "/attempt" + std::to_string(v));
    if (shards.empty() && v == lastRound) {
      std::fprintf(stderr,
                   "tracerun: elastic: round %d wrote no trace (its program never started "
                   "capturing: it must load libtorch)\n",
                   v);
      code = code != 0 ? code : 1;
    }
    addAttemptShards(inputs, shards);
  }
  if (inputs.empty()) return code != 0 ? code : 1;
  // The stats go with the last attempt's lowest rank: merged rank 0 when it wrote a shard.
  const int lastTraced = inputs.back().attempt;
  auto& first = *std::find_if(inputs.begin(), inputs.end(), [&](const trace::MergeInput& in) {
    return in.attempt == lastTraced;
  });
  first.stats.push_back({"elastic_rounds", lastRound + 1});
  for (int r = 0; r <= lastRound; ++r) {
    if (const int w = worlds[static_cast<size_t>(r)]; w > 0) {
      first.stats.push_back({"elastic_round_" + std::to_string(r) + "_world", w});
    }
  }
  const size_t shardCount = inputs.size();
  const AttemptsMerge merged = mergeAttempts(sup, std::move(inputs), o.output);
  if (!merged.whole()) {
    code = code != 0 ? code : 1;  // said why; every round's shards stay where they are
  } else {
    std::fprintf(stderr, "tracerun: elastic: %d round%s (%zu rank shards) traced in %s\n",
                 lastRound + 1, lastRound == 0 ? "" : "s", shardCount, o.output.c_str());
  }
  if (merged.whole() && !o.keep_shards) {
    for (const auto& dir : merged.dirs) {
      removeShardFiles(dir);
      ::rmdir(dir.c_str());
      ::rmdir(dir.substr(0, dir.rfind('/')).c_str());  // a dead host's directory, once empty
    }
  }
  if (!o.quiet && code == 0) {
    try {
      printSummary(o.output);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: %s: %s\n", o.output.c_str(), e.what());
    }
  }
  if (!o.keep_shards) ::rmdir(shardDir.c_str());  // only when every round's directory went
  return code;
}

}  // namespace

std::string elasticOptionsProblem(const LaunchOptions& o) {
  if (o.min_nodes < 1 || o.min_nodes > o.nnodes) {
    return "--nnodes " + std::to_string(o.min_nodes) + ":" + std::to_string(o.nnodes) +
           ": MIN must be at least 1 and at most MAX";
  }
  if (o.master_port <= 0) {
    return "--nnodes MIN:MAX needs --master-port (the rendezvous port, the same on every node)";
  }
  if (o.node_rank != 0) {
    return "--nnodes MIN:MAX assigns node ranks itself (in join order): drop --node-rank";
  }
  return {};
}

namespace {

// This agent's place in the rendezvous: the host it runs (when it could bind the port) and its
// link to whichever agent hosts.
struct Rendezvous {
  std::unique_ptr<ElasticHost> host;
  std::unique_ptr<ElasticLink> link;
};

// Binds the port when it can, then joins whoever hosts; seen and restarts go with the JOIN (a
// takeover numbers its rounds after them). Empty, or the problem.
std::string joinRendezvous(Rendezvous& rv, const LaunchOptions& o, const std::string& token,
                           const ElasticPolicy& policy, int seen, int restarts) {
  rv.link.reset();
  rv.host.reset();
  try {
    rv.host = std::make_unique<ElasticHost>(o.master_addr, o.master_port, token, policy);
    if (!rv.host->binds()) rv.host.reset();
    rv.link = std::make_unique<ElasticLink>(o.master_addr, o.master_port, token, o.nproc_per_node,
                                            o.rdzv_timeout_s, seen, restarts);
  } catch (const std::exception& e) {
    return e.what();
  }
  return {};
}

}  // namespace

int launchElastic(const LaunchOptions& opts, const std::string& executable,
                  const std::string& shardDir) {
  LaunchOptions o = opts;
  if (o.nproc_per_node <= 0) o.nproc_per_node = 1;
  if (o.master_addr.empty()) o.master_addr = "127.0.0.1";
  std::string token = o.job_token;
  if (const char* t = std::getenv(kJobTokenVariable); token.empty() && t != nullptr) token = t;
  ::unsetenv(kJobTokenVariable);
  if (token.empty()) {
    std::fprintf(stderr,
                 "tracerun: --nnodes MIN:MAX needs a job token, the same on every node: %s=TOKEN "
                 "or --job-token TOKEN\n",
                 kJobTokenVariable);
    return 2;
  }
  ElasticPolicy policy;
  policy.min_nodes = o.min_nodes;
  policy.max_nodes = o.nnodes;
  policy.join_wait_s = o.join_wait_s;
  policy.timeout_s = o.rdzv_timeout_s;
  policy.max_restarts = o.max_restarts;
  policy.addr = o.master_addr;
  char abs[PATH_MAX];  // the other agents' ranks write there: an absolute path
  policy.shard_dir = ::realpath(shardDir.c_str(), abs) != nullptr ? abs : shardDir;
  Rendezvous rv;
  if (const std::string problem = joinRendezvous(rv, o, token, policy, -1, 0); !problem.empty()) {
    std::fprintf(stderr, "tracerun: %s\n", problem.c_str());
    return 1;
  }
  if (!o.quiet) {
    std::fprintf(stderr, "tracerun: elastic agent (%s the rendezvous on %s:%d), %d-%d nodes\n",
                 rv.host ? "hosting" : "joined", o.master_addr.c_str(), o.master_port, o.min_nodes,
                 o.nnodes);
  }
  Supervisor sup(o.grace_s);
  std::optional<Round> round;
  std::vector<int> worlds;          // per round this agent took part in (0: one it missed)
  std::vector<std::string> hosted;  // per round: the shard directory of the agent that hosted it
  int code = 0, restarts = 0;
  bool ended = false, stopping = false;
  while (!ended) {
    pollfd fds[2] = {{rv.link->fd(), POLLIN, 0}, {sup.wakeFd(), POLLIN, 0}};
    ::poll(fds, 2, 100);
    sup.drain();
    if (const int sig = sup.stopSignal(); sig != 0 && !stopping) {
      stopping = true;  // our connection closes as we exit: the host sees a node leave
      if (round) round->stop();
      code = 128 + sig;
    }
    bool hostLost = false;
    if (fds[0].revents != 0) {
      for (const ElasticMessage& m : rv.link->read()) {
        if (ended) break;
        if (m.kind == ElasticMessage::kRound && !stopping) {
          if (!o.quiet) {
            std::fprintf(stderr,
                         "tracerun: elastic: round %d: world %d over %d nodes, this node %d "
                         "(ranks %d-%d)\n",
                         m.version, m.world, m.nnodes, m.node_rank, m.base_rank,
                         m.base_rank + o.nproc_per_node - 1);
          }
          round.emplace(o, sup, m);
          round->start(executable);
          worlds.resize(static_cast<size_t>(m.version) + 1, 0);
          hosted.resize(worlds.size());
          worlds[static_cast<size_t>(m.version)] = m.world;
          hosted[static_cast<size_t>(m.version)] = m.dir;
          restarts = m.restarts;
        } else if (m.kind == ElasticMessage::kStop && round && round->version() == m.version) {
          if (!o.quiet) {
            std::fprintf(stderr, "tracerun: elastic: stopping round %d: %s\n", m.version,
                         m.reason.c_str());
          }
          round->stop();
        } else if (m.kind == ElasticMessage::kEnd) {
          code = code != 0 ? code : m.code;
          ended = true;
        } else if (m.kind == ElasticMessage::kClosed) {
          if (round) round->stop();
          if (stopping) ended = true;
          hostLost = !stopping;
        }
      }
    }
    if (hostLost) {  // the host's agent is gone: this node's ranks end, then the rendezvous goes on
      std::fprintf(stderr,
                   "tracerun: elastic: the rendezvous host closed the connection (its agent is "
                   "gone); stopping this node's ranks and taking the rendezvous over\n");
      while (round && !round->poll()) sup.wait(100);
      round.reset();
      const int seen = static_cast<int>(worlds.size()) - 1;
      if (const std::string p = joinRendezvous(rv, o, token, policy, seen, restarts); !p.empty()) {
        std::fprintf(stderr, "tracerun: elastic: %s\n", p.c_str());
        code = 1;
        break;
      }
      if (!o.quiet) {
        std::fprintf(stderr, "tracerun: elastic: %s the rendezvous after round %d\n",
                     rv.host ? "hosting" : "rejoined", seen);
      }
      continue;
    }
    if (round && round->poll()) {
      rv.link->sendExit(round->version(), round->failed());
      round.reset();
    }
    if (stopping && !round) break;
  }
  while (round && !round->poll()) sup.wait(100);
  const bool hosting = rv.host != nullptr;
  rv.link.reset();
  rv.host.reset();
  if (worlds.empty()) return code != 0 ? code : 1;
  if (!hosting) {  // our ranks' shards are in the host's directory: its agent merges them
    ::rmdir(shardDir.c_str());
    return code;
  }
  return mergeRounds(sup, o, shardDir, worlds, hosted, code);
}

}  // namespace tracerun::launcher
