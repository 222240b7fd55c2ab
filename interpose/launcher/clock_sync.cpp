// The agents' exchanges (clock_sync.h). Every connection to node 0's agent opens with a hello: a
// magic word (kClockHello or kShardsHello), the job token's length and bytes; node 0 compares the
// token in constant time and answers kRefused (then closes, and counts it) when it is not the
// job's, else kReady, or kNotReady for a shard sender that came while it still serves clocks (the
// sender retries). Clock: 8-byte requests, 8-byte answers (node 0's clock in ns, host byte order:
// agents of one job run the same build). Shard transfer: node rank, clock offset, file count; per
// file a name length, the name (rankR.db, or attemptN/rankR.db for a shard of attempt N), the size,
// the bytes in 1 MiB chunks and their FNV-1a 64 checksum; node 0 answers with the count of files it
// verified. The token authenticates the peer once, in the clear: no encryption, no integrity
// protection after the hello (see docs/launcher.md, "Sockets").
//
// Sections: sockets · hello · clock · shard transfer
#include "clock_sync.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <thread>

#include "rendezvous.h"

namespace tracerun::launcher {

namespace {

// ---- sockets ------------------------------------------------------------------------------------

using SteadyClock = std::chrono::steady_clock;

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(other.release()) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  Fd& operator=(Fd&&) = delete;
  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

sockaddr_in resolve(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(addr.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    throw std::runtime_error("cannot resolve " + addr);
  }
  sockaddr_in sa = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  return sa;
}

bool readAll(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::read(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool writeAll(int fd, const void* p, size_t n) {
  const auto* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t r = ::write(fd, c, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

void noDelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// Blocking reads and writes give up after `seconds` without progress (a stalled peer).
void ioTimeout(int fd, int seconds) {
  timeval tv{};
  tv.tv_sec = seconds;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// The hello's magic words: the sender wants clock rounds (then maybe a fault link), or to deliver
// shards (the bytes "traclock" and "srecarth" on a little-endian host).
constexpr int64_t kClockHello = 0x6b636f6c63617274;
constexpr int64_t kShardsHello = 0x6874726163657273;
// After its clock rounds a node sends this, then its node rank: the connection stays open as its
// fault link ("tracelnk").
constexpr int64_t kLinkHello = 0x6b6e6c6563617274;
// A request in place of a clock round: node 0 answers {kRunReply, its run label} (serveClock's
// run_label); no timestamp comes near these values.
constexpr int64_t kRunQuery = 0x6e75726563617274;
constexpr int64_t kRunReply = 0x796c706572617274;
constexpr int64_t kReady = 1;
constexpr int64_t kNotReady = -1;
constexpr int64_t kRefused = -2;
constexpr int kHelloTimeoutS = 10;  // a connection that says nothing for this long is refused

std::string peerName(const sockaddr_in& sa) {
  char host[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &sa.sin_addr, host, sizeof host);
  return std::string(host) + ":" + std::to_string(ntohs(sa.sin_port));
}

// A socket listening on addr:port only (the interface of MASTER_ADDR, never every interface).
Fd listenOn(const std::string& addr, int port, int backlog, const char* service) {
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = resolve(addr, port);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(s.get(), backlog) != 0) {
    const int error = errno;
    throw std::runtime_error(
        std::string(service) + ": cannot listen on " + addr + ":" + std::to_string(port) + ": " +
        std::strerror(error) +
        (error == EADDRINUSE
             ? " (another program holds it: tracerun's agents listen on MASTER_PORT + 1; choose "
               "another MASTER_PORT or --master-port)"
             : " (node 0's --master-addr must be an address of node 0)"));
  }
  return s;
}

// ---- hello --------------------------------------------------------------------------------------

// Sends the hello; returns node 0's answer (kReady, kNotReady, kRefused), 0 when the connection
// broke first.
int64_t sendHello(int fd, int64_t magic, const std::string& token) {
  const int64_t head[2] = {magic, static_cast<int64_t>(token.size())};
  int64_t answer = 0;
  if (!writeAll(fd, head, sizeof head) || !writeAll(fd, token.data(), token.size()) ||
      !readAll(fd, &answer, sizeof answer)) {
    return 0;
  }
  return answer;
}

struct Hello {
  int64_t magic = 0;
  bool complete = false;  // magic, length and token all read
  bool token_ok = false;
};

Hello readHello(int fd, const std::string& token) {
  Hello h;
  int64_t length = 0;
  if (!readAll(fd, &h.magic, sizeof h.magic) || !readAll(fd, &length, sizeof length) ||
      length < 0 || length > static_cast<int64_t>(kMaxJobTokenBytes)) {
    return h;
  }
  std::string got(static_cast<size_t>(length), '\0');
  if (!readAll(fd, got.data(), got.size())) return h;
  h.complete = true;
  h.token_ok = sameJobToken(token, got);
  return h;
}

// Answers kRefused (best effort), says so in one line and counts it in `refused`.
void refuse(int fd, const std::string& peer, const Hello& h, const char* service,
            std::vector<std::string>* refused) {
  const int64_t no = kRefused;
  if (h.complete) writeAll(fd, &no, sizeof no);
  const char* why = !h.complete                                         ? "no complete hello"
                    : !h.token_ok                                       ? "wrong job token"
                    : h.magic != kClockHello && h.magic != kShardsHello ? "unknown hello"
                                                                        : "unexpected hello";
  std::fprintf(stderr, "tracerun: node 0's agent refused a connection from %s (%s): %s\n",
               peer.c_str(), service, why);
  if (refused != nullptr) refused->push_back(peer);
}

std::string refusedError(const std::string& addr, int port) {
  return "node 0's agent at " + addr + ":" + std::to_string(port) +
         " refused this node's job token: give every node the same --job-token (or " +
         kJobTokenVariable + ")";
}

}  // namespace

bool nameResolvesToLoopback(const std::string& host) {
  in_addr literal{};
  if (host.empty() || ::inet_pton(AF_INET, host.c_str(), &literal) == 1) return false;
  try {
    const sockaddr_in sa = resolve(host, 0);
    return (ntohl(sa.sin_addr.s_addr) >> 24) == 127;
  } catch (const std::exception&) {
    return false;
  }
}

// ---- clock --------------------------------------------------------------------------------------

int64_t agentClockNs() {
  static const int64_t skew = [] {
    const char* s = std::getenv("TRACERUN_TEST_CLOCK_SKEW_NS");
    return s != nullptr ? std::strtoll(s, nullptr, 10) : 0;
  }();
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec + skew;
}

int freePort(const std::string& addr) {
  const Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_in sa = resolve(addr, 0);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    throw std::runtime_error("cannot bind " + addr + ": " + std::strerror(errno));
  }
  socklen_t len = sizeof sa;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  return ntohs(sa.sin_port);
}

AgentLink& AgentLink::operator=(AgentLink&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    node_ = other.node_;
    other.fd_ = -1;
  }
  return *this;
}

void AgentLink::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool AgentLink::send(const AgentMessage& m) const {
  if (fd_ < 0) return false;
  const int64_t words[4] = {m.kind, m.node, m.rank, m.value};
  const auto* p = reinterpret_cast<const char*>(words);
  size_t n = sizeof words;
  while (n > 0) {
    const ssize_t r = ::send(fd_, p, n, MSG_NOSIGNAL);  // a gone peer must not kill the agent
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool AgentLink::receive(AgentMessage* m) const {
  int64_t words[4] = {};
  if (fd_ < 0 || !readAll(fd_, words, sizeof words)) return false;
  *m = AgentMessage{words[0], words[1], words[2], words[3]};
  return true;
}

std::vector<AgentLink> serveClock(const std::string& addr, int port, int clients, int timeout_s,
                                  const std::string& token, std::vector<std::string>* refused,
                                  const CancelCheck& cancelled, int64_t run_label) {
  std::vector<AgentLink> links;
  const Fd s = listenOn(addr, port, std::min(clients, 128), "clock exchange");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int served = 0; served < clients;) {
    if (cancelled && cancelled()) return links;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{s.get(), POLLIN, 0};
    const int64_t leftMs = left.count();
    const int slice = static_cast<int>(std::min<int64_t>(leftMs, cancelled ? 200 : 1 << 30));
    const int polled = leftMs <= 0 ? 0 : ::poll(&p, 1, slice);
    if (polled == 0 && leftMs > slice) continue;  // a slice passed: look at `cancelled` again
    if (polled <= 0) {
      std::string why = "clock exchange: only " + std::to_string(served) + " of " +
                        std::to_string(clients) + " node agents connected within " +
                        std::to_string(timeout_s) + " s";
      if (refused != nullptr && !refused->empty()) {
        why += " (" + std::to_string(refused->size()) + " connection(s) refused, see above)";
      }
      throw std::runtime_error(why);
    }
    sockaddr_in peer{};
    socklen_t peerLen = sizeof peer;
    Fd c(::accept4(s.get(), reinterpret_cast<sockaddr*>(&peer), &peerLen, SOCK_CLOEXEC));
    if (c.get() < 0) continue;
    noDelay(c.get());
    ioTimeout(c.get(), kHelloTimeoutS);
    const Hello hello = readHello(c.get(), token);
    if (!hello.complete || !hello.token_ok ||
        (hello.magic != kClockHello && hello.magic != kShardsHello)) {
      refuse(c.get(), peerName(peer), hello, "clock exchange", refused);
      continue;
    }
    if (hello.magic == kShardsHello) {
      // A node whose ranks already ended, early: not a clock client; it retries later.
      const int64_t notReady = kNotReady;
      writeAll(c.get(), &notReady, sizeof notReady);
      continue;
    }
    const int64_t ready = kReady;
    if (!writeAll(c.get(), &ready, sizeof ready)) continue;
    ++served;
    int64_t request = 0;
    while (readAll(c.get(), &request, sizeof request)) {
      if (request == kLinkHello) {
        int64_t node = 0;
        if (readAll(c.get(), &node, sizeof node)) {
          ioTimeout(c.get(), 0);  // a link waits as long as the ranks run
          links.emplace_back(c.release(), node);
        }
        break;
      }
      if (request == kRunQuery) {
        const int64_t reply[2] = {kRunReply, run_label};
        if (!writeAll(c.get(), reply, sizeof reply)) break;
        continue;
      }
      const int64_t now = agentClockNs();
      if (!writeAll(c.get(), &now, sizeof now)) break;
    }
  }
  return links;
}

namespace {

// Connects to node 0's serveClock at addr:port and presents `token`, retrying until timeout_s;
// returns the connection once node 0 answered kReady. With `refused_means_left` a refused
// connection throws at once (measureClock's). The one hello of measureClock and queryRunLabel.
Fd connectReady(const std::string& addr, int port, int timeout_s, const std::string& token,
                bool refused_means_left) {
  const sockaddr_in sa = resolve(addr, port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;; std::this_thread::sleep_for(std::chrono::milliseconds(100))) {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      if (errno == ECONNREFUSED && refused_means_left) {
        throw std::runtime_error("clock exchange: nothing listens at " + addr + ":" +
                                 std::to_string(port) + " any more (the other side has left)");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("clock exchange: cannot reach node 0's agent at " + addr + ":" +
                                 std::to_string(port) + ": " + std::strerror(errno));
      }
      continue;
    }
    noDelay(s.get());
    ioTimeout(s.get(), kHelloTimeoutS);
    const int64_t answer = sendHello(s.get(), kClockHello, token);
    if (answer == kRefused) throw std::runtime_error("clock exchange: " + refusedError(addr, port));
    if (answer != kReady) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("clock exchange: node 0's agent at " + addr + ":" +
                                 std::to_string(port) + " did not answer");
      }
      continue;
    }
    return s;
  }
}

}  // namespace

ClockEstimate measureClock(const std::string& addr, int port, int rounds, int timeout_s,
                           const std::string& token, int node_rank, AgentLink* link,
                           bool refused_means_left) {
  Fd s = connectReady(addr, port, timeout_s, token, refused_means_left);
  ClockEstimate best;
  best.rtt_ns = std::numeric_limits<int64_t>::max();
  for (int i = 0; i < rounds; ++i) {
    const int64_t t1 = agentClockNs();
    int64_t remote = 0;
    if (!writeAll(s.get(), &t1, sizeof t1) || !readAll(s.get(), &remote, sizeof remote)) {
      throw std::runtime_error("clock exchange with " + addr + " broke off");
    }
    const int64_t t2 = agentClockNs();
    if (t2 - t1 < best.rtt_ns) {
      best.rtt_ns = t2 - t1;
      best.offset_ns = t1 + (t2 - t1) / 2 - remote;
    }
    ++best.rounds;
  }
  if (link != nullptr) {
    const int64_t hello[2] = {kLinkHello, node_rank};
    if (!writeAll(s.get(), hello, sizeof hello)) {
      throw std::runtime_error("clock exchange with " + addr + " broke off");
    }
    ioTimeout(s.get(), 0);  // a link waits as long as the ranks run
    *link = AgentLink(s.release(), 0);
  }
  return best;
}

int64_t queryRunLabel(const std::string& addr, int port, int timeout_s, const std::string& token) {
  const Fd s = connectReady(addr, port, timeout_s, token, false);
  const int64_t query = kRunQuery;
  int64_t reply[2] = {0, 0};
  if (!writeAll(s.get(), &query, sizeof query) || !readAll(s.get(), reply, sizeof reply) ||
      reply[0] != kRunReply) {
    throw std::runtime_error("clock exchange: " + addr + ":" + std::to_string(port) +
                             " gave no run label");
  }
  return reply[1];
}

// ---- shard transfer -----------------------------------------------------------------------------

namespace {

constexpr size_t kChunk = size_t{1} << 20;
constexpr int kIoTimeoutS = 60;  // no progress for this long: the peer is gone

uint64_t fnv1a(uint64_t h, const char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001b3ULL;
  }
  return h;
}
constexpr uint64_t kFnvBasis = 0xcbf29ce484222325ULL;

std::string baseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool allDigits(std::string::const_iterator begin, std::string::const_iterator end) {
  return begin != end && std::all_of(begin, end, [](char c) { return c >= '0' && c <= '9'; });
}

// Only rankN.db or attemptM/rankN.db: a name from the network never becomes a path elsewhere.
bool validShardName(const std::string& name) {
  if (name.size() < 8 || name.size() > 64) return false;
  const auto slash = name.find('/');
  if (slash != std::string::npos &&
      (name.rfind("attempt", 0) != 0 || !allDigits(name.begin() + 7, name.begin() + slash))) {
    return false;
  }
  const std::string file = slash == std::string::npos ? name : name.substr(slash + 1);
  if (file.size() < 8 || file.rfind("rank", 0) != 0) return false;
  if (file.compare(file.size() - 3, 3, ".db") != 0) return false;
  return allDigits(file.begin() + 4, file.end() - 3);
}

// What a shard is called on the wire: its attempt directory's name and its own (attemptN/rankR.db)
// when it lies in one, else its own.
std::string wireName(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos || slash == 0) return path;
  const std::string dir = baseName(path.substr(0, slash));
  const bool attemptDir =
      dir.rfind("attempt", 0) == 0 && dir.size() < 15 && allDigits(dir.begin() + 7, dir.end());
  return attemptDir ? dir + "/" + baseName(path) : baseName(path);
}

