// Running a program from a test: fork + execv with stdout and stderr captured to files in a
// scratch directory, then its exit status and output. Test-only; no shell, no PATH lookup.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "process_scratch.h"

namespace tracerun::testing {

struct ProcessResult {
  bool exited = false;  // ended by exit(), not by a signal
  int code = -1;        // the exit code, or 128 + the signal (as a shell reports it)
  int signal = 0;       // the signal that ended it, 0 when it exited
  std::string out, err;
  std::string describe() const {
    return (exited ? "exit " + std::to_string(code) : "signal " + std::to_string(signal)) +
           "\nstdout:\n" + out + "\nstderr:\n" + err;
  }
};

inline std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline bool fileExists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A scratch directory for the children of this test process: $TMPDIR/<prefix>_<pid> (/tmp without
// TMPDIR; prefix "tracerun_<what>", process_scratch.h), created when missing. Kept while the
// process runs and when one of its tests failed (children's output and traces, to look at).
// Throws when it cannot be created.
inline std::string processScratchDir(const std::string& prefix) {
  std::string dir = scratchRoot() + "/" + prefix + "_" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw std::runtime_error("cannot create " + dir);
  }
  return dir;
}

// A started child; killed (SIGKILL) and reaped by the destructor if nobody waited for it.
class Child {
 public:
  Child(const std::vector<std::string>& argv, const std::string& scratchDir) {
    static int counter = 0;
    const std::string stem = scratchDir + "/proc" + std::to_string(++counter);
    out_ = stem + ".out";
    err_ = stem + ".err";
    pid_ = ::fork();
    if (pid_ == 0) {
      const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(126);
    }
  }
  ~Child() {
    if (pid_ > 0 && !waited_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  std::string out() const { return readFile(out_); }
  // False once the child has ended (it is then reaped; wait() still reports it).
  bool running() {
    if (waited_) return false;
    if (::waitpid(pid_, &status_, WNOHANG) != pid_) return true;
    waited_ = true;
    return false;
  }
  ProcessResult wait() {
    while (!waited_ && ::waitpid(pid_, &status_, 0) < 0) {
    }
    waited_ = true;
    ProcessResult r;
    r.exited = WIFEXITED(status_);
    r.signal = WIFSIGNALED(status_) ? WTERMSIG(status_) : 0;
    r.code = r.exited ? WEXITSTATUS(status_) : 128 + r.signal;
    r.out = readFile(out_);
    r.err = readFile(err_);
    return r;
  }

 private:
  pid_t pid_ = -1;
  bool waited_ = false;
  int status_ = 0;
  std::string out_, err_;
};

}  // namespace tracerun::testing
