// Writes the per-rank status file for the launcher (status_file.h): one line
// "step=S samples=N loss=L tokens_per_s=T\n", replaced atomically (temporary file created with
// O_EXCL|O_NOFOLLOW in the directory's descriptor, then renameat) every 0.5 s while it changes.
// Does not parse or read anything the program prints; no libtorch.
#include "status_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "tracerun/core/vocabulary.h"

namespace tracerun::interpose {

namespace {

std::atomic<double> gStep{-1.0};  // a "step" counter, when the program sends one
std::atomic<double> gLoss{0.0};
std::atomic<double> gTokensPerS{0.0};
std::atomic<long> gLossSamples{0};  // the step when no "step" counter exists
std::atomic<long> gVersion{0};
std::atomic<bool> gEnabled{false};
std::once_flag gOnce;

std::string statusPath() {
  const char* path = std::getenv("TRACERUN_STATUS");
  if (path == nullptr || *path == '\0') return {};
  const char* rank = std::getenv("RANK");
  return expandRank(path, rank != nullptr ? std::atoi(rank) : 0);
}

// Writes `text` to a new `tmp` in `dir` (never an existing file, never through a symlink: a
// leftover is removed first) and renames it over `name`. Between the create and the rename
// someone who can write `dir` may swap `tmp` for a symlink, and the rename would then install
// that link as `name`: the file renamed is checked to be ours (same inode as the descriptor we
// wrote), and a foreign one is removed and the write tried again, a few times at most.
void replaceFile(int dir, const std::string& tmp, const std::string& name,
                 const std::string& text) {
  constexpr int kTries = 8;
  for (int attempt = 0; attempt < kTries; ++attempt) {
    ::unlinkat(dir, tmp.c_str(), 0);
    const int fd =
        ::openat(dir, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST) continue;  // planted again since the unlink: remove, retry
    if (fd < 0) return;
    // The descriptor stays open until the check: a freed inode's number could be reused by
    // the very link planted in its place.
    struct stat written {};
    const bool whole = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fstat(fd, &written) == 0;
    if (!whole || ::renameat(dir, tmp.c_str(), dir, name.c_str()) != 0) {
      ::close(fd);
      ::unlinkat(dir, tmp.c_str(), 0);
      return;
    }
    struct stat installed {};
    const bool ours = ::fstatat(dir, name.c_str(), &installed, AT_SYMLINK_NOFOLLOW) == 0 &&
                      installed.st_dev == written.st_dev && installed.st_ino == written.st_ino;
    ::close(fd);
    if (ours) return;
    ::unlinkat(dir, name.c_str(), 0);  // a planted entry, not ours: never leave it as the status
  }
}

void writerMain(std::string path) {
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, nullptr);  // signals belong to the program's threads
  const pid_t owner = ::getpid();
  const auto slash = path.rfind('/');
  const std::string dirPath =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const int dir = ::open(dirPath.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;  // no status line; the capture goes on
  long written = -1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    if (::getpid() != owner) return;
    const long version = gVersion.load(std::memory_order_acquire);
    if (version == written) continue;
    written = version;
    const double step = gStep.load(std::memory_order_relaxed);
    char line[200];
    std::snprintf(line, sizeof line, "step=%.0f samples=%ld loss=%.6g tokens_per_s=%.6g\n",
                  step >= 0 ? step : static_cast<double>(gLossSamples.load()), gLossSamples.load(),
                  gLoss.load(), gTokensPerS.load());
    replaceFile(dir, name + ".tmp", name, line);
  }
}

}  // namespace

std::string expandRank(const std::string& pattern, int rank) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char next = i + 1 < pattern.size() ? pattern[i + 1] : '\0';
    if (pattern[i] == '%' && next == 'r') {
      out += std::to_string(rank);
      ++i;
    } else if (pattern[i] == '%' && next == '%') {
      out += '%';
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

void noteStatusCounter(const char* name, double value) noexcept {
  std::call_once(gOnce, [] {
    std::string path = statusPath();
    if (path.empty()) return;
    try {
      std::thread(writerMain, std::move(path)).detach();  // process lifetime, sleeps when idle
      gEnabled.store(true, std::memory_order_release);
    } catch (...) {
    }
  });
  if (!gEnabled.load(std::memory_order_acquire)) return;
  if (std::strcmp(name, vocab::counter::kLoss) == 0) {
    gLoss.store(value, std::memory_order_relaxed);
    gLossSamples.fetch_add(1, std::memory_order_relaxed);
  } else if (std::strcmp(name, vocab::counter::kTokensPerS) == 0) {
    gTokensPerS.store(value, std::memory_order_relaxed);
  } else if (std::strcmp(name, vocab::counter::kStep) == 0) {
    gStep.store(value, std::memory_order_relaxed);
  } else {
    return;
  }
  gVersion.fetch_add(1, std::memory_order_release);
}

}  // namespace tracerun::interpose