bool writeI64(int fd, int64_t v) {
  return writeAll(fd, &v, sizeof v);
}
bool readI64(int fd, int64_t* v) {
  return readAll(fd, v, sizeof *v);
}

void sendFile(int fd, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  in.seekg(0);
  const std::string name = wireName(path);
  if (!writeI64(fd, static_cast<int64_t>(name.size())) || !writeAll(fd, name.data(), name.size()) ||
      !writeI64(fd, size)) {
    throw std::runtime_error(std::string("connection lost: ") + std::strerror(errno));
  }
  std::vector<char> buf(kChunk);
  uint64_t sum = kFnvBasis;
  for (int64_t left = size; left > 0;) {
    const auto n = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(kChunk)));
    if (!in.read(buf.data(), static_cast<std::streamsize>(n))) {
      throw std::runtime_error(path + " shrank while it was sent");
    }
    sum = fnv1a(sum, buf.data(), n);
    if (!writeAll(fd, buf.data(), n)) {
      throw std::runtime_error(std::string("connection lost: ") + std::strerror(errno));
    }
    left -= static_cast<int64_t>(n);
  }
  if (!writeAll(fd, &sum, sizeof sum)) {
    throw std::runtime_error(std::string("connection lost: ") + std::strerror(errno));
  }
}

