// Ports for the tests' launcher jobs on loopback. A job given --master-port P uses P (the ranks'
// store) and P + 1 (the node agents' exchange, interpose/launcher/clock_sync.h). A port the kernel
// picks (bind to 0) lies in the ephemeral range, where the next outgoing connection of any
// process (the Gloo ranks of a test ctest runs beside this one) may take P + 1 before the launcher
// binds it: node 0's agent then stops at once and node 1's waits its 300 s for it (a ctest
// timeout, seen once under -j2). So the pair comes from below the ephemeral range, from a start
// the pid sets (test processes started together start apart), and both ports are bindable when
// it is returned. Not a reservation: another test could still bind them first, far less often.
// (launcher_elastic_test.cpp keeps its own blocks, from 20000 up.)
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>

namespace tracerun::testing {

// Can a listening socket bind 127.0.0.1:port now (nothing else holds it, listening or not)?
inline bool portBindable(int port) {
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return false;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(s);
  return ok;
}

// The first port of the kernel's ephemeral range (/proc/sys/net/ipv4/ip_local_port_range).
inline int ephemeralLow() {
  int low = 32768, high = 60999;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  return low;
}

// A port P with P + 1, both bindable now, in [10000, 20000): below the ephemeral range, and below
// the blocks launcher_elastic_test.cpp binds from 20000 on. Each call of a process starts past the
// pair the last one returned (two jobs of one test at once never share it).
inline int freePortPair() {
  constexpr int kFirst = 10000, kPairs = 5000;
  if (ephemeralLow() < kFirst + 2 * kPairs) {
    throw std::runtime_error("the ephemeral port range starts below 20000");
  }
  static int last = -1;  // the pair this process's last call returned
  const int start =
      last >= 0 ? last + 1 : static_cast<int>((static_cast<unsigned>(::getpid()) * 7919u) % kPairs);
  for (int i = 0; i < kPairs; ++i) {
    const int pair = (start + i) % kPairs;
    const int port = kFirst + 2 * pair;
    if (portBindable(port) && portBindable(port + 1)) {
      last = pair;
      return port;
    }
  }
  throw std::runtime_error("no free port pair in 10000..19999");
}

}  // namespace tracerun::testing
