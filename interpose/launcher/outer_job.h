// Recognises that `tracerun -o run.db -- PROGRAM` is one rank of a job another launcher started
// (torchrun, SLURM's srun, Open MPI's mpirun, MPICH/PMI), from the environment alone: a pure
// function, no processes, no files. It does not write shards or merge (outer_launch.cpp does).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tracerun::launcher {

// The environment as name -> value (tests build one by hand; environMap() reads the process's).
using EnvMap = std::map<std::string, std::string>;
EnvMap environMap();

// What an outer launcher told this process. `launcher` is empty when none was recognised.
struct OuterJob {
  std::string launcher;  // "torchrun", "slurm", "openmpi", "pmi"
  int rank = 0;
  int world_size = 1;
  // -1 where unknown: RANK and WORLD_SIZE set by hand without LOCAL_RANK / LOCAL_WORLD_SIZE and
  // no launcher around whose ranks are the job's, or a PMI launcher naming no local rank (the
  // program then gets LOCAL_RANK = RANK and LOCAL_WORLD_SIZE = WORLD_SIZE, as before).
  int local_rank = 0;
  int local_world_size = 1;
  // This node's index; -1 where the launcher does not say and it cannot be derived (MPI ranks not
  // placed node after node: mpirun --map-by node; a hand-set RANK without GROUP_RANK on several
  // nodes). Rank 0 is on node 0 where it is known. An unknown node measures its clock.
  int node_rank = 0;
  // Which run of the job this is: torchrun's TORCHELASTIC_RESTART_COUNT, a requeued SLURM job's
  // SLURM_RESTART_COUNT; 0 for the first. The merge keeps the output of the run before it.
  int restart = 0;
  // Names the job: every rank of one job computes the same, two jobs differ (documented per
  // launcher in docs/launcher.md). Only [A-Za-z0-9._-]; the shard directory's name.
  std::string job_id;
  // The part of job_id every run of the job shares (the clock exchange's token: a rank must reach
  // rank 0 before it knows which run it is in, see run_from_rank0).
  std::string token_id;
  // torchrun over several nodes (or nodes unknown): TORCHELASTIC_RESTART_COUNT is each agent's
  // own and agents do not share it, so it cannot name the run. job_id is then the shared part
  // alone; outer_clock.h's labelRun adds the run label rank 0's tracerun makes and serves.
  bool run_from_rank0 = false;
  int64_t run_label = 0;  // that label, once known (0: none)
  // The torchrun variables the program gets where the outer launcher did not set them (RANK,
  // WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT); already-set
  // ones are never overridden and do not appear here.
  EnvMap program_env;
  // Set when the environment names a launcher but is inconsistent (rank outside the world, a
  // number that is not one): one line without the "tracerun: " prefix.
  std::string problem;
};

// The outer job described by `env`, or one with an empty `launcher`. Precedence when several are
// present: torchrun (RANK and WORLD_SIZE), then Open MPI (OMPI_COMM_WORLD_RANK/_SIZE), then SLURM
// (SLURM_PROCID with SLURM_STEP_NUM_TASKS: an srun step, not a batch script) unless PMI_SIZE
// differs from SLURM's count, then PMI (PMI_RANK/PMI_SIZE); decided on values every rank shares.
// Equal counts with PMI_RANK != SLURM_PROCID are a problem. `parentPid` names a one-node job when
// the launcher gives no id (its ranks share their launcher); several nodes without an id are named
// by MASTER_ADDR and MASTER_PORT.
OuterJob detectOuterJob(const EnvMap& env, long parentPid);

// SLURM's compressed host list ("node[01-04,07],gpu7,rack[1-2]-n[3-4]") expanded in order; empty
// with *problem set on a malformed list.
std::vector<std::string> expandHostList(const std::string& list, std::string* problem);

// The MASTER_PORT used when the launcher sets none: 20000 + (FNV-1a 64 of the job id mod 12000),
// the same on every rank of the job and on every node, below Linux's ephemeral ports.
int portForJob(const std::string& jobId);

}  // namespace tracerun::launcher
