// End-to-end: `tracerun -o X -- PROGRAM` as one rank of a job another launcher started
// (interpose/launcher/outer_launch.cpp). Ranks are started by hand with the environment torchrun,
// srun or mpirun sets (their documented variables), and by Debian's real torchrun; checked against
// what the programs themselves printed (steps, CLOCK_MONOTONIC readings, losses) and against
// gpttrain under tracerun's own launcher. No libtorch in this binary; no timed assertions.
//
// Sections: running ranks · torchrun · SLURM and MPI · clocks across nodes · merge once · faults ·
// gpttrain
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/child_process.h"
#include "../support/free_ports.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

// ---- running ranks ------------------------------------------------------------------------------

namespace {

using Result = testing::ProcessResult;
using testing::freePortPair;
using testing::readFile;

const std::string& scratch() {
  static const std::string dir = [] {
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return testing::processScratchDir("tracerun_outer");
  }();
  return dir;
}

struct Child : testing::Child {
  explicit Child(const std::vector<std::string>& argv) : testing::Child(argv, scratch()) {}
};

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// A job id nobody else uses (this test process's pid and a counter).
std::string uniqueId(const std::string& stem) {
  static int n = 0;
  return stem + std::to_string(::getpid()) + "x" + std::to_string(++n);
}

// One rank: `env VARS... tracerun [-q] -o db -- program`.
std::vector<std::string> rankArgv(const std::vector<std::string>& vars, const std::string& db,
                                  const std::vector<std::string>& program, bool quiet = true) {
  std::vector<std::string> argv = {"/usr/bin/env"};
  argv.insert(argv.end(), vars.begin(), vars.end());
  argv.insert(argv.end(), {TRACERUN_BIN, "-o", db});
  if (quiet) argv.push_back("-q");
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

// The environment torchrun gives rank `rank` of `world` on one node.
std::vector<std::string> torchrunVars(const std::string& runId, int rank, int world) {
  return {"RANK=" + std::to_string(rank),
          "WORLD_SIZE=" + std::to_string(world),
          "LOCAL_RANK=" + std::to_string(rank),
          "LOCAL_WORLD_SIZE=" + std::to_string(world),
          "GROUP_RANK=0",
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=29999",
          "TORCHELASTIC_RUN_ID=" + runId,
          "TORCHELASTIC_RESTART_COUNT=0"};
}

// Starts every rank of one job at once and waits for all.
std::vector<Result> runJob(const std::vector<std::vector<std::string>>& ranks) {
  std::vector<std::unique_ptr<Child>> children;
  for (const auto& argv : ranks) children.push_back(std::make_unique<Child>(argv));
  std::vector<Result> results;
  for (auto& c : children) results.push_back(c->wait());
  return results;
}

std::string describe(const std::vector<Result>& results) {
  std::string text;
  for (size_t i = 0; i < results.size(); ++i) {
    text += "--- rank " + std::to_string(i) + ": " + results[i].describe() + "\n";
  }
  return text;
}

std::vector<std::string> worker(std::vector<std::string> args) {
  args.insert(args.begin(), WORKER_BIN);
  return args;
}

int64_t countSpans(const trace::TraceReader& r, int rank, const std::string& name) {
  int64_t n = 0;
  for (const auto& t : r.tracks()) {
    if (t.rank != rank) continue;
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) { n += r.str(s.name) == name; });
  }
  return n;
}

std::set<int> ranksOf(const trace::TraceReader& r) {
  std::set<int> out;
  for (const auto& k : r.ranks()) out.insert(k.rank);
  return out;
}

// "env NAME=VALUE" as the worker prints it.
std::string envOf(const std::string& out, const std::string& name) {
  const std::string key = "env " + name + "=";
  const auto at = out.find(key);
  if (at == std::string::npos) return "<absent>";
  return out.substr(at + key.size(), out.find('\n', at) - at - key.size());
}

// How many times a rank printed the end-of-run summary (one per merge).
int summaries(const std::vector<Result>& results) {
  int n = 0;
  for (const auto& r : results) {
    for (auto at = r.err.find("tracerun: trace written to"); at != std::string::npos;
         at = r.err.find("tracerun: trace written to", at + 1)) {
      ++n;
    }
  }
  return n;
}

// Every rank's "step" spans lie between the CLOCK_MONOTONIC readings it printed around them
// (worker --print-clock): the merged trace puts all ranks on one axis (1 ms slack for the
// capture's TSC clock fitted to CLOCK_MONOTONIC).
// `shift`: the clock offset the merge subtracted from this rank's times (0 on rank 0's node).
void checkStepsOnRealClock(const trace::TraceReader& merged, int rank, const std::string& out,
                           int64_t shift = 0) {
  const int64_t origin = std::atoll(merged.meta("origin_ns").c_str());
  std::map<int, std::pair<int64_t, int64_t>> truth;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    int step = 0;
    long long begin = 0, end = 0;
    if (std::sscanf(line.c_str(), "clock step %d %lld %lld", &step, &begin, &end) == 3) {
      truth[step] = {begin, end};
    }
  }
  std::vector<trace::SpanRow> steps;
  for (const auto& t : merged.tracks()) {
    if (t.rank != rank) continue;
    merged.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (merged.str(s.name) == "step") steps.push_back(s);
    });
  }
  REQUIRE(steps.size() == truth.size());
  std::sort(steps.begin(), steps.end(),
            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  const int64_t slack = 1000000;
  for (size_t i = 0; i < steps.size(); ++i) {
    INFO("rank " << rank << " step " << i + 1);
    const auto [begin, end] = truth.at(static_cast<int>(i + 1));
    CHECK(steps[i].start_ns + origin + shift >= begin - slack);
    CHECK(steps[i].start_ns + steps[i].dur_ns + origin + shift <= end + slack);
  }
}

}  // namespace

