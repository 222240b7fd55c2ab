// One rank of a job that torchrun, srun or mpirun started (`tracerun -o run.db -- PROGRAM` run by
// every rank): the torchrun environment the outer launcher left out, PROGRAM run through the
// supervisor, and the one merge of every rank's shard by the last rank to end, on rank 0's clock.
// Detection is outer_job.cpp's; the files' rules are output_guard.h's; the clock exchange across
// nodes is outer_clock.cpp's (one host shares CLOCK_MONOTONIC: offset 0 there, exact).
//
// Sections: markers · merge · launchOuterRank
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <stdexcept>

#include "launch.h"
#include "outer_clock.h"
#include "outer_job.h"
#include "supervisor.h"
#include "tracerun/trace/merge.h"

namespace tracerun::launcher {

// ---- markers ------------------------------------------------------------------------------------

namespace {

// Creates `dir/name` anew (0600, never through a symlink; O_EXCL, which every shared file system
// keeps) and writes `text` into it; false when it exists or cannot be made.
bool createNew(const std::string& dir, const std::string& name, const std::string& text = "") {
  const int fd = ::open((dir + "/" + name).c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  // The marker marks the end either way; its text is a hint (maxRestartCount waits for it).
  const ssize_t written = text.empty() ? 0 : ::write(fd, text.data(), text.size());
  static_cast<void>(written);
  ::close(fd);
  return true;
}

// The highest restart count the ranks wrote into their end markers (their agents' own
// TORCHELASTIC_RESTART_COUNT): over several nodes the agents count apart, and a run is a restart
// when any of them counted one.
int maxRestartCount(const std::string& dir) {
  int highest = 0;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return highest;
  while (dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "done.rank", 9) != 0) continue;
    // A marker another rank created a moment ago may not hold its text yet: a short wait.
    for (int tries = 0; tries < 20; ++tries) {
      const int fd = ::open((dir + "/" + e->d_name).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) break;
      char text[16] = {};
      const ssize_t n = ::read(fd, text, sizeof text - 1);
      ::close(fd);
      if (n > 0) {
        highest = std::max(highest, std::atoi(text));
        break;
      }
      ::usleep(10'000);
    }
  }
  ::closedir(d);
  return highest;
}

// The ranks of this world (0 .. worldSize - 1) that marked their end in `dir`: a marker of a
// larger earlier run under the same job id must not make a smaller one merge before its end.
std::set<int> finishedRanks(const std::string& dir, int worldSize) {
  std::set<int> ranks;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return ranks;
  while (dirent* e = ::readdir(d)) {
    int rank = -1;
    char tail = 0;
    if (std::sscanf(e->d_name, "done.rank%d%c", &rank, &tail) == 1 && rank >= 0 &&
        rank < worldSize) {
      ranks.insert(rank);
    }
  }
  ::closedir(d);
  return ranks;
}

// The first rank at or past `worldSize` with a shard or an end marker in `dir` (-1: none): an
// earlier, larger world's files under the same job id, which the merge would take in (rank*.db)
// and then remove.
int rankPastWorld(const std::string& dir, int worldSize) {
  int found = -1;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = ::readdir(d)) {
    int rank = -1;
    if ((std::sscanf(e->d_name, "rank%d.db", &rank) == 1 ||
         std::sscanf(e->d_name, "done.rank%d", &rank) == 1) &&
        rank >= worldSize && (found < 0 || rank < found)) {
      found = rank;
    }
  }
  ::closedir(d);
  return found;
}

void removeJobDir(const std::string& dir) {
  removeShardFiles(dir);  // rank* (shards, -wal, claims, status)
  DIR* d = ::opendir(dir.c_str());
  if (d != nullptr) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name.rfind("done.rank", 0) == 0 || name.rfind("clock.rank", 0) == 0 ||
          name == "merge.claim") {
        ::unlink((dir + "/" + name).c_str());
      }
    }
    ::closedir(d);
  }
  ::rmdir(dir.c_str());
  ::rmdir(dir.substr(0, dir.rfind('/')).c_str());  // OUTPUT.shards/, when no other job is in it
}

// How long rank 0 waits for the other ranks' end markers: TRACERUN_OUTER_WAIT_S, default 30 s.
long waitMs() {
  const char* v = std::getenv("TRACERUN_OUTER_WAIT_S");
  const double s = v != nullptr && *v != '\0' ? std::atof(v) : 30.0;
  return static_cast<long>((s > 0 ? s : 0) * 1000);
}

std::string mergeByHand(const std::string& output, const std::string& dir) {
  return "tracerun merge --allow-incomplete -o " + output + " " + dir + "/rank*.db";
}

// ---- merge --------------------------------------------------------------------------------------

