// End-to-end: the multi-rank launcher (`tracerun --nproc-per-node N ... -- PROGRAM`) on real
// processes: the torchrun environment, [rank N] pass-through and the status line, a failing or
// killed rank, restarts, Ctrl-C, the agents' clock exchange, several nodes merged on node 0, and
// gpttrain under it (a merged trace, and a killed rank resumed to the uninterrupted losses). No
// libtorch in this test binary; no timed assertions.
//
// Sections: running processes · environment and output · faults · restarts · clock · several
//           nodes · gpttrain
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/child_process.h"
#include "../support/free_ports.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

// ---- running processes --------------------------------------------------------------------------

namespace {

using Result = testing::ProcessResult;
using testing::freePortPair;
using testing::readFile;

bool exists(const std::string& path) {
  return testing::fileExists(path);
}

// A scratch directory per test process.
const std::string& scratch() {
  static const std::string dir = [] {
    // One intra-op thread, one BLAS thread: quick and deterministic on a small machine.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return testing::processScratchDir("tracerun_group");
  }();
  return dir;
}

// A child whose output goes to this test process's scratch directory.
struct Child : testing::Child {
  explicit Child(const std::vector<std::string>& argv) : testing::Child(argv, scratch()) {}
};

Result run(const std::vector<std::string>& argv) {
  return Child(argv).wait();
}

std::vector<std::string> group(const std::string& output, std::vector<std::string> flags,
                               std::vector<std::string> program) {
  std::vector<std::string> argv = {TRACERUN_BIN, "-q", "-o", output};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

// A worker told to fail waits, before failing, until every rank of its attempt has done a step
// (its own rendezvous directory per job): what a test checks of the others then exists.
std::vector<std::string> worker(std::vector<std::string> args) {
  if (std::find(args.begin(), args.end(), "--fail-step") != args.end()) {
    static int jobs = 0;
    const std::string dir = scratch() + "/ready" + std::to_string(jobs++);
    ::mkdir(dir.c_str(), 0755);
    args.insert(args.end(), {"--ready-dir", dir});
  }
  args.insert(args.begin(), WORKER_BIN);
  return args;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

// The value of "[rank R] env NAME=" in a launcher's stdout.
std::string envOf(const std::string& out, int rank, const std::string& name) {
  const std::string key = "[rank " + std::to_string(rank) + "] env " + name + "=";
  const auto at = out.find(key);
  if (at == std::string::npos) return "<absent>";
  const auto end = out.find('\n', at);
  return out.substr(at + key.size(), end - at - key.size());
}

// Waits (no time limit: ctest's timeout is the limit) until `child`'s stdout contains `what`;
// false when the child ended first.
bool waitForOutput(Child& child, const std::string& what) {
  while (!contains(child.out(), what)) {
    if (!child.running()) return contains(child.out(), what);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

int64_t countSpans(const trace::TraceReader& r, int rank, const std::string& name) {
  int64_t n = 0;
  for (const auto& t : r.tracks()) {
    if (t.rank != rank) continue;
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) { n += r.str(s.name) == name; });
  }
  return n;
}

// Ranks with a "restart" instant of value `restart` (written by libtracerun at start-up).
std::set<int> restartedRanks(const trace::TraceReader& r, int64_t restart) {
  std::set<int> out;
  for (const auto& t : r.tracks()) {
    for (const auto& i : r.instants(t.id, INT64_MIN / 2, INT64_MAX / 2)) {
      if (r.str(i.name) == "restart" && i.value == restart) out.insert(t.rank);
    }
  }
  return out;
}

// How many "[rank R] step N" lines the launcher passed through.
int64_t stepLines(const std::string& out, int rank) {
  int64_t n = 0;
  const std::string key = "[rank " + std::to_string(rank) + "] step ";
  for (auto at = out.find(key); at != std::string::npos; at = out.find(key, at + 1)) ++n;
  return n;
}

// A rank stopped by a signal may have closed its last step (the span is recorded) and not yet
// printed that step's line (tests/interpose/launcher_worker.cpp): its step spans are the lines it
// printed, or one more.
bool stepsAsPrinted(int64_t spans, int64_t printed) {
  return spans == printed || spans == printed + 1;
}

std::set<int> ranksOf(const trace::TraceReader& r) {
  std::set<int> out;
  for (const auto& k : r.ranks()) out.insert(k.rank);
  return out;
}

// The values of rank `rank`'s counter `name`, in time order.
std::vector<double> counterValues(const trace::TraceReader& r, int rank, const std::string& name) {
  std::vector<double> out;
  for (const auto& t : r.tracks()) {
    if (t.rank != rank || t.kind != core::TrackKind::kCounter || t.name != name) continue;
    for (const auto& c : r.counters(t.id, INT64_MIN / 2, INT64_MAX / 2)) out.push_back(c.value);
  }
  return out;
}

// A job of `world` ranks restarted once, in one trace: two attempts of that world size, one after
// the other on the one time axis; the last attempt's ranks keep their numbers, attempt 0's follow.
void checkTwoAttempts(const trace::TraceReader& r, int world) {
  const auto attempts = r.attempts();
  REQUIRE(attempts.size() == 2);
  CHECK(attempts[0].world_size == world);
  CHECK(attempts[1].world_size == world);
  CHECK(attempts[0].end_ns <= attempts[1].start_ns);
  std::map<int, std::pair<int, int>> ranks, want;
  for (const auto& k : r.ranks()) ranks[k.rank] = {k.attempt, k.attempt_rank};
  for (int k = 0; k < world; ++k) {
    want[k] = {1, k};
    want[world + k] = {0, k};
  }
  CHECK(ranks == want);
}

}  // namespace

// ---- environment and output ---------------------------------------------------------------------

TEST_CASE("every rank gets the torchrun environment, output is prefixed, one merged trace",
          "[launcher_group]") {
  const std::string db = scratch() + "/env.db";
  // Without OMP_NUM_THREADS in the environment the launcher pins each rank to one thread.
  auto argv = group(db, {"--nproc-per-node", "2", "--status", "off"}, worker({"--steps", "3"}));
  argv.insert(argv.begin(),
              {"/usr/bin/env", "-u", "OMP_NUM_THREADS", "-u", "OPENBLAS_NUM_THREADS"});
  const Result r = run(argv);
  INFO(r.describe());
  REQUIRE(r.code == 0);
  for (int rank : {0, 1}) {
    CHECK(envOf(r.out, rank, "RANK") == std::to_string(rank));
    CHECK(envOf(r.out, rank, "LOCAL_RANK") == std::to_string(rank));
    CHECK(envOf(r.out, rank, "WORLD_SIZE") == "2");
    CHECK(envOf(r.out, rank, "LOCAL_WORLD_SIZE") == "2");
    CHECK(envOf(r.out, rank, "GROUP_RANK") == "0");
    CHECK(envOf(r.out, rank, "MASTER_ADDR") == "127.0.0.1");
    CHECK(envOf(r.out, rank, "TORCHELASTIC_RESTART_COUNT") == "0");
    CHECK(envOf(r.out, rank, "OMP_NUM_THREADS") == "1");
    CHECK(envOf(r.out, rank, "OPENBLAS_NUM_THREADS") == "1");
    CHECK(envOf(r.out, rank, "intra_op_threads") == "1");
    CHECK(envOf(r.out, rank, "TRACERUN_CLOCK_OFFSET_NS") == "0");
    CHECK(contains(r.out, "[rank " + std::to_string(rank) + "] done\n"));
  }
  const std::string port = envOf(r.out, 0, "MASTER_PORT");
  CHECK(std::atoi(port.c_str()) > 0);
  CHECK(envOf(r.out, 1, "MASTER_PORT") == port);

  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == std::set<int>{0, 1});
  CHECK(countSpans(reader, 0, "step") == 3);
  CHECK(countSpans(reader, 1, "step") == 3);
  CHECK_FALSE(exists(db + ".shards"));
}

TEST_CASE("tracing some ranks (--ranks): only those, the others run as without tracerun",
          "[launcher_group]") {
  const std::string db = scratch() + "/ranks.db";
  const Result r = run(group(db, {"--nproc-per-node", "4", "--status", "off", "--ranks", "3,1"},
                             worker({"--steps", "3"})));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 4; ++rank) {  // every rank ran its steps, traced or not
    INFO("rank " << rank);
    CHECK(stepLines(r.out, rank) == 3);
    CHECK(envOf(r.out, rank, "WORLD_SIZE") == "4");
  }
  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == std::set<int>{1, 3});
  CHECK(countSpans(reader, 1, "step") == 3);
  CHECK(countSpans(reader, 3, "step") == 3);
  CHECK(reader.meta("traced_ranks") == "1,3");
  CHECK(reader.meta("world_size") == "4");
  CHECK_FALSE(exists(db + ".shards"));
  // The report and info say so.
  const Result report = run({TRACERUN_BIN, "report", db});
  INFO(report.describe());
  CHECK(contains(report.out, "2 ranks (world size 4)"));
  CHECK(contains(report.out, "traced ranks 1,3 only (tracerun --ranks)"));
  const Result info = run({TRACERUN_BIN, "info", db});
  CHECK(contains(info.out, "ranks (2, world size 4; traced: 1,3, tracerun --ranks)"));
}

