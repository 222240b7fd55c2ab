// `tracerun [options] -- PROGRAM ARGS`: environment for the preloaded library, PROGRAM run and
// stopped through the supervisor (supervisor.h) as a group of one, shard merge and the summary.
// Never loads libtorch itself; never parses flags (launch_command.cpp does, with the rest of the
// CLI).
//
// Sections: helpers · finding things · the child · merge and summary · launch
#include "launch.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "capture_words.h"
#include "commands.h"
#include "outer_clock.h"
#include "outer_job.h"
#include "output_guard.h"
#include "stop_sequence.h"
#include "supervisor.h"
#include "tracerun/trace/error.h"
#include "tracerun/trace/format.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/raw_convert.h"
#include "tracerun/trace/reader.h"

namespace tracerun::launcher {

// ---- helpers ------------------------------------------------------------------------------------

namespace {

bool isFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool isExecutableFile(const std::string& path) {
  return isFile(path) && ::access(path.c_str(), X_OK) == 0;
}

std::string realPath(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) != nullptr ? std::string(buf) : std::string();
}

std::string dirName(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string baseName(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string searchPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (isExecutableFile(candidate)) return candidate;
  }
  return {};
}

}  // namespace

void removeShardFiles(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("rank", 0) == 0) ::unlink((dir + "/" + name).c_str());
  }
  ::closedir(d);
}

// A rank that wrote a raw shard (the default writer) and did not get to convert it (killed, _exit,
// a failed conversion) leaves rankR.db.raw (and the room it held, rankR.db.raw-reserve): build
// rankR.db from it here, after the run, so the merge sees a shard like any other. The raw file goes
// once its shard is written; a conversion that fails is one line and keeps it.
static void convertLeftoverRaw(const std::string& dir) {
  std::vector<std::string> raws;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("rank", 0) == 0 && name.size() > 7 &&
        name.compare(name.size() - 7, 7, ".db.raw") == 0) {
      raws.push_back(dir + "/" + name);
    }
  }
  ::closedir(d);
  std::sort(raws.begin(), raws.end());
  for (const auto& raw : raws) {
    const std::string shard = raw.substr(0, raw.size() - 4);
    ::unlink(trace::rawReservePath(shard).c_str());  // the conversion's room (raw_shard_writer.h)
    // Beside a closed shard the raw file holds nothing more: its rank converted it and was killed
    // before removing it, or it is an older run's (rawIsLeftover).
    if (trace::rawIsLeftover(shard)) {
      ::unlink(raw.c_str());
      continue;
    }
    try {
      trace::convertRawShard(raw, shard);
      ::unlink(raw.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tracerun: converting %s failed: %s; it is kept\n", raw.c_str(),
                   e.what());
    }
  }
}

std::vector<std::string> shardFiles(const std::string& dir) {
  convertLeftoverRaw(dir);
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("rank", 0) == 0 && name.size() > 3 &&
        name.compare(name.size() - 3, 3, ".db") == 0) {
      out.push_back(dir + "/" + name);
    }
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// ---- finding things -----------------------------------------------------------------------------

std::string findLibrary(const std::string& explicitPath) {
  if (!explicitPath.empty()) return isFile(explicitPath) ? realPath(explicitPath) : std::string();
  if (const char* env = std::getenv("TRACERUN_LIBRARY"); env != nullptr && isFile(env)) {
    return realPath(env);
  }
  const std::string self = realPath("/proc/self/exe");
  if (!self.empty()) {
    for (const char* rel : {"/libtracerun.so", "/../lib/libtracerun.so"}) {
      const std::string candidate = dirName(self) + rel;
      if (isFile(candidate)) return realPath(candidate);
    }
  }
#ifdef TRACERUN_BUILD_LIBRARY
  if (isFile(TRACERUN_BUILD_LIBRARY)) return TRACERUN_BUILD_LIBRARY;
#endif
  return {};
}

namespace {

// libtracerun_nccl.so (the NCCL host-call interposer) beside `library`, when the capture words ask
// for collectives or CUDA; empty when not asked for or not built (no nccl.h at build time).
std::string ncclInterposer(const std::string& library, interpose::CaptureSet capture) {
  const bool wanted =
      capture.has(interpose::CaptureWord::kComm) || capture.has(interpose::CaptureWord::kCuda);
  const std::string candidate = dirName(library) + "/libtracerun_nccl.so";
  return wanted && isFile(candidate) ? candidate : std::string();
}

}  // namespace

