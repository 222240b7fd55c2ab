// Clock offsets between launcher agents on different hosts (--nnodes > 1): node 0's agent answers
// time requests on a TCP port; every other agent asks several times and keeps the estimate from the
// round trip with the smallest RTT (NTP's rule). Not used on one host: all ranks there share
// CLOCK_MONOTONIC (offset 0). No libtorch, no c10d.
#pragma once

#include <cstdint>
#include <string>

namespace tracerun::launcher {

struct ClockEstimate {
  int64_t offset_ns = 0;  // this agent's clock minus node 0's
  int64_t rtt_ns = 0;     // the round trip the estimate came from: |error| <= rtt_ns / 2
  int rounds = 0;
};

// This agent's clock: CLOCK_MONOTONIC plus TRACERUN_TEST_CLOCK_SKEW_NS (tests inject an offset).
int64_t agentClockNs();

// Node 0: listens on addr:port, serves `clients` agents (each until it closes) and returns.
// Throws std::runtime_error on a socket error or when not all clients came within timeout_s.
void serveClock(const std::string& addr, int port, int clients, int timeout_s);

// Other nodes: connects to addr:port (retrying until timeout_s), does `rounds` round trips.
// Throws std::runtime_error when node 0 cannot be reached.
ClockEstimate measureClock(const std::string& addr, int port, int rounds, int timeout_s);

// A free TCP port on addr (bind port 0, read it, close): the rendezvous port when none is given.
int freePort(const std::string& addr);

}  // namespace tracerun::launcher
