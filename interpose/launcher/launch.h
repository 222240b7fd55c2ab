// The launcher mode of tracerun: `tracerun [-o run.db] [--capture ops,scopes,memory] [--no-shapes]
// -- PROGRAM ARGS`. Runs PROGRAM with libtracerun.so preloaded and told (through TRACERUN_*
// variables) to capture in PROGRAM only, waits, merges the shard(s) into the output, prints a short
// summary, and returns PROGRAM's exit code. With --nproc-per-node/--nnodes it starts a group of
// ranks with the torchrun environment instead (group.cpp). No libtorch here.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tracerun/core/rank_set.h"

namespace tracerun::trace {
struct MergeResult;
}

namespace tracerun::launcher {

struct OuterJob;
class Supervisor;

struct LaunchOptions {
  std::string output = "run.db";
  std::string capture = "ops,scopes,memory,comm";  // capture words (interpose/src/capture_words.h)
  bool shapes = true;
  std::string target;                // empty: PROGRAM itself (through a #! line to its interpreter)
  std::string library;               // empty: libtracerun.so next to this binary, then the build's
  bool keep_shards = false;          // keep OUTPUT.shards/ after merging
  bool quiet = false;                // no summary
  std::vector<std::string> program;  // PROGRAM ARGS...
  // The multi-rank mode (group.cpp); nproc_per_node 0 and nnodes 1: one process, no torchrun env.
  int nproc_per_node = 0;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr;  // empty: 127.0.0.1 (the rendezvous store stays on loopback)
  int master_port = 0;      // 0: a free port (one node only)
  // Names the job to its node agents (clock_sync.h): empty: TRACERUN_JOB_TOKEN; several nodes
  // need one (the same on every node), one node makes its own.
  std::string job_token;
  int max_restarts = 0;
  // Elastic mode (--nnodes MIN:MAX, elastic.cpp): min_nodes > 0, nnodes is MAX.
  int min_nodes = 0;
  double join_wait_s = 3;       // with MIN..MAX-1 nodes joined: wait this long for more
  double rdzv_timeout_s = 300;  // with fewer than MIN: give up after this long
  double grace_s = 5;           // SIGTERM -> SIGKILL when stopping ranks
  std::string status = "auto";  // auto (in place on a terminal, else plain lines), plain, off
  // --ranks as given: the only ranks to trace (core/include/tracerun/core/rank_set.h); none:
  // every rank ("" is an error, not "every rank").
  std::optional<std::string> ranks;
};

// --ranks as a set, once launch() has checked it; none without --ranks.
inline std::optional<core::RankSet> tracedRanks(const LaunchOptions& o) {
  if (!o.ranks) return std::nullopt;
  return core::RankSet::parse(*o.ranks, nullptr);
}

// Runs the whole launch. Returns PROGRAM's exit code (128+N when it died of signal N), 127 when
// PROGRAM cannot be found, 2 for a usage problem, 1 when PROGRAM succeeded but no trace came out.
int launch(const LaunchOptions& options);

// What is wrong with the multi-rank flags (--node-rank outside --nnodes, several nodes without
// --master-addr/--master-port), checked before anything is created; empty when nothing is.
std::string groupOptionsProblem(const LaunchOptions& options);

// What is wrong with the elastic flags (elastic.cpp); empty when nothing is.
std::string elasticOptionsProblem(const LaunchOptions& options);

// The elastic launch (elastic.cpp): joins (or hosts) the membership rendezvous and runs this node's
// ranks for every round. Returns the job's exit code.
int launchElastic(const LaunchOptions& options, const std::string& executable,
                  const std::string& shardDir);

// The multi-rank launch (group.cpp), called by launch() once the program, the library, the
// preload environment and the locked shard directory are settled. Returns the exit code (see
// group.cpp).
int launchGroup(const LaunchOptions& options, const std::string& executable,
                const std::string& shardDir);

// One rank of a job another launcher started (outer_launch.cpp): runs PROGRAM with the torchrun
// environment the outer launcher left out, its shard in `jobDir` (private, made by launch()), and
// merges every rank's shard into the output when it is the last rank of the job to end. Returns
// PROGRAM's exit code (1 when it succeeded but the merge failed).
int launchOuterRank(const LaunchOptions& options, const OuterJob& job,
                    const std::string& executable, const std::string& jobDir);

// Runs PROGRAM as the supervisor's group of one and waits (launch.cpp); its wait status, or -1
// when it could not start; *stopSignal: the launcher's stop signal that stopped it, 0 when none.
int runChild(Supervisor& supervisor, const std::string& executable,
             const std::vector<std::string>& args, double grace_s, const std::string& name,
             int* stopSignal);

// Shared with group.cpp: the rank*.db files in `dir` (sorted), removing rank* files, the summary
// (tools::printRunSummary on stderr: the one implementation, beside `tracerun info`).
std::vector<std::string> shardFiles(const std::string& dir);
void removeShardFiles(const std::string& dir);
void printSummary(const std::string& path);

// After a merge (launch.cpp): when a shard was not merged whole (unreadable, tables unreadable, or
// not closed because its writer failed, as on a full disk: SHARD.close-failed exists), prints one
// line naming the ranks, the free space of `dir`'s file system and the shards' size, and that the
// shards stay in `dir` for keptShardsHint(); returns true then (the caller keeps them and fails).
bool reportMergeLoss(const trace::MergeResult& result, const std::string& output,
                     const std::string& dir);
// The same for shards in several directories (every attempt of a restarted or elastic job).
bool reportMergeLoss(const trace::MergeResult& result, const std::string& output,
                     const std::vector<std::string>& dirs);
// "the shards are kept in DIR: once there is room, `tracerun merge --allow-incomplete -o OUTPUT
// DIR/rank*.db` merges them" (the end of a failed merge's line).
std::string keptShardsHint(const std::string& output, const std::string& dir);
// The same naming every directory; the command gets --attempts when they are attemptN directories
// of more than one attempt (trace::attemptOfShard).
std::string keptShardsHint(const std::string& output, const std::vector<std::string>& dirs);
// "A", "A and B", "A, B and C": directories named in a line.
std::string listPaths(const std::vector<std::string>& paths);
// That command alone: `tracerun merge --allow-incomplete [--attempts] -o OUTPUT D1/rank*.db ...`.
std::string mergeByHandCommand(const std::string& output, const std::vector<std::string>& dirs);

// Where libtracerun.so is: `explicitPath` if given, else next to the running tracerun binary,
// else where the build put it. Empty when none exists.
std::string findLibrary(const std::string& explicitPath);

// The program that will really run for `program` (a PATH lookup, then realpath), and the one the
// library should capture in: the interpreter named by a #! line (through /usr/bin/env), or the
// program itself. Empty strings when not found.
std::string resolveProgram(const std::string& program);
std::string captureTarget(const std::string& resolvedProgram);

}  // namespace tracerun::launcher