TEST_CASE("tracing some ranks (--ranks): a malformed list or a rank outside the world is refused",
          "[launcher_group]") {
  const std::string db = scratch() + "/ranks_bad.db";
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--nproc-per-node", "2", "--ranks", "0-x"},
       "tracerun: --ranks 0-x: '0-x' is not a rank or a range such as 8-15\n"},
      {{"--nproc-per-node", "2", "--ranks", ""},  // an unset "$RANKS" traces nothing by mistake
       "tracerun: --ranks: an empty list (write ranks such as 0,8-15)\n"},
      {{"--nproc-per-node", "2", "--ranks", "1,2"},
       "tracerun: --ranks 1,2: rank 2 is not in a world of 2 ranks\n"},
      {{"--ranks", "1"},
       "tracerun: --ranks 1: PROGRAM is rank 0, not in the list: nothing would be traced "
       "(--nproc-per-node starts ranks, or run tracerun under torchrun or srun)\n"},
      {{"--nnodes", "1:2", "--master-port", "29999", "--ranks", "0"},
       "tracerun: --ranks 0: not with --nnodes MIN:MAX (a resize renumbers the ranks)\n"},
  };
  for (const auto& [flags, said] : cases) {
    auto argv = group(db, flags, worker({"--steps", "1"}));
    argv.insert(argv.begin(), {"/usr/bin/env", "-u", "RANK"});
    const Result r = run(argv);
    INFO(r.describe());
    CHECK(r.code == 2);
    CHECK(r.err == said);
    CHECK(r.out.empty());  // nothing ran
    CHECK_FALSE(exists(db));
  }
}

TEST_CASE("the status line comes from the ranks' counters, plain lines when not a terminal",
          "[launcher_group]") {
  const std::string db = scratch() + "/status.db";
  const Result r =
      run(group(db, {"--nproc-per-node", "2"}, worker({"--steps", "8", "--sleep-ms", "300"})));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  // The worker prints "step N" but never "loss": the loss in the line came from its counters.
  CHECK(contains(r.out, "[tracerun] step "));
  CHECK(contains(r.out, "| loss "));
  CHECK(contains(r.out, "tok/s"));
  CHECK_FALSE(contains(r.out, "\r"));  // stdout is a file: no in-place redraws
  // With --ranks, an untraced rank (which never reports) is `x`, not `-` (not reported yet).
  const Result some =
      run(group(scratch() + "/status_ranks.db", {"--nproc-per-node", "2", "--ranks", "1"},
                worker({"--steps", "8", "--sleep-ms", "300"})));
  INFO(some.describe());
  REQUIRE(some.code == 0);
  CHECK(contains(some.out, "| ranks x "));
}

// ---- faults -------------------------------------------------------------------------------------