std::string resolveProgram(const std::string& program) {
  if (program.empty()) return {};
  if (program.find('/') != std::string::npos) {
    return isExecutableFile(program) ? realPath(program) : std::string();
  }
  const std::string found = searchPath(program);
  return found.empty() ? std::string() : realPath(found);
}

std::string captureTarget(const std::string& resolvedProgram) {
  std::ifstream in(resolvedProgram, std::ios::binary);
  std::string first;
  if (!in || !std::getline(in, first) || first.rfind("#!", 0) != 0) return resolvedProgram;
  std::stringstream words(first.substr(2));
  std::string interpreter;
  words >> interpreter;
  if (baseName(interpreter) == "env") {
    std::string next;
    while (words >> next && next[0] == '-') {
    }
    interpreter = next.empty() ? std::string() : searchPath(next);
  }
  const std::string resolved = interpreter.empty() ? std::string() : realPath(interpreter);
  return resolved.empty() ? resolvedProgram : resolved;
}

// ---- the child ----------------------------------------------------------------------------------

// Runs PROGRAM as the supervisor's group of one (in the launcher's process group: it keeps the
// terminal) and waits. A stop signal to the launcher stops it: SIGTERM now, SIGKILL `grace_s`
// later; when the terminal sent SIGINT or SIGQUIT to the whole foreground group PROGRAM got it
// too, and the SIGTERM waits `grace_s` for it to end on its own. Returns its wait status, or -1
// (errno set) when it could not start; *stopSignal: the signal that stopped it, 0 when none did.
int runChild(Supervisor& supervisor, const std::string& executable,
             const std::vector<std::string>& args, double grace_s, const std::string& name,
             int* stopSignal) {
  *stopSignal = 0;
  supervisor.beginRun();
  ChildSpec spec;
  spec.executable = executable;
  spec.args = args;
  const int child = supervisor.start(spec);
  if (child < 0) return -1;
  StopSequence& stop = supervisor.stop();
  for (;;) {
    supervisor.reap([](size_t, int) {});
    if (!supervisor.anyRunning()) break;
    const int sig = supervisor.stopSignal();
    if (sig != 0 && !stop.stopping()) {
      *stopSignal = sig;
      const bool terminal = supervisor.stopFromTerminal() && (sig == SIGINT || sig == SIGQUIT);
      stop.begin(terminal ? stop.grace() : StopSequence::Clock::duration::zero());
      if (terminal) {
        std::fprintf(stderr,
                     "tracerun: %s from the terminal reached %s too; SIGTERM follows in %g s if it "
                     "is still running\n",
                     signalName(sig).c_str(), name.c_str(), grace_s);
      } else {
        std::fprintf(stderr,
                     "tracerun: %s: stopping %s (SIGTERM, SIGKILL %g s later; it flushes its "
                     "trace)\n",
                     signalName(sig).c_str(), name.c_str(), grace_s);
      }
    }
    supervisor.advanceStop();
    supervisor.wait(200);
  }
  return supervisor.child(static_cast<size_t>(child)).status;
}

// ---- merge and summary --------------------------------------------------------------------------

void printSummary(const std::string& path) {
  tools::printRunSummary(path, stderr);  // info's short form: trace/tools/cmd_info.cpp
}

std::string mergeByHandCommand(const std::string& output, const std::vector<std::string>& dirs) {
  std::set<int> attempts;
  bool allAttemptDirs = true;
  for (const auto& dir : dirs) {
    const int attempt = trace::attemptOfShard(dir + "/rank0.db");
    allAttemptDirs = allAttemptDirs && attempt >= 0;
    attempts.insert(attempt);
  }
  std::string command = "tracerun merge --allow-incomplete";
  if (allAttemptDirs && attempts.size() > 1) command += " --attempts";
  command += " -o " + output;
  for (const auto& dir : dirs) command += " " + dir + "/rank*.db";
  return command;
}

std::string listPaths(const std::vector<std::string>& paths) {
  std::string text;
  for (size_t i = 0; i < paths.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == paths.size() ? " and " : ", ") + paths[i];
  }
  return text;
}

std::string keptShardsHint(const std::string& output, const std::vector<std::string>& dirs) {
  // Raw shards not converted (no room) hold records their rankR.db lacks: merge reads each
  // beside its shard, so they go along when the shards are copied.
  bool raw = false;
  for (const auto& dir : dirs) {
    if (DIR* d = ::opendir(dir.c_str())) {
      while (dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        raw = raw || (name.size() > 7 && name.compare(name.size() - 7, 7, ".db.raw") == 0);
      }
      ::closedir(d);
    }
  }
  return "the shards are kept in " + listPaths(dirs) +
         (raw ? " (with rank*.db.raw files beside them: records not yet converted, which the "
                "merge reads; copy them along)"
              : "") +
         ": once there is room, `" + mergeByHandCommand(output, dirs) + "` merges them";
}

