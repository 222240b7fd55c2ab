// The launcher's process supervisor (supervisor.h): the signal handlers and their self-pipe, the
// children's start, reaping and stopping, and the merge's signal rule. Decides nothing about when
// to stop, restart or merge.
#include "supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "launch.h"

namespace tracerun::launcher {

namespace {

constexpr std::array<int, 5> kSignals = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD};
constexpr unsigned char kFromKernel = 0x80;  // or'ed into the byte of a signal the kernel sent

// The one piece of state the signal handlers reach, and the only mutable global of the launcher:
// a handler can safely do little more than write(2), so it writes one byte (the signal number,
// with kFromKernel when the terminal's foreground group got it) into the Supervisor's self-pipe,
// whose write end this holds while a Supervisor lives (-1 otherwise). Everything else, from the
// first stop signal to the merge's rule, is decided outside the handler by whoever reads the pipe.
std::atomic<int> gSignalPipe{-1};

void onSignal(int sig, siginfo_t* info, void*) {
  const int saved = errno;
  const int fd = gSignalPipe.load(std::memory_order_relaxed);
  const unsigned char b = static_cast<unsigned char>(
      sig | (info != nullptr && info->si_code == SI_KERNEL ? kFromKernel : 0));
  if (fd >= 0 && ::write(fd, &b, 1) < 0) {
  }
  errno = saved;
}

bool isStop(int sig) {
  return sig != SIGCHLD && sig != 0;
}

// In a rank's child after fork: its own process group, dying with the launcher, default signal
// dispositions and mask, stdin from /dev/null, stdout/stderr onto the pipes. False: the launcher
// is already gone.
bool becomeRank(pid_t parent, int out, int err) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) return false;
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  for (int sig : kSignals) ::sigaction(sig, &dfl, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::dup2(out, 1);
  ::dup2(err, 2);
  return true;
}

void closePair(int fds[2]) {
  for (int i = 0; i < 2; ++i) {
    if (fds[i] >= 0) ::close(fds[i]);
    fds[i] = -1;
  }
}

}  // namespace

std::string signalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

void writeAll(int fd, const std::string& s) {
  const char* p = s.data();
  size_t n = s.size();
  while (n > 0) {
    const ssize_t r = ::write(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    p += r;
    n -= static_cast<size_t>(r);
  }
}

// ---- signals ------------------------------------------------------------------------------------

Supervisor::Supervisor(double grace_s) : grace_s_(grace_s), stop_(grace_s) {
  if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  gSignalPipe.store(wake_[1]);
  struct sigaction sa {};
  sa.sa_sigaction = onSignal;
  // Each handler runs with the others blocked: signals pending together (a stopped launcher that
  // continues) then reach the pipe in delivery order instead of the last one's frame running first.
  ::sigemptyset(&sa.sa_mask);
  for (int sig : kSignals) ::sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &sa, &old_[i]);
}

Supervisor::~Supervisor() {
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
  gSignalPipe.store(-1);
  for (size_t i = 0; i < children_.size(); ++i) {
    closeOutput(i, 0);
    closeOutput(i, 1);
  }
  closePair(wake_);
}

void Supervisor::drain() {
  unsigned char got[64];
  for (ssize_t n; wake_[0] >= 0 && (n = ::read(wake_[0], got, sizeof got)) > 0;) {
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = got[i] & ~kFromKernel;
      if (!isStop(sig)) continue;
      if (stops_++ == 0) {
        firstStop_ = sig;
        firstFromTerminal_ = (got[i] & kFromKernel) != 0;
      }
    }
  }
}

int Supervisor::stopSignal() {
  drain();
  return firstStop_;
}

bool Supervisor::stopFromTerminal() {
  drain();
  return firstFromTerminal_;
}

std::function<bool()> Supervisor::cancelledAfterNow() {
  drain();
  const long seen = stops_;
  return [this, seen] {
    drain();
    return stops_ > seen;
  };
}

void Supervisor::wait(int ms) {
  pollfd p{wake_[0], POLLIN, 0};
  ::poll(&p, wake_[0] >= 0 ? 1 : 0, ms);
  drain();
}

void Supervisor::restoreInChild() const {
  for (size_t i = 0; i < kSignals.size(); ++i) ::sigaction(kSignals[i], &old_[i], nullptr);
}

// ---- children -----------------------------------------------------------------------------------

void Supervisor::beginRun() {
  for (size_t i = 0; i < children_.size(); ++i) {
    closeOutput(i, 0);
    closeOutput(i, 1);
  }
  children_.clear();
  stop_ = StopSequence(grace_s_);
}