TEST_CASE("a rank killed by SIGKILL stops the others, the exit code and message name it",
          "[launcher_group]") {
  const std::string db = scratch() + "/killed.db";
  // Rank 1 dies after ~3 s (two of the capture's 1 s flush periods, so at least one flush has
  // happened on a loaded machine too); rank 0 would run for ~40 s.
  const Result r = run(group(db, {"--nproc-per-node", "2", "--status", "off"},
                             worker({"--steps", "400", "--sleep-ms", "100", "--fail-rank", "1",
                                     "--fail-step", "30", "--fail-signal", "9"})));
  INFO(r.describe());
  CHECK(r.code == 128 + SIGKILL);
  CHECK(contains(r.err, "tracerun: rank 1 (pid "));
  CHECK(contains(r.err, "was killed by SIGKILL"));
  CHECK_FALSE(contains(r.out, "[rank 0] done"));
  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == std::set<int>{0, 1});
  // Rank 0, stopped by SIGTERM, flushed every step it printed; rank 1, killed, what it had
  // flushed before the fault (the capture flushes every second).
  CHECK(stepsAsPrinted(countSpans(reader, 0, "step"), stepLines(r.out, 0)));
  CHECK(countSpans(reader, 1, "step") >= 1);
  CHECK(countSpans(reader, 1, "step") <= 30);
}

TEST_CASE("a rank that exits non-zero: the launcher exits with its code", "[launcher_group]") {
  const std::string db = scratch() + "/failed.db";
  const Result r = run(group(db, {"--nproc-per-node", "2", "--status", "off"},
                             worker({"--steps", "400", "--sleep-ms", "50", "--fail-rank", "0",
                                     "--fail-step", "3", "--fail-code", "3"})));
  INFO(r.describe());
  CHECK(r.code == 3);
  CHECK(contains(r.err, "tracerun: rank 0 (pid "));
  CHECK(contains(r.err, "exited with code 3"));
  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == std::set<int>{0, 1});
  CHECK(countSpans(reader, 0, "step") == 3);
  CHECK(stepsAsPrinted(countSpans(reader, 1, "step"), stepLines(r.out, 1)));
}

TEST_CASE("Ctrl-C stops every rank, and the trace is still merged", "[launcher_group]") {
  const std::string db = scratch() + "/interrupted.db";
  Child c(group(db, {"--nproc-per-node", "2", "--status", "off"},
                worker({"--steps", "400", "--sleep-ms", "50"})));
  // Both ranks capturing (a loaded machine may start one long after the other).
  const bool started =
      waitForOutput(c, "[rank 1] step 3\n") && waitForOutput(c, "[rank 0] step 3\n");
  if (!started) UNSCOPED_INFO(c.wait().describe());
  REQUIRE(started);
  ::kill(c.pid(), SIGINT);
  const Result r = c.wait();
  INFO(r.describe());
  CHECK(r.code == 130);
  CHECK_FALSE(contains(r.out, "done"));
  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == std::set<int>{0, 1});
  CHECK(stepsAsPrinted(countSpans(reader, 0, "step"), stepLines(r.out, 0)));
  CHECK(stepsAsPrinted(countSpans(reader, 1, "step"), stepLines(r.out, 1)));
}

// ---- restarts -----------------------------------------------------------------------------------

TEST_CASE("max-restarts: every attempt's ranks in the one trace, none in run.attemptK.db",
          "[launcher_group]") {
  const std::string db = scratch() + "/restart.db";
  const Result r =
      run(group(db, {"--nproc-per-node", "2", "--status", "off", "--max-restarts", "1"},
                worker({"--steps", "4", "--sleep-ms", "50", "--fail-rank", "1", "--fail-step", "2",
                        "--fail-code", "5"})));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(contains(r.err, "restarting all 2 ranks (restart 1 of 1)"));
  CHECK(contains(r.out, "[rank 1] env TORCHELASTIC_RESTART_COUNT=1"));
  CHECK(contains(r.out, "[rank 0] env TRACERUN_RESTART=1"));
  // One file: the launcher once merged attempt 0 into restart.attempt0.db beside it.
  CHECK_FALSE(exists(scratch() + "/restart.attempt0.db"));
  CHECK_FALSE(exists(db + ".shards"));
  const auto reader = trace::TraceReader::open(db);
  checkTwoAttempts(reader, 2);
  CHECK(restartedRanks(reader, 1) == std::set<int>{0, 1});
  // The last attempt ran every step; attempt 0's rank 1 (row 3) failed after its step 2. Each
  // rank row holds the steps its process printed (the output holds both attempts' lines).
  CHECK(countSpans(reader, 0, "step") == 4);
  CHECK(countSpans(reader, 1, "step") == 4);
  CHECK(countSpans(reader, 3, "step") == 2);
  CHECK(stepsAsPrinted(countSpans(reader, 2, "step") + 4, stepLines(r.out, 0)));
  CHECK(countSpans(reader, 3, "step") + 4 == stepLines(r.out, 1));
  // The worker's counters (loss = 1/step) of the last attempt, in step order.
  for (int rank : {0, 1}) {
    INFO("rank " << rank);
    CHECK(counterValues(reader, rank, "loss") == std::vector<double>{1.0, 0.5, 1.0 / 3, 0.25});
    CHECK(counterValues(reader, rank, "step") == std::vector<double>{1, 2, 3, 4});
  }
  CHECK(counterValues(reader, 3, "loss") == std::vector<double>{1.0, 0.5});
  // The report names the restart under its headline.
  const Result report = run({TRACERUN_BIN, "report", db});
  INFO(report.describe());
  CHECK(report.code == 0);
  CHECK(contains(report.out,
                 "2 attempts (restarts or elastic rounds): world 2 (ranks 2-3), then world 2 "
                 "(ranks 0-1)"));

  // No restarts left: the second failure is the exit code, and both attempts are in the trace.
  const std::string db2 = scratch() + "/restart2.db";
  const Result again =
      run(group(db2, {"--nproc-per-node", "2", "--status", "off", "--max-restarts", "1"},
                worker({"--steps", "4", "--sleep-ms", "50", "--fail-rank", "1", "--fail-step", "2",
                        "--fail-code", "5", "--fail-every-attempt"})));
  INFO(again.describe());
  CHECK(again.code == 5);
  CHECK(contains(again.err, "(no restarts left)"));
  CHECK_FALSE(exists(scratch() + "/restart2.attempt0.db"));
  const auto failed = trace::TraceReader::open(db2);
  checkTwoAttempts(failed, 2);
  CHECK(countSpans(failed, 1, "step") == 2);
  CHECK(countSpans(failed, 3, "step") == 2);
}

