// End-to-end: what the launcher promises about files and signals (docs/launcher.md). Another
// user's shards directory with planted symlinks is refused and nothing of theirs is written; a
// shards directory others can write is refused; shards are private; two launches with one output;
// -o names checked before anything runs; signals stop the program and the merge completes. Runs
// the tracerun binary on launcher_worker; no libtorch here, no timed assertions.
//
// Sections: running processes · another user's directory · one output, one launcher · -o names
//           and nodes · signals · a raw shard that cannot be converted
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/child_process.h"
#include "tracerun/core/raw_shard.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

// ---- running processes --------------------------------------------------------------------------

namespace {

using Result = testing::ProcessResult;
using testing::readFile;

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

const std::string& scratch() {
  static const std::string dir = [] {
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return testing::processScratchDir("tracerun_files");
  }();
  return dir;
}

struct Child : testing::Child {
  explicit Child(const std::vector<std::string>& argv) : testing::Child(argv, scratch()) {}
};

Result run(const std::vector<std::string>& argv) {
  return Child(argv).wait();
}

std::vector<std::string> launch(const std::string& output, std::vector<std::string> flags,
                                std::vector<std::string> program) {
  std::vector<std::string> argv = {TRACERUN_BIN, "-q", "-o", output, "--status", "off"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.push_back("--");
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

std::vector<std::string> worker(std::vector<std::string> args) {
  args.insert(args.begin(), WORKER_BIN);
  return args;
}

bool contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

int lines(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Waits (no time limit: ctest's is the limit) until `path` exists; false when `child` ended first.
bool waitForFile(Child& child, const std::string& path, std::chrono::milliseconds every) {
  while (!exists(path)) {
    if (!child.running()) return exists(path);
    std::this_thread::sleep_for(every);
  }
  return true;
}

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

std::set<int> ranksOf(const trace::TraceReader& r) {
  std::set<int> out;
  for (const auto& k : r.ranks()) out.insert(k.rank);
  return out;
}

// "step N" lines the program printed (single-process mode: its stdout is the launcher's).
int64_t stepLines(const std::string& out, const std::string& prefix = "") {
  int64_t n = 0;
  const std::string key = prefix + "step ";
  for (auto at = out.find(key); at != std::string::npos; at = out.find(key, at + 1)) {
    n += at == 0 || out[at - 1] == '\n';
  }
  return n;
}

unsigned modeOf(const std::string& path) {
  struct stat st {};
  ::lstat(path.c_str(), &st);
  return st.st_mode & 07777;
}

}  // namespace

// ---- another user's directory -------------------------------------------------------------------

TEST_CASE(
    "another user's shards directory with planted symlinks: refused and their target unchanged",
    "[launcher_files]") {
  const passwd* nobody = ::getpwnam("nobody");
  if (::geteuid() != 0 || nobody == nullptr || !exists("/usr/sbin/runuser")) {
    WARN("skipped: needs root, a 'nobody' user and /usr/sbin/runuser to play the other user");
    return;
  }
  // A sticky world-writable directory, as /tmp is; the files root owns, which the links name.
  const std::string shared = scratch() + "/shared";
  ::mkdir(shared.c_str(), 0700);
  REQUIRE(::chmod(shared.c_str(), 01777) == 0);
  const std::string precious = scratch() + "/precious.txt";
  const std::string precious2 = scratch() + "/precious2.txt";
  for (const auto& p : {precious, precious2}) {
    std::FILE* f = std::fopen(p.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs("root's own file\n", f);
    std::fclose(f);
  }
  const std::string db = shared + "/x.db";
  const std::string shards = db + ".shards";
  const std::string stop = scratch() + "/stop-planting";
  // nobody makes x.db.shards/ (and attempt0/, with a subdirectory so that it cannot be removed)
  // and keeps links where the run writes: the status file's temporary, the shards; re-planted in a
  // loop, as an attacker racing the launcher's cleanup would.
  const std::string plant = "ln -sfn " + precious + " " + shards + "/attempt0/status.rank0.tmp; " +
                            "ln -sfn " + precious2 + " " + shards + "/attempt0/rank0.db; " +
                            "ln -sfn " + precious2 + " " + shards + "/rank0.db";
  const Result setup = run({"/usr/sbin/runuser", "-u", "nobody", "--", "/bin/sh", "-c",
                            "umask 0 && mkdir -p " + shards + "/attempt0/keep && " + plant});
  INFO(setup.describe());
  REQUIRE(setup.code == 0);
  Child planter({"/usr/sbin/runuser", "-u", "nobody", "--", "/bin/sh", "-c",
                 "umask 0; while [ ! -e " + stop + " ]; do " + plant + "; done"});

  const Result group =
      run(launch(db, {"--nproc-per-node", "1"}, worker({"--steps", "30", "--sleep-ms", "100"})));
  const Result single = run(launch(db, {}, worker({"--steps", "30", "--sleep-ms", "100"})));
  std::FILE* f = std::fopen(stop.c_str(), "w");
  if (f != nullptr) std::fclose(f);
  planter.wait();

  INFO("multi-rank: " + group.describe() + "\nsingle: " + single.describe());
  CHECK(readFile(precious) == "root's own file\n");
  CHECK(readFile(precious2) == "root's own file\n");
  for (const Result* r : {&group, &single}) {
    CHECK(r->code == 2);
    CHECK(lines(r->err) == 1);
    CHECK(contains(r->err, shards + " belongs to nobody"));
    CHECK_FALSE(contains(r->out, "step 1"));  // refused before the program ran
  }
  CHECK_FALSE(exists(db));
}

TEST_CASE("libtracerun never writes its status file through a symlink planted meanwhile",
          "[launcher_files]") {
  // Without the launcher (which would refuse a directory others can write): the library alone,
  // while a loop keeps planting a symlink to a file of ours as the status file's temporary.
  const std::string dir = scratch() + "/planted";
  ::mkdir(dir.c_str(), 0700);
  const std::string target = scratch() + "/planted-target.txt";
  std::FILE* f = std::fopen(target.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("not a status line\n", f);
  std::fclose(f);
  const std::string stop = scratch() + "/planted-stop";
  Child planter({"/bin/sh", "-c",
                 "while [ ! -e " + stop + " ]; do ln -sfn " + target + " " + dir +
                     "/status.rank0.tmp; done"});
  const Result r =
      run({"/usr/bin/env", std::string("LD_PRELOAD=") + LIBTRACERUN,
           "TRACERUN_OUTPUT=" + dir + "/rank%r.db", "TRACERUN_STATUS=" + dir + "/status.rank%r",
           WORKER_BIN, "--steps", "25", "--sleep-ms", "100"});
  f = std::fopen(stop.c_str(), "w");
  if (f != nullptr) std::fclose(f);
  planter.wait();
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(readFile(target) == "not a status line\n");
  // The status file itself was written (a regular file, not the planted link renamed).
  struct stat st {};
  CHECK(::lstat((dir + "/status.rank0").c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK(readFile(dir + "/status.rank0").rfind("step=", 0) == 0);
  CHECK(countSpans(trace::TraceReader::open(dir + "/rank0.db"), 0, "step") == 25);
}

TEST_CASE("a shards directory that others can write is refused and once private it is used",
          "[launcher_files]") {
  const std::string db = scratch() + "/open.db";
  const std::string shards = db + ".shards";
  ::mkdir(shards.c_str(), 0700);
  REQUIRE(::chmod(shards.c_str(), 0777) == 0);
  const Result refused = run(launch(db, {}, worker({"--steps", "2"})));
  INFO(refused.describe());
  CHECK(refused.code == 2);
  CHECK(lines(refused.err) == 1);
  CHECK(contains(refused.err, "is writable by others (mode 0777)"));
  CHECK_FALSE(contains(refused.out, "step 1"));

  REQUIRE(::chmod(shards.c_str(), 0700) == 0);
  const Result used = run(launch(db, {}, worker({"--steps", "2"})));
  INFO(used.describe());
  CHECK(used.code == 0);
  CHECK(countSpans(trace::TraceReader::open(db), 0, "step") == 2);
}

TEST_CASE("the shards directory and attempt directories and shards are private to the user",
          "[launcher_files]") {
  const std::string db = scratch() + "/private.db";
  const Result r = run(launch(db, {"--keep-shards", "--nproc-per-node", "1"},
                              worker({"--steps", "3", "--sleep-ms", "600"})));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(modeOf(db + ".shards") == 0700);
  CHECK(modeOf(db + ".shards/attempt0") == 0700);
  CHECK(modeOf(db + ".shards/attempt0/rank0.db") == 0600);
  if (exists(db + ".shards/attempt0/status.rank0")) {  // written every 0.5 s while it changes
    CHECK(modeOf(db + ".shards/attempt0/status.rank0") == 0600);
  }

  const std::string single = scratch() + "/private1.db";
  const Result s = run(launch(single, {"--keep-shards"}, worker({"--steps", "2"})));
  INFO(s.describe());
  REQUIRE(s.code == 0);
  CHECK(modeOf(single + ".shards") == 0700);
  CHECK(modeOf(single + ".shards/rank0.db") == 0600);
  CHECK(modeOf(single + ".shards/rank0.db.claim") == 0600);
}

// ---- one output, one launcher -------------------------------------------------------------------

namespace {

// The first launch's program: the worker, then a wait for `gate` (a file the test creates once
// the second launch has been answered), so the first is surely still running meanwhile.
std::vector<std::string> gatedWorker(const std::string& gate, int steps) {
  return {"/bin/sh", "-c",
          std::string(WORKER_BIN) + " --steps " + std::to_string(steps) + " && while [ ! -e " +
              gate + " ]; do sleep 0.05; done"};
}

void twoLaunches(const std::string& name, std::vector<std::string> flags, const std::string& done,
                 const std::set<int>& ranks) {
  const std::string db = scratch() + "/" + name + ".db";
  const std::string gate = scratch() + "/" + name + ".gate";
  auto firstFlags = flags;
  firstFlags.insert(firstFlags.end(), {"--target", WORKER_BIN});
  Child first(launch(db, firstFlags, gatedWorker(gate, 4)));
  const bool running = waitForOutput(first, done);
  if (!running) UNSCOPED_INFO(first.wait().describe());
  REQUIRE(running);

  const Result second = run(launch(db, flags, worker({"--steps", "2"})));
  std::FILE* f = std::fopen(gate.c_str(), "w");
  if (f != nullptr) std::fclose(f);
  const Result r = first.wait();
  INFO("second: " + second.describe() + "\nfirst: " + r.describe());
  CHECK(second.code == 2);
  CHECK(lines(second.err) == 1);
  CHECK(contains(second.err, db + " is being written by another tracerun (pid " +
                                 std::to_string(first.pid()) + ")"));
  CHECK_FALSE(contains(second.out, "step 1"));
  REQUIRE(r.code == 0);
  const auto reader = trace::TraceReader::open(db);
  CHECK(ranksOf(reader) == ranks);
  for (int rank : ranks) CHECK(countSpans(reader, rank, "step") == 4);
  CHECK_FALSE(exists(db + ".shards"));  // the lock leaves nothing behind
}

}  // namespace

TEST_CASE("a second launch with the same output is refused while the first runs (one process)",
          "[launcher_files]") {
  twoLaunches("twice", {}, "done\n", {0});
}

TEST_CASE("a second launch with the same output is refused while the first runs (two ranks)",
          "[launcher_files]") {
  twoLaunches("twice2", {"--nproc-per-node", "2"}, "[rank 1] done\n", {0, 1});
}

// ---- -o names and nodes -------------------------------------------------------------------------

TEST_CASE("an output naming a directory fails before the program runs", "[launcher_files]") {
  const std::string dir = scratch() + "/adir";
  ::mkdir(dir.c_str(), 0755);
  for (const auto& flags : std::vector<std::vector<std::string>>{{}, {"--nproc-per-node", "1"}}) {
    const Result r = run(launch(dir, flags, worker({"--steps", "2"})));
    INFO(r.describe());
    CHECK(r.code == 2);
    CHECK(lines(r.err) == 1);
    CHECK(contains(r.err, "-o " + dir + ": is a directory"));
    CHECK_FALSE(contains(r.out, "step 1"));
    CHECK_FALSE(exists(dir + ".shards"));
  }
}

TEST_CASE("a % in the output name is kept as it is (one process and two ranks)",
          "[launcher_files]") {
  const std::string db = scratch() + "/run%r%%.db";
  const Result r = run(launch(db, {}, worker({"--steps", "2"})));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(countSpans(trace::TraceReader::open(db), 0, "step") == 2);
  CHECK_FALSE(exists(scratch() + "/run0%.db.shards"));

  const std::string db2 = scratch() + "/ranks%r.db";
  const Result g = run(launch(db2, {"--nproc-per-node", "2"}, worker({"--steps", "2"})));
  INFO(g.describe());
  REQUIRE(g.code == 0);
  CHECK(ranksOf(trace::TraceReader::open(db2)) == std::set<int>{0, 1});
}

TEST_CASE("a node rank outside the node count fails before any directory is made",
          "[launcher_files]") {
  const std::string db = scratch() + "/nodes.db";
  const Result r = run(launch(
      db,
      {"--nnodes", "2", "--node-rank", "5", "--master-addr", "127.0.0.1", "--master-port", "29999"},
      worker({"--steps", "2"})));
  INFO(r.describe());
  CHECK(r.code == 2);
  CHECK(lines(r.err) == 1);
  CHECK(contains(r.err, "--node-rank 5 is outside 0..1"));
  CHECK_FALSE(exists(db + ".shards"));
}

// ---- signals ------------------------------------------------------------------------------------

TEST_CASE("SIGINT to the launcher stops a single program and what it recorded is merged",
          "[launcher_files]") {
  const std::string db = scratch() + "/int.db";
  Child c(launch(db, {}, worker({"--steps", "3000", "--sleep-ms", "5"})));
  const bool started = waitForOutput(c, "step 3\n");
  if (!started) UNSCOPED_INFO(c.wait().describe());
  REQUIRE(started);
  ::kill(c.pid(), SIGINT);
  const Result r = c.wait();
  INFO(r.describe());
  CHECK(r.code == 130);
  CHECK_FALSE(contains(r.out, "done"));
  CHECK(contains(r.err, "tracerun: SIGINT: stopping"));
  const auto reader = trace::TraceReader::open(db);
  // Every step printed was recorded (and perhaps the one the signal cut between its end and its
  // line).
  const int64_t spans = countSpans(reader, 0, "step");
  CHECK(spans >= 3);
  CHECK(spans >= stepLines(r.out));
  CHECK(spans <= stepLines(r.out) + 1);
}

namespace {

// A launch whose merge takes a while (many ops in one shard). Stops the launcher (SIGSTOP) once
// the merge's temporary file exists, queues `signals`, lets it go on, and returns its result.
Result signalDuringMerge(const std::string& db, std::vector<std::string> flags,
                         const std::vector<int>& signals) {
  auto argv = launch(db, flags, worker({"--steps", "30000"}));
  // A ring that holds every event of a step loop without sleeps (no drops: all steps are merged).
  argv.insert(argv.begin(), {"/usr/bin/env", "TRACERUN_BUFFER_MB=256"});
  Child c(argv);
  const bool merging = waitForFile(c, db + ".tmp", std::chrono::milliseconds(1));
  if (!merging) UNSCOPED_INFO(c.wait().describe());
  REQUIRE(merging);
  ::kill(c.pid(), SIGSTOP);
  const bool stillMerging = exists(db + ".tmp") && !exists(db);
  for (int sig : signals) ::kill(c.pid(), sig);
  ::kill(c.pid(), SIGCONT);
  const Result r = c.wait();
  UNSCOPED_INFO(r.describe());
  REQUIRE(stillMerging);  // else the merge was too quick to be caught: more steps
  return r;
}

}  // namespace

TEST_CASE("a signal during the merge: one line and the merge completes", "[launcher_files]") {
  for (const auto& flags : std::vector<std::vector<std::string>>{{}, {"--nproc-per-node", "1"}}) {
    const std::string db = scratch() + "/merge" + std::to_string(flags.size()) + ".db";
    const Result r = signalDuringMerge(db, flags, {SIGINT});
    CHECK(r.code == 0);
    CHECK(contains(r.err,
                   "tracerun: merging the trace; send the signal again to abandon it (the shards "
                   "are kept)\n"));
    CHECK(countSpans(trace::TraceReader::open(db), 0, "step") == 30000);
    CHECK_FALSE(exists(db + ".tmp"));
    CHECK_FALSE(exists(db + ".shards"));
  }
}

TEST_CASE("two signals during the merge abandon it: no temporary file and the shards kept",
          "[launcher_files]") {
  const std::string db = scratch() + "/abandon.db";
  const Result r = signalDuringMerge(db, {}, {SIGINT, SIGTERM});
  CHECK(r.code == 128 + SIGTERM);
  CHECK(contains(r.err, "tracerun: merge abandoned, " + db + " not written; the shards are kept"));
  CHECK_FALSE(exists(db + ".tmp"));
  CHECK_FALSE(exists(db));
  REQUIRE(exists(db + ".shards/rank0.db"));
  // The shards are whole: `tracerun merge` finishes what was abandoned.
  const Result m = run({TRACERUN_BIN, "merge", "-o", db, db + ".shards/rank0.db"});
  INFO(m.describe());
  CHECK(m.code == 0);
  CHECK(countSpans(trace::TraceReader::open(db), 0, "step") == 30000);
}

// ---- a raw shard that cannot be converted -------------------------------------------------------

// A killed rank leaves its records in rankR.db.raw for the launcher to convert. When that fails
// (here the rank spoiled its file's magic before dying, a stand-in for a full disk), the file is
// the only copy of them: the run says so and keeps it (it used to remove it with the shards and
// say nothing), `tracerun merge` names it, and once it is mended every flushed step is back.
TEST_CASE("a killed rank's raw shard that cannot be converted is kept and named",
          "[launcher_files]") {
  const std::string db = scratch() + "/spoiled.db";
  const std::string shard = db + ".shards/rank0.db", raw = shard + ".raw";
  // Two flush periods (1 s each) before the kill, so that the file holds steps.
  const Result r =
      run(launch(db, {},
                 worker({"--steps", "20", "--sleep-ms", "600", "--fail-rank", "0", "--fail-step",
                         "5", "--fail-signal", std::to_string(SIGKILL), "--spoil-raw", raw})));
  INFO(r.describe());
  CHECK(r.code != 0);
  CHECK_FALSE(contains(r.out, "cannot spoil"));
  CHECK(contains(r.err, "tracerun: converting " + raw + " failed: " + raw +
                            ": not a tracerun raw shard (bad magic); it is kept\n"));
  CHECK(contains(r.err, "rank0.db.raw was not converted, its records are only there"));
  CHECK(contains(r.err, "the shards are kept in"));
  REQUIRE(exists(raw));
  REQUIRE(exists(shard));

  // By hand: without --allow-incomplete the conversion's error is the merge's, with it the
  // merge is written without those records, says so on one line and exits 3.
  const std::string out = scratch() + "/spoiled_merged.db";
  const Result strict = run({TRACERUN_BIN, "merge", "-q", "-o", out, shard});
  CHECK(strict.code == 1);
  CHECK(contains(strict.err, raw + ": not a tracerun raw shard (bad magic)"));
  const Result loose = run({TRACERUN_BIN, "merge", "-q", "--allow-incomplete", "-o", out, shard});
  INFO(loose.describe());
  CHECK(loose.code == 3);
  CHECK(contains(loose.err, "tracerun merge: " + raw + ": its records could not be converted (" +
                                raw +
                                ": not a tracerun raw shard (bad magic)); merged without them, "
                                "the file is kept\n"));
  CHECK(exists(raw));

  // Mended (the magic written back), the kept file gives the steps back.
  {
    const int fd = ::open(raw.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    CHECK(::pwrite(fd, core::kRawMagic, sizeof core::kRawMagic, 0) ==
          static_cast<ssize_t>(sizeof core::kRawMagic));
    ::close(fd);
  }
  const Result mended = run({TRACERUN_BIN, "merge", "-q", "--allow-incomplete", "-o", out, shard});
  INFO(mended.describe());
  CHECK(mended.code == 0);
  const int64_t steps = countSpans(trace::TraceReader::open(out), 0, "step");
  CHECK(steps >= 1);
  CHECK(steps <= stepLines(r.out));
}