// ---- torchrun -----------------------------------------------------------------------------------

TEST_CASE("outer torchrun environment by hand: one merged trace, ranks on one clock",
          "[launcher_outer]") {
  const std::string db = scratch() + "/torchrun_env.db";
  const std::string id = uniqueId("t");
  const auto results =
      runJob({rankArgv(torchrunVars(id, 0, 2), db, worker({"--steps", "3", "--print-clock"})),
              rankArgv(torchrunVars(id, 1, 2), db, worker({"--steps", "3", "--print-clock"}))});
  INFO(describe(results));
  REQUIRE(results[0].code == 0);
  REQUIRE(results[1].code == 0);
  CHECK_FALSE(testing::fileExists(db + ".shards"));  // merged, nothing left behind
  const auto merged = trace::TraceReader::open(db);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
  for (const auto& k : merged.ranks()) CHECK(k.clock_offset_ns == 0);  // one host
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(countSpans(merged, rank, "step") == 3);
    checkStepsOnRealClock(merged, rank, results[static_cast<size_t>(rank)].out);
  }
  // torchrun set everything: the program sees its values unchanged.
  CHECK(envOf(results[1].out, "MASTER_PORT") == "29999");
  CHECK(envOf(results[1].out, "RANK") == "1");
}

TEST_CASE("outer torchrun with --ranks: only the listed rank is in the one trace",
          "[launcher_outer]") {
  const std::string db = scratch() + "/torchrun_ranks.db";
  const std::string id = uniqueId("r");
  std::vector<std::vector<std::string>> argvs;
  for (int rank = 0; rank < 3; ++rank) {
    auto argv = rankArgv(torchrunVars(id, rank, 3), db, worker({"--steps", "2"}));
    argv.insert(std::find(argv.begin(), argv.end(), std::string("--")), {"--ranks", "1"});
    argvs.push_back(argv);
  }
  const auto results = runJob(argvs);
  INFO(describe(results));
  for (const auto& r : results) REQUIRE(r.code == 0);
  CHECK_FALSE(testing::fileExists(db + ".shards"));
  const auto merged = trace::TraceReader::open(db);
  CHECK(ranksOf(merged) == std::set<int>{1});
  CHECK(countSpans(merged, 1, "step") == 2);
  CHECK(merged.meta("traced_ranks") == "1");
  CHECK(merged.meta("world_size") == "3");
  // A rank outside the outer launcher's world: refused, nothing run.
  auto badArgv = rankArgv(torchrunVars(uniqueId("b"), 0, 2), db + ".bad", worker({}));
  badArgv.insert(std::find(badArgv.begin(), badArgv.end(), std::string("--")), {"--ranks", "0,2"});
  const Result bad = Child(badArgv).wait();
  CHECK(bad.code == 2);
  CHECK(bad.err == "tracerun: --ranks 0,2: rank 2 is not in a world of 2 ranks\n");
}

TEST_CASE("outer torchrun restart: the run before it is kept beside the output, not replaced",
          "[launcher_outer]") {
  // torchrun --max-restarts runs the job again after a failure; each run merges over -o, so the
  // failed run (the one to read) was replaced by the next. Run 0 of 2 steps, then restart 1 of 3.
  const std::string db = scratch() + "/torchrun_restart.db";
  const std::string id = uniqueId("r");
  const Result first = Child(rankArgv(torchrunVars(id, 0, 1), db, worker({"--steps", "2"}))).wait();
  INFO(first.describe());
  REQUIRE(first.code == 0);
  CHECK(envOf(first.out, "TRACERUN_RESTART") == "");
  auto restarted = torchrunVars(id, 0, 1);
  restarted.back() = "TORCHELASTIC_RESTART_COUNT=1";
  const Result second = Child(rankArgv(restarted, db, worker({"--steps", "3"}))).wait();
  INFO(second.describe());
  REQUIRE(second.code == 0);
  CHECK(envOf(second.out, "TRACERUN_RESTART") == "1");  // the capture marks the restart
  const std::string kept = db + ".before-restart1";
  CHECK(contains(second.err,
                 "tracerun: " + db + ", the run before restart 1, is kept as " + kept + "\n"));
  REQUIRE(testing::fileExists(kept));
  CHECK(countSpans(trace::TraceReader::open(kept), 0, "step") == 2);
  CHECK(countSpans(trace::TraceReader::open(db), 0, "step") == 3);
}

#ifdef TRACERUN_TEST_PYTHON
TEST_CASE("real torchrun --no-python tracerun: a torch.distributed Gloo program, one trace",
          "[launcher_outer]") {
  const std::string db = scratch() + "/torchrun_real.db";
  // Debian's torchrun 1.13 on Python 3.11 fails with the default --redirects/--tee 0
  // (Std.from_str('0') is None there); 2 keeps the output on the terminal.
  const Result r = Child({TRACERUN_TEST_PYTHON,
                          "-m",
                          "torch.distributed.run",
                          "--standalone",
                          "--nproc_per_node",
                          "2",
                          "--redirects",
                          "2",
                          "--tee",
                          "2",
                          "--log_dir",
                          scratch() + "/torchrun_logs",
                          "--no_python",
                          TRACERUN_BIN,
                          "-q",
                          "-o",
                          db,
                          "--",
                          TRACERUN_TEST_PYTHON,
                          OUTER_DDP_SCRIPT})
                       .wait();
  INFO(r.describe());
  REQUIRE(r.code == 0);
  // The all-reduce really ran across the two ranks: 1 + 2 on both.
  CHECK(contains(r.out, "rank 0 sum 3.0"));
  CHECK(contains(r.out, "rank 1 sum 3.0"));
  const auto merged = trace::TraceReader::open(db);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(countSpans(merged, 0, "step") == 2);
  CHECK(countSpans(merged, 1, "step") == 2);
  CHECK_FALSE(testing::fileExists(db + ".shards"));
}
#endif