TEST_CASE("a restarted job's merge abandoned by two signals names every attempt's shards",
          "[launcher_group]") {
  const std::string db = scratch() + "/abandon.db";
  // Attempt 0 fails at step 2; attempt 1 runs long enough for its merge to be caught.
  auto argv = group(
      db, {"--nproc-per-node", "1", "--status", "off", "--max-restarts", "1"},
      worker({"--steps", "30000", "--fail-rank", "0", "--fail-step", "2", "--fail-code", "5"}));
  argv.insert(argv.begin(), {"/usr/bin/env", "TRACERUN_BUFFER_MB=256"});
  Child c(argv);
  while (c.running() && !exists(db + ".tmp")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::kill(c.pid(), SIGSTOP);
  const bool merging = exists(db + ".tmp") && !exists(db);
  ::kill(c.pid(), SIGINT);
  ::kill(c.pid(), SIGTERM);
  ::kill(c.pid(), SIGCONT);
  const Result r = c.wait();
  INFO(r.describe());
  REQUIRE(merging);  // else the merge was too quick to be caught: more steps
  CHECK(r.code == 128 + SIGTERM);
  CHECK_FALSE(exists(db));
  const std::string a0 = db + ".shards/attempt0", a1 = db + ".shards/attempt1";
  const std::string command = "tracerun merge --allow-incomplete --attempts -o " + db + " " + a0 +
                              "/rank*.db " + a1 + "/rank*.db";
  CHECK(contains(r.err, "the shards are kept in " + a0 + " and " + a1 + " (" + command + ")"));
  // That one line finishes the job: both attempts, as the launcher would have merged them.
  const Result m = run({"/bin/sh", "-c", std::string(TRACERUN_BIN) + command.substr(8)});
  INFO(m.describe());
  REQUIRE(m.code == 0);
  const auto reader = trace::TraceReader::open(db);
  checkTwoAttempts(reader, 1);
  CHECK(countSpans(reader, 0, "step") == 30000);
  CHECK(countSpans(reader, 1, "step") == 2);
}

// ---- clock --------------------------------------------------------------------------------------

namespace {

// Two node agents on loopback; node 1's clock reads `skew` ns more. Returns node 1's estimate and
// the round trip it came from.
std::pair<int64_t, int64_t> twoAgents(int64_t skew) {
  const std::string port = std::to_string(freePortPair());
  const std::vector<std::string> common = {
      "--nproc-per-node", "1",  "--nnodes", "2",   "--master-addr", "127.0.0.1",
      "--master-port",    port, "--status", "off", "--job-token",   "group-test-token"};
  auto flags0 = common, flags1 = common;
  flags0.insert(flags0.end(), {"--node-rank", "0"});
  flags1.insert(flags1.end(), {"--node-rank", "1"});
  Child node0(group(scratch() + "/node0.db", flags0, worker({"--steps", "1"})));
  auto argv1 = group(scratch() + "/node1.db", flags1, worker({"--steps", "1"}));
  argv1.insert(argv1.begin(),
               {"/usr/bin/env", "TRACERUN_TEST_CLOCK_SKEW_NS=" + std::to_string(skew)});
  Child node1(argv1);
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r1.describe());
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  CHECK(envOf(r0.out, 0, "TRACERUN_CLOCK_OFFSET_NS") == "0");
  CHECK(envOf(r1.out, 1, "RANK") == "1");
  CHECK(envOf(r1.out, 1, "WORLD_SIZE") == "2");
  CHECK(envOf(r1.out, 1, "GROUP_RANK") == "1");
  const auto reader = trace::TraceReader::open(scratch() + "/node1.db");
  REQUIRE(reader.ranks().size() == 1);
  const int64_t offset = std::atoll(envOf(r1.out, 1, "TRACERUN_CLOCK_OFFSET_NS").c_str());
  CHECK(reader.ranks()[0].clock_offset_ns == offset);  // stored in the shard, kept by the merge
  return {offset, std::atoll(envOf(r1.out, 1, "TRACERUN_CLOCK_RTT_NS").c_str())};
}

}  // namespace

TEST_CASE("node agents measure their clock offset: within half the best round trip",
          "[launcher_group]") {
  const auto [same, rtt0] = twoAgents(0);
  CHECK(rtt0 > 0);
  CHECK(std::llabs(same) <= rtt0 / 2 + 1);
  const int64_t skew = 2500000000;  // 2.5 s
  const auto [offset, rtt] = twoAgents(skew);
  CHECK(rtt > 0);
  CHECK(std::llabs(offset - skew) <= rtt / 2 + 1);
}

// ---- several nodes: one trace on node 0 ---------------------------------------------------------

namespace {

// The same job token on both agents.
std::vector<std::string> nodeFlags(const std::string& port, int nodeRank) {
  return {"--nproc-per-node", "2",
          "--nnodes",         "2",
          "--master-addr",    "127.0.0.1",
          "--master-port",    port,
          "--status",         "off",
          "--node-rank",      std::to_string(nodeRank),
          "--job-token",      "group-test-token"};
}

// "[rank R] clock step S BEGIN END" lines: step -> (begin, end) on the rank's real clock.
std::map<int, std::pair<int64_t, int64_t>> stepClocks(const std::string& out, int rank) {
  std::map<int, std::pair<int64_t, int64_t>> steps;
  std::istringstream in(out);
  const std::string key = "[rank " + std::to_string(rank) + "] clock step ";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    int step = 0;
    long long begin = 0, end = 0;
    if (std::sscanf(line.c_str() + key.size(), "%d %lld %lld", &step, &begin, &end) == 3) {
      steps[step] = {begin, end};
    }
  }
  return steps;
}

}  // namespace

