// The launcher agents' exchanges across hosts (--nnodes > 1), both on node 0's MASTER_PORT + 1:
// - clock offsets: node 0's agent answers time requests; every other agent asks several times and
//   keeps the estimate from the round trip with the smallest RTT (NTP's rule). Not used on one
//   host: all ranks there share CLOCK_MONOTONIC (offset 0).
// - the shard transfer at the end: every other agent sends its ranks' shards to node 0's agent
//   (chunked, a size header and a checksum per file), which merges all nodes into one trace.
// - the fault link: every other agent keeps its clock connection open while the ranks run; both
//   sides send a fault (which rank on which node failed, how), a stop (a signal) or "done" (ranks
//   ended well), and node 0 relays a fault to every other node. A link that breaks before "done"
//   means that agent is gone. With --max-restarts, node 0 then tells every node whether and with
//   which attempt number to restart.
// Every connection opens with a hello carrying the job token (--job-token); node 0's agent refuses
// and counts one without the job's token. Node 0 listens on MASTER_ADDR only. No libtorch, no c10d.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tracerun::launcher {

// One message on the fault link (4 x int64, host byte order like the clock exchange).
struct AgentMessage {
  // After a failed attempt with --max-restarts: node K says its ranks have all ended (kEnded),
  // node 0 answers with the next attempt's number (kRestart) or kEnd.
  enum Kind : int64_t { kFault = 1, kStop = 2, kDone = 3, kEnded = 4, kRestart = 5, kEnd = 6 };
  int64_t kind = kDone;
  int64_t node = 0;   // the node where it happened
  int64_t rank = -1;  // kFault: the rank that failed
  int64_t value = 0;  // kFault: its wait status; kStop: the signal
};

// The connection between node 0's agent and node K's agent while the ranks run (owns the socket).
class AgentLink {
 public:
  AgentLink() = default;
  AgentLink(int fd, int node) : fd_(fd), node_(node) {}
  ~AgentLink() { close(); }
  AgentLink(AgentLink&& other) noexcept : fd_(other.fd_), node_(other.node_) { other.fd_ = -1; }
  AgentLink& operator=(AgentLink&& other) noexcept;
  AgentLink(const AgentLink&) = delete;
  AgentLink& operator=(const AgentLink&) = delete;

  int fd() const { return fd_; }
  int node() const { return node_; }  // the peer's node rank
  bool open() const { return fd_ >= 0; }
  // False when the peer is gone (never raises SIGPIPE).
  bool send(const AgentMessage& m) const;
  // Blocks until one message came; false when the connection broke or closed.
  bool receive(AgentMessage* m) const;
  void close();

 private:
  int fd_ = -1;
  int node_ = -1;
};

struct ClockEstimate {
  int64_t offset_ns = 0;  // this agent's clock minus node 0's
  int64_t rtt_ns = 0;     // the round trip the estimate came from: |error| <= rtt_ns / 2
  int rounds = 0;
};

// Whether `host` is a name (not an IPv4 literal) that resolves here to a loopback address:
// Debian's /etc/hosts maps a host's own name to 127.0.1.1, so a rendezvous host name can be
// loopback on its own host and a real address everywhere else. False when it does not resolve.
bool nameResolvesToLoopback(const std::string& host);

// This agent's clock: CLOCK_MONOTONIC plus TRACERUN_TEST_CLOCK_SKEW_NS (tests inject an offset).
int64_t agentClockNs();

// Returns true when the caller wants the wait abandoned (e.g. a second Ctrl-C).
using CancelCheck = std::function<bool()>;

// Node 0: listens on addr:port (that address only), serves `clients` agents that present `token`
// (each until it closes or turns its connection into a fault link) and returns the links, one per
// node that asked for one. A connection without the token is refused with one stderr line naming
// the peer, and its address appended to `refused` (when given). Throws std::runtime_error on a
// socket error or when not all clients came within timeout_s. When `cancelled` says so (checked
// at least every 200 ms while no client is being served) it returns the links it has, no error.
// `run_label` is what a queryRunLabel client is told (an outer job's round: outer_clock.h).
std::vector<AgentLink> serveClock(const std::string& addr, int port, int clients, int timeout_s,
                                  const std::string& token,
                                  std::vector<std::string>* refused = nullptr,
                                  const CancelCheck& cancelled = {}, int64_t run_label = 0);

// Other nodes: asks node 0's serveClock (retrying until timeout_s, presenting `token`) for its
// run label. Throws std::runtime_error when it cannot be reached, refuses the token, or answers
// something else.
int64_t queryRunLabel(const std::string& addr, int port, int timeout_s, const std::string& token);

// Other nodes: connects to addr:port (retrying until timeout_s), presents `token`, does `rounds`
// round trips. With `link`, the connection then becomes this node's (node_rank's) fault link to
// node 0. Throws std::runtime_error when node 0 cannot be reached or refuses the token, or when a
// connected node 0 stays silent for 10 s (a stopped agent never blocks the caller for longer).
// With `refused_means_left` a refused connection throws at once instead of being retried: for an
// exchange after the server was known to listen, when a refusal means it has left.
ClockEstimate measureClock(const std::string& addr, int port, int rounds, int timeout_s,
                           const std::string& token, int node_rank = 0, AgentLink* link = nullptr,
                           bool refused_means_left = false);

// ---- shard transfer (node K -> node 0) ----

// One node's delivery: its shards (on node 0's disk after receiveShards) and its clock offset.
struct NodeShards {
  int node_rank = 0;
  int64_t clock_offset_ns = 0;  // that node's clock minus node 0's, to apply when merging
  std::vector<std::string> paths;
  int64_t bytes = 0;
};

// Node K: sends `shard` paths (files named rankR.db; one in a directory attemptN arrives as
// attemptN/rankR.db under node 0's dir/nodeK/) to node 0's agent at addr:port with `token`,
// retrying the connection until node 0 is ready or timeout_s passes. Returns the bytes sent once
// node 0 has confirmed every file's size and checksum; throws std::runtime_error saying why
// otherwise (at once when node 0 refuses the token).
int64_t sendShards(const std::string& addr, int port, const NodeShards& shards,
                   const std::string& token, int timeout_s, const CancelCheck& cancelled);

struct ReceiveResult {
  std::vector<NodeShards> delivered;  // in node order
  std::vector<int> missing;           // nodes that delivered nothing valid
  std::vector<std::string> errors;    // one line per failed delivery
  std::vector<std::string> refused;   // the peers refused for lack of the token (one line each)
};

// Node 0: listens on addr:port (that address only), takes one delivery from each of nodes
// 1..nnodes-1 that presents `token` into dir/nodeK/ until all came, timeout_s passed or
// `cancelled` says so.
ReceiveResult receiveShards(const std::string& addr, int port, int nnodes, const std::string& dir,
                            const std::string& token, int timeout_s, const CancelCheck& cancelled);

// A free TCP port on addr (bind port 0, read it, close): the rendezvous port when none is given.
int freePort(const std::string& addr);

}  // namespace tracerun::launcher