// Receives one file into dir; returns its path, or throws saying what was wrong.
std::string receiveFile(int fd, const std::string& dir, int64_t* bytes) {
  int64_t nameLen = 0, size = 0;
  if (!readI64(fd, &nameLen) || nameLen <= 0 || nameLen > 64) {
    throw std::runtime_error("bad file header");
  }
  std::string name(static_cast<size_t>(nameLen), '\0');
  if (!readAll(fd, name.data(), name.size()) || !validShardName(name)) {
    throw std::runtime_error("bad file name");
  }
  if (!readI64(fd, &size) || size < 0) throw std::runtime_error(name + ": bad size");
  if (const auto slash = name.find('/'); slash != std::string::npos) {
    const std::string sub = dir + "/" + name.substr(0, slash);  // attemptN (validShardName)
    if (::mkdir(sub.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create " + sub + ": " + std::strerror(errno));
    }
  }
  const std::string path = dir + "/" + name;
  const std::string part = path + ".part";
  {
    std::ofstream out(part, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + part);
    std::vector<char> buf(kChunk);
    uint64_t sum = kFnvBasis;
    for (int64_t left = size; left > 0;) {
      const auto n = static_cast<size_t>(std::min<int64_t>(left, static_cast<int64_t>(kChunk)));
      if (!readAll(fd, buf.data(), n)) {
        throw std::runtime_error(name + ": connection lost after " + std::to_string(size - left) +
                                 " of " + std::to_string(size) + " bytes");
      }
      sum = fnv1a(sum, buf.data(), n);
      out.write(buf.data(), static_cast<std::streamsize>(n));
      left -= static_cast<int64_t>(n);
    }
    uint64_t expected = 0;
    if (!readAll(fd, &expected, sizeof expected)) {
      throw std::runtime_error(name + ": connection lost before the checksum");
    }
    if (expected != sum) throw std::runtime_error(name + ": checksum mismatch");
    if (!out.flush()) throw std::runtime_error("cannot write " + part + " (disk full?)");
  }
  if (std::rename(part.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + part + ": " + std::strerror(errno));
  }
  *bytes += size;
  return path;
}

// One sender's connection, after its hello: header, files, the answer.
NodeShards receiveNode(int fd, int nnodes, const std::string& dir, std::vector<bool>& done) {
  const int64_t ready = kReady;
  if (!writeAll(fd, &ready, sizeof ready)) throw std::runtime_error("connection lost");
  int64_t node = 0, offset = 0, count = 0;
  if (!readI64(fd, &node) || !readI64(fd, &offset) || !readI64(fd, &count)) {
    throw std::runtime_error("connection lost in the header");
  }
  if (node < 1 || node >= nnodes || done[static_cast<size_t>(node)] || count < 0 ||
      count > 1 << 16) {
    throw std::runtime_error("unexpected header (node " + std::to_string(node) + ", " +
                             std::to_string(count) + " files)");
  }
  NodeShards got;
  got.node_rank = static_cast<int>(node);
  got.clock_offset_ns = offset;
  const std::string nodeDir = dir + "/node" + std::to_string(node);
  ::mkdir(nodeDir.c_str(), 0755);
  try {
    for (int64_t i = 0; i < count; ++i) got.paths.push_back(receiveFile(fd, nodeDir, &got.bytes));
  } catch (const std::exception& e) {
    throw std::runtime_error("node " + std::to_string(node) + ": " + e.what());
  }
  writeI64(fd, count);  // every file verified
  return got;
}

}  // namespace