// ---- SLURM and MPI ------------------------------------------------------------------------------

TEST_CASE("outer srun and mpirun environments by hand: the torchrun variables are filled in",
          "[launcher_outer]") {
  struct Case {
    const char* what;
    std::vector<std::string> rank0, rank1;
    std::string masterAddr;
  };
  const std::string job = uniqueId("");
  const std::vector<Case> cases = {
      {"srun",
       {"SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_NUM_TASKS=2", "SLURM_LOCALID=0",
        "SLURM_NODEID=0", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0",
        "SLURM_STEP_NODELIST=localhost,n[2-3]", "SLURM_STEP_TASKS_PER_NODE=2"},
       {"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_STEP_NUM_TASKS=2", "SLURM_LOCALID=1",
        "SLURM_NODEID=0", "SLURM_JOB_ID=" + job, "SLURM_STEP_ID=0",
        "SLURM_STEP_NODELIST=localhost,n[2-3]", "SLURM_STEP_TASKS_PER_NODE=2"},
       "localhost"},
      {"mpirun",
       {"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=0",
        "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_ess_base_jobid=" + job},
       {"OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_LOCAL_RANK=1",
        "OMPI_COMM_WORLD_LOCAL_SIZE=2", "OMPI_MCA_ess_base_jobid=" + job},
       "127.0.0.1"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    const std::string db = scratch() + "/outer_" + c.what + ".db";
    const auto results = runJob({rankArgv(c.rank0, db, worker({"--steps", "2"})),
                                 rankArgv(c.rank1, db, worker({"--steps", "2"}))});
    INFO(describe(results));
    REQUIRE(results[0].code == 0);
    REQUIRE(results[1].code == 0);
    for (int rank = 0; rank < 2; ++rank) {
      const std::string& out = results[static_cast<size_t>(rank)].out;
      CHECK(envOf(out, "RANK") == std::to_string(rank));
      CHECK(envOf(out, "LOCAL_RANK") == std::to_string(rank));
      CHECK(envOf(out, "WORLD_SIZE") == "2");
      CHECK(envOf(out, "LOCAL_WORLD_SIZE") == "2");
      CHECK(envOf(out, "MASTER_ADDR") == c.masterAddr);
      CHECK(envOf(out, "TRACERUN_CLOCK_OFFSET_NS") == "0");
    }
    const int port = std::atoi(envOf(results[0].out, "MASTER_PORT").c_str());
    CHECK(port >= 20000);
    CHECK(port < 40000);
    CHECK(envOf(results[1].out, "MASTER_PORT") == std::to_string(port));
    const auto merged = trace::TraceReader::open(db);
    REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
    CHECK(countSpans(merged, 0, "step") == 2);
    CHECK(countSpans(merged, 1, "step") == 2);
  }
}

// ---- clocks across nodes -----------------------------------------------------------------------

namespace {

// A loopback socket bound to a port the kernel chose (no SO_REUSEADDR, never listening): while it
// lives nobody else can listen on that port, and a connection to it is refused.
struct BoundPort {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int port = 0;
  explicit BoundPort(int want = 0) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<uint16_t>(want));
    if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return;  // port stays 0
    socklen_t len = sizeof sa;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
    port = ntohs(sa.sin_port);
  }
  ~BoundPort() { ::close(fd); }
  BoundPort(const BoundPort&) = delete;
  BoundPort& operator=(const BoundPort&) = delete;
};

// Rank `rank` of a two-task srun step over two nodes (one task on each), SLURM_NODEID = rank.
std::vector<std::string> twoNodeVars(const std::string& job, int rank, int port) {
  return {"SLURM_PROCID=" + std::to_string(rank),
          "SLURM_NTASKS=2",
          "SLURM_STEP_NUM_TASKS=2",
          "SLURM_LOCALID=0",
          "SLURM_NODEID=" + std::to_string(rank),
          "SLURM_JOB_ID=" + job,
          "SLURM_STEP_ID=0",
          "SLURM_STEP_TASKS_PER_NODE=1(x2)",
          "MASTER_ADDR=127.0.0.1",
          "MASTER_PORT=" + std::to_string(port)};
}

std::map<std::string, trace::StatRow> statsOf(const trace::TraceReader& r, int rank) {
  std::map<std::string, trace::StatRow> out;
  for (const auto& s : r.stats()) {
    if (s.rank == rank) out[s.name] = s;
  }
  return out;
}

}  // namespace

