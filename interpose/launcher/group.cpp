// The multi-rank launch: `tracerun --nproc-per-node N [--nnodes ...] [--max-restarts R] --
// PROGRAM`. Starts N ranks with the torchrun environment, passes their output through with [rank N]
// prefixes, draws the status line from the ranks' status files, stops the group on the first
// failure or on Ctrl-C, restarts it when allowed, and merges the shards; with several nodes every
// other node ships its shards to node 0, whose output becomes the trace of all ranks, and a fault
// on any node stops every node's ranks (through the agents' fault links, clock_sync.h). It does not
// host the rendezvous store: on one node it hands the ranks a c10d FileStore path in a private
// directory (TRACERUN_STORE_FILE, rendezvous.h), on several rank 0 of the program hosts it, as
// under torchrun; with several nodes node 0's agent decides restarts for all.
//
// Sections: helpers · workers · status line · one attempt (class Attempt, whose stopRanks is the
//           one stop path) · merge · nodes · restarts across nodes · launchGroup (class Group)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attempts_merge.h"
#include "clock_sync.h"
#include "launch.h"
#include "output_guard.h"
#include "rendezvous.h"
#include "stop_sequence.h"
#include "supervisor.h"
#include "tracerun/trace/format.h"
#include "tracerun/trace/merge.h"

namespace tracerun::launcher {

namespace {

// ---- helpers ------------------------------------------------------------------------------------

using Clock = std::chrono::steady_clock;

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by " + signalName(WTERMSIG(status));
  return "stopped";
}

int exitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

bool succeeded(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// ---- workers ------------------------------------------------------------------------------------

// A rank of this node: its number, and its process (the supervisor's child) and output.
struct Worker {
  int rank = 0;
  int local = 0;
  size_t child = 0;  // index in the supervisor's children
  std::string pending[2];
};

// ---- status line --------------------------------------------------------------------------------

struct RankStatus {
  bool seen = false;
  double step = 0, loss = 0, tokens_per_s = 0;
};

RankStatus readStatus(const std::string& path) {
  RankStatus s;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return s;
  long samples = 0;
  s.seen = std::sscanf(line.c_str(), "step=%lf samples=%ld loss=%lf tokens_per_s=%lf", &s.step,
                       &samples, &s.loss, &s.tokens_per_s) == 4;
  return s;
}

class StatusLine {
 public:
  // `traced`: --ranks's list when given (a rank outside it shows `x`: it never reports).
  StatusLine(const std::string& mode, const std::string& dir, const std::vector<Worker>& workers,
             int restart, std::optional<core::RankSet> traced)
      : dir_(dir),
        workers_(workers),
        restart_(restart),
        traced_(std::move(traced)),
        start_(Clock::now()) {
    tty_ = ::isatty(1) == 1;
    on_ = mode != "off";
    inPlace_ = on_ && tty_ && mode != "plain";
  }

  // Before a pass-through line: take the in-place line off the screen.
  void hide() {
    if (shown_) writeAll(1, "\r\033[K");
    shown_ = false;
  }
  void show() {
    if (inPlace_ && !text_.empty()) {
      writeAll(1, text_);
      shown_ = true;
    }
  }
  // Called every ~0.5 s from the loop.
  void update() {
    if (!on_) return;
    double minStep = -1, loss = 0, tps = 0;
    bool haveLoss = false;
    std::string ranks;
    bool anyTraced = false;
    for (const auto& w : workers_) {
      if (traced_ && !traced_->contains(w.rank)) {
        ranks += " x";
        continue;
      }
      anyTraced = true;
      const RankStatus s = readStatus(dir_ + "/status.rank" + std::to_string(w.rank));
      ranks += " " + (s.seen ? std::to_string(static_cast<long>(s.step)) : std::string("-"));
      if (!s.seen) continue;
      minStep = minStep < 0 ? s.step : std::min(minStep, s.step);
      if (!haveLoss) {  // the lowest rank that reports a loss (gpttrain: every rank, same value)
        loss = s.loss;
        tps = s.tokens_per_s;
        haveLoss = true;
      }
    }
    const long elapsed = static_cast<long>(
        std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start_).count());
    char head[200];
    if (!anyTraced) {
      std::snprintf(head, sizeof head, "[tracerun] no rank traced here (--ranks) | %ld:%02ld",
                    elapsed / 60, elapsed % 60);
    } else if (minStep < 0) {
      std::snprintf(head, sizeof head, "[tracerun] starting | %ld:%02ld", elapsed / 60,
                    elapsed % 60);
    } else {
      std::snprintf(head, sizeof head, "[tracerun] step %.0f | loss %.4f | %.0f tok/s | %ld:%02ld",
                    minStep, loss, tps, elapsed / 60, elapsed % 60);
    }
    std::string text = std::string(head) + " | ranks" + ranks;
    if (restart_ > 0) text += " | restart " + std::to_string(restart_);
    if (inPlace_) {
      text_ = "\r\033[K" + text;
      writeAll(1, text_);
      shown_ = true;
    } else if (minStep >= 0 && minStep != lastPlainStep_ &&
               Clock::now() - lastPlain_ >= std::chrono::seconds(2)) {
      lastPlainStep_ = minStep;
      lastPlain_ = Clock::now();
      writeAll(1, text + "\n");
    }
  }
  void finish() {
    if (shown_) writeAll(1, "\n");
    shown_ = false;
  }

 private:
  std::string dir_;
  const std::vector<Worker>& workers_;
  int restart_;
  std::optional<core::RankSet> traced_;
  Clock::time_point start_, lastPlain_{};
  double lastPlainStep_ = -1;
  bool tty_ = false, on_ = true, inPlace_ = false, shown_ = false;
  std::string text_;
};

// ---- one attempt --------------------------------------------------------------------------------

struct AttemptResult {
  int failed_rank = -1;   // the first rank that failed, -1 when none did
  pid_t failed_pid = -1;  // -1 when it failed on another node
  int failed_node = -1;
  int failed_status = 0;
  int stop_signal = 0;  // SIGINT/SIGTERM/... that the launcher (or another node's) received
  int stop_node = -1;   // where that signal arrived
  int lost_node = -1;   // the node whose agent vanished while the ranks ran
};

void emitLines(Worker& w, int stream, const char* data, size_t n, StatusLine& status, bool flush) {
  std::string& buf = w.pending[stream];
  buf.append(data, n);
  std::string out;
  const std::string prefix = "[rank " + std::to_string(w.rank) + "] ";
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1) {
    out += prefix + buf.substr(start, nl + 1 - start);
  }
  buf.erase(0, start);
  if (flush && !buf.empty()) {
    out += prefix + buf + "\n";
    buf.clear();
  }
  if (out.empty()) return;
  status.hide();
  writeAll(stream == 0 ? 1 : 2, out);
  status.show();
}