std::string keptShardsHint(const std::string& output, const std::string& dir) {
  return keptShardsHint(output, std::vector<std::string>{dir});
}

bool reportMergeLoss(const trace::MergeResult& result, const std::string& output,
                     const std::string& dir) {
  return reportMergeLoss(result, output, std::vector<std::string>{dir});
}

bool reportMergeLoss(const trace::MergeResult& result, const std::string& output,
                     const std::vector<std::string>& dirs) {
  const std::string dir = dirs.empty() ? std::string(".") : dirs.front();
  if (!result.memory_summary_error.empty()) {  // a note, not a loss: nothing recorded is missing
    std::fprintf(stderr,
                 "tracerun: %s: the memory tab's summary was not stored (%s); traceview replays "
                 "the memory events instead\n",
                 output.c_str(), result.memory_summary_error.c_str());
  }
  std::vector<std::string> unreadable, partial, unclosed, unconverted;
  std::string firstRawProblem;
  for (const auto& s : result.shards) {
    const std::string name = s.path.substr(s.path.rfind('/') + 1);
    // A raw file that could not be converted holds records the output lacks: it must stay (the
    // shards are removed only when nothing is lost), whatever else is true of its shard.
    if (!s.raw_problem.empty()) {
      unconverted.push_back(name + ".raw");
      if (firstRawProblem.empty()) firstRawProblem = s.raw_problem;
    }
    if (!s.readable) {
      unreadable.push_back(name);
    } else if (s.unreadable_tables > 0) {
      partial.push_back(std::to_string(s.rank));
    } else if (!s.complete && ::access((s.path + ".close-failed").c_str(), F_OK) == 0) {
      // libtracerun leaves SHARD.close-failed when the writer failed (capture.cpp stopCapture); a
      // shard merely left open (a process that exec'd or was killed) has none.
      unclosed.push_back(std::to_string(s.rank));
    }
  }
  if (unreadable.empty() && partial.empty() && unclosed.empty() && unconverted.empty()) {
    return false;
  }
  auto list = [](const std::vector<std::string>& v) {
    std::string text;
    for (size_t i = 0; i < v.size(); ++i) text += (i ? ", " : "") + v[i];
    return text;
  };
  std::string what;
  auto add = [&](const std::string& clause) { what += (what.empty() ? "" : "; ") + clause; };
  if (!unclosed.empty()) {
    add(std::string(unclosed.size() == 1 ? "rank " : "ranks ") + list(unclosed) +
        (unclosed.size() == 1 ? ": its shard was" : ": their shards were") +
        " not closed by the writer (a write failed: see the rank's line above)");
  }
  if (!partial.empty()) {
    add(std::string(partial.size() == 1 ? "rank " : "ranks ") + list(partial) +
        ": tables of the shard could not be read");
  }
  if (!unreadable.empty()) add(list(unreadable) + " could not be read");
  if (!unconverted.empty()) {
    add(list(unconverted) +
        (unconverted.size() == 1 ? " was not converted, its records are"
                                 : " were not converted, their records are") +
        " only there (" + firstRawProblem + ")");
  }
  uint64_t shardBytes = 0;
  for (const auto& s : result.shards) {
    for (const std::string& file : {s.path, s.path + "-wal", s.path + ".raw"}) {
      struct stat st {};
      if (::stat(file.c_str(), &st) == 0) shardBytes += static_cast<uint64_t>(st.st_size);
    }
  }
  struct statvfs fs {};
  const std::string free =
      ::statvfs(dir.c_str(), &fs) == 0
          ? trace::formatBytes(static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize))
          : std::string("?");
  std::fprintf(stderr,
               "tracerun: %s lacks part of the recording (%s); the file system of %s has %s free, "
               "the shards take %s; %s\n",
               output.c_str(), what.c_str(), dir.c_str(), free.c_str(),
               trace::formatBytes(static_cast<double>(shardBytes)).c_str(),
               keptShardsHint(output, dirs).c_str());
  return true;
}