TEST_CASE("outer job over two nodes: rank 1's skewed clock is measured and undone in the merge",
          "[launcher_outer][outer_clock]") {
  const int64_t skew = 1500000000;  // node 1's exchange clock reads 1.5 s more
  const int port = freePortPair();
  const std::string job = uniqueId("clk");
  const std::string db = scratch() + "/two_nodes.db";
  auto rank1 = twoNodeVars(job, 1, port);
  rank1.push_back("TRACERUN_TEST_CLOCK_SKEW_NS=" + std::to_string(skew));
  const auto program = worker({"--steps", "3", "--print-clock"});
  const auto results =
      runJob({rankArgv(twoNodeVars(job, 0, port), db, program), rankArgv(rank1, db, program)});
  INFO(describe(results));
  REQUIRE(results[0].code == 0);
  REQUIRE(results[1].code == 0);
  CHECK_FALSE(contains(results[0].err + results[1].err, "not measured"));
  CHECK(envOf(results[0].out, "TRACERUN_CLOCK_OFFSET_NS") == "0");
  const int64_t offset = std::atoll(envOf(results[1].out, "TRACERUN_CLOCK_OFFSET_NS").c_str());

  const auto merged = trace::TraceReader::open(db);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(merged.ranks()[0].clock_offset_ns == 0);
  CHECK(merged.ranks()[1].clock_offset_ns == offset);  // the rank's start reading, applied
  for (const auto& [name, row] : statsOf(merged, 0)) CHECK(name.rfind("clock_", 0) != 0);
  const auto stats = statsOf(merged, 1);
  REQUIRE(stats.count("clock_offset_error_ns") == 1);
  const int64_t error = stats.at("clock_offset_error_ns").value;
  CHECK(error > 0);
  CHECK(stats.at("clock_offset_rtt_ns").value / 2 == error);
  // The injected skew is undone within the residual error the trace states.
  CHECK(std::llabs(offset - skew) <= error + 1);
  // The end reading: no real drift on one host, so start and end agree within both errors.
  REQUIRE(stats.count("clock_drift_ns") == 1);
  CHECK(std::llabs(stats.at("clock_drift_ns").value) <=
        error + stats.at("clock_end_error_ns").value + 1);
  CHECK(stats.count("clock_drift_ppb") == 1);
  // Every step span of both ranks lies between the clock readings the rank printed around it,
  // rank 1's moved by exactly the offset the merge applied (without it they would be 1.5 s off).
  checkStepsOnRealClock(merged, 0, results[0].out);
  checkStepsOnRealClock(merged, 1, results[1].out, offset);
  CHECK_FALSE(testing::fileExists(db + ".shards"));  // clock.rank1 went with the job directory
}

TEST_CASE("outer job under mpirun --map-by node: every rank off rank 0's node measures its clock",
          "[launcher_outer][outer_clock]") {
  // mpirun -np 4 --map-by node over two nodes: rank r on node r % 2 as local rank r / 2. The node
  // was taken as rank / local size: rank 1 (node 1) counted as node 0, kept offset 0 unmeasured,
  // and its times went into the merge 1.5 s off; rank 2 (node 0) was exported GROUP_RANK=1.
  const int64_t skew = 1500000000;  // node 1's exchange clock reads 1.5 s more
  const int port = freePortPair();
  const std::string job = uniqueId("bynode");
  const std::string db = scratch() + "/by_node.db";
  const auto program = worker({"--steps", "3", "--print-clock"});
  std::vector<std::vector<std::string>> argvs;
  for (int rank = 0; rank < 4; ++rank) {
    std::vector<std::string> vars = {"OMPI_COMM_WORLD_RANK=" + std::to_string(rank),
                                     "OMPI_COMM_WORLD_SIZE=4",
                                     "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(rank / 2),
                                     "OMPI_COMM_WORLD_LOCAL_SIZE=2",
                                     "OMPI_MCA_ess_base_jobid=" + job,
                                     "MASTER_ADDR=127.0.0.1",
                                     "MASTER_PORT=" + std::to_string(port)};
    if (rank % 2 == 1) vars.push_back("TRACERUN_TEST_CLOCK_SKEW_NS=" + std::to_string(skew));
    argvs.push_back(rankArgv(vars, db, program));
  }
  const auto results = runJob(argvs);
  INFO(describe(results));
  for (const auto& r : results) REQUIRE(r.code == 0);
  std::string err;
  for (const auto& r : results) err += r.err;
  CHECK_FALSE(contains(err, "not measured"));
  // The node is exported only where it is known: rank / local size holds for ranks 0 and 3.
  CHECK(envOf(results[0].out, "GROUP_RANK") == "0");
  CHECK(envOf(results[1].out, "GROUP_RANK") == "");
  CHECK(envOf(results[2].out, "GROUP_RANK") == "");
  CHECK(envOf(results[3].out, "GROUP_RANK") == "1");
  CHECK(envOf(results[0].out, "TRACERUN_CLOCK_OFFSET_NS") == "0");

  const auto merged = trace::TraceReader::open(db);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1, 2, 3});
  for (int rank = 1; rank < 4; ++rank) {
    INFO("rank " << rank);
    const int64_t offset = std::atoll(
        envOf(results[static_cast<size_t>(rank)].out, "TRACERUN_CLOCK_OFFSET_NS").c_str());
    CHECK(merged.ranks()[static_cast<size_t>(rank)].clock_offset_ns == offset);
    const auto stats = statsOf(merged, rank);
    REQUIRE(stats.count("clock_offset_error_ns") == 1);  // measured, every rank off rank 0
    const int64_t error = stats.at("clock_offset_error_ns").value;
    // Node 1's skew undone; rank 2, beside rank 0, reads its own clock: offset 0 within the error.
    CHECK(std::llabs(offset - (rank % 2 == 1 ? skew : 0)) <= error + 1);
    checkStepsOnRealClock(merged, rank, results[static_cast<size_t>(rank)].out, offset);
  }
  checkStepsOnRealClock(merged, 0, results[0].out);
}

