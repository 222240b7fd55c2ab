// What keeps a job's rendezvous off the network: the private directory that holds a one-node job's
// c10d FileStore (one fresh file per attempt), and the job token that node agents present to node
// 0's agent. Not the agents' protocol (clock_sync.h) and not the store itself (the ranks open it).
#pragma once

#include <string>

namespace tracerun::launcher {

// The variable that hands the ranks the FileStore path (one-node jobs; see docs/launcher.md).
inline constexpr const char* kStoreFileVariable = "TRACERUN_STORE_FILE";
// Where a node agent finds the job token when --job-token is not given.
inline constexpr const char* kJobTokenVariable = "TRACERUN_JOB_TOKEN";
inline constexpr size_t kMaxJobTokenBytes = 256;

// A 0700 directory made with mkdtemp under $TMPDIR (else /tmp), owned by this launcher, removed
// with everything in it when this object goes (normal end, faults, signals the launcher handles).
class StoreDir {
 public:
  // Throws std::runtime_error naming the directory and errno when it cannot be made.
  StoreDir();
  ~StoreDir();
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;

  const std::string& path() const { return path_; }
  // A fresh, absent store file for attempt `attempt` (the previous attempts' files are removed:
  // c10d::FileStore keeps every key it ever had, and ranks killed mid-run never remove theirs).
  std::string attemptFile(int attempt);

 private:
  void removeFiles() const;
  std::string path_;
};

// 32 hex digits from getrandom(2) (a one-node job's own token).
std::string generateJobToken();

// Compares a received token with the job's in time that depends only on the job token's length.
bool sameJobToken(const std::string& expected, const std::string& received);

}  // namespace tracerun::launcher