namespace {

// What is wrong with --ranks (empty: nothing, or no --ranks): a malformed list, a rank outside the
// world, or no traced rank among those this launch starts. Checked before anything runs.
std::string ranksProblem(const LaunchOptions& o, bool group, bool elastic, const OuterJob& outer) {
  if (!o.ranks) return {};
  std::string bad;
  const core::RankSet ranks = core::RankSet::parse(*o.ranks, &bad);
  if (!bad.empty()) return bad;
  // An elastic resize renumbers the ranks: "rank 5" would be another process in every round.
  if (elastic) return "not with --nnodes MIN:MAX (a resize renumbers the ranks)";
  auto outside = [&](int64_t world) {
    return "rank " + std::to_string(ranks.highest()) + " is not in a world of " +
           std::to_string(world) + " rank" + (world == 1 ? "" : "s");
  };
  if (group) {
    const int64_t world = int64_t{o.nnodes} * std::max(o.nproc_per_node, 1);
    return ranks.highest() >= world ? outside(world) : std::string();
  }
  if (!outer.launcher.empty()) {
    return ranks.highest() >= outer.world_size ? outside(outer.world_size) : std::string();
  }
  // One process: it is the rank RANK says (0 when unset), as libtracerun will read it.
  const int self = core::rankFromEnvironment();
  if (!ranks.contains(self)) {
    return "PROGRAM is rank " + std::to_string(self) +
           ", not in the list: nothing would be traced (--nproc-per-node starts ranks, or run "
           "tracerun under torchrun or srun)";
  }
  return {};
}

}  // namespace

// ---- launch -------------------------------------------------------------------------------------