TEST_CASE("outer job over two nodes: a MASTER_ADDR name that is loopback on rank 0's host",
          "[launcher_outer][outer_clock]") {
  // Debian's /etc/hosts maps a host's own name to 127.0.1.1: MASTER_ADDR=HOSTNAME (what srun's
  // node list gives) is loopback on node 0 and node 0's real address on node 1. Here rank 0 sees
  // "localhost" and rank 1 127.0.0.2, another address of rank 0's host as another host would see
  // it. Rank 0 listened on 127.0.0.1 alone: rank 1's exchange was refused, its clock unmeasured.
  const int port = freePortPair();
  const std::string job = uniqueId("lo");
  const std::string db = scratch() + "/loopback_name.db";
  auto withAddr = [](std::vector<std::string> vars, const std::string& addr) {
    for (auto& v : vars) {
      if (v.rfind("MASTER_ADDR=", 0) == 0) v = "MASTER_ADDR=" + addr;
    }
    return vars;
  };
  const auto program = worker({"--steps", "2"});
  const auto results =
      runJob({rankArgv(withAddr(twoNodeVars(job, 0, port), "localhost"), db, program),
              rankArgv(withAddr(twoNodeVars(job, 1, port), "127.0.0.2"), db, program)});
  INFO(describe(results));
  REQUIRE(results[0].code == 0);
  REQUIRE(results[1].code == 0);
  CHECK(contains(results[0].err,
                 "tracerun: note: MASTER_ADDR localhost is a loopback address on "
                 "rank 0's host; the clock exchange listens on every interface"));
  CHECK_FALSE(contains(results[1].err, "not measured"));
  const auto merged = trace::TraceReader::open(db);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(statsOf(merged, 1).count("clock_offset_error_ns") == 1);  // measured
}

TEST_CASE("outer job over two nodes: a refused or unreachable exchange keeps offset 0, unmeasured",
          "[launcher_outer][outer_clock]") {
  for (const bool refused : {true, false}) {
    INFO((refused ? "refused token" : "port taken, unreachable"));
    const int port = freePortPair();
    // Unreachable: the exchange's port is held by this test, so rank 0 cannot listen on it and
    // rank 1's connections are refused.
    std::unique_ptr<BoundPort> taken;
    int held = port + 1;
    while (!refused && !taken) {
      taken = std::make_unique<BoundPort>();
      held = taken->port;
    }
    const int master = refused ? port : held - 1;
    const std::string job = uniqueId("unm");
    const std::string db = scratch() + "/unmeasured" + std::to_string(refused) + ".db";
    auto rank1 = twoNodeVars(job, 1, master);
    rank1.insert(rank1.end(),
                 {"TRACERUN_OUTER_CLOCK_TIMEOUT_S=1", "TRACERUN_TEST_CLOCK_SKEW_NS=1500000000"});
    if (refused) rank1.push_back("TRACERUN_JOB_TOKEN=not-this-job");
    const auto results =
        runJob({rankArgv(twoNodeVars(job, 0, master), db, worker({"--steps", "2"})),
                rankArgv(rank1, db, worker({"--steps", "2"}))});
    INFO(describe(results));
    REQUIRE(results[0].code == 0);  // the job still succeeds
    REQUIRE(results[1].code == 0);
    CHECK(contains(results[1].err, "clock offset to rank 0 not measured at start"));
    CHECK(contains(results[0].err, refused ? "refused a connection" : "cannot serve the clock"));
    CHECK(envOf(results[1].out, "TRACERUN_CLOCK_OFFSET_NS") == "0");
    const auto merged = trace::TraceReader::open(db);
    REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
    CHECK(merged.ranks()[1].clock_offset_ns == 0);
    const auto stats = statsOf(merged, 1);
    REQUIRE(stats.count("clock_offset_unmeasured") == 1);
    CHECK(stats.at("clock_offset_unmeasured").severity == trace::Severity::kWarning);
    CHECK(stats.count("clock_offset_error_ns") == 0);
  }
}

TEST_CASE("outer job over two nodes: rank 0 gone before the end reading costs no wait",
          "[launcher_outer][outer_clock]") {
  // Rank 0 ends first and leaves at once (no wait for the others: TRACERUN_OUTER_WAIT_S=0, as a
  // stop signal does), closing its clock server; rank 1, on "another node", ends 1.5 s later.
  // Its end reading was retried against the refused port for 10 s, inside the kill window of
  // scancel or torchrun; a refusal at the end now means rank 0 has left.
  const int port = freePortPair();
  const std::string job = uniqueId("gone");
  const std::string db = scratch() + "/rank0_gone.db";
  auto rank0 = twoNodeVars(job, 0, port);
  rank0.push_back("TRACERUN_OUTER_WAIT_S=0");
  const auto began = std::chrono::steady_clock::now();
  const auto results = runJob(
      {rankArgv(rank0, db, worker({"--steps", "1"})),
       rankArgv(twoNodeVars(job, 1, port), db, worker({"--steps", "3", "--sleep-ms", "500"}))});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  INFO(describe(results) << "job took " << seconds << " s");
  REQUIRE(results[0].code == 0);
  REQUIRE(results[1].code == 0);
  CHECK_FALSE(contains(results[1].err, "not measured at start"));
  CHECK(contains(results[1].err, "not measured at end"));
  CHECK(contains(results[1].err, "has left"));
  CHECK(seconds < 9);  // 1.5 s of steps and start-up; the old retries alone took 10 s
  const auto merged = trace::TraceReader::open(db);  // rank 1 ended last and merged
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
  const auto stats = statsOf(merged, 1);
  CHECK(stats.count("clock_offset_error_ns") == 1);  // the start reading stands
  CHECK(stats.count("clock_end_unmeasured") == 1);
}