TEST_CASE("several nodes: node 0's output holds every node's ranks, on node 0's clock",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const int64_t skew = 1500000000;  // node 1's agent clock reads 1.5 s more
  const std::string out0 = scratch() + "/nodes0.db", out1 = scratch() + "/nodes1.db";
  const auto program = worker({"--steps", "3", "--print-clock"});
  Child node0(group(out0, nodeFlags(port, 0), program));
  auto argv1 = group(out1, nodeFlags(port, 1), program);
  argv1.insert(argv1.begin(),
               {"/usr/bin/env", "TRACERUN_TEST_CLOCK_SKEW_NS=" + std::to_string(skew)});
  Child node1(argv1);
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r0.err + "\n" + r1.describe() + "\n" + r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  CHECK_FALSE(contains(r1.err, "did not reach node 0"));
  CHECK_FALSE(exists(out0 + ".shards"));  // delivered and merged: nothing left behind
  CHECK_FALSE(exists(out1 + ".shards"));

  // Node 1 keeps its own node file with its two ranks.
  CHECK(ranksOf(trace::TraceReader::open(out1)) == std::set<int>{2, 3});

  const auto merged = trace::TraceReader::open(out0);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1, 2, 3});
  const int64_t origin = std::atoll(merged.meta("origin_ns").c_str());
  const int64_t node1Offset = std::atoll(envOf(r1.out, 2, "TRACERUN_CLOCK_OFFSET_NS").c_str());
  CHECK(std::llabs(node1Offset - skew) <= 1000000000);  // measured (exactly: test above)
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& out = rank < 2 ? r0.out : r1.out;
    // Merged time = the rank's clock - its node's offset: every step span lies between the
    // clock readings the rank printed around it, shifted by exactly that offset. 1 ms of slack
    // for the capture's TSC clock (fitted to CLOCK_MONOTONIC); a missing shift is 1.5 s.
    const int64_t offset = rank < 2 ? 0 : node1Offset;
    const int64_t slack = 1000000;
    const auto truth = stepClocks(out, rank);
    REQUIRE(truth.size() == 3);
    std::vector<trace::SpanRow> steps;
    for (const auto& t : merged.tracks()) {
      if (t.rank != rank) continue;
      merged.forEachSpan(t.id, [&](const trace::SpanRow& s) {
        if (merged.str(s.name) == "step") steps.push_back(s);
      });
    }
    REQUIRE(steps.size() == 3);
    std::sort(steps.begin(), steps.end(),
              [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
    for (int step = 1; step <= 3; ++step) {
      INFO("rank " << rank << " step " << step);
      const auto& span = steps[static_cast<size_t>(step - 1)];
      const auto [begin, end] = truth.at(step);
      CHECK(span.start_ns + origin >= begin - offset - slack);
      CHECK(span.start_ns + span.dur_ns + origin <= end - offset + slack);
    }
  }
}

TEST_CASE("several nodes: --ranks leaving out every rank of node 1, node 0 has the rest",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/ranks_nodes0.db", out1 = scratch() + "/ranks_nodes1.db";
  const auto program = worker({"--steps", "2"});
  auto flags0 = nodeFlags(port, 0), flags1 = nodeFlags(port, 1);
  for (auto* f : {&flags0, &flags1}) f->insert(f->end(), {"--ranks", "0-1"});
  Child node0(group(out0, flags0, program));
  Child node1(group(out1, flags1, program));
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r1.describe());
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);  // nothing to trace on node 1 is no failure
  for (int rank : {2, 3}) CHECK(stepLines(r1.out, rank) == 2);
  CHECK_FALSE(contains(r1.err, "no rank wrote a trace"));
  CHECK_FALSE(exists(out1));  // no node file without a traced rank
  CHECK_FALSE(exists(out0 + ".shards"));
  CHECK_FALSE(exists(out1 + ".shards"));
  const auto merged = trace::TraceReader::open(out0);
  CHECK(ranksOf(merged) == std::set<int>{0, 1});
  CHECK(merged.meta("traced_ranks") == "0,1");
  CHECK(merged.meta("world_size") == "4");
}

TEST_CASE("several nodes: --ranks leaving out node 0's ranks, node 0 merges node 1's",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/ranks_swap0.db", out1 = scratch() + "/ranks_swap1.db";
  const auto program = worker({"--steps", "2"});
  auto flags0 = nodeFlags(port, 0), flags1 = nodeFlags(port, 1);
  for (auto* f : {&flags0, &flags1}) f->insert(f->end(), {"--ranks", "3"});
  Child node0(group(out0, flags0, program));
  Child node1(group(out1, flags1, program));
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r1.describe());
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  const auto merged = trace::TraceReader::open(out0);
  CHECK(ranksOf(merged) == std::set<int>{3});
  CHECK(countSpans(merged, 3, "step") == 2);
  CHECK(ranksOf(trace::TraceReader::open(out1)) == std::set<int>{3});  // node 1's node file
}

TEST_CASE("several nodes: a node that does not deliver is named, node 0 keeps its shards",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/lost0.db", out1 = scratch() + "/lost1.db";
  // Every rank would run ~50 s; node 1's agent is killed once its ranks have started: node 0
  // loses its fault link, stops its own ranks, and node 1 never delivers.
  const auto program = worker({"--steps", "1000", "--sleep-ms", "50"});
  auto argv0 = group(out0, nodeFlags(port, 0), program);
  argv0.insert(argv0.begin(), {"/usr/bin/env", "TRACERUN_NODE_TRANSFER_TIMEOUT_S=2"});
  Child node0(argv0);
  Child node1(group(out1, nodeFlags(port, 1), program));
  REQUIRE(waitForOutput(node1, "[rank 2] step 1"));
  REQUIRE(waitForOutput(node0, "[rank 0] step 1"));
  REQUIRE(waitForOutput(node0, "[rank 1] step 1"));
  ::kill(node1.pid(), SIGKILL);
  node1.wait();
  const Result r0 = node0.wait();
  INFO(r0.describe() + "\n" + r0.err);
  CHECK(r0.code == 1);
  CHECK(contains(r0.err, "tracerun: stopped: node 1's agent is gone"));
  CHECK_FALSE(contains(r0.out, "[rank 0] done"));
  CHECK(stepLines(r0.out, 0) < 1000);
  CHECK(contains(r0.err, "node 1 did not deliver its shards within 2 s"));
  CHECK(contains(r0.err, "node 0's shards kept in"));
  CHECK(ranksOf(trace::TraceReader::open(out0)) == std::set<int>{0, 1});
  CHECK(exists(out0 + ".shards/attempt0/rank0.db"));
}

