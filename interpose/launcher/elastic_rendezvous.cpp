// The elastic membership rendezvous (elastic_rendezvous.h): the host's thread (members, rounds,
// stops) and an agent's link. Plain blocking sockets under poll(2); no libtorch, no c10d.
#include "elastic_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "clock_sync.h"
#include "launch.h"
#include "output_guard.h"
#include "rendezvous.h"
#include "supervisor.h"

namespace tracerun::launcher {

namespace {

using Clock = std::chrono::steady_clock;

sockaddr_in addressOf(const std::string& addr, int port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) {
    throw std::runtime_error("--master-addr " + addr + ": not an IPv4 address");
  }
  return sa;
}

// Complete lines taken off the front of `buffer`.
std::vector<std::string> takeLines(std::string& buffer) {
  std::vector<std::string> lines;
  for (size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
    lines.push_back(buffer.substr(0, nl));
    buffer.erase(0, nl + 1);
  }
  return lines;
}

// Reads what is there into `buffer`; false at the end of the stream or on an error.
bool readSome(int fd, std::string& buffer) {
  char chunk[4096];
  const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  buffer.append(chunk, static_cast<size_t>(n));
  return buffer.size() < (1 << 16);  // a peer that never ends a line is dropped
}

// ---- the host's state ---------------------------------------------------------------------------

struct Member {
  int fd = -1;
  int nproc = 0;
  bool joined = false;  // sent a valid JOIN
  bool in_round = false;
  bool exited = false;  // sent EXIT for the current round
  int exit_code = 0;
  std::string buffer;
};

enum class Phase { kGathering, kRunning, kStopping, kEnded };

class HostState {
 public:
  HostState(std::string token, ElasticPolicy policy)
      : token_(std::move(token)), policy_(std::move(policy)) {}

  std::vector<Member>& members() { return members_; }
  bool ended() const { return phase_ == Phase::kEnded; }

  void add(int fd) {
    Member m;
    m.fd = fd;
    members_.push_back(std::move(m));
  }

  // A line from member i.
  void onLine(size_t i, const std::string& line) {
    Member& m = members_[i];
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    if (!m.joined) {
      std::string token;
      int nproc = 0, seen = -1, restarts = 0;
      words >> token >> nproc;
      if (words >> seen >> restarts) {  // a round before this host's: go on after it
        seen_ = std::max(seen_, seen);
        restarts_ = std::max(restarts_, restarts);
      }
      if (kind != "JOIN" || !sameJobToken(token_, token) || nproc < 1) {
        drop(i, "");  // not one of ours: never counted
        return;
      }
      m.joined = true;
      m.nproc = nproc;
      if (phase_ == Phase::kGathering && joinedCount() == 1) first_member_ = Clock::now();
      if (phase_ == Phase::kRunning && joinedCount() <= policy_.max_nodes) {
        beginStop("a node joined");
      }
      return;
    }
    if (kind == "EXIT") {
      int version = 0, code = 0;
      words >> version >> code;
      if (version != version_ || !m.in_round) return;
      m.exited = true;
      m.exit_code = code;
      if (phase_ == Phase::kRunning && code != 0) {
        failed_code_ = code;
        beginStop("a rank failed with exit code " + std::to_string(code));
      }
    }
  }

  // Member i's connection ended (or it broke the protocol).
  void drop(size_t i, const std::string& why) {
    Member& m = members_[i];
    const bool counted = m.joined;
    const bool wasInRound = m.in_round;
    ::close(m.fd);
    members_.erase(members_.begin() + static_cast<long>(i));
    if (!counted || !wasInRound) return;
    // A node lost is a membership change, not a failure: the ranks that failed because their
    // peers vanished (a rank may report that before the host sees the connection end) are not
    // counted against --max-restarts.
    failed_code_ = 0;
    if (phase_ == Phase::kRunning) beginStop(why);
  }