int64_t sendShards(const std::string& addr, int port, const NodeShards& shards,
                   const std::string& token, int timeout_s, const CancelCheck& cancelled) {
  const sockaddr_in sa = resolve(addr, port);
  const auto deadline = SteadyClock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    if (cancelled && cancelled()) throw std::runtime_error("stopped while waiting for node 0");
    if (SteadyClock::now() > deadline) {
      throw std::runtime_error("node 0's agent at " + addr + ":" + std::to_string(port) +
                               " did not take the shards within " + std::to_string(timeout_s) +
                               " s");
    }
    const Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (s.get() < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    ioTimeout(s.get(), kIoTimeoutS);
    const int64_t answer = sendHello(s.get(), kShardsHello, token);
    if (answer == kRefused) throw std::runtime_error(refusedError(addr, port));
    if (answer == 0 || answer == kNotReady) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;  // node 0 still serves clocks, or was between its two services
    }
    if (answer != kReady) throw std::runtime_error("node 0's agent gave an unexpected answer");
    if (!writeI64(s.get(), shards.node_rank) || !writeI64(s.get(), shards.clock_offset_ns) ||
        !writeI64(s.get(), static_cast<int64_t>(shards.paths.size()))) {
      throw std::runtime_error(std::string("connection lost: ") + std::strerror(errno));
    }
    int64_t bytes = 0;
    for (const auto& p : shards.paths) {
      sendFile(s.get(), p);
      struct stat st {};
      if (::stat(p.c_str(), &st) == 0) bytes += st.st_size;
    }
    int64_t verified = -1;
    if (!readI64(s.get(), &verified) || verified != static_cast<int64_t>(shards.paths.size())) {
      throw std::runtime_error("node 0 did not confirm the shards (see its output)");
    }
    return bytes;
  }
}