TEST_CASE("several nodes: a node whose shards cannot reach node 0 keeps them and says so",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/gone0.db", out1 = scratch() + "/gone1.db";
  // Every rank would run ~50 s; node 0's agent is killed once node 1's ranks have started: node 1
  // loses its fault link and stops its ranks, and nobody receives its shards.
  const auto program = worker({"--steps", "1000", "--sleep-ms", "50"});
  Child node0(group(out0, nodeFlags(port, 0), program));
  auto argv1 = group(out1, nodeFlags(port, 1), program);
  argv1.insert(argv1.begin(), {"/usr/bin/env", "TRACERUN_NODE_TRANSFER_TIMEOUT_S=2"});
  Child node1(argv1);
  // Both of node 1's ranks have started writing (a rank stopped before that leaves no shard).
  REQUIRE(waitForOutput(node1, "[rank 2] step 1"));
  REQUIRE(waitForOutput(node1, "[rank 3] step 1"));
  ::kill(node0.pid(), SIGKILL);
  node0.wait();
  const Result r1 = node1.wait();
  INFO(r1.describe() + "\n" + r1.err);
  CHECK(r1.code == 1);
  CHECK(contains(r1.err, "tracerun: stopped: node 0's agent is gone"));
  CHECK_FALSE(contains(r1.out, "[rank 2] done"));
  CHECK(stepLines(r1.out, 2) < 1000);
  CHECK(contains(r1.err, "node 1: the shards did not reach node 0"));
  CHECK(ranksOf(trace::TraceReader::open(out1)) == std::set<int>{2, 3});
  CHECK(exists(out1 + ".shards/attempt0/rank2.db"));
  CHECK(exists(out1 + ".shards/attempt0/rank3.db"));
}

// ---- several nodes: faults ----------------------------------------------------------------------

namespace {

// Step spans of `rank` in `reader`, checked against the "[rank R] step N" lines it printed.
void checkStepsUpToFault(const trace::TraceReader& reader, const std::string& out, int rank) {
  INFO("rank " << rank);
  const int64_t printed = stepLines(out, rank);
  const int64_t spans = countSpans(reader, rank, "step");
  INFO("step spans " << spans << ", step lines " << printed);
  CHECK(printed >= 1);
  CHECK(stepsAsPrinted(spans, printed));
}

}  // namespace

TEST_CASE("several nodes: a --master-addr name that is loopback on node 0 is said there",
          "[launcher_group]") {
  // Debian's /etc/hosts maps a host's own name to 127.0.1.1: node 0's agent listens there alone
  // and agents on other hosts wait out their timeout with no word why. Node 0 now says so at once.
  // Both agents on this host reach "localhost", so the job itself runs to its end.
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/lo0.db", out1 = scratch() + "/lo1.db";
  auto flags0 = nodeFlags(port, 0), flags1 = nodeFlags(port, 1);
  for (auto* f : {&flags0, &flags1}) {
    *std::find(f->begin(), f->end(), "127.0.0.1") = "localhost";
  }
  const auto program = worker({"--steps", "1"});
  Child node0(group(out0, flags0, program));
  Child node1(group(out1, flags1, program));
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r0.err + "\n" + r1.describe() + "\n" + r1.err);
  CHECK(r0.code == 0);
  CHECK(r1.code == 0);
  const std::string warning =
      "tracerun: warning: --master-addr localhost is a loopback address on this host (node 0)";
  CHECK(contains(r0.err, warning));
  CHECK_FALSE(contains(r1.err, warning));  // said where it listens, not by every node
  CHECK(ranksOf(trace::TraceReader::open(out0)) == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("several nodes: a rank failing on node 1 stops node 0's ranks, both agents name it",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/fault0.db", out1 = scratch() + "/fault1.db";
  // Every rank would run 1000 steps (~50 s); rank 3 (node 1) exits with code 3 after step 5.
  const auto program = worker({"--steps", "1000", "--sleep-ms", "50", "--fail-rank", "3",
                               "--fail-step", "5", "--fail-code", "3"});
  Child node0(group(out0, nodeFlags(port, 0), program));
  Child node1(group(out1, nodeFlags(port, 1), program));
  const Result r1 = node1.wait(), r0 = node0.wait();
  INFO(r0.describe() + "\n" + r0.err + "\n" + r1.describe() + "\n" + r1.err);
  const std::string fault = "rank 3 on node 1 exited with code 3";
  CHECK(r0.code == 3);
  CHECK(r1.code == 3);
  CHECK(contains(r0.err, "tracerun: node 0: " + fault + "; stopping this node's ranks"));
  CHECK(contains(r0.err, "tracerun: fault on node 1: " + fault));
  CHECK(contains(r1.err, "tracerun: fault on node 1: " + fault));
  // Node 0's ranks were stopped, not run to their end (counted in steps, not timed: 900 steps
  // are >= 45 s, far more than a start-up skew on a loaded machine).
  for (int rank : {0, 1}) {
    CHECK_FALSE(contains(r0.out, "[rank " + std::to_string(rank) + "] done"));
    CHECK(stepLines(r0.out, rank) < 900);
  }
  CHECK(stepLines(r1.out, 2) < 900);
  // The shards were still shipped: node 0's trace holds all 4 ranks up to the fault.
  const auto merged = trace::TraceReader::open(out0);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1, 2, 3});
  checkStepsUpToFault(merged, r0.out, 0);
  checkStepsUpToFault(merged, r0.out, 1);
  checkStepsUpToFault(merged, r1.out, 2);
  CHECK(countSpans(merged, 3, "step") == 5);
  CHECK_FALSE(exists(out0 + ".shards"));
}

