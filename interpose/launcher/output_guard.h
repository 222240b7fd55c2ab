// The launcher's hold on its output: the -o name checked before anything runs, OUTPUT.shards/
// created private (0700) or refused when another user could write in it, locked for the whole run
// (a second launch with the same output is refused). It does not write shards or merge them
// (libtracerun and trace/ do), and handles no signal (the merge's rule is supervisor.h's).
#pragma once

#include <string>

namespace tracerun::launcher {

// The -o name before anything runs: an existing directory, or a name whose directory does not
// exist, is a usage problem. Empty when fine, else one line (without the "tracerun: " prefix).
std::string outputProblem(const std::string& output);

// A directory only the caller can write: creates `path` with mode 0700, or accepts an existing one
// that is a directory (not a symlink) owned by the caller and not writable by group or others.
// Empty when fine, else one line (without the "tracerun: " prefix) naming the problem and the fix.
std::string makePrivateDir(const std::string& path);

// "%" doubled: a path handed to libtracerun inside a TRACERUN_OUTPUT/TRACERUN_STATUS pattern, whose
// "%r" becomes the rank and "%%" a single "%" (status_file.h, expandRank).
std::string escapePattern(const std::string& path);

// OUTPUT.shards/ held for the launcher's lifetime: private (makePrivateDir, then checked again on
// the opened descriptor) and locked with flock(2) on the directory itself, so nothing is left
// behind by the lock and it ends with the process. A second launcher with the same output finds
// the lock taken and is refused. The directory descriptor is close-on-exec: the program never
// holds the lock.
class OutputLock {
 public:
  OutputLock(const std::string& shardDir, const std::string& output);
  ~OutputLock();
  OutputLock(const OutputLock&) = delete;
  OutputLock& operator=(const OutputLock&) = delete;

  bool ok() const { return fd_ >= 0; }
  // Why it was refused: one line without the "tracerun: " prefix.
  const std::string& problem() const { return problem_; }
  // Non-empty when it was accepted but could not be locked (a file system without flock on
  // directories): one line to print.
  const std::string& note() const { return note_; }

 private:
  int fd_ = -1;
  std::string problem_, note_;
};

}  // namespace tracerun::launcher
