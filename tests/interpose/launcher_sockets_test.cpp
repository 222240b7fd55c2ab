// What a launched job exposes on the network: the listening sockets of the launcher and its ranks
// (found through /proc/PID/fd and /proc/net/tcp{,6}) during a real gpttrain run, the one-node
// FileStore's private directory, node 0's agent's address and its job-token checks (end to end and
// through the real receiveShards/sendShards). Not the agents' clock or fault logic
// (launcher_group_test.cpp).
//
// Sections: socket listing · one node · several nodes · shard upload
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/child_process.h"
#include "../support/free_ports.h"
#include "clock_sync.h"
#include "rendezvous.h"

using namespace tracerun;

// ---- socket listing -----------------------------------------------------------------------------

namespace {

using testing::freePortPair;
using testing::readFile;

// One TCP socket of a process, as /proc/net/tcp{,6} has it.
struct Socket {
  std::string addr;  // the local address as inet_ntop writes it: "127.0.0.1", "0.0.0.0", "::"
  int port = 0;      // the local port
  pid_t pid = 0;
  bool listening = false;
};

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

bool isLoopback(const std::string& addr) {
  return addr.rfind("127.", 0) == 0 || addr == "::1" || addr.rfind("::ffff:127.", 0) == 0;
}

std::string describe(const std::vector<Socket>& ls) {
  std::string s;
  for (const auto& l : ls) {
    s += "pid " + std::to_string(l.pid) + (l.listening ? " listens on " : " connected from ") +
         l.addr + " port " + std::to_string(l.port) + "\n";
  }
  return s.empty() ? "(no TCP socket)\n" : s;
}

// The socket inodes among `pid`'s open files ("socket:[INODE]").
std::set<uint64_t> socketInodes(pid_t pid) {
  std::set<uint64_t> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = ::readdir(d)) {
    char target[128] = {};
    const std::string link = dir + "/" + e->d_name;
    const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    const std::string t(target, static_cast<size_t>(n));
    if (t.rfind("socket:[", 0) == 0) out.insert(std::strtoull(t.c_str() + 8, nullptr, 10));
  }
  ::closedir(d);
  return out;
}

// Every socket of /proc/net/tcp and tcp6 whose inode is among a pid's `inodes`.
std::vector<Socket> tcpSockets(const std::vector<std::pair<pid_t, std::set<uint64_t>>>& of) {
  std::vector<Socket> out;
  for (const bool v6 : {false, true}) {
    std::ifstream in(v6 ? "/proc/net/tcp6" : "/proc/net/tcp");
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string slot, local, remote, state, queues, timer, retr, uid, timeout;
      uint64_t inode = 0;
      f >> slot >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      pid_t owner = 0;
      for (const auto& [pid, inodes] : of) {
        if (inodes.count(inode) != 0) owner = pid;
      }
      if (owner == 0) continue;
      const auto colon = local.find(':');
      const std::string hex = local.substr(0, colon);
      char text[INET6_ADDRSTRLEN] = {};
      if (v6) {
        in6_addr a{};
        for (int w = 0; w < 4; ++w) {  // four 32-bit words, each printed in host order
          const uint32_t word = static_cast<uint32_t>(
              std::stoul(hex.substr(static_cast<size_t>(w) * 8, 8), nullptr, 16));
          std::memcpy(reinterpret_cast<char*>(&a) + w * 4, &word, 4);
        }
        ::inet_ntop(AF_INET6, &a, text, sizeof text);
      } else {
        in_addr a{};
        a.s_addr = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
        ::inet_ntop(AF_INET, &a, text, sizeof text);
      }
      out.push_back({text, std::stoi(local.substr(colon + 1), nullptr, 16), owner,
                     state == "0A"});  // TCP_LISTEN
    }
  }
  return out;
}

// `root` and every process descended from it.
std::vector<pid_t> processTree(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> parentOf;  // (pid, ppid)
  DIR* d = ::opendir("/proc");
  while (const dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parentOf.emplace_back(pid, ppid);
  }
  if (d != nullptr) ::closedir(d);
  std::vector<pid_t> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    for (const auto& [pid, ppid] : parentOf) {
      if (ppid == tree[i]) tree.push_back(pid);
    }
  }
  return tree;
}

std::vector<Socket> socketsOf(const std::vector<pid_t>& pids) {
  std::vector<std::pair<pid_t, std::set<uint64_t>>> of;
  for (pid_t p : pids) of.emplace_back(p, socketInodes(p));
  return tcpSockets(of);
}

std::vector<Socket> listenersOf(const std::vector<pid_t>& pids) {
  std::vector<Socket> out;
  for (const auto& s : socketsOf(pids)) {
    if (s.listening) out.push_back(s);
  }
  return out;
}