TEST_CASE("several nodes: a rank killed on node 0 stops node 1's ranks, both agents name it",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/kill0.db", out1 = scratch() + "/kill1.db";
  // Rank 0 is killed at step 30 (~3 s, two of the capture's 1 s flush periods); the others would
  // run ~100 s.
  const auto program = worker({"--steps", "1000", "--sleep-ms", "100", "--fail-rank", "0",
                               "--fail-step", "30", "--fail-signal", "9"});
  Child node0(group(out0, nodeFlags(port, 0), program));
  Child node1(group(out1, nodeFlags(port, 1), program));
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r0.err + "\n" + r1.describe() + "\n" + r1.err);
  const std::string fault = "rank 0 on node 0 was killed by SIGKILL";
  CHECK(r0.code == 128 + SIGKILL);
  CHECK(r1.code == 128 + SIGKILL);
  CHECK(contains(r1.err, "tracerun: node 1: " + fault + "; stopping this node's ranks"));
  CHECK(contains(r0.err, "tracerun: fault on node 0: " + fault));
  CHECK(contains(r1.err, "tracerun: fault on node 0: " + fault));
  for (int rank : {2, 3}) {
    CHECK_FALSE(contains(r1.out, "[rank " + std::to_string(rank) + "] done"));
    CHECK(stepLines(r1.out, rank) < 400);  // stopped: 1,000 steps of 100 ms are >= 100 s
  }
  const auto merged = trace::TraceReader::open(out0);
  REQUIRE(ranksOf(merged) == std::set<int>{0, 1, 2, 3});
  checkStepsUpToFault(merged, r0.out, 1);
  checkStepsUpToFault(merged, r1.out, 2);
  checkStepsUpToFault(merged, r1.out, 3);
  CHECK(countSpans(merged, 0, "step") >= 1);  // what rank 0 had flushed before it was killed
  CHECK(countSpans(merged, 0, "step") <= 30);
}

TEST_CASE("several nodes: --max-restarts restarts every node together, node 0 numbers the attempt",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  const std::string out0 = scratch() + "/restart0.db", out1 = scratch() + "/restart1.db";
  auto flags0 = nodeFlags(port, 0), flags1 = nodeFlags(port, 1);
  for (auto* f : {&flags0, &flags1}) f->insert(f->end(), {"--max-restarts", "1"});
  // Rank 3 (node 1) exits with code 3 after step 2 of the first attempt only. Steps of 300 ms:
  // node 0's ranks must still run when it fails (with 50 ms steps a loaded machine once started
  // node 1's ranks so late that node 0's had ended: no restart, exit 3).
  const auto program = worker({"--steps", "6", "--sleep-ms", "300", "--fail-rank", "3",
                               "--fail-step", "2", "--fail-code", "3"});
  Child node0(group(out0, flags0, program));
  Child node1(group(out1, flags1, program));
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r0.err + "\n" + r1.describe() + "\n" + r1.err);
  REQUIRE(r0.code == 0);
  REQUIRE(r1.code == 0);
  for (const Result* r : {&r0, &r1}) {
    CHECK(contains(r->err, "rank 3 on node 1 exited with code 3; node 0 restarts every node"));
    CHECK(contains(r->err, "restarting all 4 ranks (restart 1 of 1)"));
  }
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& out = rank < 2 ? r0.out : r1.out;
    const std::string tag = "[rank " + std::to_string(rank) + "] ";
    CHECK(contains(out, tag + "env TORCHELASTIC_RESTART_COUNT=1\n"));
    CHECK(contains(out, tag + "done\n"));
  }
  // Node 0's trace: both attempts of all 4 ranks (node 1 shipped the shards of each): the
  // restarted attempt complete as rows 0-3, attempt 0 as rows 4-7, its rank 3 (row 7) up to the
  // fault after step 2. No node wrote a run.attemptK.db.
  const auto merged = trace::TraceReader::open(out0);
  checkTwoAttempts(merged, 4);
  CHECK(restartedRanks(merged, 1) == std::set<int>{0, 1, 2, 3});
  for (int rank = 0; rank < 4; ++rank) CHECK(countSpans(merged, rank, "step") == 6);
  CHECK(countSpans(merged, 7, "step") == 2);
  for (int rank = 0; rank < 4; ++rank) {
    const std::string& out = rank < 2 ? r0.out : r1.out;
    CHECK(stepsAsPrinted(countSpans(merged, rank + 4, "step") + 6, stepLines(out, rank)));
  }
  // Node 1's own file: its ranks of both attempts (2 and 3; attempt 0's after world 4: 6 and 7).
  CHECK(ranksOf(trace::TraceReader::open(out1)) == std::set<int>{2, 3, 6, 7});
  CHECK_FALSE(exists(scratch() + "/restart0.attempt0.db"));
  CHECK_FALSE(exists(scratch() + "/restart1.attempt0.db"));
  CHECK_FALSE(exists(out0 + ".shards"));
}

TEST_CASE("several nodes: failing again with no restarts left ends every node with the code",
          "[launcher_group]") {
  const std::string port = std::to_string(freePortPair());
  auto flags0 = nodeFlags(port, 0), flags1 = nodeFlags(port, 1);
  for (auto* f : {&flags0, &flags1}) f->insert(f->end(), {"--max-restarts", "1"});
  const auto program = worker({"--steps", "400", "--sleep-ms", "50", "--fail-rank", "1",
                               "--fail-step", "2", "--fail-code", "4", "--fail-every-attempt"});
  Child node0(group(scratch() + "/again0.db", flags0, program));
  Child node1(group(scratch() + "/again1.db", flags1, program));
  const Result r0 = node0.wait(), r1 = node1.wait();
  INFO(r0.describe() + "\n" + r0.err + "\n" + r1.describe() + "\n" + r1.err);
  CHECK(r0.code == 4);
  CHECK(r1.code == 4);
  for (const Result* r : {&r0, &r1}) {
    CHECK(contains(r->err, "restarting all 4 ranks (restart 1 of 1)"));
    CHECK(contains(r->err, "fault on node 0: rank 1 on node 0 exited with code 4 (no restart)"));
  }
  CHECK(contains(r1.out, "[rank 2] env TORCHELASTIC_RESTART_COUNT=1\n"));
  CHECK_FALSE(contains(r1.out, "[rank 2] done"));
}

// ---- gpttrain -----------------------------------------------------------------------------------

