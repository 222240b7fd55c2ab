// The membership rendezvous of `tracerun --nnodes MIN:MAX` (elastic.cpp): a small line protocol
// over TCP on MASTER_ADDR:MASTER_PORT between node agents and one host. The agent that can bind
// that port hosts it (in a thread of its own) and joins it like any other agent. It decides rounds
// (a version, the members in join order, their node and base ranks, the world size and a fresh
// port for the program's store); an agent that joins, or whose connection ends (killed, gone),
// makes the host stop the round and form the next. Not the ranks' store (rank 0 of the program
// hosts that, as under torchrun) and not the trace's transfer: elastic jobs write their shards
// into the host's directory, on a file system every node sees (docs/launcher.md "Elastic jobs").
//
// Messages (one line each, space-separated words):
//   agent -> host  JOIN <token> <nproc> <seen> <restarts>
//                                                  once, first; seen: the last round the agent
//                                                  took part in (-1: none), restarts: the failed
//                                                  rounds restarted so far (both carried over when
//                                                  a surviving agent takes the rendezvous over)
//                  EXIT <version> <code>           its ranks of that round ended (0: all succeeded)
//   host -> agent  ROUND <version> <world> <nnodes> <node_rank> <base_rank> <port> <restarts> <dir>
//                  STOP <version> <reason...>       stop the ranks, answer EXIT
//                  END <code>                       the job is over
//
// When the host's agent dies, every other agent sees its connection end, stops its ranks and
// tries to bind the port again: the first that can hosts the next round (numbered after the last
// one any member saw), the others join it (elastic.cpp). Not handled: a network partition that
// keeps connections open, several hosts at once.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace tracerun::launcher {

struct ElasticPolicy {
  int min_nodes = 1;
  int max_nodes = 1;
  double join_wait_s = 3;  // with MIN..MAX-1 members: how long to wait for more before starting
  double timeout_s = 300;  // with fewer than MIN: how long to wait before giving up
  int max_restarts = 0;    // rounds after a failed rank (membership changes do not count)
  std::string addr;        // where the program's store port is chosen (the host's address)
  std::string shard_dir;   // the host's shard directory; round V writes into <dir>/attemptV
};

// The host: listens on addr:port when it can bind it (else binds() is false and nothing runs).
// Its thread ends when the job ends or this object goes.
class ElasticHost {
 public:
  ElasticHost(const std::string& addr, int port, const std::string& token, ElasticPolicy policy);
  ~ElasticHost();
  ElasticHost(const ElasticHost&) = delete;
  ElasticHost& operator=(const ElasticHost&) = delete;
  bool binds() const { return listen_fd_ >= 0; }

 private:
  void serve();
  int listen_fd_ = -1;
  int quit_[2] = {-1, -1};
  std::string token_;
  ElasticPolicy policy_;
  std::thread thread_;
};

// What an agent hears from the host.
struct ElasticMessage {
  enum Kind { kNone, kRound, kStop, kEnd, kClosed } kind = kNone;
  int version = 0, world = 0, nnodes = 0, node_rank = 0, base_rank = 0, port = 0, restarts = 0;
  int code = 0;
  std::string dir, reason;
};

// An agent's connection to the host.
class ElasticLink {
 public:
  // Connects (retrying until `timeout_s`) and sends JOIN. Throws std::runtime_error naming the
  // address when it cannot.
  ElasticLink(const std::string& addr, int port, const std::string& token, int nproc,
              double timeout_s, int seen = -1, int restarts = 0);
  ~ElasticLink();
  ElasticLink(const ElasticLink&) = delete;
  ElasticLink& operator=(const ElasticLink&) = delete;
  int fd() const { return fd_; }
  // Reads what is there (call when fd() is readable); the complete messages, in order.
  std::vector<ElasticMessage> read();
  void sendExit(int version, int code);

 private:
  int fd_ = -1;
  std::string buffer_;
};

}  // namespace tracerun::launcher