// A fault's one-line description: "rank 3 on node 1 was killed by SIGKILL".
std::string describeFault(const AttemptResult& r) {
  if (r.lost_node >= 0) return "node " + std::to_string(r.lost_node) + "'s agent is gone";
  if (r.failed_rank < 0 && r.stop_signal != 0) {
    return signalName(r.stop_signal) + " on node " + std::to_string(r.stop_node);
  }
  return "rank " + std::to_string(r.failed_rank) + " on node " + std::to_string(r.failed_node) +
         " " + describeStatus(r.failed_status);
}

// Sends `m` on every open link but `except`'s (node 0 relaying what node `except` said).
void sendAll(std::vector<AgentLink>& links, const AgentMessage& m, int except = -1) {
  for (auto& l : links) {
    if (l.open() && l.node() != except) l.send(m);
  }
}

using Env = std::vector<std::pair<std::string, std::string>>;

// One attempt of the group on this node: its ranks, their output, the status line, what the other
// nodes' agents say on the links, and the one way the attempt stops its ranks (stopRanks: a line,
// then the supervisor's StopSequence: SIGTERM and SIGKILL). run() returns how the attempt ended.
class Attempt {
 public:
  Attempt(const LaunchOptions& o, Supervisor& supervisor, std::vector<AgentLink>& links,
          const std::string& dir, int restart)
      : o_(o),
        sup_(supervisor),
        links_(links),
        workers_(static_cast<size_t>(o.nproc_per_node)),
        status_(o.status, dir, workers_, restart, tracedRanks(o)),
        stop_(supervisor.stop()) {
    sup_.beginRun();
  }
  Attempt(const Attempt&) = delete;
  Attempt& operator=(const Attempt&) = delete;
  ~Attempt() {
    for (size_t i = 0; i < sup_.children(); ++i) {
      sup_.closeOutput(i, 0);
      sup_.closeOutput(i, 1);
    }
  }

  // Starts the ranks and waits for them (and their output). *peerEnded: per link, the peer's
  // kDone/kEnded (its ranks ended) or node 0's decision (kRestart/kEnd) read here and kept for
  // agreeOnRestart; kind 0 when none came.
  AttemptResult run(const std::string& executable, const Env& env,
                    std::vector<AgentMessage>* peerEnded) {
    peerEnded_ = peerEnded;
    peerEnded_->assign(links_.size(), AgentMessage{0, 0, -1, 0});
    // Links still watched: a peer that said "done" may close its end without it being a fault.
    watching_.resize(links_.size());
    for (size_t i = 0; i < links_.size(); ++i) watching_[i] = links_[i].open();
    spawnRanks(executable, env);
    while (turn()) {
    }
    status_.finish();
    // Ranks ended well: the peers may now see this side close without taking it for a fault.
    if (result_.failed_rank < 0 && result_.stop_signal == 0 && result_.lost_node < 0) {
      sendAll(links_, {AgentMessage::kDone, o_.node_rank, -1, 0});
    }
    return result_;
  }

 private:
  void spawnRanks(const std::string& executable, const Env& commonEnv) {
    const int world = o_.nnodes * o_.nproc_per_node;
    for (int local = 0; local < o_.nproc_per_node; ++local) {
      Worker& w = workers_[static_cast<size_t>(local)];
      w.local = local;
      w.rank = o_.node_rank * o_.nproc_per_node + local;
      auto env = commonEnv;
      env.emplace_back("RANK", std::to_string(w.rank));
      env.emplace_back("LOCAL_RANK", std::to_string(local));
      env.emplace_back("ROLE_RANK", std::to_string(w.rank));
      env.emplace_back("GROUP_RANK", std::to_string(o_.node_rank));
      env.emplace_back("WORLD_SIZE", std::to_string(world));
      env.emplace_back("ROLE_WORLD_SIZE", std::to_string(world));
      const int child = sup_.start({executable, o_.program, env, /*rank=*/true});
      if (child < 0) {
        std::fprintf(stderr, "tracerun: cannot start rank %d: %s\n", w.rank, std::strerror(errno));
        result_.failed_rank = w.rank;
        result_.failed_status = 127 << 8;
        stop_.killNow();  // the ranks started so far have nothing to flush yet
        sup_.advanceStop();
        break;
      }
      w.child = static_cast<size_t>(child);
    }
  }