int Supervisor::start(const ChildSpec& spec) {
  std::vector<char*> argv;
  for (const auto& a : spec.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int out[2] = {-1, -1}, err[2] = {-1, -1};  // a rank's streams, or (not a rank) exec's errno
  if (::pipe2(out, O_CLOEXEC) != 0) return -1;
  if (spec.rank && ::pipe2(err, O_CLOEXEC) != 0) {
    closePair(out);
    return -1;
  }
  // The handled signals stay blocked across fork until the child has put its own dispositions in
  // place: a signal meant for the child must not run the launcher's handler there (it would write
  // into the launcher's pipe).
  sigset_t handled, before;
  ::sigemptyset(&handled);
  for (int sig : kSignals) ::sigaddset(&handled, sig);
  ::pthread_sigmask(SIG_BLOCK, &handled, &before);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (spec.rank && !becomeRank(parent, out[1], err[1])) ::_exit(1);  // its mask: empty
    if (!spec.rank) {
      restoreInChild();
      ::sigprocmask(SIG_SETMASK, &before, nullptr);
    }
    for (const auto& [k, v] : spec.env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(spec.executable.c_str(), argv.data());
    const int e = errno;
    if (spec.rank) {
      writeAll(2, "tracerun: " + spec.executable + ": cannot run: " + std::strerror(e) + "\n");
    } else if (::write(out[1], &e, sizeof e) < 0) {
    }
    ::_exit(127);
  }
  const int saved = errno;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  ::close(out[1]);
  if (spec.rank) ::close(err[1]);
  if (pid < 0) {
    ::close(out[0]);
    if (spec.rank) ::close(err[0]);
    errno = saved;
    return -1;
  }
  Child c;
  c.pid = pid;
  c.rank = spec.rank;
  c.running = true;
  if (spec.rank) {
    ::setpgid(pid, pid);  // also here: no race with a kill(-pid) before the child ran
    c.fds[0] = out[0];
    c.fds[1] = err[0];
  } else {
    // The exec's outcome: the pipe closes on a successful exec, carries errno on a failed one.
    int execErrno = 0;
    ssize_t got;
    while ((got = ::read(out[0], &execErrno, sizeof execErrno)) < 0 && errno == EINTR) {
    }
    ::close(out[0]);
    if (got == sizeof execErrno) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      errno = execErrno;
      return -1;
    }
  }
  children_.push_back(c);
  return static_cast<int>(children_.size() - 1);
}

bool Supervisor::anyRunning() const {
  for (const Child& c : children_) {
    if (c.running) return true;
  }
  return false;
}

void Supervisor::reap(const std::function<void(size_t, int)>& ended) {
  int status = 0;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& c = children_[i];
      if (c.pid != pid || !c.running) continue;
      c.running = false;
      c.status = status;
      ended(i, status);
    }
  }
}

void Supervisor::closeOutput(size_t index, int stream) {
  int& fd = children_[index].fds[stream];
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void Supervisor::advanceStop() {
  stop_.advance([this](int sig) {
    for (const Child& c : children_) {
      if (c.running) ::kill(c.rank ? -c.pid : c.pid, sig);
    }
  });
}

// ---- the merge's rule ---------------------------------------------------------------------------

MergeGuard::MergeGuard(Supervisor& supervisor, const std::string& output,
                       const std::string& shardDir)
    : MergeGuard(supervisor, output, std::vector<std::string>{shardDir}) {}

MergeGuard::MergeGuard(Supervisor& supervisor, const std::string& output,
                       const std::vector<std::string>& shardDirs) {
  // mergeShards (trace/src/merge.cpp) writes OUTPUT.tmp and renames it over OUTPUT at the end.
  for (const char* suffix : {"", "-journal", "-wal", "-shm"})
    temps_.push_back(output + ".tmp" + suffix);
  note_ =
      "tracerun: merging the trace; send the signal again to abandon it (the shards are kept)\n";
  abandon_ = "tracerun: merge abandoned, " + output + " not written; the shards are kept in " +
             listPaths(shardDirs) + " (" + mergeByHandCommand(output, shardDirs) + ")\n";
  supervisor.drain();  // what came before the merge is the supervisor's
  // Without a pipe to end the watcher (no descriptors left) the merge runs unguarded.
  if (::pipe2(quit_, O_CLOEXEC) != 0) return;
  // The watcher starts with the handled signals blocked, so they all run their handler on the
  // other threads (the main one) and reach the pipe in the order they were delivered.
  sigset_t handled, before;
  ::sigemptyset(&handled);
  for (int sig : kSignals) ::sigaddset(&handled, sig);
  ::pthread_sigmask(SIG_BLOCK, &handled, &before);
  watcher_ = std::thread([this, fd = supervisor.wakeFd()] { watch(fd); });
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

MergeGuard::~MergeGuard() {
  if (watcher_.joinable()) {
    const char b = 0;
    while (::write(quit_[1], &b, 1) < 0 && errno == EINTR) {
    }
    watcher_.join();
  }
  closePair(quit_);
}

void MergeGuard::watch(int signalFd) {
  int received = 0;
  for (;;) {
    pollfd p[2] = {{signalFd, POLLIN, 0}, {quit_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0) return;
    unsigned char got[64];
    const ssize_t n = signalFd >= 0 ? ::read(signalFd, got, sizeof got) : -1;
    for (ssize_t i = 0; i < n; ++i) {
      const int sig = got[i] & ~kFromKernel;
      if (!isStop(sig)) continue;
      if (++received == 1) {
        writeAll(2, note_);
        continue;
      }
      for (const std::string& path : temps_) ::unlink(path.c_str());
      writeAll(2, abandon_);
      ::_exit(128 + sig);
    }
  }
}

}  // namespace tracerun::launcher