#ifdef GPTTRAIN_BIN
namespace {

std::vector<std::string> tinyGpt() {
  return {GPTTRAIN_BIN, "--layers",
          "2",          "--hidden",
          "32",         "--heads",
          "4",          "--seq-len",
          "16",         "--vocab",
          "64",         "--dropout",
          "0",          "--global-batch",
          "8",          "--micro-batch-size",
          "2",          "--seed",
          "7",          "--bucket-mb",
          "0.02",       "--quiet",
          "--tp",       "2",
          "--warmup",   "2"};
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

// The child of `parent` whose environment has RANK=rank, or -1.
pid_t childWithRank(pid_t parent, int rank) {
  DIR* d = ::opendir("/proc");
  pid_t found = -1;
  while (dirent* e = d != nullptr ? ::readdir(d) : nullptr) {
    const pid_t pid = std::atoi(e->d_name);
    if (pid <= 0) continue;
    const std::string stat = readFile("/proc/" + std::to_string(pid) + "/stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (ppid != parent) continue;
    std::string environ = readFile("/proc/" + std::to_string(pid) + "/environ");
    for (char& c : environ) c = c == '\0' ? '\n' : c;
    if (contains("\n" + environ, "\nRANK=" + std::to_string(rank) + "\n")) found = pid;
  }
  if (d != nullptr) ::closedir(d);
  return found;
}

}  // namespace

TEST_CASE("gpttrain --tp 2 under the launcher: one trace with both ranks", "[launcher_group]") {
  const std::string db = scratch() + "/gpt.db";
  auto program = tinyGpt();
  program.insert(program.end(), {"--steps", "3"});
  const Result r = run(group(db, {"--nproc-per-node", "2", "--status", "off"}, program));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == std::set<int>{0, 1});
  CHECK(countSpans(reader, 0, "step") == 3);
  CHECK(countSpans(reader, 1, "step") == 3);
}

TEST_CASE(
    "gpttrain (tp 2, and pp 2 under zb-h1, 2bw, chimera): a rank killed mid-run, restarted "
    "from its checkpoint, gives the same losses",
    "[launcher_group]") {
  // The launcher's --max-restarts with every layout whose checkpoint holds more than weights and
  // moments: the pipeline schedules of issue 18 (2bw: both weight versions).
  const std::string layout = GENERATE(as<std::string>{}, "tp", "zb-h1", "2bw", "chimera");
  INFO("layout " << layout);
  const std::string dir = scratch() + "/gpt_restart_" + layout;
  ::mkdir(dir.c_str(), 0755);
  auto args = tinyGpt();
  if (layout != "tp") {
    const auto tp = std::find(args.begin(), args.end(), "--tp");
    REQUIRE(tp != args.end());
    args.erase(tp, tp + 2);
    args.insert(args.end(), {"--pp", "2", "--schedule", layout});
    if (layout == "2bw") args.insert(args.end(), {"--clip-grad", "0"});  // 2bw clips nothing
  }
  args.insert(args.end(), {"--steps", "30", "--lr-decay-steps", "30"});
  auto full = args;
  full.insert(full.end(), {"--log-json", dir + "/full.json"});
  const Result ref =
      run(group(dir + "/full.db", {"--nproc-per-node", "2", "--status", "off"}, full));
  INFO(ref.describe());
  REQUIRE(ref.code == 0);

  // Restart count 0: a plain run that saves every step; later: resume from the checkpoint.
  std::string cmd = "exec";
  for (const auto& a : args) cmd += " '" + a + "'";
  cmd += " --save '" + dir + "/ckpt' --save-interval 1 --log-json \"" + dir +
         "/run$TORCHELASTIC_RESTART_COUNT.json\"";
  cmd = "if [ \"$TORCHELASTIC_RESTART_COUNT\" -gt 0 ]; then " + cmd + " --load '" + dir +
        "/ckpt'; else " + cmd + "; fi";
  Child c(group(
      dir + "/run.db",
      {"--nproc-per-node", "2", "--status", "off", "--max-restarts", "1", "--target", GPTTRAIN_BIN},
      {"/bin/sh", "-c", cmd}));
  // Kill rank 1 once rank 0 has logged a few steps (each step also saved a checkpoint).
  while (lossesByStep(dir + "/run0.json").size() < 5 && c.running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_t victim = -1;
  while (c.running() && (victim = childWithRank(c.pid(), 1)) < 0) {
  }
  if (victim < 0) UNSCOPED_INFO(c.wait().describe());
  REQUIRE(victim > 0);
  ::kill(victim, SIGKILL);
  const Result r = c.wait();
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(contains(r.err, "was killed by SIGKILL"));
  CHECK(contains(r.err, "restarting all 2 ranks"));
  const auto want = lossesByStep(dir + "/full.json");
  const auto before = lossesByStep(dir + "/run0.json");
  const auto after = lossesByStep(dir + "/run1.json");
  REQUIRE(want.size() == 30);
  REQUIRE_FALSE(after.empty());
  CHECK(after.rbegin()->first == 30);
  CHECK(after.begin()->first > 1);  // resumed, not started over
  for (const auto& [step, loss] : before) CHECK(loss == Approx(want.at(step)).epsilon(1e-6));
  for (const auto& [step, loss] : after) {
    INFO("step " << step);
    CHECK(loss == Approx(want.at(step)).epsilon(1e-6));
  }
  // One trace: the killed attempt's ranks (rows 2 and 3) and the resumed one's (rows 0 and 1);
  // each attempt's loss counters are the losses its rank 0 logged.
  const auto reader = trace::TraceReader::open(dir + "/run.db");
  checkTwoAttempts(reader, 2);
  CHECK(restartedRanks(reader, 1) == std::set<int>{0, 1});
  CHECK_FALSE(exists(dir + "/run.attempt0.db"));
  for (const auto& [row, logged] : {std::pair(0, after), std::pair(2, before)}) {
    INFO("row " << row);
    const auto steps = counterValues(reader, row, "step");
    const auto losses = counterValues(reader, row, "loss");
    REQUIRE(steps.size() == losses.size());
    std::map<int, double> traced;
    for (size_t i = 0; i < steps.size(); ++i) traced[static_cast<int>(steps[i])] = losses[i];
    // A rank stopped by SIGTERM may have traced a step it had not logged yet.
    if (row == 2 && traced.size() == logged.size() + 1) traced.erase(std::prev(traced.end()));
    REQUIRE(traced.size() == logged.size());
    for (const auto& [step, loss] : logged) CHECK(traced[step] == Approx(loss).epsilon(1e-6));
  }
}
#endif