  // The one stop path: says why on one line and begins the SIGTERM, SIGKILL sequence (once; a
  // later reason is said, the first deadlines stand).
  void stopRanks(const std::string& line) {
    status_.hide();
    std::fprintf(stderr, "%s\n", line.c_str());
    stop_.begin();
  }

  // One turn of the wait loop: wait up to 200 ms for output, a signal or a peer; then read what
  // came, reap ranks, follow a stop signal, send what the stop sequence has due. False: done.
  bool turn() {
    const bool anyRunning = sup_.anyRunning();
    std::vector<pollfd> pfds;
    std::vector<std::pair<Worker*, int>> owners;
    pfds.push_back({sup_.wakeFd(), POLLIN, 0});
    owners.emplace_back(nullptr, 0);
    for (auto& w : workers_) {
      if (w.child >= sup_.children()) continue;  // not started (a failed start)
      for (int s = 0; s < 2; ++s) {
        if (const int fd = sup_.child(w.child).fds[s]; fd >= 0) {
          pfds.push_back({fd, POLLIN, 0});
          owners.emplace_back(&w, s);
        }
      }
    }
    if (!anyRunning) {
      // Everyone is reaped; read what is left, but do not wait on a grandchild that keeps a
      // pipe open for longer than a second.
      if (pfds.size() == 1) return false;
      if (!draining_) {
        draining_ = true;
        drainUntil_ = Clock::now() + std::chrono::seconds(1);
      } else if (Clock::now() >= drainUntil_) {
        return false;
      }
    }
    const size_t firstLink = pfds.size();
    std::vector<size_t> linkOf;  // pfds index - firstLink -> index in links_
    if (anyRunning) {
      for (size_t i = 0; i < links_.size(); ++i) {
        if (!watching_[i]) continue;
        pfds.push_back({links_[i].fd(), POLLIN, 0});
        linkOf.push_back(i);
      }
    }
    ::poll(pfds.data(), pfds.size(), 200);
    for (size_t i = firstLink; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) readLink(linkOf[i - firstLink]);
    }
    pfds.resize(firstLink);
    sup_.drain();
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) readOutput(*owners[i].first, owners[i].second);
    }
    reapRanks();
    followStopSignal();
    sup_.advanceStop();
    if (Clock::now() >= nextStatus_ && anyRunning) {
      status_.update();
      nextStatus_ = Clock::now() + std::chrono::milliseconds(500);
    }
    return true;
  }

  // A message (or the end) on link `li`: a peer's fault or stop (node 0 relays it to the others),
  // its ranks' end, or node 0's decision.
  void readLink(size_t li) {
    AgentLink& link = links_[li];
    AgentMessage m;
    AttemptResult what;
    if (!link.receive(&m)) {
      // The peer's agent died (or its host): node 0 treats it as a fault on that node and tells
      // the others; another node has lost its coordinator and stops.
      watching_[li] = false;
      link.close();
      what.lost_node = link.node();
      if (o_.node_rank == 0 && !stop_.stopping()) {
        sendAll(links_, {AgentMessage::kFault, link.node(), -1, 0});
      }
      stopForRemote(what);
      return;
    }
    if (m.kind == AgentMessage::kDone || m.kind == AgentMessage::kEnded ||
        m.kind == AgentMessage::kRestart || m.kind == AgentMessage::kEnd) {
      (*peerEnded_)[li] = m;
      watching_[li] = false;
      return;
    }
    if (m.kind != AgentMessage::kFault && m.kind != AgentMessage::kStop) return;
    if (o_.node_rank == 0) sendAll(links_, m, link.node());  // relay to every other node
    if (m.kind == AgentMessage::kFault && m.rank < 0) {
      what.lost_node = static_cast<int>(m.node);  // node 0 lost that node's agent
    } else if (m.kind == AgentMessage::kFault) {
      what.failed_rank = static_cast<int>(m.rank);
      what.failed_node = static_cast<int>(m.node);
      what.failed_status = static_cast<int>(m.value);
    } else {
      what.stop_signal = static_cast<int>(m.value);
      what.stop_node = static_cast<int>(m.node);
    }
    stopForRemote(what);
  }

  // Stops this node's ranks because of something that happened elsewhere (the first reason only).
  void stopForRemote(const AttemptResult& what) {
    if (stop_.stopping()) return;
    result_.failed_rank = what.failed_rank;
    result_.failed_node = what.failed_node;
    result_.failed_status = what.failed_status;
    result_.stop_signal = what.stop_signal;
    result_.stop_node = what.stop_node;
    result_.lost_node = what.lost_node;
    stopRanks("tracerun: node " + std::to_string(o_.node_rank) + ": " + describeFault(result_) +
              "; stopping this node's ranks");
  }

  void readOutput(Worker& w, int stream) {
    const ssize_t n = ::read(sup_.child(w.child).fds[stream], buf_, sizeof buf_);
    if (n > 0) {
      emitLines(w, stream, buf_, static_cast<size_t>(n), status_, false);
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      emitLines(w, stream, buf_, 0, status_, true);
      sup_.closeOutput(w.child, stream);
    }
  }

  // Reaps ended ranks; the first failure (before any stop) is the attempt's and stops the others.
  void reapRanks() {
    sup_.reap([this](size_t child, int st) {
      const pid_t pid = sup_.child(child).pid;
      for (auto& w : workers_) {
        if (w.child != child) continue;
        if (succeeded(st) || stop_.stopping()) continue;
        result_.failed_rank = w.rank;
        result_.failed_pid = pid;
        result_.failed_node = o_.node_rank;
        result_.failed_status = st;
        sendAll(links_, {AgentMessage::kFault, o_.node_rank, w.rank, st});
        stopRanks("tracerun: rank " + std::to_string(w.rank) + " (pid " +
                  std::to_string(static_cast<int>(pid)) + ") " + describeStatus(st) +
                  "; stopping the other ranks");
      }
    });
  }

  // A stop signal to this launcher: the attempt's reason (over another node's), said to the peers.
  void followStopSignal() {
    const int sig = sup_.stopSignal();
    if (sig == 0 || (result_.stop_signal != 0 && result_.stop_node == o_.node_rank)) return;
    result_.stop_signal = sig;
    result_.stop_node = o_.node_rank;
    sendAll(links_, {AgentMessage::kStop, o_.node_rank, -1, sig});
    stopRanks("tracerun: " + signalName(sig) + ": stopping all ranks (they flush their traces)");
  }

  const LaunchOptions& o_;
  Supervisor& sup_;
  std::vector<AgentLink>& links_;
  std::vector<Worker> workers_;  // sized once: status_ keeps a reference
  StatusLine status_;
  StopSequence& stop_;  // the supervisor's, fresh for this attempt
  AttemptResult result_;
  std::vector<bool> watching_;
  std::vector<AgentMessage>* peerEnded_ = nullptr;
  Clock::time_point nextStatus_ = Clock::now();
  Clock::time_point drainUntil_{};
  bool draining_ = false;
  char buf_[65536];
};