ReceiveResult receiveShards(const std::string& addr, int port, int nnodes, const std::string& dir,
                            const std::string& token, int timeout_s, const CancelCheck& cancelled) {
  ReceiveResult result;
  const Fd s = listenOn(addr, port, nnodes, "shard transfer");
  std::vector<bool> done(static_cast<size_t>(nnodes), false);
  int left = nnodes - 1;
  const auto deadline = SteadyClock::now() + std::chrono::seconds(timeout_s);
  while (left > 0 && SteadyClock::now() < deadline && !(cancelled && cancelled())) {
    pollfd p{s.get(), POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    sockaddr_in peer{};
    socklen_t peerLen = sizeof peer;
    const Fd c(::accept4(s.get(), reinterpret_cast<sockaddr*>(&peer), &peerLen, SOCK_CLOEXEC));
    if (c.get() < 0) continue;
    ioTimeout(c.get(), kHelloTimeoutS);
    const Hello hello = readHello(c.get(), token);
    if (!hello.complete || !hello.token_ok || hello.magic != kShardsHello) {
      refuse(c.get(), peerName(peer), hello, "shard upload", &result.refused);
      continue;
    }
    ioTimeout(c.get(), kIoTimeoutS);
    try {
      NodeShards got = receiveNode(c.get(), nnodes, dir, done);
      done[static_cast<size_t>(got.node_rank)] = true;
      --left;
      result.delivered.push_back(std::move(got));
    } catch (const std::exception& e) {
      result.errors.push_back(e.what());
    }
  }
  for (int n = 1; n < nnodes; ++n) {
    if (!done[static_cast<size_t>(n)]) result.missing.push_back(n);
  }
  std::sort(result.delivered.begin(), result.delivered.end(),
            [](const NodeShards& a, const NodeShards& b) { return a.node_rank < b.node_rank; });
  return result;
}

}  // namespace tracerun::launcher
