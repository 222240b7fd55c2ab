// The one-node store directory and the job token (rendezvous.h). No sockets here.
#include "rendezvous.h"

#include <dirent.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace tracerun::launcher {

StoreDir::StoreDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string templ = base + "/tracerun-store.XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {  // mode 0700, a new name: nobody else's directory
    throw std::runtime_error("cannot create a private directory for the rendezvous store in " +
                             base + ": " + std::strerror(errno) +
                             " (set TMPDIR to a writable one)");
  }
  path_ = buf.data();
}

StoreDir::~StoreDir() {
  removeFiles();
  ::rmdir(path_.c_str());
}

void StoreDir::removeFiles() const {
  DIR* d = ::opendir(path_.c_str());
  if (d == nullptr) return;
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(d);
  for (const auto& name : names) ::unlink((path_ + "/" + name).c_str());
}

std::string StoreDir::attemptFile(int attempt) {
  removeFiles();
  return path_ + "/store.attempt" + std::to_string(attempt);
}

std::string generateJobToken() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    got += static_cast<size_t>(n);
  }
  static const char kHex[] = "0123456789abcdef";
  std::string token;
  for (unsigned char b : bytes) {
    token += kHex[b >> 4];
    token += kHex[b & 15];
  }
  return token;
}

bool sameJobToken(const std::string& expected, const std::string& received) {
  // Every byte of `expected` is looked at whatever `received` holds; no early exit.
  volatile unsigned char diff = expected.size() != received.size() ? 1 : 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const unsigned char other = i < received.size() ? static_cast<unsigned char>(received[i]) : 0;
    diff = static_cast<unsigned char>(diff | (static_cast<unsigned char>(expected[i]) ^ other));
  }
  return diff == 0 && !expected.empty();
}

}  // namespace tracerun::launcher