// ---- merge --------------------------------------------------------------------------------------

// The status files of an attempt (its shards stay).
void removeStatusFiles(const std::string& dir) {
  for (int r = 0; r < 4096; ++r) {
    const std::string p = dir + "/status.rank" + std::to_string(r);
    if (::unlink(p.c_str()) != 0 && errno == ENOENT && r > 1024) break;
    ::unlink((p + ".tmp").c_str());
  }
}

void removeAttemptDir(const std::string& dir) {
  removeShardFiles(dir);
  removeStatusFiles(dir);
  ::rmdir(dir.c_str());
}

// Every attempt's shards on this node: the rank*.db files of each attempt directory.
std::vector<std::string> shardsOf(const std::vector<std::string>& attemptDirs) {
  std::vector<std::string> out;
  for (const auto& dir : attemptDirs) {
    const auto shards = shardFiles(dir);
    out.insert(out.end(), shards.begin(), shards.end());
  }
  return out;
}

// ---- nodes --------------------------------------------------------------------------------------

// How long node 0 waits for the other nodes' shards after its own ranks ended, and how long the
// other nodes try to deliver them.
int transferTimeoutS() {
  const char* v = std::getenv("TRACERUN_NODE_TRANSFER_TIMEOUT_S");
  const int s = v != nullptr ? std::atoi(v) : 0;
  return s > 0 ? s : 300;
}

// Node 0: the other nodes' shards, into shardDir/received/nodeK/. Says which node did not deliver.
ReceiveResult collectNodes(const LaunchOptions& o, const std::string& receivedDir,
                           const std::string& token, const CancelCheck& cancelled) {
  const int timeout = transferTimeoutS();
  if (const std::string p = makePrivateDir(receivedDir); !p.empty()) {
    std::fprintf(stderr, "tracerun: %s\n", p.c_str());
  }
  if (!o.quiet) {
    std::fprintf(stderr, "tracerun: waiting up to %d s for the shards of nodes 1..%d\n", timeout,
                 o.nnodes - 1);
  }
  ReceiveResult got;
  try {
    got = receiveShards(o.master_addr, o.master_port + 1, o.nnodes, receivedDir, token, timeout,
                        cancelled);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracerun: %s\n", e.what());
    for (int n = 1; n < o.nnodes; ++n) got.missing.push_back(n);
    return got;
  }
  for (const auto& e : got.errors)
    std::fprintf(stderr, "tracerun: shard transfer: %s\n", e.c_str());
  for (const auto& node : got.delivered) {
    if (!o.quiet) {
      std::fprintf(stderr, "tracerun: node %d: %zu shard(s), %s received\n", node.node_rank,
                   node.paths.size(), trace::formatBytes(static_cast<double>(node.bytes)).c_str());
    }
  }
  for (int n : got.missing) {
    std::fprintf(stderr,
                 "tracerun: node %d did not deliver its shards within %d s; %s lacks its ranks "
                 "(node %d keeps them)\n",
                 n, timeout, o.output.c_str(), n);
  }
  return got;
}

