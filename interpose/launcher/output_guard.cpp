// The -o checks and the private and locked OUTPUT.shards/ (output_guard.h). Never writes a shard,
// never merges, handles no signal.
#include "output_guard.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

namespace tracerun::launcher {

namespace {

std::string dirName(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string userName(uid_t uid) {
  const passwd* pw = ::getpwuid(uid);
  return (pw != nullptr ? std::string(pw->pw_name) + " " : std::string()) + "(uid " +
         std::to_string(uid) + ")";
}

// Why a directory that already exists is not private to us (empty when it is).
std::string privateDirProblem(const std::string& path, const struct stat& st) {
  const std::string fix = "; remove it or choose another -o";
  if (S_ISLNK(st.st_mode)) return path + " is a symbolic link, not a directory" + fix;
  if (!S_ISDIR(st.st_mode)) return path + " exists and is not a directory" + fix;
  if (st.st_uid != ::geteuid()) {
    return path + " belongs to " + userName(st.st_uid) +
           ", not to you: another user could plant files in it" + fix;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return path + " is writable by " + ((st.st_mode & S_IWOTH) != 0 ? "others" : "its group") +
           " (mode " + mode +
           "): another user could plant files in it; remove it (or chmod go-w "
           "it) or choose another -o";
  }
  return {};
}

// The pid holding a flock on the file `st` describes, from /proc/locks; 0 when not found.
long lockHolder(const struct stat& st) {
  std::ifstream locks("/proc/locks");
  for (std::string line; std::getline(locks, line);) {
    std::istringstream words(line);
    std::string id, type, advisory, access, device;
    long pid = 0;
    if (!(words >> id >> type >> advisory >> access >> pid >> device) || type != "FLOCK") continue;
    unsigned devMajor = 0, devMinor = 0;
    unsigned long inode = 0;
    if (std::sscanf(device.c_str(), "%x:%x:%lu", &devMajor, &devMinor, &inode) == 3 &&
        devMajor == major(st.st_dev) && devMinor == minor(st.st_dev) && inode == st.st_ino) {
      return pid;
    }
  }
  return 0;
}

// Whether `path` still names the directory `st` describes (the run before us may have removed it).
bool stillThere(const std::string& path, const struct stat& st) {
  struct stat now {};
  return ::lstat(path.c_str(), &now) == 0 && now.st_dev == st.st_dev && now.st_ino == st.st_ino;
}

}  // namespace

std::string outputProblem(const std::string& output) {
  if (output.empty()) return "-o: an empty name (give a file name, e.g. -o run.db)";
  struct stat st {};
  if (output.back() == '/' || (::stat(output.c_str(), &st) == 0 && S_ISDIR(st.st_mode))) {
    return "-o " + output + ": is a directory; give a file name (e.g. -o " +
           (output.back() == '/' ? output : output + "/") + "run.db)";
  }
  const std::string dir = dirName(output);
  if (::stat(dir.c_str(), &st) != 0) {
    return "-o " + output + ": its directory " + dir + " cannot be used: " + std::strerror(errno) +
           " (create it first)";
  }
  if (!S_ISDIR(st.st_mode)) return "-o " + output + ": " + dir + " is not a directory";
  return {};
}

std::string makePrivateDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0700) == 0) return {};
  if (errno != EEXIST) return path + ": cannot create: " + std::strerror(errno);
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  return privateDirProblem(path, st);
}

std::string escapePattern(const std::string& path) {
  std::string out;
  for (const char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

// ---- OutputLock ---------------------------------------------------------------------------------

OutputLock::OutputLock(const std::string& shardDir, const std::string& output) {
  // A few rounds: the run that held the directory before us may remove it between our mkdir and
  // our open, or after we locked it (we then hold a lock on a directory that is gone).
  for (int round = 0; round < 8; ++round) {
    if (std::string p = makePrivateDir(shardDir); !p.empty()) {
      problem_ = std::move(p);
      return;
    }
    const int fd = ::open(shardDir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) continue;
    if (fd < 0) {
      problem_ =
          shardDir + ": cannot open: " + std::strerror(errno) + "; remove it or choose another -o";
      return;
    }
    struct stat st {};
    ::fstat(fd, &st);
    if (std::string p = privateDirProblem(shardDir, st); !p.empty()) {  // swapped since mkdir
      ::close(fd);
      problem_ = std::move(p);
      return;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      if (e == EWOULDBLOCK) {
        ::close(fd);
        const long pid = lockHolder(st);
        problem_ = output + " is being written by another tracerun" +
                   (pid > 0 ? " (pid " + std::to_string(pid) + ")" : std::string()) +
                   "; choose another -o, or wait until it ends";
        return;
      }
      // A file system without flock on a directory (NFS emulates it with byte-range locks, which
      // need a descriptor open for writing): the run goes on, unguarded, and says so.
      note_ = shardDir + " cannot be locked on this file system (" + std::strerror(e) +
              "): a second launch with the same -o would not be refused";
      if (!stillThere(shardDir, st)) {
        ::close(fd);
        continue;
      }
      fd_ = fd;
      return;
    }
    if (stillThere(shardDir, st)) {
      fd_ = fd;
      return;
    }
    ::close(fd);
  }
  problem_ =
      shardDir + ": keeps being removed and created again by someone else; choose another -o";
}

OutputLock::~OutputLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace tracerun::launcher
