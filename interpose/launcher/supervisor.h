// The launcher's one process supervisor: the only owner of its signal handling and of the processes
// it starts. Both modes use it: the single-process mode is a group of one child (in the launcher's
// own process group, so it keeps the terminal and its streams); the multi-rank mode starts one
// child per rank (each leading its own process group, its output on pipes). Whatever decides to
// stop them (a failed rank, another node, a signal to the launcher), they are stopped through the
// supervisor's one StopSequence (stop_sequence.h). During a merge a MergeGuard gives the stop
// signals the merge's rule.
//
// It does not decide when to stop, restart or merge (launch.cpp and group.cpp do), read the ranks'
// output (the attempt does, from the descriptors given here) or format anything.
//
// Threading: one thread uses a Supervisor; a MergeGuard adds one watcher thread for its lifetime.
// One Supervisor at a time per process (the signal handlers reach it through one pipe).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "stop_sequence.h"

namespace tracerun::launcher {

// "SIGINT", or "signal N" for one without a name.
std::string signalName(int sig);
// Writes all of `s` to `fd` (retrying short writes and EINTR; gives up on an error).
void writeAll(int fd, const std::string& s);

// How a child starts.
struct ChildSpec {
  std::string executable;  // a path (execv: no PATH lookup)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // set in the child only
  // A rank: its own process group (terminal signals reach only the launcher, which decides),
  // stdin from /dev/null, stdout and stderr on pipes (Child::fds), SIGTERM when the launcher dies
  // (PR_SET_PDEATHSIG), the supervisor's signals at their defaults; a failed exec says so on its
  // stderr and exits 127. Not a rank (the single-process mode): the launcher's process group,
  // terminal and streams, the signal dispositions the launcher had before the supervisor; a
  // failed exec makes start() fail with exec's errno.
  bool rank = false;
};

// One started process.
struct Child {
  pid_t pid = -1;
  bool rank = false;
  bool running = false;
  int status = 0;         // its wait status once reaped
  int fds[2] = {-1, -1};  // a rank's stdout and stderr (read ends); -1 once closed
};

class Supervisor {
 public:
  // Installs the handlers of SIGINT, SIGTERM, SIGHUP, SIGQUIT and SIGCHLD for its lifetime; the
  // old ones come back at the end. `grace_s`: seconds between SIGTERM and SIGKILL when stopping.
  explicit Supervisor(double grace_s);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // ---- signals (what arrived is read from the self-pipe by drain(), which every query calls)

  // The first stop signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT) since construction; 0: none.
  int stopSignal();
  // Whether the kernel sent that first one (the terminal's foreground group: a child in the
  // launcher's process group got it too).
  bool stopFromTerminal();
  // A check that is true once a stop signal arrives after now (the first stopped the children; a
  // later one ends a wait on other nodes).
  std::function<bool()> cancelledAfterNow();
  // Readable after any of the handled signals (SIGCHLD included): for the caller's poll.
  int wakeFd() const { return wake_[0]; }
  // Reads what the handlers wrote and records the stop signals among it.
  void drain();
  // Waits up to `ms` for a signal, then drain().
  void wait(int ms);

  // ---- children (one set at a time: an attempt of the group, or the single program)

  // Forgets the previous set (closing their descriptors) and makes a fresh stop sequence.
  void beginRun();
  // Starts a child; returns its index in this set, or -1 with errno set when it did not start
  // (not a rank: also when its exec failed; the child is reaped then).
  int start(const ChildSpec& spec);
  Child& child(size_t index) { return children_[index]; }
  size_t children() const { return children_.size(); }
  bool anyRunning() const;
  // Reaps every child that ended; calls ended(index, status) for each of this set's.
  void reap(const std::function<void(size_t index, int status)>& ended);
  // Closes one of a rank's output descriptors.
  void closeOutput(size_t index, int stream);

  // ---- stopping them

  StopSequence& stop() { return stop_; }
  // Sends what the stop sequence has due to every running child (a rank's whole process group).
  void advanceStop();

 private:
  friend class MergeGuard;
  void restoreInChild() const;

  int wake_[2] = {-1, -1};
  struct sigaction old_[5]{};
  int firstStop_ = 0;
  bool firstFromTerminal_ = false;
  long stops_ = 0;  // stop signals so far
  double grace_s_;
  StopSequence stop_;
  std::vector<Child> children_;
};

// While alive, a stop signal does not interrupt the merge into `output`: the first prints one line
// and the merge goes on; the second removes the merge's temporary file (OUTPUT.tmp and its SQLite
// companions), says that the shards in `shardDir` (or every one of `shardDirs`, with the command
// that merges them all: launch.h mergeByHandCommand) are kept, and exits with 128 + that signal. A
// watcher thread reads the supervisor's self-pipe meanwhile (the handlers themselves only write a
// byte); what arrives during the merge is not counted as the supervisor's stop signals.
class MergeGuard {
 public:
  MergeGuard(Supervisor& supervisor, const std::string& output, const std::string& shardDir);
  MergeGuard(Supervisor& supervisor, const std::string& output,
             const std::vector<std::string>& shardDirs);
  ~MergeGuard();
  MergeGuard(const MergeGuard&) = delete;
  MergeGuard& operator=(const MergeGuard&) = delete;

 private:
  void watch(int signalFd);

  std::vector<std::string> temps_;
  std::string note_, abandon_;
  int quit_[2] = {-1, -1};  // written by the destructor to end the watcher
  std::thread watcher_;
};

}  // namespace tracerun::launcher