// Moves the output a run before this restart merged out of the way (OUTPUT.before-restartN): a
// torchrun --max-restarts or a requeued SLURM job merges each run over -o, and the run that
// failed is the one a user wants to read. True when there was none, or it was moved.
bool keepEarlierRun(const std::string& output, int restart) {
  struct stat st {};
  if (restart <= 0 || ::lstat(output.c_str(), &st) != 0) return true;
  // Never over a run kept before: agents that count apart can give two runs the same count.
  std::string kept = output + ".before-restart" + std::to_string(restart);
  for (int k = 2; ::lstat(kept.c_str(), &st) == 0; ++k) {
    kept = output + ".before-restart" + std::to_string(restart) + "." + std::to_string(k);
  }
  if (::rename(output.c_str(), kept.c_str()) != 0) {
    std::fprintf(stderr, "tracerun: cannot keep %s (the run before restart %d) as %s: %s\n",
                 output.c_str(), restart, kept.c_str(), std::strerror(errno));
    return false;
  }
  std::fprintf(stderr, "tracerun: %s, the run before restart %d, is kept as %s\n", output.c_str(),
               restart, kept.c_str());
  return true;
}

// The last rank's merge of every shard in `dir` into the output (after keepEarlierRun for a
// restarted run). Returns 0, or 1 when it failed (the shards are then kept and a line says how to
// finish by hand).
int mergeJob(const LaunchOptions& o, Supervisor& supervisor, const std::string& dir, int restart) {
  const auto shards = shardFiles(dir);
  if (shards.empty()) {
    std::fprintf(stderr, "tracerun: no rank of the job wrote a trace into %s\n", dir.c_str());
    return 1;
  }
  // Merged inside the job's own directory, then renamed over the output: two jobs writing one
  // output never share a temporary file, and the output is always one job's whole trace.
  const std::string staged = dir + "/merged.db";
  trace::MergeResult merged;
  try {
    std::vector<trace::MergeInput> inputs;
    for (const auto& s : shards) {
      trace::MergeInput in{s};
      // A rank on another node than rank 0's left its measured offset (outer_clock.h).
      int rank = -1;
      RankClock clock;
      const std::string name = s.substr(s.rfind('/') + 1);
      if (std::sscanf(name.c_str(), "rank%d.db", &rank) == 1 && readRankClock(dir, rank, &clock)) {
        in.has_offset = true;
        in.clock_offset_ns = clock.start.measured ? clock.start.offset_ns : 0;
        in.stats = clockStats(clock);
      }
      inputs.push_back(std::move(in));
    }
    trace::MergeOptions mo;
    mo.output = staged;
    const MergeGuard guard(supervisor, staged, dir);
    merged = trace::mergeShards(inputs, mo, /*allow_incomplete=*/true);
    if (!keepEarlierRun(o.output, restart)) {
      throw std::runtime_error("the earlier run's " + o.output + " would be replaced");
    }
    if (::rename(staged.c_str(), o.output.c_str()) != 0) {
      throw std::runtime_error("cannot rename " + staged + " to " + o.output + ": " +
                               std::strerror(errno));
    }
    if (!o.quiet) printSummary(o.output);
  } catch (const std::exception& e) {
    ::unlink(staged.c_str());
    std::fprintf(stderr, "tracerun: merging the shards in %s failed: %s; %s\n", dir.c_str(),
                 e.what(), keptShardsHint(o.output, dir).c_str());
    return 1;
  }
  if (reportMergeLoss(merged, o.output, dir)) return 1;
  if (!o.keep_shards) removeJobDir(dir);
  return 0;
}

}  // namespace

// ---- launchOuterRank ----------------------------------------------------------------------------