  // Advances by time and by what members reported; sends what is due.
  void advance() {
    if (phase_ == Phase::kRunning) {
      bool all = true;
      for (const auto& m : members_) all = all && (!m.in_round || m.exited);
      if (all) return end(0);  // every rank of every node succeeded
    }
    if (phase_ == Phase::kStopping) {
      bool all = true;
      for (const auto& m : members_) all = all && (!m.in_round || m.exited);
      if (!all) return;
      if (failed_code_ != 0) {
        if (restarts_ >= policy_.max_restarts) return end(failed_code_);
        ++restarts_;
      }
      failed_code_ = 0;
      phase_ = Phase::kGathering;
      first_member_ = Clock::now();
      for (auto& m : members_) m.in_round = false;
    }
    if (phase_ == Phase::kGathering) gather();
  }

 private:
  int joinedCount() const {
    int n = 0;
    for (const auto& m : members_) n += m.joined ? 1 : 0;
    return n;
  }

  void gather() {
    const int n = joinedCount();
    const double waited = std::chrono::duration<double>(Clock::now() - first_member_).count();
    if (n < policy_.min_nodes) {
      if (waited > policy_.timeout_s) {
        std::fprintf(stderr, "tracerun: elastic: %d of at least %d nodes after %g s; giving up\n",
                     n, policy_.min_nodes, policy_.timeout_s);
        end(1);
      }
      return;
    }
    if (n < policy_.max_nodes && waited < policy_.join_wait_s) return;
    startRound();
  }

  void startRound() {
    version_ = std::max(version_, seen_) + 1;
    int world = 0, nodes = 0;
    for (const auto& m : members_) {
      if (m.joined && nodes < policy_.max_nodes) {
        world += m.nproc;
        ++nodes;
      }
    }
    int port = 0;
    try {
      port = freePort(policy_.addr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: elastic: no free port for round %d: %s\n", version_,
                   e.what());
      return end(1);
    }
    // Round V's shards go to <dir>/attemptV (made here, before any rank of it starts).
    const std::string dir = policy_.shard_dir + "/attempt" + std::to_string(version_);
    removeShardFiles(dir);
    if (const std::string p = makePrivateDir(dir); !p.empty()) {
      std::fprintf(stderr, "tracerun: elastic: %s\n", p.c_str());
      return end(1);
    }
    int node = 0, base = 0;
    for (auto& m : members_) {
      if (!m.joined || node >= nodes) continue;
      m.in_round = true;
      m.exited = false;
      send(m, "ROUND " + std::to_string(version_) + " " + std::to_string(world) + " " +
                  std::to_string(nodes) + " " + std::to_string(node) + " " + std::to_string(base) +
                  " " + std::to_string(port) + " " + std::to_string(restarts_) + " " +
                  policy_.shard_dir);
      ++node;
      base += m.nproc;
    }
    phase_ = Phase::kRunning;
  }

  void beginStop(const std::string& why) {
    phase_ = Phase::kStopping;
    for (auto& m : members_) {
      if (m.in_round && !m.exited) send(m, "STOP " + std::to_string(version_) + " " + why);
    }
  }

  void end(int code) {
    for (auto& m : members_) {
      if (m.joined) send(m, "END " + std::to_string(code));
    }
    phase_ = Phase::kEnded;
  }

  static void send(const Member& m, const std::string& line) { writeAll(m.fd, line + "\n"); }

  std::string token_;
  ElasticPolicy policy_;
  std::vector<Member> members_;
  Phase phase_ = Phase::kGathering;
  int version_ = -1;  // the first round is 0 (the ranks' TORCHELASTIC_RESTART_COUNT)
  int seen_ = -1;     // the last round a member took part in under an earlier host
  int restarts_ = 0;
  int failed_code_ = 0;
  Clock::time_point first_member_ = Clock::now();
};

}  // namespace

// ---- ElasticHost --------------------------------------------------------------------------------

