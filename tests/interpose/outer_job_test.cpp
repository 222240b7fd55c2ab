// The outer-launcher detection (interpose/launcher/outer_job.h) table by table: each row an
// environment as torchrun, srun, mpirun or MPICH's hydra sets it (their documented variables),
// and what the rank must get. SLURM's host lists against expansions written out by hand. No
// processes.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "outer_clock.h"
#include "outer_job.h"

using tracerun::launcher::detectOuterJob;
using tracerun::launcher::EnvMap;
using tracerun::launcher::expandHostList;
using tracerun::launcher::measuresOuterClock;
using tracerun::launcher::portForJob;

TEST_CASE("outer job: no launcher variables, no outer job", "[outer_job]") {
  const auto job = detectOuterJob({{"HOME", "/root"}, {"RANK", "1"}}, 42);
  CHECK(job.launcher.empty());
  CHECK(job.problem.empty());
}

TEST_CASE("outer job: table of launchers", "[outer_job]") {
  struct Row {
    const char* what;
    EnvMap env;
    const char* launcher;
    int rank, world, local, localWorld, node;
    const char* jobId;
    EnvMap programEnv;  // exactly what the rank adds
  };
  const std::vector<Row> rows = {
      {"torchrun, everything set",
       {{"RANK", "3"},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "1"},
        {"MASTER_ADDR", "n0"},
        {"MASTER_PORT", "29500"},
        {"TORCHELASTIC_RUN_ID", "abc"},
        {"TORCHELASTIC_RESTART_COUNT", "0"}},
       "torchrun",
       3,
       4,
       1,
       2,
       1,
       "torchrun-abc-addr-n0-port29500",
       {}},
      {"torchrun, rdzv id none, restarted",
       {{"RANK", "0"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"},
        {"TORCHELASTIC_RUN_ID", "none"},
        {"TORCHELASTIC_RESTART_COUNT", "2"}},
       "torchrun",
       0,
       2,
       0,
       2,
       0,
       "torchrun-addr-127.0.0.1-port29500-restart2",
       {}},
      // Nothing says how the ranks sit on nodes: unknown, not one node (the rank measures its
      // clock against rank 0's; nothing made up is exported).
      {"RANK and WORLD_SIZE by hand",
       {{"RANK", "1"}, {"WORLD_SIZE", "2"}},
       "torchrun",
       1,
       2,
       -1,
       -1,
       -1,
       "torchrun-ppid77",
       {{"LOCAL_RANK", "1"},  // what the program got before (right on one node): scripts read it
        {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(portForJob("torchrun-ppid77"))}}},
      {"RANK 0 of a world of 1 by hand: one process is one node",
       {{"RANK", "0"}, {"WORLD_SIZE", "1"}},
       "torchrun",
       0,
       1,
       0,
       1,
       0,
       "torchrun-ppid77",
       {{"LOCAL_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "1"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(portForJob("torchrun-ppid77"))}}},
      {"torchrun on one node inside a SLURM job: SLURM's job names it too",
       {{"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", "29500"},
        {"SLURM_JOB_ID", "79"},
        {"SLURM_STEP_ID", "0"}},
       "torchrun",
       1,
       2,
       1,
       2,
       0,
       "torchrun-addr-127.0.0.1-port29500-slurm79.0",
       {}},
      // srun bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS ... tracerun ...' over two
      // nodes: the step's own local id, node id and tasks per node fill what was not set.
      {"RANK and WORLD_SIZE by hand in an srun step",
       {{"RANK", "5"},
        {"WORLD_SIZE", "8"},
        {"MASTER_ADDR", "n1"},
        {"MASTER_PORT", "29500"},
        {"SLURM_PROCID", "5"},
        {"SLURM_STEP_NUM_TASKS", "8"},
        {"SLURM_LOCALID", "1"},
        {"SLURM_NODEID", "1"},
        {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
        {"SLURM_JOB_ID", "77"},
        {"SLURM_STEP_ID", "0"}},
       "torchrun",
       5,
       8,
       1,
       4,
       1,
       "torchrun-addr-n1-port29500",  // several nodes: rank 0's run label tells runs apart
       {{"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "4"}, {"GROUP_RANK", "1"}}},
      // torchrun inside an srun step of one task per node: SLURM_PROCID is the node's index, not
      // the rank; torchrun's own variables are taken, SLURM's job names the job.
      {"torchrun in an srun step, one agent per node",
       {{"RANK", "5"},
        {"WORLD_SIZE", "8"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "4"},
        {"GROUP_RANK", "1"},
        {"MASTER_ADDR", "n1"},
        {"MASTER_PORT", "29500"},
        {"TORCHELASTIC_RUN_ID", "none"},
        {"SLURM_PROCID", "1"},
        {"SLURM_STEP_NUM_TASKS", "2"},
        {"SLURM_LOCALID", "0"},
        {"SLURM_NODEID", "1"},
        {"SLURM_JOB_ID", "78"},
        {"SLURM_STEP_ID", "1"},
        {"SLURM_RESTART_COUNT", "2"}},
       "torchrun",
       5,
       8,
       1,
       4,
       1,
       "torchrun-addr-n1-port29500",
       {}},
      {"srun, 2 nodes x 2 tasks",
       {{"SLURM_PROCID", "2"},
        {"SLURM_NTASKS", "4"},
        {"SLURM_STEP_NUM_TASKS", "4"},
        {"SLURM_LOCALID", "0"},
        {"SLURM_NODEID", "1"},
        {"SLURM_JOB_ID", "8812"},
        {"SLURM_STEP_ID", "0"},
        {"SLURM_STEP_NODELIST", "gpu[07-08]"},
        {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}},
       "slurm",
       2,
       4,
       0,
       2,
       1,
       "slurm-8812.0",
       {{"RANK", "2"},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "1"},
        {"MASTER_ADDR", "gpu07"},
        {"MASTER_PORT", std::to_string(portForJob("slurm-8812.0"))}}},
      {"srun, uneven tasks, MASTER_ADDR and PORT exported by the sbatch script",
       {{"SLURM_PROCID", "4"},
        {"SLURM_STEP_NUM_TASKS", "5"},
        {"SLURM_LOCALID", "1"},
        {"SLURM_NODEID", "1"},
        {"SLURM_JOB_ID", "9"},
        {"SLURM_STEP_ID", "3"},
        {"SLURM_JOB_NODELIST", "a,b"},
        {"SLURM_TASKS_PER_NODE", "3,2"},
        {"MASTER_ADDR", "head"},
        {"MASTER_PORT", "1234"}},
       "slurm",
       4,
       5,
       1,
       2,
       1,
       "slurm-9.3",
       {{"RANK", "4"},
        {"WORLD_SIZE", "5"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "1"}}},
      {"mpirun (Open MPI), one node",
       {{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"OMPI_MCA_ess_base_jobid", "3735945217"}},
       "openmpi",
       1,
       2,
       1,
       2,
       0,
       "openmpi-3735945217",
       {{"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", std::to_string(portForJob("openmpi-3735945217"))}}},
      {"mpirun (Open MPI) --map-by node: rank 1 is node 1's local rank 0, its node unknown",
       {{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
        {"OMPI_MCA_ess_base_jobid", "77"},
        {"MASTER_ADDR", "n0"},
        {"MASTER_PORT", "29500"}},
       "openmpi",
       1,
       4,
       0,
       2,
       -1,
       "openmpi-77",
       {{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "0"}, {"LOCAL_WORLD_SIZE", "2"}}},
      {"MPICH hydra",
       {{"PMI_RANK", "0"},
        {"PMI_SIZE", "3"},
        {"MPI_LOCALRANKID", "0"},
        {"MPI_LOCALNRANKS", "3"},
        {"PMI_KVSNAME", "kvs_1234_0"},
        {"MASTER_PORT", "5000"}},
       "pmi",
       0,
       3,
       0,
       3,
       0,
       "pmi-kvs_1234_0",
       {{"RANK", "0"},
        {"WORLD_SIZE", "3"},
        {"LOCAL_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "3"},
        {"GROUP_RANK", "0"},
        {"MASTER_ADDR", "127.0.0.1"}}},
      // HPE/Cray PALS mpiexec (Cray EX without srun): PMI's ranks, the local ones and the node
      // under PALS' and Cray PMI's names. Read as one node before: LOCAL_RANK 5, GROUP_RANK 0.
      {"Cray PALS mpiexec, 2 nodes x 4",
       {{"PMI_RANK", "5"},
        {"PMI_SIZE", "8"},
        {"PMI_LOCAL_RANK", "1"},
        {"PMI_LOCAL_SIZE", "4"},
        {"PALS_RANKID", "5"},
        {"PALS_LOCAL_RANKID", "1"},
        {"PALS_LOCAL_SIZE", "4"},
        {"PALS_NODEID", "1"},
        {"MASTER_ADDR", "x1000c0s0b0n0"},
        {"MASTER_PORT", "29500"}},
       "pmi",
       5,
       8,
       1,
       4,
       1,
       "pmi-addr-x1000c0s0b0n0-29500",
       {{"RANK", "5"},
        {"WORLD_SIZE", "8"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "4"},
        {"GROUP_RANK", "1"}}},
      {"MVAPICH2 mpirun_rsh",
       {{"PMI_RANK", "2"},
        {"PMI_SIZE", "4"},
        {"MV2_COMM_WORLD_LOCAL_RANK", "0"},
        {"MV2_COMM_WORLD_LOCAL_SIZE", "2"},
        {"MASTER_ADDR", "n1"},
        {"MASTER_PORT", "29500"}},
       "pmi",
       2,
       4,
       0,
       2,
       1,
       "pmi-addr-n1-29500",
       {{"RANK", "2"},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "0"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"GROUP_RANK", "1"}}},
      // A PMI launcher that names nothing local: unknown, not one node (nothing made up exported;
      // the rank measures its clock against rank 0's).
      {"PMI ranks alone, the rendezvous given",
       {{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MASTER_ADDR", "n1"}, {"MASTER_PORT", "29500"}},
       "pmi",
       3,
       4,
       -1,
       -1,
       -1,
       "pmi-addr-n1-29500",
       {{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "3"}, {"LOCAL_WORLD_SIZE", "4"}}},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    const auto job = detectOuterJob(row.env, 77);
    CHECK(job.problem == "");
    CHECK(job.launcher == row.launcher);
    CHECK(job.rank == row.rank);
    CHECK(job.world_size == row.world);
    CHECK(job.local_rank == row.local);
    CHECK(job.local_world_size == row.localWorld);
    CHECK(job.node_rank == row.node);
    CHECK(job.job_id == row.jobId);
    CHECK(job.program_env == row.programEnv);
  }
}

TEST_CASE("outer job: an sbatch script is no SLURM launch, only an srun step is", "[outer_job]") {
  // The batch script's own environment: SLURM_PROCID=0 and the allocation's task count, but no
  // step. A lone `tracerun -o run.db -- python train.py` there is one process, not rank 0 of 4.
  const EnvMap batch = {{"SLURM_PROCID", "0"},       {"SLURM_NTASKS", "4"},
                        {"SLURM_NPROCS", "4"},       {"SLURM_TASKS_PER_NODE", "4"},
                        {"SLURM_JOB_ID", "5"},       {"SLURM_JOB_NODELIST", "n1"},
                        {"SLURM_JOB_NUM_NODES", "1"}};
  const auto plain = detectOuterJob(batch, 1);
  CHECK(plain.launcher == "");
  CHECK(plain.problem == "");
  // The same variables inside `srun -n 4` (the step's own count added): rank 0 of 4.
  EnvMap step = batch;
  step.insert({{"SLURM_STEP_NUM_TASKS", "4"},
               {"SLURM_STEP_ID", "0"},
               {"SLURM_LOCALID", "0"},
               {"SLURM_NODEID", "0"}});
  const auto srun = detectOuterJob(step, 1);
  CHECK(srun.launcher == "slurm");
  CHECK(srun.world_size == 4);
  // MPICH's mpiexec -launcher fork in that batch script: the PMI ranks, not the batch step.
  EnvMap mpich = batch;
  mpich.insert({{"PMI_RANK", "1"},
                {"PMI_SIZE", "4"},
                {"PMI_KVSNAME", "kvs_7_0"},
                {"MPI_LOCALRANKID", "1"},
                {"MPI_LOCALNRANKS", "4"},
                {"MASTER_ADDR", "n1"},
                {"MASTER_PORT", "29500"}});
  const auto pmi = detectOuterJob(mpich, 1);
  INFO(pmi.problem);
  CHECK(pmi.problem == "");
  CHECK(pmi.launcher == "pmi");
  CHECK(pmi.rank == 1);
  CHECK(pmi.world_size == 4);
}

TEST_CASE("outer job: torchrun wins over the SLURM variables around it", "[outer_job]") {
  // torchrun started inside an sbatch allocation: its own RANK is the rank, not SLURM_PROCID.
  const auto job = detectOuterJob({{"RANK", "1"},
                                   {"WORLD_SIZE", "2"},
                                   {"SLURM_PROCID", "0"},
                                   {"SLURM_NTASKS", "1"},
                                   {"SLURM_JOB_ID", "5"}},
                                  1);
  CHECK(job.launcher == "torchrun");
  CHECK(job.rank == 1);
}

TEST_CASE("outer job: which MPI ranks measure their clock against rank 0's", "[outer_job]") {
  // Four ranks on two nodes, placed node after node (mpirun's default) and round robin
  // (--map-by node: rank r on node r % 2 as local rank r / 2). Every rank not known to share rank
  // 0's node measures; only rank 0 and a rank known to be beside it do not.
  for (const bool byNode : {false, true}) {
    for (int rank = 0; rank < 4; ++rank) {
      INFO((byNode ? "--map-by node" : "--map-by slot") << ", rank " << rank);
      const int node = byNode ? rank % 2 : rank / 2;
      const int local = byNode ? rank / 2 : rank % 2;
      const auto job = detectOuterJob({{"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
                                       {"OMPI_COMM_WORLD_SIZE", "4"},
                                       {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local)},
                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                       {"OMPI_MCA_ess_base_jobid", "77"},
                                       {"MASTER_ADDR", "n0"},
                                       {"MASTER_PORT", "29500"}},
                                      42);
      REQUIRE(job.problem == "");
      CHECK((job.node_rank == node || job.node_rank == -1));  // never a wrong node
      CHECK(measuresOuterClock(job) == (node != 0 || (rank != 0 && job.node_rank == -1)));
    }
  }
}

TEST_CASE("outer job: an MPI launcher inside a SLURM allocation is the MPI launcher",
          "[outer_job]") {
  // mpirun in an sbatch script: the batch step's (or the node daemons' srun's) SLURM variables are
  // around every rank; taking SLURM_PROCID made every rank rank 0 (or its node's index).
  struct Row {
    const char* what;
    EnvMap env;
    const char* launcher;
    int rank, world;
    const char* jobId;
  };
  const std::vector<Row> rows = {
      {"Open MPI's mpirun in a batch script",
       {{"OMPI_COMM_WORLD_RANK", "5"},
        {"OMPI_COMM_WORLD_SIZE", "8"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
        {"OMPI_MCA_ess_base_jobid", "77"},
        {"MASTER_ADDR", "n1"},
        {"SLURM_PROCID", "1"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_JOB_ID", "40"}},
       "openmpi",
       5,
       8,
       "openmpi-77"},
      {"MPICH's hydra, its node daemons started by srun",
       {{"PMI_RANK", "5"},
        {"PMI_SIZE", "8"},
        {"MPI_LOCALRANKID", "1"},
        {"MPI_LOCALNRANKS", "4"},
        {"PMI_KVSNAME", "kvs_9_0"},
        {"MASTER_ADDR", "n1"},
        {"SLURM_PROCID", "1"},
        {"SLURM_NTASKS", "2"},
        {"SLURM_JOB_ID", "40"}},
       "pmi",
       5,
       8,
       "pmi-kvs_9_0"},
      {"srun --mpi=pmi2: PMI's variables agree with SLURM's, SLURM's job",
       {{"PMI_RANK", "3"},
        {"PMI_SIZE", "4"},
        {"SLURM_PROCID", "3"},
        {"SLURM_NTASKS", "4"},
        {"SLURM_STEP_NUM_TASKS", "4"},
        {"SLURM_LOCALID", "1"},
        {"SLURM_NODEID", "1"},
        {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
        {"SLURM_JOB_ID", "40"},
        {"SLURM_STEP_ID", "2"},
        {"MASTER_ADDR", "n1"}},
       "slurm",
       3,
       4,
       "slurm-40.2"},
      {"srun -E: the allocation's SLURM_NTASKS kept, the step's count is the world",
       {{"SLURM_PROCID", "1"},
        {"SLURM_NTASKS", "8"},
        {"SLURM_STEP_NUM_TASKS", "2"},
        {"SLURM_LOCALID", "1"},
        {"SLURM_NODEID", "0"},
        {"SLURM_STEP_TASKS_PER_NODE", "2"},
        {"SLURM_JOB_ID", "41"},
        {"SLURM_STEP_ID", "0"},
        {"MASTER_ADDR", "n1"}},
       "slurm",
       1,
       2,
       "slurm-41.0"},
      {"MPICH's hydra over two nodes without a job name: the rendezvous address names it (the "
       "parent pid differs per node)",
       {{"PMI_RANK", "2"},
        {"PMI_SIZE", "4"},
        {"MPI_LOCALRANKID", "0"},
        {"MPI_LOCALNRANKS", "2"},
        {"MASTER_ADDR", "n1"},
        {"MASTER_PORT", "29400"}},
       "pmi",
       2,
       4,
       "pmi-addr-n1-29400"},
      {"a requeued job: its earlier run's directory is not its own",
       {{"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "1"},
        {"SLURM_STEP_NUM_TASKS", "1"},
        {"SLURM_JOB_ID", "42"},
        {"SLURM_STEP_ID", "0"},
        {"SLURM_RESTART_COUNT", "1"},
        {"MASTER_ADDR", "n1"}},
       "slurm",
       0,
       1,
       "slurm-42.0-restart1"},
  };
  for (const Row& row : rows) {
    INFO(row.what);
    const auto job = detectOuterJob(row.env, 77);
    CHECK(job.problem == "");
    CHECK(job.launcher == row.launcher);
    CHECK(job.rank == row.rank);
    CHECK(job.world_size == row.world);
    CHECK(job.job_id == row.jobId);
  }
}

TEST_CASE("outer job: torchrun over several nodes leaves the run's name to rank 0", "[outer_job]") {
  // One node: one agent, whose restart count all ranks share, names the run. Several: each agent
  // counts its own failures, so the directory's name waits for rank 0's label (labelRun).
  EnvMap one = {{"RANK", "1"},
                {"WORLD_SIZE", "2"},
                {"LOCAL_RANK", "1"},
                {"LOCAL_WORLD_SIZE", "2"},
                {"GROUP_RANK", "0"},
                {"MASTER_ADDR", "h"},
                {"MASTER_PORT", "29500"},
                {"TORCHELASTIC_RESTART_COUNT", "1"}};
  const auto single = detectOuterJob(one, 1);
  CHECK_FALSE(single.run_from_rank0);
  CHECK(single.job_id == "torchrun-addr-h-port29500-restart1");
  CHECK(single.token_id == "torchrun-addr-h-port29500");
  EnvMap two = one;
  two["LOCAL_RANK"] = "0";
  two["LOCAL_WORLD_SIZE"] = "1";
  two["GROUP_RANK"] = "1";
  const auto multi = detectOuterJob(two, 1);
  CHECK(multi.run_from_rank0);
  CHECK(multi.restart == 1);
  CHECK(multi.job_id == "torchrun-addr-h-port29500");  // labelRun adds the run
  CHECK(multi.token_id == multi.job_id);
}

TEST_CASE("outer job: an id too long for a directory keeps what tells runs apart", "[outer_job]") {
  // A long rendezvous id and a long host name: a requeued SLURM job's count at the end was cut
  // off, and the requeued run found the first run's directory ("already holds rank 0's shard").
  EnvMap env = {{"RANK", "0"},
                {"WORLD_SIZE", "2"},
                {"LOCAL_RANK", "0"},
                {"LOCAL_WORLD_SIZE", "2"},
                {"GROUP_RANK", "0"},
                {"MASTER_ADDR", "node-0001.rack-17.hall-b.cluster.example.org"},
                {"MASTER_PORT", "29500"},
                {"TORCHELASTIC_RUN_ID", std::string(80, 'j')},
                {"SLURM_JOB_ID", "4242"},
                {"SLURM_STEP_ID", "0"}};
  const auto first = detectOuterJob(env, 1);
  env["SLURM_RESTART_COUNT"] = "1";
  const auto second = detectOuterJob(env, 1);
  CHECK(first.job_id.size() <= 129);  // "torchrun-" and at most 120 characters
  CHECK(second.job_id.size() <= 129);
  CHECK(first.job_id != second.job_id);
  CHECK(first.job_id.rfind("torchrun-jjjj", 0) == 0);
}

TEST_CASE("outer job: which run of the job this is", "[outer_job]") {
  CHECK(detectOuterJob({{"RANK", "0"}, {"WORLD_SIZE", "1"}}, 1).restart == 0);
  CHECK(detectOuterJob({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"TORCHELASTIC_RESTART_COUNT", "2"}}, 1)
            .restart == 2);
  CHECK(detectOuterJob({{"SLURM_PROCID", "0"},
                        {"SLURM_STEP_NUM_TASKS", "1"},
                        {"SLURM_JOB_ID", "3"},
                        {"SLURM_RESTART_COUNT", "1"},
                        {"MASTER_ADDR", "n"}},
                       1)
            .restart == 1);
}

TEST_CASE("outer job: inconsistent environments are one line each", "[outer_job]") {
  struct Row {
    EnvMap env;
    const char* needle;
  };
  const std::vector<Row> rows = {
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "rank 2 is outside a world of 2"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "RANK=x is not a count"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_JOB_ID", "1"}},
       "export MASTER_ADDR"},
      {{{"SLURM_PROCID", "0"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NODELIST", "n[1-"}},
       "cannot read the host list 'n[1-'"},
      {{{"OMPI_COMM_WORLD_RANK", "0"},
        {"OMPI_COMM_WORLD_SIZE", "4"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
       "mpirun -x MASTER_ADDR"},
      {{{"PMI_RANK", "0"},
        {"PMI_SIZE", "4"},
        {"MPI_LOCALRANKID", "0"},
        {"MPI_LOCALNRANKS", "2"},
        {"MASTER_ADDR", "n1"}},
       "pass MASTER_ADDR and MASTER_PORT"},
      // Nothing says which ranks share a node: the rendezvous host must be given.
      {{{"PMI_RANK", "1"}, {"PMI_SIZE", "4"}, {"PMI_KVSNAME", "kvs_3_0"}},
       "MASTER_ADDR is not set"},
      // An MPI launcher inside an srun step of the same size (the sizes agree): SLURM is chosen
      // on all ranks alike (a choice made on the rank split the job in two), and a rank whose
      // PMI_RANK disagrees says so.
      {{{"PMI_RANK", "1"},
        {"PMI_SIZE", "4"},
        {"SLURM_PROCID", "0"},
        {"SLURM_NTASKS", "4"},
        {"SLURM_STEP_NUM_TASKS", "4"},
        {"SLURM_JOB_ID", "7"},
        {"MASTER_ADDR", "n1"}},
       "PMI_RANK=1 and SLURM_PROCID=0 disagree"},
  };
  for (const Row& row : rows) {
    const auto job = detectOuterJob(row.env, 1);
    INFO(job.problem);
    CHECK(job.problem.find(row.needle) != std::string::npos);
    CHECK(job.problem.find('\n') == std::string::npos);
  }
}

TEST_CASE("outer job: SLURM host lists", "[outer_job]") {
  using V = std::vector<std::string>;
  const std::vector<std::pair<std::string, V>> rows = {
      {"node1", {"node1"}},
      {"node[01-04,07]", {"node01", "node02", "node03", "node04", "node07"}},
      {"a,b[8-10],c", {"a", "b8", "b9", "b10", "c"}},
      {"gpu[098-101]", {"gpu098", "gpu099", "gpu100", "gpu101"}},
      {"rack[1-2]-n[3-4]", {"rack1-n3", "rack1-n4", "rack2-n3", "rack2-n4"}},
      {"x[5]", {"x5"}},
  };
  for (const auto& [list, hosts] : rows) {
    std::string problem;
    CHECK(expandHostList(list, &problem) == hosts);
    CHECK(problem.empty());
  }
  for (const std::string bad : {"", "n[1-", "n]1[", "n[4-2]", "n[a-b]", "n[[1]]", "n,,m"}) {
    std::string problem;
    INFO(bad);
    CHECK(expandHostList(bad, &problem).empty());
    CHECK(!problem.empty());
  }
}

TEST_CASE("outer job: the default port is the job's, below the ephemeral range", "[outer_job]") {
  CHECK(portForJob("slurm-1.0") == portForJob("slurm-1.0"));
  CHECK(portForJob("slurm-1.0") != portForJob("slurm-2.0"));
  // Linux hands out local ports from 32768 (ip_local_port_range's default): a derived port above
  // it could be taken by some connection first. 10,000 ids, none there.
  int lowest = 1 << 30, highest = 0;
  for (int i = 0; i < 10000; ++i) {
    const int port = portForJob("slurm-" + std::to_string(i) + ".0");
    lowest = std::min(lowest, port);
    highest = std::max(highest, port);
  }
  CHECK(lowest >= 20000);
  CHECK(highest < 32768);
  CHECK(highest - lowest > 10000);  // still spread over the range
}