int launchOuterRank(const LaunchOptions& o, const OuterJob& job, const std::string& executable,
                    const std::string& jobDir) {
  const std::string rankName = "rank" + std::to_string(job.rank) + ".db";
  struct stat st {};
  if (::lstat((jobDir + "/" + rankName).c_str(), &st) == 0 ||
      finishedRanks(jobDir, job.world_size).count(job.rank) != 0) {
    std::fprintf(stderr,
                 "tracerun: %s already holds rank %d's shard of an earlier run with the same job "
                 "id (%s); merge it (%s) or remove the directory\n",
                 jobDir.c_str(), job.rank, job.job_id.c_str(),
                 mergeByHand(o.output, jobDir).c_str());
    return 2;
  }
  if (const int past = rankPastWorld(jobDir, job.world_size); past >= 0) {
    std::fprintf(stderr,
                 "tracerun: %s holds rank %d's files of an earlier, larger run (this one has %d "
                 "ranks) with the same job id (%s); merge it (%s) or remove the directory\n",
                 jobDir.c_str(), past, job.world_size, job.job_id.c_str(),
                 mergeByHand(o.output, jobDir).c_str());
    return 2;
  }
  for (const auto& [name, value] : job.program_env) ::setenv(name.c_str(), value.c_str(), 1);
  // The capture marks where a restarted run begins (a "restart" instant, meta restart), as under
  // tracerun's own --max-restarts.
  if (job.restart > 0) ::setenv("TRACERUN_RESTART", std::to_string(job.restart).c_str(), 1);
  // Ranks on rank 0's host share its CLOCK_MONOTONIC: offset 0 is exact. A rank on another node
  // measures its offset against rank 0's tracerun, before PROGRAM starts and after it ends
  // (docs/launcher.md, "Clocks under an outer launcher"); rank 0 serves while it runs.
  std::optional<OuterClockServer> clockServer;
  if (job.rank == 0 && job.local_world_size != job.world_size) clockServer.emplace(job);
  RankClock clock;
  if (measuresOuterClock(job)) {
    clock.start = measureOuterClock(job, "start", 30);
    ::setenv("TRACERUN_CLOCK_OFFSET_NS", std::to_string(clock.start.offset_ns).c_str(), 1);
    ::setenv("TRACERUN_CLOCK_RTT_NS", std::to_string(clock.start.rtt_ns).c_str(), 1);
    ::setenv("TRACERUN_CLOCK_SOURCE", clock.start.measured ? "measured (outer job)" : "unmeasured",
             1);
  } else {
    ::setenv("TRACERUN_CLOCK_OFFSET_NS", "0", 1);
  }

  Supervisor supervisor(o.grace_s);
  int stopSignal = 0;
  const std::string name = o.program[0] + " (rank " + std::to_string(job.rank) + ")";
  const int status = runChild(supervisor, executable, o.program, o.grace_s, name, &stopSignal);
  if (status < 0) {
    std::fprintf(stderr, "tracerun: %s: cannot run: %s\n", name.c_str(), std::strerror(errno));
  }
  int code = status < 0 ? 127 : 0;
  if (status >= 0 && WIFEXITED(status)) code = WEXITSTATUS(status);
  if (status >= 0 && WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
    std::fprintf(stderr, "tracerun: %s was killed by signal %d (%s)\n", name.c_str(),
                 WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  }
  if (stopSignal != 0) code = 128 + stopSignal;

  if (measuresOuterClock(job)) {
    clock.end = measureOuterClock(job, "end", 10, /*at_end=*/true);
    writeRankClock(jobDir, job.rank, clock);  // before the end marker: the merger reads it
  }

  // Exactly one merge: each rank marks its end with an O_EXCL marker, then counts the markers; a
  // rank that sees all of them races for merge.claim (O_EXCL) and only its winner merges. The last
  // rank to write its marker always sees them all, so a merge always happens once all have ended.
  if (!createNew(jobDir, "done.rank" + std::to_string(job.rank), std::to_string(job.restart))) {
    std::fprintf(stderr, "tracerun: %s: cannot mark rank %d as ended: %s\n", jobDir.c_str(),
                 job.rank, std::strerror(errno));
    return code != 0 ? code : 1;
  }
  std::set<int> done = finishedRanks(jobDir, job.world_size);
  // Rank 0 waits a bounded time for the others, only to say how to finish by hand when one of
  // them never ends (a killed node); the merge itself stays with whichever rank ends last.
  if (job.rank == 0 && static_cast<int>(done.size()) < job.world_size) {
    // Another rank that ended last claims the merge and removes the directory when done: rank 0
    // stops waiting then, not at the deadline (its done markers are gone with the directory).
    const auto mergedElsewhere = [&jobDir] {
      struct stat st {};
      return ::lstat(jobDir.c_str(), &st) != 0 ||
             ::lstat((jobDir + "/merge.claim").c_str(), &st) == 0;
    };
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(waitMs());
    while (static_cast<int>(done.size()) < job.world_size && supervisor.stopSignal() == 0 &&
           std::chrono::steady_clock::now() < until && !mergedElsewhere()) {
      supervisor.wait(100);
      done = finishedRanks(jobDir, job.world_size);
    }
    if (mergedElsewhere()) return code;  // another rank ended last and merges (or has merged)
  }
  if (static_cast<int>(done.size()) < job.world_size) {
    if (job.rank == 0 || code != 0) {
      std::string missing;
      for (int r = 0, listed = 0; r < job.world_size && listed < 8; ++r) {
        if (done.count(r) == 0) missing += (listed++ ? ", " : "") + std::to_string(r);
      }
      std::fprintf(stderr,
                   "tracerun: rank %d ended before rank(s) %s%s of %d; the last rank to end "
                   "merges into %s; if a rank died, merge by hand once all have ended: %s\n",
                   job.rank, missing.c_str(),
                   job.world_size - static_cast<int>(done.size()) > 8 ? ", ..." : "",
                   job.world_size, o.output.c_str(), mergeByHand(o.output, jobDir).c_str());
    }
    return code;
  }
  if (!createNew(jobDir, "merge.claim")) return code;  // another rank saw them all first
  const int merged =
      mergeJob(o, supervisor, jobDir, job.run_from_rank0 ? maxRestartCount(jobDir) : job.restart);
  return code != 0 ? code : merged;
}

}  // namespace tracerun::launcher