// NAME's value in `pid`'s environment, "<absent>" without it.
std::string environOf(pid_t pid, const std::string& name) {
  const std::string env = readFile("/proc/" + std::to_string(pid) + "/environ");
  const std::string key = name + "=";
  for (size_t at = 0; at < env.size();) {
    const size_t end = env.find('\0', at);
    const std::string entry = env.substr(at, end == std::string::npos ? end : end - at);
    if (entry.rfind(key, 0) == 0) return entry.substr(key.size());
    if (end == std::string::npos) break;
    at = end + 1;
  }
  return "<absent>";
}

const std::string& scratch() {
  static const std::string dir = [] {
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    ::unsetenv(launcher::kJobTokenVariable);
    return testing::processScratchDir("tracerun_sockets");
  }();
  return dir;
}

struct Child : testing::Child {
  explicit Child(const std::vector<std::string>& argv) : testing::Child(argv, scratch()) {}
};

bool waitForOutput(Child& child, const std::string& what) {
  while (!contains(child.out(), what)) {
    if (!child.running()) return contains(child.out(), what);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A listening socket of this test process on addr:0; returns its port.
struct OwnListener {
  int fd = -1;
  int port = 0;
  explicit OwnListener(uint32_t addr) {
    fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(addr);
    ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
    ::listen(fd, 1);
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~OwnListener() { ::close(fd); }
  OwnListener(const OwnListener&) = delete;
  OwnListener& operator=(const OwnListener&) = delete;
};

}  // namespace

TEST_CASE("the socket listing finds a process's listeners and tells loopback from the rest",
          "[launcher_sockets]") {
  const OwnListener any(INADDR_ANY), loop(INADDR_LOOPBACK);
  const auto ls = listenersOf({::getpid()});
  INFO(describe(ls));
  auto find = [&](int port) {
    return std::find_if(ls.begin(), ls.end(), [&](const Socket& l) { return l.port == port; });
  };
  REQUIRE(find(any.port) != ls.end());
  REQUIRE(find(loop.port) != ls.end());
  CHECK(find(any.port)->addr == "0.0.0.0");
  CHECK_FALSE(isLoopback(find(any.port)->addr));
  CHECK(find(loop.port)->addr == "127.0.0.1");
  CHECK(isLoopback(find(loop.port)->addr));
}

// ---- one node -----------------------------------------------------------------------------------

#ifdef GPTTRAIN_BIN
TEST_CASE(
    "one node: gpttrain's ranks rendezvous through a private FileStore, nothing listens "
    "beyond loopback",
    "[launcher_sockets]") {
  const std::string db = scratch() + "/gpt.db";
  // Far more steps than it will run: the test stops it once the groups are built and training.
  Child c({TRACERUN_BIN,
           "-q",
           "-o",
           db,
           "--nproc-per-node",
           "2",
           "--status",
           "off",
           "--",
           GPTTRAIN_BIN,
           "--layers",
           "2",
           "--hidden",
           "32",
           "--heads",
           "4",
           "--seq-len",
           "16",
           "--vocab",
           "64",
           "--dropout",
           "0",
           "--global-batch",
           "8",
           "--micro-batch-size",
           "2",
           "--seed",
           "7",
           "--tp",
           "2",
           "--warmup",
           "2",
           "--steps",
           "1000000"});
  // Rank 0 prints a step only after both ranks rendezvoused and ran collectives in it.
  REQUIRE(waitForOutput(c, "[rank 0] step 2/"));
  const std::vector<pid_t> job = processTree(c.pid());
  const auto sockets = socketsOf(job);
  std::vector<pid_t> ranks;
  for (pid_t p : job) {
    if (environOf(p, "RANK") != "<absent>") ranks.push_back(p);
  }
  REQUIRE(ranks.size() == 2);
  const std::string port = environOf(ranks[0], "MASTER_PORT");
  const std::string store = environOf(ranks[0], launcher::kStoreFileVariable);
  const std::string store1 = environOf(ranks[1], launcher::kStoreFileVariable);
  const std::string storeDir = store.substr(0, store.rfind('/'));
  struct stat dirStat {};
  const bool dirThere = ::stat(storeDir.c_str(), &dirStat) == 0;
  const bool fileThere = testing::fileExists(store);
  ::kill(c.pid(), SIGTERM);
  const auto r = c.wait();
  INFO(describe(sockets) << "MASTER_PORT=" << port << "\nstore file: " << store << "\n"
                         << r.describe());

  std::set<pid_t> connected;
  for (const auto& s : sockets) {
    INFO("pid " << s.pid << ": " << s.addr << ":" << s.port);
    CHECK(isLoopback(s.addr));  // listening or connected: nothing on another interface
    if (s.listening) CHECK(std::to_string(s.port) != port);  // no TCPStore on MASTER_PORT
    if (!s.listening) connected.insert(s.pid);
  }
  // Both ranks' Gloo connections (127.0.0.1) are in the listing: it saw the job's sockets.
  CHECK(connected.count(ranks[0]) == 1);
  CHECK(connected.count(ranks[1]) == 1);
  REQUIRE(store != "<absent>");
  CHECK(store1 == store);
  CHECK(fileThere);
  REQUIRE(dirThere);
  CHECK((dirStat.st_mode & 0777) == 0700);
  CHECK(dirStat.st_uid == ::getuid());
  CHECK(r.code == 128 + SIGTERM);
  CHECK_FALSE(testing::fileExists(storeDir));  // removed with the launcher's end
}
#endif

TEST_CASE("one node: every attempt gets its own store file, the directory goes after a fault",
          "[launcher_sockets]") {
  const std::string db = scratch() + "/restart.db";
  const testing::ProcessResult r = Child({TRACERUN_BIN,
                                          "-q",
                                          "-o",
                                          db,
                                          "--nproc-per-node",
                                          "2",
                                          "--status",
                                          "off",
                                          "--max-restarts",
                                          "1",
                                          "--",
                                          WORKER_BIN,
                                          "--steps",
                                          "3",
                                          "--fail-rank",
                                          "1",
                                          "--fail-step",
                                          "2",
                                          "--fail-code",
                                          "3",
                                          "--fail-every-attempt"})
                                       .wait();
  INFO(r.describe());
  CHECK(r.code == 3);
  // Rank 1 fails every attempt at step 2, so it always prints its environment first; rank 0 may be
  // stopped before it prints anything in the restart (seen once on a loaded machine).
  const std::string key = "[rank 1] env TRACERUN_STORE_FILE=";
  std::vector<std::string> files;
  for (auto at = r.out.find(key); at != std::string::npos; at = r.out.find(key, at + 1)) {
    const auto end = r.out.find('\n', at);
    files.push_back(r.out.substr(at + key.size(), end - at - key.size()));
  }
  REQUIRE(files.size() == 2);  // attempt 0 and its restart
  CHECK(files[0] != files[1]);
  const std::string dir = files[0].substr(0, files[0].rfind('/'));
  CHECK(files[1].substr(0, files[1].rfind('/')) == dir);
  CHECK(contains(dir, "/tracerun-store."));
  CHECK_FALSE(testing::fileExists(dir));
}

// ---- several nodes ------------------------------------------------------------------------------

namespace {

// The hello that opens a connection to node 0's agent (clock_sync.cpp, docs/launcher.md):
// a magic word, the token's length, its bytes; the answer is one int64 (-2: refused).
constexpr int64_t kClockHello = 0x6b636f6c63617274;
constexpr int64_t kRefused = -2;

int64_t rawHello(int port, int64_t magic, const std::string& token) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sa.sin_port = htons(static_cast<uint16_t>(port));
  int64_t answer = 0;
  if (::connect(s, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) {
    const int64_t head[2] = {magic, static_cast<int64_t>(token.size())};
    if (::write(s, head, sizeof head) == sizeof head &&
        ::write(s, token.data(), token.size()) == static_cast<ssize_t>(token.size()) &&
        ::read(s, &answer, sizeof answer) != sizeof answer) {
      answer = 0;
    }
  }
  ::close(s);
  return answer;
}

std::vector<std::string> nodeArgs(const std::string& db, int port, int nodeRank,
                                  const std::string& token) {
  return {TRACERUN_BIN,
          "-o",
          db,
          "--nproc-per-node",
          "1",
          "--nnodes",
          "2",
          "--node-rank",
          std::to_string(nodeRank),
          "--master-addr",
          "127.0.0.1",
          "--master-port",
          std::to_string(port),
          "--job-token",
          token,
          "--status",
          "off",
          "--",
          WORKER_BIN,
          "--steps",
          "2"};
}

}  // namespace

TEST_CASE("several nodes: node 0's agent listens on MASTER_ADDR only and refuses a wrong token",
          "[launcher_sockets]") {
  const int port = freePortPair();
  const std::string out0 = scratch() + "/token0.db";
  Child node0(nodeArgs(out0, port, 0, "the-right-token"));
  // Node 0's agent serves the clock exchange before any rank starts: wait for its listener.
  std::vector<Socket> agent;
  while (agent.empty() && node0.running()) {
    for (const auto& l : listenersOf({node0.pid()})) {
      if (l.port == port + 1) agent.push_back(l);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  INFO(describe(agent));
  REQUIRE(agent.size() == 1);
  CHECK(agent[0].addr == "127.0.0.1");  // MASTER_ADDR, not 0.0.0.0

  // A peer without the job's token gets "refused", whatever it asks for.
  CHECK(rawHello(port + 1, kClockHello, "a-wrong-token") == kRefused);
  const auto wrong = Child(nodeArgs(scratch() + "/token1w.db", port, 1, "another-token")).wait();
  INFO(wrong.describe());
  CHECK(wrong.code == 1);
  CHECK(contains(wrong.err, "refused this node's job token"));

  // The right token: the job runs as before.
  const auto r1 = Child(nodeArgs(scratch() + "/token1.db", port, 1, "the-right-token")).wait();
  const auto r0 = node0.wait();
  INFO(r0.describe() << "\n" << r1.describe());
  CHECK(r1.code == 0);
  CHECK(r0.code == 0);
  CHECK(contains(r0.err, "refused a connection from 127.0.0.1:"));
  CHECK(contains(r0.err, "(clock exchange): wrong job token"));
  CHECK(contains(r0.err, "node 0's agent refused 2 connection(s) without this job's token"));
  CHECK(contains(r0.err, "node 1: 1 shard(s)"));  // node 1's upload, with the token, arrived
}

TEST_CASE("several nodes: a job without a token is a usage error", "[launcher_sockets]") {
  const std::string db = scratch() + "/notoken.db";
  auto args = nodeArgs(db, freePortPair(), 0, "");
  args.erase(std::find(args.begin(), args.end(), "--job-token"));
  args.erase(std::find(args.begin(), args.end(), ""));
  const auto r = Child(args).wait();
  INFO(r.describe());
  CHECK(r.code == 2);
  CHECK(contains(r.err, "--nnodes 2 needs a job token"));
  CHECK_FALSE(testing::fileExists(db + ".shards"));  // checked before anything was made
}

TEST_CASE("several nodes: the agents' port held by another program is one line naming it",
          "[launcher_sockets]") {
  const OwnListener held(INADDR_LOOPBACK);  // MASTER_PORT + 1, listened on by this test
  const std::string db = scratch() + "/heldport.db";
  const auto r = Child(nodeArgs(db, held.port - 1, 0, "the-right-token")).wait();
  INFO(r.describe());
  CHECK(r.code != 0);
  CHECK(contains(r.err, "cannot listen on 127.0.0.1:" + std::to_string(held.port) +
                            ": Address already in use (another program holds it: tracerun's "
                            "agents listen on MASTER_PORT + 1; choose another MASTER_PORT or "
                            "--master-port)"));
}

// ---- shard upload -------------------------------------------------------------------------------

TEST_CASE("shard upload: a wrong token is refused and counted, the right one delivers",
          "[launcher_sockets]") {
  const int port = freePortPair();
  const std::string dir = scratch() + "/upload";
  ::mkdir(dir.c_str(), 0755);
  ::mkdir((dir + "/received").c_str(), 0755);
  const std::string shard = dir + "/rank1.db";
  std::ofstream(shard) << "not a real shard, only bytes to carry";

  launcher::ReceiveResult got;
  std::thread node0([&] {
    got = launcher::receiveShards("127.0.0.1", port, 2, dir + "/received", "job-token-A", 60,
                                  nullptr);
  });
  launcher::NodeShards mine;
  mine.node_rank = 1;
  mine.paths = {shard};
  std::string refusal;
  try {
    launcher::sendShards("127.0.0.1", port, mine, "job-token-B", 60, nullptr);
  } catch (const std::exception& e) {
    refusal = e.what();
  }
  const int64_t bytes = launcher::sendShards("127.0.0.1", port, mine, "job-token-A", 60, nullptr);
  node0.join();
  INFO(refusal);
  CHECK(contains(refusal, "refused this node's job token"));
  CHECK(bytes == static_cast<int64_t>(readFile(shard).size()));
  REQUIRE(got.refused.size() == 1);
  CHECK(got.refused[0].rfind("127.0.0.1:", 0) == 0);
  REQUIRE(got.delivered.size() == 1);
  CHECK(got.delivered[0].node_rank == 1);
  CHECK(readFile(dir + "/received/node1/rank1.db") == readFile(shard));
}

TEST_CASE("job tokens compare equal only when identical", "[launcher_sockets]") {
  using launcher::sameJobToken;
  CHECK(sameJobToken("abc", "abc"));
  CHECK_FALSE(sameJobToken("abc", "abd"));
  CHECK_FALSE(sameJobToken("abc", "ab"));
  CHECK_FALSE(sameJobToken("abc", "abcd"));
  CHECK_FALSE(sameJobToken("abc", std::string("abc\0", 4)));
  CHECK_FALSE(sameJobToken("", ""));  // no token is never the job's
  const std::string a = launcher::generateJobToken(), b = launcher::generateJobToken();
  CHECK(a.size() == 32);
  CHECK(a != b);
}