TEST_CASE("outer torchrun over two nodes restarted: the agents' counts differ, one run merges",
          "[launcher_outer][outer_clock]") {
  // torchrun's agents count restarts apart (node 0's workers failed: 1; node 1's did not: 0), and
  // MASTER_PORT stays the same from run to run (torch >= 2.4). Each node's ranks took their own
  // count into the shard directory: two directories, nothing merged. Rank 0's tracerun now names
  // the run for every rank; the run before is kept under the highest count.
  const std::string db = scratch() + "/two_node_restart.db";
  const std::string id = uniqueId("nr");
  const int port = freePortPair();
  auto vars = [&](int rank, int restarts) {
    return std::vector<std::string>{"RANK=" + std::to_string(rank),
                                    "WORLD_SIZE=2",
                                    "LOCAL_RANK=0",
                                    "LOCAL_WORLD_SIZE=1",
                                    "GROUP_RANK=" + std::to_string(rank),
                                    "MASTER_ADDR=127.0.0.1",
                                    "MASTER_PORT=" + std::to_string(port),
                                    "TORCHELASTIC_RUN_ID=" + id,
                                    "TORCHELASTIC_RESTART_COUNT=" + std::to_string(restarts),
                                    "TRACERUN_OUTER_WAIT_S=5"};
  };
  for (const int run : {0, 1}) {
    INFO("run " << run);
    const auto program = worker({"--steps", run == 0 ? "2" : "3"});
    const auto results = runJob({rankArgv(vars(0, run), db, program),  // node 0's agent counted
                                 rankArgv(vars(1, 0), db, program)});  // node 1's did not
    INFO(describe(results));
    REQUIRE(results[0].code == 0);
    REQUIRE(results[1].code == 0);
    CHECK_FALSE(contains(results[0].err + results[1].err, "did not say which run"));
    const auto merged = trace::TraceReader::open(db);
    REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
    for (int rank = 0; rank < 2; ++rank) CHECK(countSpans(merged, rank, "step") == 2 + run);
    CHECK_FALSE(testing::fileExists(db + ".shards"));  // merged, nothing left behind
  }
  const std::string kept = db + ".before-restart1";
  REQUIRE(testing::fileExists(kept));
  CHECK(countSpans(trace::TraceReader::open(kept), 1, "step") == 2);
}

// ---- merge once ---------------------------------------------------------------------------------

TEST_CASE("outer jobs: ranks ending together merge exactly once, two jobs on one output never mix",
          "[launcher_outer]") {
  const std::string db = scratch() + "/race.db";
  for (int round = 0; round < 2; ++round) {
    INFO("round " << round);
    // Two jobs at once on one output, 2 ranks each, identical ranks ending at the same moment:
    // job A runs 3 steps, job B 5.
    const std::string a = uniqueId("a"), b = uniqueId("b");
    const auto results =
        runJob({rankArgv(torchrunVars(a, 0, 2), db, worker({"--steps", "3"}), false),
                rankArgv(torchrunVars(a, 1, 2), db, worker({"--steps", "3"}), false),
                rankArgv(torchrunVars(b, 0, 2), db, worker({"--steps", "5"}), false),
                rankArgv(torchrunVars(b, 1, 2), db, worker({"--steps", "5"}), false)});
    INFO(describe(results));
    for (const auto& r : results) REQUIRE(r.code == 0);
    CHECK(summaries({results[0], results[1]}) == 1);  // job A merged once
    CHECK(summaries({results[2], results[3]}) == 1);  // job B merged once
    CHECK_FALSE(testing::fileExists(db + ".shards"));
    // The output is one job's whole trace: both ranks with the same number of steps.
    const auto merged = trace::TraceReader::open(db);
    REQUIRE(ranksOf(merged) == std::set<int>{0, 1});
    const int64_t steps = countSpans(merged, 0, "step");
    CHECK((steps == 3 || steps == 5));
    CHECK(countSpans(merged, 1, "step") == steps);
  }
}