// received/nodeK/attemptN/ of every node that delivered, then received/ itself when empty.
void removeReceived(const std::string& receivedDir, const std::vector<NodeShards>& nodes) {
  for (const auto& node : nodes) {
    const std::string dir = receivedDir + "/node" + std::to_string(node.node_rank);
    for (const auto& path : node.paths) {
      const std::string attemptDir = path.substr(0, path.rfind('/'));
      removeShardFiles(attemptDir);
      ::rmdir(attemptDir.c_str());
    }
    ::rmdir(dir.c_str());
  }
  ::rmdir(receivedDir.c_str());
}

// Node K > 0: the shards of every attempt (attemptDirs) to node 0, each under its attempt's
// directory name. Returns false (after saying so) when they did not get there.
bool deliverToNode0(const LaunchOptions& o, const std::vector<std::string>& attemptDirs,
                    int64_t offset, const std::string& token, const CancelCheck& cancelled) {
  NodeShards mine;
  mine.node_rank = o.node_rank;
  mine.clock_offset_ns = offset;
  mine.paths = shardsOf(attemptDirs);
  try {
    const int64_t bytes =
        sendShards(o.master_addr, o.master_port + 1, mine, token, transferTimeoutS(), cancelled);
    if (!o.quiet && mine.paths.empty() && o.ranks) {
      std::fprintf(stderr, "tracerun: node %d: no shard to send to node 0 (--ranks %s)\n",
                   o.node_rank, o.ranks->c_str());
    } else if (!o.quiet) {
      std::fprintf(stderr,
                   "tracerun: node %d: %zu shard(s), %s sent to node 0, whose output holds "
                   "every node's ranks; this node's own ranks are also in %s\n",
                   o.node_rank, mine.paths.size(),
                   trace::formatBytes(static_cast<double>(bytes)).c_str(), o.output.c_str());
    }
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "tracerun: node %d: the shards did not reach node 0: %s; this node's ranks are in "
                 "%s, its shards kept in %s\n",
                 o.node_rank, e.what(), o.output.c_str(), listPaths(attemptDirs).c_str());
    return false;
  }
}

// ---- restarts across nodes ----------------------------------------------------------------------