ElasticHost::ElasticHost(const std::string& addr, int port, const std::string& token,
                         ElasticPolicy policy)
    : token_(token), policy_(std::move(policy)) {
  const sockaddr_in sa = addressOf(addr, port);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, 64) != 0) {
    ::close(fd);  // another agent hosts it (or the address is not this machine's)
    return;
  }
  listen_fd_ = fd;
  if (::pipe2(quit_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

ElasticHost::~ElasticHost() {
  if (thread_.joinable()) {
    writeAll(quit_[1], "q");
    thread_.join();
  }
  for (int fd : {listen_fd_, quit_[0], quit_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

void ElasticHost::serve() {
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, nullptr);  // the supervisor's thread takes the signals
  HostState state(token_, policy_);
  while (!state.ended()) {
    std::vector<pollfd> fds = {{quit_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& m : state.members()) fds.push_back({m.fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) break;
    // Members first (their indices shift as they leave), from the back.
    for (size_t k = fds.size(); k-- > 2;) {
      if (fds[k].revents == 0) continue;
      const size_t i = k - 2;
      Member& m = state.members()[i];
      if (!readSome(m.fd, m.buffer)) {
        state.drop(i, "a node left (its agent's connection ended)");
        continue;
      }
      for (const std::string& line : takeLines(m.buffer)) {
        const size_t before = state.members().size();
        state.onLine(i, line);
        if (state.members().size() != before) break;  // dropped
      }
    }
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        state.add(fd);
      }
    }
    state.advance();
  }
  // The job is over (or the agent is going): members see their connections end.
  for (auto& m : state.members()) ::close(m.fd);
  state.members().clear();
}

// ---- ElasticLink --------------------------------------------------------------------------------

ElasticLink::ElasticLink(const std::string& addr, int port, const std::string& token, int nproc,
                         double timeout_s, int seen, int restarts) {
  const sockaddr_in sa = addressOf(addr, port);
  const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    if (::connect(fd_, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) break;
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (Clock::now() > deadline) {
      throw std::runtime_error("elastic rendezvous " + addr + ":" + std::to_string(port) + ": " +
                               std::strerror(err) + " for " + std::to_string(timeout_s) +
                               " s (is an agent hosting it?)");
    }
    ::usleep(200 * 1000);
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  writeAll(fd_, "JOIN " + token + " " + std::to_string(nproc) + " " + std::to_string(seen) + " " +
                    std::to_string(restarts) + "\n");
}

ElasticLink::~ElasticLink() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<ElasticMessage> ElasticLink::read() {
  std::vector<ElasticMessage> out;
  const bool open = readSome(fd_, buffer_);
  for (const std::string& line : takeLines(buffer_)) {
    std::istringstream words(line);
    std::string kind;
    words >> kind;
    ElasticMessage m;
    if (kind == "ROUND") {
      m.kind = ElasticMessage::kRound;
      words >> m.version >> m.world >> m.nnodes >> m.node_rank >> m.base_rank >> m.port >>
          m.restarts;
      std::getline(words >> std::ws, m.dir);
    } else if (kind == "STOP") {
      m.kind = ElasticMessage::kStop;
      words >> m.version;
      std::getline(words >> std::ws, m.reason);
    } else if (kind == "END") {
      m.kind = ElasticMessage::kEnd;
      words >> m.code;
    } else {
      continue;
    }
    out.push_back(m);
  }
  if (!open) {
    ElasticMessage closed;
    closed.kind = ElasticMessage::kClosed;
    out.push_back(closed);
  }
  return out;
}

void ElasticLink::sendExit(int version, int code) {
  // MSG_NOSIGNAL: the host may be gone (its agent killed) before this agent has read so.
  const std::string line = "EXIT " + std::to_string(version) + " " + std::to_string(code) + "\n";
  for (size_t at = 0; at < line.size();) {
    const ssize_t n = ::send(fd_, line.data() + at, line.size() - at, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

}  // namespace tracerun::launcher