namespace {

// Whether some job directory under `shards` holds rank's end marker (done.rankR).
bool rankEnded(const std::string& shards, int rank) {
  std::unique_ptr<DIR, int (*)(DIR*)> dir(::opendir(shards.c_str()), ::closedir);
  if (!dir) return false;
  const std::string marker = "done.rank" + std::to_string(rank);
  while (const dirent* e = ::readdir(dir.get())) {
    if (e->d_name[0] != '.' && testing::fileExists(shards + "/" + e->d_name + "/" + marker)) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("outer job: rank 0 ending first leaves as soon as the last rank has merged",
          "[launcher_outer]") {
  // Rank 0 waits for the others only to name a rank that never ends. Once rank 1 (ending last)
  // has merged and removed the job directory there is nothing left to wait for: rank 0 must not
  // sit out TRACERUN_OUTER_WAIT_S (an hour here; the default 30 s had ended every srun/torchrun
  // job whose rank 0 finished first half a minute late).
  const std::string db = scratch() + "/first.db";
  const std::string id = uniqueId("f");
  auto vars0 = torchrunVars(id, 0, 2);
  vars0.push_back("TRACERUN_OUTER_WAIT_S=3600");
  Child rank0(rankArgv(vars0, db, worker({"--steps", "1"})));
  // Rank 1 starts once rank 0 has ended (its end marker is in the job directory), so rank 0 is
  // first whatever the load: two start-ups racing on a busy machine may drift by seconds.
  bool ended = false;
  for (int i = 0; i < 1200 && !(ended = rankEnded(db + ".shards", 0)) && rank0.running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE(ended);
  Child rank1(rankArgv(torchrunVars(id, 1, 2), db, worker({"--steps", "3", "--sleep-ms", "300"})));
  const Result r1 = rank1.wait();
  INFO(r1.describe());
  REQUIRE(r1.code == 0);
  // A liveness bound, not a timing: rank 0 polls every 100 ms, so a minute is ample under any load.
  bool running = true;
  for (int i = 0; i < 600 && (running = rank0.running()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  REQUIRE_FALSE(running);  // else the destructor kills it
  const Result r0 = rank0.wait();
  INFO(r0.describe());
  CHECK(r0.code == 0);
  // One of them merged: rank 1, or rank 0 when its poll saw rank 1's end marker before rank 1
  // claimed the merge (a loaded run: rank 1 then ended with nothing merged yet).
  REQUIRE(testing::fileExists(db));
  CHECK_FALSE(contains(r0.err, "ended before"));
  const auto merged = trace::TraceReader::open(db);
  CHECK(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(countSpans(merged, 0, "step") == 1);
  CHECK(countSpans(merged, 1, "step") == 3);
}

// ---- faults -------------------------------------------------------------------------------------

namespace {

// The children of `pid` (/proc/PID/task/PID/children).
std::vector<pid_t> childrenOf(pid_t pid) {
  std::istringstream in(
      readFile("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children"));
  std::vector<pid_t> out;
  for (pid_t c = 0; in >> c;) out.push_back(c);
  return out;
}

bool waitForOutput(Child& child, const std::string& what) {
  while (!contains(child.out(), what)) {
    if (!child.running()) return contains(child.out(), what);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

}  // namespace

TEST_CASE("outer job: a dead rank leaves the shards and the merge-by-hand line",
          "[launcher_outer]") {
  const std::string db = scratch() + "/dead.db";
  const std::string id = uniqueId("d");
  Child rank1(rankArgv(torchrunVars(id, 1, 2), db, worker({"--steps", "400", "--sleep-ms", "20"})));
  // 3 s: two of the capture's 1 s flush periods, so it has flushed on a loaded machine too.
  REQUIRE(waitForOutput(rank1, "step 150\n"));
  // rank 1's tracerun and its program die at once (a node lost): no end marker, no merge.
  const auto programs = childrenOf(rank1.pid());
  REQUIRE(programs.size() == 1);
  ::kill(rank1.pid(), SIGKILL);
  ::kill(programs[0], SIGKILL);
  rank1.wait();
  auto vars0 = torchrunVars(id, 0, 2);
  vars0.push_back("TRACERUN_OUTER_WAIT_S=1");  // rank 0 waits 1 s for rank 1's end
  const Result r0 = Child(rankArgv(vars0, db, worker({"--steps", "3"}))).wait();
  INFO(r0.describe());
  CHECK(r0.code == 0);
  CHECK_FALSE(testing::fileExists(db));
  const std::string dir = db + ".shards/torchrun-" + id + "-addr-127.0.0.1-port29999";
  CHECK(contains(r0.err, "rank 0 ended before rank(s) 1 of 2"));
  const std::string command =
      "tracerun merge --allow-incomplete -o " + db + " " + dir + "/rank*.db";
  CHECK(contains(r0.err, command));
  REQUIRE(testing::fileExists(dir + "/rank0.db"));
  REQUIRE(testing::fileExists(dir + "/rank1.db"));
  // The line's command, run (the shell's glob written out): both ranks, rank 1 up to its kill.
  const Result m = Child({TRACERUN_BIN, "merge", "--allow-incomplete", "-o", db, dir + "/rank0.db",
                          dir + "/rank1.db"})
                       .wait();
  INFO(m.describe());
  REQUIRE(m.code == 0);
  const auto merged = trace::TraceReader::open(db);
  CHECK(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(countSpans(merged, 0, "step") == 3);
  CHECK(countSpans(merged, 1, "step") >= 1);
  // The same job id again, shards still there: refused in one line, nothing overwritten.
  const Result again = Child(rankArgv(torchrunVars(id, 0, 2), db, worker({"--steps", "1"}))).wait();
  CHECK(again.code == 2);
  CHECK(contains(again.err, "already holds rank 0's shard"));
  CHECK_FALSE(contains(again.out, "step 1"));
  // A world of 1 under the same id where only the larger world's rank 1 is left: its shard would
  // be merged into the new trace, then removed. Refused in one line, the file kept.
  ::unlink((dir + "/rank0.db").c_str());
  ::unlink((dir + "/done.rank0").c_str());
  const Result smaller =
      Child(rankArgv(torchrunVars(id, 0, 1), db, worker({"--steps", "1"}))).wait();
  INFO(smaller.describe());
  CHECK(smaller.code == 2);
  CHECK(contains(smaller.err,
                 "holds rank 1's files of an earlier, larger run (this one has 1 "
                 "ranks)"));
  CHECK_FALSE(contains(smaller.out, "step 1"));
  CHECK(testing::fileExists(dir + "/rank1.db"));
}

TEST_CASE("outer job: a rank outside the world is one line, exit 2, program not started",
          "[launcher_outer]") {
  const Result r =
      Child(rankArgv({"RANK=2", "WORLD_SIZE=2"}, scratch() + "/bad.db", worker({"--steps", "1"})))
          .wait();
  CHECK(r.code == 2);
  CHECK(r.err == "tracerun: torchrun: rank 2 is outside a world of 2\n");
  CHECK_FALSE(contains(r.out, "step"));
}

// ---- gpttrain -----------------------------------------------------------------------------------

#ifdef GPTTRAIN_BIN
namespace {

std::vector<std::string> tinyGpt(const std::string& log) {
  return {GPTTRAIN_BIN, "--layers",
          "2",          "--hidden",
          "32",         "--heads",
          "4",          "--seq-len",
          "16",         "--vocab",
          "64",         "--dropout",
          "0",          "--global-batch",
          "8",          "--micro-batch-size",
          "2",          "--seed",
          "7",          "--quiet",
          "--tp",       "2",
          "--steps",    "3",
          "--log-json", log};
}

std::map<int, double> lossesByStep(const std::string& path) {
  std::map<int, double> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    out[j.at("step").get<int>()] = j.at("loss").get<double>();
  }
  return out;
}

}  // namespace

// The losses of the same gpttrain under `tracerun --nproc-per-node 2` (run once per test process).
const std::map<int, double>& referenceLosses() {
  static const std::map<int, double> losses = [] {
    const std::string ref = scratch() + "/gpt_ref.jsonl";
    std::vector<std::string> argv = {
        TRACERUN_BIN, "-q",  "-o", scratch() + "/gpt_ref.db", "--nproc-per-node", "2",
        "--status",   "off", "--"};
    for (const auto& a : tinyGpt(ref)) argv.push_back(a);
    const Result r = Child(argv).wait();
    if (r.code != 0) throw std::runtime_error("reference run failed: " + r.describe());
    return lossesByStep(ref);
  }();
  return losses;
}

TEST_CASE("gpttrain --tp 2 as an srun step by hand: the losses of tracerun --nproc-per-node 2",
          "[launcher_outer]") {
  const std::string log = scratch() + "/gpt_srun.jsonl";
  const auto want = referenceLosses();
  const std::string job = uniqueId("");
  std::vector<std::vector<std::string>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(rankArgv(
        {"SLURM_PROCID=" + std::to_string(rank), "SLURM_NTASKS=2", "SLURM_STEP_NUM_TASKS=2",
         "SLURM_LOCALID=" + std::to_string(rank), "SLURM_NODEID=0", "SLURM_JOB_ID=" + job,
         "SLURM_STEP_ID=1", "SLURM_STEP_NODELIST=localhost", "SLURM_STEP_TASKS_PER_NODE=2"},
        scratch() + "/gpt_srun.db", tinyGpt(log)));
  }
  const auto results = runJob(ranks);
  INFO(describe(results));
  REQUIRE(results[0].code == 0);
  REQUIRE(results[1].code == 0);
  const auto got = lossesByStep(log);
  REQUIRE(want.size() == 3);
  CHECK(got == want);  // the same engine, the same samples: bit-identical losses
  const auto merged = trace::TraceReader::open(scratch() + "/gpt_srun.db");
  CHECK(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(countSpans(merged, 0, "step") == 3);
  CHECK(countSpans(merged, 1, "step") == 3);
}
#ifdef MPIRUN_BIN
TEST_CASE("gpttrain --tp 2 under the real mpirun: one trace, the losses of --nproc-per-node 2",
          "[launcher_outer]") {
  const std::string log = scratch() + "/gpt_mpirun.jsonl", db = scratch() + "/gpt_mpirun.db";
  const auto want = referenceLosses();
  // --allow-run-as-root: Open MPI refuses root without it (harmless otherwise); MASTER_PORT is
  // left to tracerun (derived from Open MPI's job id).
  std::vector<std::string> argv = {MPIRUN_BIN,
                                   "--allow-run-as-root",
                                   "--oversubscribe",
                                   "-np",
                                   "2",
                                   "-x",
                                   "MASTER_ADDR=127.0.0.1",
                                   TRACERUN_BIN,
                                   "-q",
                                   "-o",
                                   db,
                                   "--"};
  for (const auto& a : tinyGpt(log)) argv.push_back(a);
  const Result r = Child(argv).wait();
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(lossesByStep(log) == want);
  const auto merged = trace::TraceReader::open(db);
  CHECK(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(countSpans(merged, 0, "step") == 3);
  CHECK(countSpans(merged, 1, "step") == 3);
  CHECK_FALSE(testing::fileExists(db + ".shards"));
}
#endif
#ifdef TRACERUN_TEST_PYTHON
TEST_CASE("gpttrain --tp 2 under the real torchrun: one trace, the losses of --nproc-per-node 2",
          "[launcher_outer]") {
  const std::string log = scratch() + "/gpt_torchrun.jsonl", db = scratch() + "/gpt_torchrun.db";
  const auto want = referenceLosses();
  std::vector<std::string> argv = {TRACERUN_TEST_PYTHON,
                                   "-m",
                                   "torch.distributed.run",
                                   "--standalone",
                                   "--nproc_per_node",
                                   "2",
                                   "--redirects",
                                   "2",
                                   "--tee",
                                   "2",
                                   "--log_dir",
                                   scratch() + "/torchrun_gpt_logs",
                                   "--no_python",
                                   TRACERUN_BIN,
                                   "-q",
                                   "-o",
                                   db,
                                   "--"};
  for (const auto& a : tinyGpt(log)) argv.push_back(a);
  const Result r = Child(argv).wait();
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(lossesByStep(log) == want);
  const auto merged = trace::TraceReader::open(db);
  CHECK(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(countSpans(merged, 0, "step") == 3);
  CHECK(countSpans(merged, 1, "step") == 3);
}
#endif
#endif
