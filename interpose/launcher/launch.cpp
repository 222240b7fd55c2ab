// `tracerun [options] -- PROGRAM ARGS`: environment for the preloaded library, fork/exec/wait with
// signal forwarding, shard merge and the summary. Never loads libtorch itself; never parses flags
// (launch_command.cpp does, with the rest of the CLI).
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
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "tracerun/trace/error.h"
#include "tracerun/trace/merge.h"
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

std::string withCommas(int64_t v) {
  std::string digits = std::to_string(v < 0 ? -v : v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
  return (v < 0 ? "-" : "") + digits;
}

std::string bytesText(double bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  char b[48];
  std::snprintf(b, sizeof b, unit ? "%.1f %s" : "%.0f %s", bytes, kUnits[unit]);
  return b;
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

std::vector<std::string> shardFiles(const std::string& dir) {
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

bool validCaptureList(const std::string& list, std::string* bad) {
  std::stringstream words(list);
  for (std::string w; std::getline(words, w, ',');) {
    if (w != "ops" && w != "scopes" && w != "memory" && w != "comm" && w != "cuda" &&
        w != "tensors") {
      if (bad) *bad = w;
      return false;
    }
  }
  return true;
}

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
std::string ncclInterposer(const std::string& library, const std::string& capture) {
  bool wanted = false;
  std::stringstream words(capture);
  for (std::string w; std::getline(words, w, ',');) wanted = wanted || w == "comm" || w == "cuda";
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

namespace {

volatile sig_atomic_t gChild = 0;

void forwardSignal(int sig) {
  if (gChild > 0) ::kill(gChild, sig);
}

// Runs PROGRAM and waits. Returns its wait status, or -1 (errno set) when it could not start.
int runChild(const std::string& executable, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  // The terminal sends SIGINT/SIGQUIT to the whole foreground group: the program decides; the
  // launcher waits for it to finish and still merges. SIGTERM/SIGHUP sent to us go to it.
  struct sigaction ignore {
  }, forward{}, oldInt{}, oldQuit{}, oldTerm{}, oldHup{};
  ignore.sa_handler = SIG_IGN;
  forward.sa_handler = forwardSignal;
  ::sigemptyset(&ignore.sa_mask);
  ::sigemptyset(&forward.sa_mask);
  ::sigaction(SIGINT, &ignore, &oldInt);
  ::sigaction(SIGQUIT, &ignore, &oldQuit);
  ::sigaction(SIGTERM, &forward, &oldTerm);
  ::sigaction(SIGHUP, &forward, &oldHup);

  int errPipe[2];
  if (::pipe2(errPipe, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::sigaction(SIGINT, &oldInt, nullptr);
    ::sigaction(SIGQUIT, &oldQuit, nullptr);
    ::sigaction(SIGTERM, &oldTerm, nullptr);
    ::sigaction(SIGHUP, &oldHup, nullptr);
    ::close(errPipe[0]);
    ::execv(executable.c_str(), argv.data());
    const int e = errno;
    if (::write(errPipe[1], &e, sizeof e) < 0) {
    }
    ::_exit(127);
  }
  ::close(errPipe[1]);
  if (pid < 0) {
    ::close(errPipe[0]);
    return -1;
  }
  gChild = pid;
  int execErrno = 0;
  const bool execFailed = ::read(errPipe[0], &execErrno, sizeof execErrno) == sizeof execErrno;
  ::close(errPipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  gChild = 0;
  ::sigaction(SIGINT, &oldInt, nullptr);
  ::sigaction(SIGQUIT, &oldQuit, nullptr);
  ::sigaction(SIGTERM, &oldTerm, nullptr);
  ::sigaction(SIGHUP, &oldHup, nullptr);
  if (execFailed) {
    errno = execErrno;
    return -1;
  }
  return status;
}

}  // namespace

// ---- merge and summary --------------------------------------------------------------------------

void printSummary(const std::string& path) {
  const auto reader = trace::TraceReader::open(path);
  const auto counts = reader.counts();
  int64_t ops = 0, backward = 0, scopes = 0;
  for (const auto& a : reader.aggregates()) {
    if (a.category == core::Category::kOp) ops += a.count;
    if (a.category == core::Category::kBackward) backward += a.count;
    if (a.category == core::Category::kUser || a.category == core::Category::kPhase ||
        a.category == core::Category::kModule) {
      scopes += a.count;
    }
  }
  int64_t dropped = 0, peak = 0, errors = 0;
  for (const auto& s : reader.stats()) {
    if (s.name == "dropped_events") dropped += s.value;
    if (s.name == "memory_peak_bytes") peak = std::max(peak, s.value);
    if (s.severity == trace::Severity::kError) ++errors;
  }
  struct stat st {};
  ::stat(path.c_str(), &st);
  const size_t ranks = reader.ranks().size();
  std::fprintf(stderr, "tracerun: trace written to %s (%zu rank%s, %s)\n", path.c_str(), ranks,
               ranks == 1 ? "" : "s", bytesText(static_cast<double>(st.st_size)).c_str());
  std::fprintf(stderr, "  spans:   %s (ops %s, backward nodes %s, scopes %s)\n",
               withCommas(counts.spans).c_str(), withCommas(ops).c_str(),
               withCommas(backward).c_str(), withCommas(scopes).c_str());
  std::fprintf(stderr, "  events:  %s memory, %s flows, %s counter samples, %s instants\n",
               withCommas(counts.memory).c_str(), withCommas(counts.flows).c_str(),
               withCommas(counts.counters).c_str(), withCommas(counts.instants).c_str());
  std::fprintf(stderr, "  memory:  peak %s live (CPU)\n",
               bytesText(static_cast<double>(peak)).c_str());
  std::fprintf(stderr, "  dropped: %s events%s\n", withCommas(dropped).c_str(),
               errors ? " (stats with severity error: see tracerun info)" : "");
}

std::string keptShardsHint(const std::string& output, const std::string& dir) {
  return "the shards are kept in " + dir + ": once there is room, `tracerun merge " +
         "--allow-incomplete -o " + output + " " + dir + "/rank*.db` merges them";
}

bool reportMergeLoss(const trace::MergeResult& result, const std::string& output,
                     const std::string& dir) {
  std::vector<std::string> unreadable, partial, unclosed;
  for (const auto& s : result.shards) {
    const std::string name = s.path.substr(s.path.rfind('/') + 1);
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
  if (unreadable.empty() && partial.empty() && unclosed.empty()) return false;
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
  uint64_t shardBytes = 0;
  for (const auto& s : result.shards) {
    for (const std::string& file : {s.path, s.path + "-wal"}) {
      struct stat st {};
      if (::stat(file.c_str(), &st) == 0) shardBytes += static_cast<uint64_t>(st.st_size);
    }
  }
  struct statvfs fs {};
  const std::string free =
      ::statvfs(dir.c_str(), &fs) == 0
          ? bytesText(static_cast<double>(fs.f_bavail) * static_cast<double>(fs.f_frsize))
          : std::string("?");
  std::fprintf(stderr,
               "tracerun: %s lacks part of the recording (%s); the file system of %s has %s free, "
               "the shards take %s; %s\n",
               output.c_str(), what.c_str(), dir.c_str(), free.c_str(),
               bytesText(static_cast<double>(shardBytes)).c_str(),
               keptShardsHint(output, dir).c_str());
  return true;
}

// ---- launch -------------------------------------------------------------------------------------

int launch(const LaunchOptions& o) {
  if (o.program.empty()) {
    std::fprintf(stderr, "tracerun: no program given (tracerun [-o run.db] -- PROGRAM ARGS)\n");
    return 2;
  }
  std::string bad;
  if (!validCaptureList(o.capture, &bad)) {
    std::fprintf(stderr,
                 "tracerun: --capture: unknown word '%s' (words: ops, scopes, memory, comm, "
                 "cuda, tensors)\n",
                 bad.c_str());
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

  const std::string shardDir = o.output + ".shards";
  if (::mkdir(shardDir.c_str(), 0755) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "tracerun: %s: cannot create: %s\n", shardDir.c_str(),
                 std::strerror(errno));
    return 2;
  }
  if (o.nproc_per_node <= 0 && o.nnodes <= 1) removeShardFiles(shardDir);

  std::string preload = library;
  if (const std::string nccl = ncclInterposer(library, o.capture); !nccl.empty()) {
    preload += ":" + nccl;  // after libtracerun (it records through it), before any libnccl
  }
  if (const char* old = std::getenv("LD_PRELOAD"); old != nullptr && *old != '\0') {
    preload += std::string(":") + old;
  }
  ::setenv("LD_PRELOAD", preload.c_str(), 1);
  ::setenv("TRACERUN_OUTPUT", (shardDir + "/rank%r.db").c_str(), 1);
  ::setenv("TRACERUN_TARGET", target.c_str(), 1);
  ::setenv("TRACERUN_CAPTURE", o.capture.c_str(), 1);
  ::setenv("TRACERUN_SHAPES", o.shapes ? "1" : "0", 1);
  ::setenv("TRACERUN_CLAIM", "1", 1);
  if (o.nproc_per_node > 0 || o.nnodes > 1) return launchGroup(o, executable, shardDir);

  const int status = runChild(executable, o.program);
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