int launch(const LaunchOptions& o) {
  if (o.program.empty()) {
    std::fprintf(stderr, "tracerun: no program given (tracerun [-o run.db] -- PROGRAM ARGS)\n");
    return 2;
  }
  std::string bad;
  const interpose::CaptureSet capture = interpose::CaptureSet::parse(o.capture, &bad);
  if (!bad.empty()) {
    std::fprintf(stderr, "tracerun: --capture: %s\n", bad.c_str());
    return 2;
  }
  const std::string library = findLibrary(o.library);
  if (library.empty()) {
    std::fprintf(stderr,
                 "tracerun: libtracerun.so not found next to this binary (was it built? it needs "
                 "libtorch); set TRACERUN_LIBRARY to its path\n");
    return 2;
  }
  const std::string executable = resolveProgram(o.program[0]);
  if (executable.empty()) {
    std::fprintf(stderr, "tracerun: %s: command not found or not executable\n",
                 o.program[0].c_str());
    return 127;
  }
  const std::string target = o.target.empty() ? captureTarget(executable) : o.target;

  // Everything about the output and the nodes is checked before a directory is made or the
  // program runs.
  if (const std::string p = outputProblem(o.output); !p.empty()) {
    std::fprintf(stderr, "tracerun: %s\n", p.c_str());
    return 2;
  }
  const bool elastic = o.min_nodes > 0;  // --nnodes MIN:MAX (elastic.cpp)
  const bool group = o.nproc_per_node > 0 || o.nnodes > 1 || elastic;
  const std::string optionsProblem = elastic ? elasticOptionsProblem(o)
                                     : group ? groupOptionsProblem(o)
                                             : std::string();
  if (const std::string& p = optionsProblem; !p.empty()) {
    std::fprintf(stderr, "tracerun: %s\n", p.c_str());
    return 2;
  }
  // One rank of a job another launcher started (torchrun, srun, mpirun: outer_job.h): its shard
  // goes to OUTPUT.shards/JOB/, which every rank of the job shares (outer_launch.cpp).
  OuterJob outer = group ? OuterJob{} : detectOuterJob(environMap(), ::getppid());
  if (!outer.problem.empty()) {
    std::fprintf(stderr, "tracerun: %s\n", outer.problem.c_str());
    return 2;
  }
  if (const std::string p = ranksProblem(o, group, elastic, outer); !p.empty()) {
    std::fprintf(stderr, "tracerun: --ranks%s%s: %s\n", o.ranks->empty() ? "" : " ",
                 o.ranks->c_str(), p.c_str());
    return 2;
  }
  labelRun(&outer);  // torchrun over several nodes: the run named by rank 0 (outer_clock.h)
  // OUTPUT.shards/: ours alone (0700, refused when another user could write in it) and locked
  // until we exit, so a second launch with the same output is refused. An outer job's ranks share
  // it (no lock); their job directory inside it is private the same way.
  std::string shardDir = o.output + ".shards";
  std::optional<OutputLock> lock;
  if (!outer.launcher.empty()) {
    std::string p = makePrivateDir(shardDir);
    shardDir += "/" + outer.job_id;
    if (p.empty()) p = makePrivateDir(shardDir);
    if (!p.empty()) {
      std::fprintf(stderr, "tracerun: %s\n", p.c_str());
      return 2;
    }
  } else {
    lock.emplace(shardDir, o.output);
    if (!lock->ok()) {
      std::fprintf(stderr, "tracerun: %s\n", lock->problem().c_str());
      return 2;
    }
    if (!lock->note().empty()) std::fprintf(stderr, "tracerun: note: %s\n", lock->note().c_str());
    if (!group) removeShardFiles(shardDir);
  }

  std::string preload = library;
  if (const std::string nccl = ncclInterposer(library, capture); !nccl.empty()) {
    preload += ":" + nccl;  // after libtracerun (it records through it), before any libnccl
  }
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') {
    preload += std::string(":") + old;
  }
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  // "%r" is the rank; a "%" of the user's own output name is passed doubled (status_file.h).
  ::setenv("TRACERUN_OUTPUT", (escapePattern(shardDir) + "/rank%r.db").c_str(), 1);
  ::setenv("TRACERUN_TARGET", target.c_str(), 1);
  ::setenv("TRACERUN_CAPTURE", capture.text().c_str(), 1);
  ::setenv("TRACERUN_SHAPES", o.shapes ? "1" : "0", 1);
  ::setenv("TRACERUN_CLAIM", "1", 1);
  if (const auto traced = tracedRanks(o)) {
    ::setenv("TRACERUN_RANKS", traced->text().c_str(), 1);
  } else {
    ::unsetenv("TRACERUN_RANKS");  // an outer tracerun's list is not ours
  }
  // Python programs: nn.Module scopes through the sitecustomize.py found here (docs/capture.md).
  if (const std::string hooks = dirName(library) + "/tracerun-python";
      isFile(hooks + "/sitecustomize.py")) {
    const char* old = std::getenv("PYTHONPATH");
    ::setenv("PYTHONPATH", (old != nullptr && *old != '\0' ? hooks + ":" + old : hooks).c_str(), 1);
  }
  if (elastic) return launchElastic(o, executable, shardDir);
  if (group) return launchGroup(o, executable, shardDir);
  if (!outer.launcher.empty()) return launchOuterRank(o, outer, executable, shardDir);

  Supervisor supervisor(o.grace_s);  // the launcher's signals and PROGRAM, to the end
  int stopSignal = 0;
  const int status =
      runChild(supervisor, executable, o.program, o.grace_s, o.program[0], &stopSignal);
  if (status < 0) {
    std::fprintf(stderr, "tracerun: %s: cannot run: %s\n", o.program[0].c_str(),
                 std::strerror(errno));
    return 127;
  }
  int code = 0;
  if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
    if (code != 0 && !o.quiet) {
      std::fprintf(stderr, "tracerun: %s exited with code %d\n", o.program[0].c_str(), code);
    }
  } else if (WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
    std::fprintf(stderr, "tracerun: %s was killed by signal %d (%s)\n", o.program[0].c_str(),
                 WTERMSIG(status), ::strsignal(WTERMSIG(status)));
  }
  if (stopSignal != 0) code = 128 + stopSignal;  // stopped by the launcher: as multi-rank mode

  const auto shards = shardFiles(shardDir);
  if (shards.empty()) {
    std::fprintf(stderr,
                 "tracerun: no trace was written: %s never started capturing (it must load "
                 "libtorch; the capture target was %s)\n",
                 o.program[0].c_str(), target.c_str());
    return code != 0 ? code : 1;
  }
  trace::MergeResult merged;
  try {
    std::vector<trace::MergeInput> inputs;
    for (const auto& s : shards) inputs.push_back({s});
    trace::MergeOptions mo;
    mo.output = o.output;
    const MergeGuard guard(supervisor, o.output, shardDir);  // the merge completes
    merged = trace::mergeShards(inputs, mo, /*allow_incomplete=*/true);
    if (!o.quiet) printSummary(o.output);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracerun: merging the shards in %s failed: %s; %s\n", shardDir.c_str(),
                 e.what(), keptShardsHint(o.output, shardDir).c_str());
    return code != 0 ? code : 1;
  }
  // A shard not merged whole (a full disk cut its writer short) fails the run and stays.
  if (reportMergeLoss(merged, o.output, shardDir)) return code != 0 ? code : 1;
  if (!o.keep_shards) {
    removeShardFiles(shardDir);
    ::rmdir(shardDir.c_str());
  }
  return code;
}

}  // namespace tracerun::launcher
