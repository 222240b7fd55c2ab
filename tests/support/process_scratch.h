// The names of the test binaries' per-process scratch files and directories, and their removal.
// Test-only. One owner of the contract: a test that leaves files behind names them
// $TMPDIR/tracerun_<what>_<pid>[.ext] (processScratchPath), and the shared Catch2 main
// (tests/catch_main.cpp) removes every such entry of its own pid once all of the process's test
// cases have passed. A failed process keeps its scratch (children's output and traces, to look at);
// so does TRACERUN_KEEP_SCRATCH=1. Until 2026-11-27 every run of the suite left ~0.5 GB in /tmp
// (508 MB measured with TMPDIR on an empty directory).
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace tracerun::testing {

inline std::string scratchRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return tmp != nullptr && tmp[0] != '\0' ? tmp : "/tmp";
}

// $TMPDIR/tracerun_<what>_<pid>: the stem of this process's scratch `what` (a directory, or a
// file when the caller appends an extension).
inline std::string processScratchPath(const std::string& what) {
  return scratchRoot() + "/tracerun_" + what + "_" + std::to_string(::getpid());
}

// Whether `name` (an entry of scratchRoot()) is process `pid`'s scratch: "tracerun_" ... "_<pid>",
// then the end or an extension.
inline bool isProcessScratch(const std::string& name, pid_t pid) {
  if (name.rfind("tracerun_", 0) != 0) return false;
  const std::string tag = "_" + std::to_string(pid);
  for (size_t at = name.find(tag, 8); at != std::string::npos; at = name.find(tag, at + 1)) {
    const size_t end = at + tag.size();
    if (end == name.size() || name[end] == '.') return true;
  }
  return false;
}

// Removes this process's scratch (files and directories, recursively). Returns how many entries.
inline int removeProcessScratch() {
  const std::string root = scratchRoot();
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> mine;
  while (const dirent* e = ::readdir(d)) {
    if (isProcessScratch(e->d_name, ::getpid())) mine.push_back(root + "/" + e->d_name);
  }
  ::closedir(d);
  for (const auto& path : mine) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  return static_cast<int>(mine.size());
}

}  // namespace tracerun::testing