// Reads `link` until a message of one of `kinds` (earlier fault/stop messages are stale: the ranks
// are already stopped) or until timeout_s / a stop signal / a broken link; false then.
bool awaitMessage(const AgentLink& link, std::initializer_list<int64_t> kinds, int timeout_s,
                  Supervisor& signals, AgentMessage* got) {
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  while (Clock::now() < deadline && signals.stopSignal() == 0) {
    pollfd p{link.fd(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    if (!link.receive(got)) return false;
    if (std::find(kinds.begin(), kinds.end(), got->kind) != kinds.end()) return true;
  }
  return false;
}

// After a failed attempt with --max-restarts on several nodes. Node 0 restarts the group only
// when the attempt failed on a rank (not a signal, not a lost agent), restarts are left and every
// node says its ranks have ended; it tells every node the next attempt's number, or to end.
// Returns that number, or -1 for no restart.
int agreeOnRestart(const LaunchOptions& o, std::vector<AgentLink>& links, const AttemptResult& r,
                   int attempt, const std::vector<AgentMessage>& peerEnded, Supervisor& signals) {
  const int timeout = static_cast<int>(o.grace_s) + 60;  // the other nodes' ranks are stopping
  if (o.node_rank > 0) {
    if (links.empty() || !links[0].open() || r.lost_node >= 0) return -1;
    links[0].send({AgentMessage::kEnded, o.node_rank, -1, attempt});
    AgentMessage m = peerEnded.empty() ? AgentMessage{0, 0, -1, 0} : peerEnded[0];
    if (m.kind == 0 &&
        !awaitMessage(links[0], {AgentMessage::kRestart, AgentMessage::kEnd, AgentMessage::kDone},
                      300, signals, &m)) {
      return -1;
    }
    return m.kind == AgentMessage::kRestart ? static_cast<int>(m.value) : -1;
  }
  bool restart = r.failed_rank >= 0 && r.stop_signal == 0 && r.lost_node < 0 &&
                 attempt < o.max_restarts && signals.stopSignal() == 0;
  for (size_t i = 0; i < links.size(); ++i) {
    // kDone: that node's ranks had all ended well; the group cannot restart without them.
    AgentMessage m;
    m.kind = i < peerEnded.size() ? peerEnded[i].kind : 0;
    if (restart && links[i].open() && m.kind == 0 &&
        !awaitMessage(links[i], {AgentMessage::kEnded, AgentMessage::kDone}, timeout, signals,
                      &m)) {
      m.kind = 0;
    }
    if (!links[i].open() || m.kind != AgentMessage::kEnded) restart = false;
  }
  const AgentMessage decision = restart ? AgentMessage{AgentMessage::kRestart, 0, -1, attempt + 1}
                                        : AgentMessage{AgentMessage::kEnd, 0, -1, 0};
  sendAll(links, decision);
  return restart ? attempt + 1 : -1;
}

}  // namespace

// ---- launchGroup --------------------------------------------------------------------------------

std::string groupOptionsProblem(const LaunchOptions& o) {
  if (o.nnodes < 1 || o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return "--node-rank " + std::to_string(o.node_rank) + " is outside 0.." +
           std::to_string(o.nnodes - 1) + " (--nnodes " + std::to_string(o.nnodes) + ")";
  }
  if (o.nnodes > 1 && (o.master_port <= 0 || o.master_addr.empty())) {
    return "--nnodes " + std::to_string(o.nnodes) +
           " needs --master-addr and --master-port (the same on every node)";
  }
  const char* fromEnv = std::getenv(kJobTokenVariable);
  const std::string token = !o.job_token.empty() ? o.job_token : fromEnv ? fromEnv : "";
  if (token.size() > kMaxJobTokenBytes) {
    return "the job token has " + std::to_string(token.size()) + " bytes; at most " +
           std::to_string(kMaxJobTokenBytes) + " are allowed";
  }
  if (token.empty() && o.nnodes > 1) {
    return "--nnodes " + std::to_string(o.nnodes) +
           " needs a job token, the same on every node: " + kJobTokenVariable +
           "=TOKEN or --job-token TOKEN (e.g. TOKEN=$(openssl rand -hex 16))";
  }
  return {};
}

namespace {

// The group on this node across its attempts: what launchGroup settles once (job token, store
// directory, rendezvous port, clock offsets and the links to the other nodes' agents, the ranks'
// common environment), the attempts with their restarts, and the final merge.
class Group {
 public:
  Group(LaunchOptions opts, std::string executable, std::string shardDir)
      : o_(std::move(opts)), executable_(std::move(executable)), shardDir_(std::move(shardDir)) {}

  // Whether runAttempts stopped without an attempt directory (then there is nothing to finish).
  bool noDirectory() const { return noDirectory_; }

  // Everything before the first attempt. Returns an exit code when it failed (after one line).
  std::optional<int> prepare() {
    if (o_.nproc_per_node <= 0) o_.nproc_per_node = 1;
    if (const std::string p = groupOptionsProblem(o_); !p.empty()) {
      std::fprintf(stderr, "tracerun: %s\n", p.c_str());
      return 2;
    }
    if (o_.master_addr.empty()) o_.master_addr = "127.0.0.1";
    // Debian maps a host's own name to 127.0.1.1: node 0's agent would listen there alone, out of
    // reach of the agents on other hosts (they wait out their timeout). Said on node 0 at once.
    if (o_.nnodes > 1 && o_.node_rank == 0 && nameResolvesToLoopback(o_.master_addr)) {
      std::fprintf(stderr,
                   "tracerun: warning: --master-addr %s is a loopback address on this host (node "
                   "0): agents on other hosts cannot reach it; give node 0's IP address\n",
                   o_.master_addr.c_str());
    }
    // The job token (rendezvous.h): several nodes must share one; one node makes its own. The
    // ranks do not see it.
    token_ = o_.job_token;
    if (const char* t = std::getenv(kJobTokenVariable); token_.empty() && t != nullptr) token_ = t;
    ::unsetenv(kJobTokenVariable);  // checked by groupOptionsProblem
    // One node: the ranks rendezvous through a c10d FileStore in a private directory (no
    // socket); several nodes: TCPStore on MASTER_ADDR:MASTER_PORT, where the program puts it.
    try {
      if (token_.empty()) token_ = generateJobToken();
      if (o_.nnodes == 1) storeDir_.emplace();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: %s\n", e.what());
      return 1;
    }
    if (o_.nnodes > 1) ::unsetenv(kStoreFileVariable);
    // A port we chose ourselves is chosen again for every restart: the previous attempt's store
    // and Gloo connections may still linger on the old one (seen as "connection reset by peer").
    ownPort_ = o_.master_port <= 0 && o_.nnodes == 1;
    try {
      if (o_.master_port <= 0) o_.master_port = freePort(o_.master_addr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: no free port for the rendezvous: %s\n", e.what());
      return 2;
    }
    if (const auto code = connectNodes()) return code;
    env_ = commonEnv();
    return std::nullopt;
  }

  // The attempts, restarting as --max-restarts (and, on several nodes, node 0) allow. Returns the
  // exit code so far (the merge may still fail the run).
  int runAttempts(Supervisor& signals) {
    int code = 0;
    for (;; ++attempt_) {
      // A fresh attempt directory, 0700, in the private shard directory launch() holds.
      const std::string dir = shardDir_ + "/attempt" + std::to_string(attempt_);
      removeAttemptDir(dir);
      if (const std::string p = makePrivateDir(dir); !p.empty()) {
        std::fprintf(stderr, "tracerun: %s\n", p.c_str());
        noDirectory_ = true;  // nothing to merge: finish() is not called
        return code != 0 ? code : 2;
      }
      attemptDirs_.push_back(dir);
      std::vector<AgentMessage> peerEnded;
      const AttemptResult r =
          Attempt(o_, signals, links_, dir, attempt_).run(executable_, attemptEnv(dir), &peerEnded);
      const bool failed = r.failed_rank >= 0 || r.stop_signal != 0 || r.lost_node >= 0;
      // Several nodes: node 0 decides whether the whole group restarts, every node follows.
      const int next = o_.nnodes > 1 && o_.max_restarts > 0 && failed
                           ? agreeOnRestart(o_, links_, r, attempt_, peerEnded, signals)
                           : -1;
      if (r.stop_signal != 0) {
        if (r.stop_node != o_.node_rank) {
          std::fprintf(stderr, "tracerun: stopped by %s\n", describeFault(r).c_str());
        }
        return 128 + r.stop_signal;
      }
      if (r.lost_node >= 0) {
        // The exit code 1 and the line name the node; its ranks' fate is on that node (if any).
        std::fprintf(stderr, "tracerun: stopped: %s (killed or unreachable)\n",
                     describeFault(r).c_str());
        return 1;
      }
      if (r.failed_rank < 0) return 0;
      code = exitCodeOf(r.failed_status);
      if (o_.nnodes > 1 && next < 0) {
        std::fprintf(stderr, "tracerun: fault on node %d: %s%s\n", r.failed_node,
                     describeFault(r).c_str(), o_.max_restarts > 0 ? " (no restart)" : "");
        return code;
      }
      if (o_.nnodes > 1) {
        std::fprintf(stderr, "tracerun: fault on node %d: %s; node 0 restarts every node\n",
                     r.failed_node, describeFault(r).c_str());
      }
      if (o_.nnodes == 1 && attempt_ >= o_.max_restarts) {
        std::fprintf(stderr, "tracerun: rank %d (pid %d) %s%s\n", r.failed_rank,
                     static_cast<int>(r.failed_pid), describeStatus(r.failed_status).c_str(),
                     o_.max_restarts > 0 ? " (no restarts left)" : "");
        return code;
      }
      keepAttempt(dir);
      const int restartNumber = o_.nnodes > 1 ? next : attempt_ + 1;
      std::fprintf(stderr, "tracerun: restarting all %d ranks (restart %d of %d)\n",
                   o_.nproc_per_node * o_.nnodes, restartNumber, o_.max_restarts);
      attempt_ = restartNumber - 1;  // the loop's ++attempt_ makes it node 0's number
    }
  }

  // The end: every attempt's shards merged into the one output, each as its attempt
  // (attempts_merge.h, as the elastic agent merges its rounds). Several nodes: node 0 merges every
  // node's shards of every attempt; the others merge their own (their "node file") and ship them
  // to node 0, keeping them when that fails.
  int finish(int code, Supervisor& signals) {
    const bool severalNodes = o_.nnodes > 1;
    const std::string receivedDir = shardDir_ + "/received";
    ReceiveResult others;
    if (severalNodes && o_.node_rank == 0) {
      others = collectNodes(o_, receivedDir, token_, signals.cancelledAfterNow());
      refused_.insert(refused_.end(), others.refused.begin(), others.refused.end());
    }
    std::vector<trace::MergeInput> inputs;
    addAttemptShards(inputs, shardsOf(attemptDirs_), clock_.offset_ns);
    for (const auto& node : others.delivered) {
      addAttemptShards(inputs, node.paths, node.clock_offset_ns);
    }
    AttemptsMerge merged;
    // --ranks left out every rank of this node: nothing to merge. Not on node 0 of several, whose
    // output is the job's trace: with nothing received either, that is a failure.
    const bool nothingTraced =
        inputs.empty() && !tracesAnyOwnRank() && !(severalNodes && o_.node_rank == 0);
    if (inputs.empty() && !nothingTraced) {
      std::fprintf(stderr, "tracerun: no rank wrote a trace in %s (did PROGRAM load libtorch?)\n",
                   listPaths(attemptDirs_).c_str());
    } else if (!inputs.empty()) {
      merged = mergeAttempts(signals, std::move(inputs), o_.output);
    }
    bool keep = o_.keep_shards;
    if (severalNodes && o_.node_rank == 0 && !others.missing.empty()) {
      keep = true;
      std::fprintf(stderr, "tracerun: node 0's shards kept in %s (for `tracerun merge`)\n",
                   listPaths(attemptDirs_).c_str());
    }
    if (severalNodes && o_.node_rank > 0 &&
        !deliverToNode0(o_, attemptDirs_, clock_.offset_ns, token_, signals.cancelledAfterNow())) {
      keep = true;
    }
    if (merged.result && !o_.quiet) {
      try {
        printSummary(o_.output);
        if (attempt_ > 0) {
          std::fprintf(stderr,
                       "  restarts: %d (every attempt is in %s: tracerun info lists them)\n",
                       attempt_, o_.output.c_str());
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tracerun: %s: %s\n", o_.output.c_str(), e.what());
      }
    }
    // A shard not merged whole (a full disk cut its writer short) fails the run and stays, as does
    // every shard of a failed merge.
    if ((merged.whole() || nothingTraced) && !keep) {
      for (const auto& dir : attemptDirs_) removeAttemptDir(dir);
      removeReceived(receivedDir, others.delivered);
      ::rmdir(shardDir_.c_str());
    }
    if (!refused_.empty()) {
      std::fprintf(stderr,
                   "tracerun: node 0's agent refused %zu connection(s) without this job's token "
                   "(first from %s)\n",
                   refused_.size(), refused_.front().c_str());
    }
    if (!merged.whole() && !nothingTraced && code == 0) code = 1;
    return code;
  }

 private:
  // Whether --ranks (when given) keeps one of this node's ranks traced.
  bool tracesAnyOwnRank() const {
    const std::optional<core::RankSet> traced = tracedRanks(o_);
    if (!traced) return true;
    const int first = o_.node_rank * o_.nproc_per_node;
    for (int r = first; r < first + o_.nproc_per_node; ++r) {
      if (traced->contains(r)) return true;
    }
    return false;
  }

  // Clock offsets: one host shares CLOCK_MONOTONIC; across hosts the agents measure (port+1). The
  // same connections stay open as the fault links (node 0: one per node; others: to node 0).
  std::optional<int> connectNodes() {
    if (o_.nnodes == 1) return std::nullopt;
    try {
      if (o_.node_rank == 0) {
        links_ =
            serveClock(o_.master_addr, o_.master_port + 1, o_.nnodes - 1, 300, token_, &refused_);
        clockSource_ = "node 0 (reference)";
      } else {
        links_.emplace_back();
        clock_ = measureClock(o_.master_addr, o_.master_port + 1, 16, 300, token_, o_.node_rank,
                              &links_[0]);
        clockSource_ = "measured: " + std::to_string(clock_.rounds) + " round trips, min RTT " +
                       std::to_string(clock_.rtt_ns) + " ns";
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: %s\n", e.what());
      return 1;
    }
    return std::nullopt;
  }

  // What every rank of every attempt gets (the torchrun variables but the per-rank ones).
  Env commonEnv() const {
    Env env = {
        {"MASTER_ADDR", o_.master_addr},
        {"MASTER_PORT", std::to_string(o_.master_port)},
        {"LOCAL_WORLD_SIZE", std::to_string(o_.nproc_per_node)},
        {"ROLE_NAME", "default"},
        {"TORCHELASTIC_MAX_RESTARTS", std::to_string(o_.max_restarts)},
        {"TORCHELASTIC_RUN_ID", "tracerun-" + std::to_string(::getpid())},
        {"TRACERUN_CLOCK_OFFSET_NS", std::to_string(clock_.offset_ns)},
        {"TRACERUN_CLOCK_RTT_NS", std::to_string(clock_.rtt_ns)},
        {"TRACERUN_CLOCK_SOURCE", clockSource_},
    };
    // Several ranks on one machine: one intra-op thread and one BLAS thread each, unless the user
    // set them (torchrun does the same for OMP_NUM_THREADS).
    for (const char* var : {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}) {
      if (o_.nproc_per_node > 1 && std::getenv(var) == nullptr) env.emplace_back(var, "1");
    }
    return env;
  }

  // commonEnv plus what differs per attempt: the restart count, where the shards and status files
  // go, the store file, and (a port of our own) a fresh rendezvous port.
  Env attemptEnv(const std::string& dir) {
    Env env = env_;
    if (ownPort_ && attempt_ > 0) {
      try {
        const int port = freePort(o_.master_addr);
        for (auto& [key, value] : env) {
          if (key == "MASTER_PORT") value = std::to_string(port);
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "tracerun: no free port for the restart, keeping %d: %s\n",
                     o_.master_port, e.what());
      }
    }
    env.emplace_back("TORCHELASTIC_RESTART_COUNT", std::to_string(attempt_));
    env.emplace_back("TRACERUN_RESTART", std::to_string(attempt_));
    env.emplace_back("TRACERUN_OUTPUT", dir + "/rank%r.db");
    env.emplace_back("TRACERUN_STATUS", dir + "/status.rank%r");
    if (storeDir_) env.emplace_back(kStoreFileVariable, storeDir_->attemptFile(attempt_));
    env.emplace_back("TRACERUN_OUTPUT", escapePattern(dir) + "/rank%r.db");
    env.emplace_back("TRACERUN_STATUS", escapePattern(dir) + "/status.rank%r");
    return env;
  }

  // Before a restart: the failed attempt's shards stay in `dir` for the final merge (finish),
  // where they become that attempt's ranks in the one output. A killed rank's raw shard is
  // converted now (shardFiles), freeing the room it held (rankR.db.raw-reserve) for the next
  // attempt; the status files go.
  static void keepAttempt(const std::string& dir) {
    shardFiles(dir);
    removeStatusFiles(dir);
  }

  LaunchOptions o_;
  const std::string executable_;
  const std::string shardDir_;
  std::string token_;
  std::optional<StoreDir> storeDir_;
  bool ownPort_ = false;
  std::vector<std::string> refused_;  // peers node 0's agent turned away (no job token)
  ClockEstimate clock_;
  std::string clockSource_ = "same host (CLOCK_MONOTONIC shared)";
  std::vector<AgentLink> links_;
  Env env_;
  int attempt_ = 0;
  std::vector<std::string> attemptDirs_;  // this node's, one per attempt (their shards stay)
  bool noDirectory_ = false;
};

}  // namespace

int launchGroup(const LaunchOptions& o, const std::string& executable,
                const std::string& shardDir) {
  Group group(o, executable, shardDir);
  if (const auto code = group.prepare()) return *code;
  Supervisor signals(o.grace_s);  // the launcher's signals and the ranks, to the end
  const int code = group.runAttempts(signals);
  return group.noDirectory() ? code : group.finish(code, signals);
}

}  // namespace tracerun::launcher
