// The agents' clock exchange (clock_sync.h): 8-byte requests, 8-byte answers (node 0's clock in
// ns, little-endian host order: agents of one job run the same build). No authentication and no
// encryption: it runs on the job's own network, like the rendezvous store.
#include "clock_sync.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <stdexcept>
#include <thread>

namespace tracerun::launcher {

namespace {

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

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

}  // namespace

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

void serveClock(const std::string& addr, int port, int clients, int timeout_s) {
  const Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.get() < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa = resolve(addr, port);
  sa.sin_addr.s_addr = htonl(INADDR_ANY);  // other hosts connect to addr's interface
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::listen(s.get(), clients) != 0) {
    throw std::runtime_error("clock exchange: cannot listen on port " + std::to_string(port) +
                             ": " + std::strerror(errno));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int served = 0; served < clients; ++served) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{s.get(), POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      throw std::runtime_error("clock exchange: only " + std::to_string(served) + " of " +
                               std::to_string(clients) + " node agents connected within " +
                               std::to_string(timeout_s) + " s");
    }
    const Fd c(::accept4(s.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (c.get() < 0) {
      --served;
      continue;
    }
    noDelay(c.get());
    int64_t request = 0;
    while (readAll(c.get(), &request, sizeof request)) {
      const int64_t now = agentClockNs();
      if (!writeAll(c.get(), &now, sizeof now)) break;
    }
  }
}

ClockEstimate measureClock(const std::string& addr, int port, int rounds, int timeout_s) {
  const sockaddr_in sa = resolve(addr, port);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    const Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (::connect(s.get(), reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) {
      noDelay(s.get());
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
      return best;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error("clock exchange: cannot reach node 0's agent at " + addr + ":" +
                               std::to_string(port) + ": " + std::strerror(errno));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace tracerun::launcher
