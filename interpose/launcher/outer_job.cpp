// Outer-launcher detection (outer_job.h): torchrun, SLURM, Open MPI and PMI variables read from an
// environment map into one OuterJob, SLURM's host-list syntax, the default port. Pure functions:
// no processes, no files, no globals.
//
// Sections: numbers and names · host lists · the launchers · detectOuterJob
#include "outer_job.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

extern char** environ;

namespace tracerun::launcher {

// ---- numbers and names --------------------------------------------------------------------------

namespace {

const std::string* find(const EnvMap& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? nullptr : &it->second;
}

// A decimal integer >= 0 from the whole of `text`; false otherwise.
bool parseCount(const std::string& text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  int value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + (c - '0');
  }
  *out = value;
  return true;
}

// `name`'s value as a count into *out; a problem line when present but not a number.
bool readCount(const EnvMap& env, const char* name, int* out, std::string* problem) {
  const std::string* value = find(env, name);
  if (value == nullptr) return false;
  if (!parseCount(*value, out)) {
    if (problem->empty()) *problem = std::string(name) + "=" + *value + " is not a count";
    return false;
  }
  return true;
}

std::string value(const EnvMap& env, const char* name) {
  const std::string* v = find(env, name);
  return v == nullptr ? std::string() : *v;
}

// FNV-1a 64 of `text`: the derived port's and a cut id's hash.
uint64_t fnv1a64(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (const unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// Only [A-Za-z0-9._-]; anything else becomes '_' (a directory name, never a path).
std::string safeName(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '-' || c == '_';
    out += ok ? c : '_';
  }
  if (out.size() > 120) {
    // Too long for a directory name: the start, and a hash of the whole so that what was cut
    // (a requeue or restart count at the end) still tells two ids apart.
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a64(text)));
    out = out.substr(0, 103) + "-" + hex;
  }
  return out == "." || out == ".." ? "_" + out : out;
}

}  // namespace

EnvMap environMap() {
  EnvMap env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const auto eq = entry.find('=');
    if (eq != std::string::npos) env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  return env;
}

int portForJob(const std::string& jobId) {
  const uint64_t h = fnv1a64(jobId);
  // 20000-31999: below Linux's ephemeral range (32768-60999), where a connection's own port
  // could take it first.
  return 20000 + static_cast<int>(h % 12000);
}

// ---- host lists ---------------------------------------------------------------------------------

namespace {

// Splits at commas outside brackets.
std::vector<std::string> splitTopLevel(const std::string& list) {
  std::vector<std::string> out;
  std::string item;
  int depth = 0;
  for (const char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      out.push_back(item);
      item.clear();
    } else {
      item += c;
    }
  }
  out.push_back(item);
  return out;
}

// The values of one bracket's body ("01-04,07"), zero-padded to the width of each range's start.
bool expandRange(const std::string& body, std::vector<std::string>* out) {
  for (const std::string& part : splitTopLevel(body)) {
    const auto dash = part.find('-');
    const std::string lo = part.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    int a = 0, b = 0;
    if (!parseCount(lo, &a) || !parseCount(hi, &b) || b < a || b - a > 100000) return false;
    for (int i = a; i <= b; ++i) {
      std::string digits = std::to_string(i);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out->push_back(digits);
    }
  }
  return true;
}

// One item ("rack[1-2]-n[3-4]"): every bracket expanded, left to right, as a cartesian product.
bool expandItem(const std::string& item, std::vector<std::string>* out) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    const auto open = item.find('[', i);
    const std::string literal = item.substr(i, open == std::string::npos ? item.npos : open - i);
    if (literal.find(']') != std::string::npos) return false;
    for (auto& n : names) n += literal;
    if (open == std::string::npos) break;
    const auto close = item.find(']', open);
    if (close == std::string::npos) return false;
    std::vector<std::string> values;
    if (!expandRange(item.substr(open + 1, close - open - 1), &values)) return false;
    std::vector<std::string> next;
    for (const auto& n : names) {
      for (const auto& v : values) next.push_back(n + v);
    }
    names.swap(next);
    i = close + 1;
  }
  if (names.size() == 1 && names[0].empty()) return false;
  out->insert(out->end(), names.begin(), names.end());
  return true;
}

// SLURM's tasks-per-node list ("2(x3),1") expanded to one count per node.
std::vector<int> expandTaskCounts(const std::string& list) {
  std::vector<int> out;
  for (const std::string& item : splitTopLevel(list)) {
    const auto paren = item.find("(x");
    int count = 0, times = 1;
    if (!parseCount(item.substr(0, paren), &count)) return {};
    if (paren != std::string::npos &&
        (item.back() != ')' ||
         !parseCount(item.substr(paren + 2, item.size() - paren - 3), &times))) {
      return {};
    }
    out.insert(out.end(), static_cast<size_t>(times), count);
  }
  return out;
}

}  // namespace

std::vector<std::string> expandHostList(const std::string& list, std::string* problem) {
  std::vector<std::string> hosts;
  int depth = 0;
  for (const char c : list) {
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (depth < 0 || depth > 1) break;
  }
  bool ok = depth == 0 && !list.empty();
  for (const std::string& item : ok ? splitTopLevel(list) : std::vector<std::string>{}) {
    if (!expandItem(item, &hosts)) ok = false;
  }
  if (!ok) {
    *problem = "cannot read the host list '" + list + "'";
    return {};
  }
  return hosts;
}

// ---- the launchers ------------------------------------------------------------------------------

namespace {

// torchrun sets LOCAL_RANK, LOCAL_WORLD_SIZE and GROUP_RANK; a job that sets RANK and WORLD_SIZE
// by hand (`srun bash -c 'RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS ... tracerun ...'`) may
// leave them out. What is missing comes from the launcher around it when its ranks are the job's
// (an srun step's local id, node id and tasks per node; Open MPI's local rank and size), else it
// stays unknown (-1): never a one-node guess, which left other nodes' clocks at offset 0,
// unmeasured and unflagged, and handed the program a wrong LOCAL_RANK.
void localsFromLauncherAround(const EnvMap& env, OuterJob* job) {
  const std::string rank = value(env, "RANK"), world = value(env, "WORLD_SIZE");
  std::string ignored;  // a malformed value there only leaves the field unknown
  if (value(env, "SLURM_PROCID") == rank && value(env, "SLURM_STEP_NUM_TASKS") == world) {
    readCount(env, "SLURM_LOCALID", &job->local_rank, &ignored);
    readCount(env, "SLURM_NODEID", &job->node_rank, &ignored);
    const std::vector<int> counts = expandTaskCounts(value(env, "SLURM_STEP_TASKS_PER_NODE"));
    if (job->node_rank >= 0 && static_cast<size_t>(job->node_rank) < counts.size()) {
      job->local_world_size = counts[static_cast<size_t>(job->node_rank)];
    }
  } else if (value(env, "OMPI_COMM_WORLD_RANK") == rank &&
             value(env, "OMPI_COMM_WORLD_SIZE") == world) {
    readCount(env, "OMPI_COMM_WORLD_LOCAL_RANK", &job->local_rank, &ignored);
    readCount(env, "OMPI_COMM_WORLD_LOCAL_SIZE", &job->local_world_size, &ignored);
  }
}

// A world of one process is one node, whatever else is missing.
void oneProcessIsOneNode(OuterJob* job) {
  if (job->world_size != 1) return;
  job->local_rank = 0;
  job->local_world_size = 1;
  job->node_rank = 0;
}

void detectTorchrun(const EnvMap& env, long parentPid, OuterJob* job) {
  job->launcher = "torchrun";
  readCount(env, "RANK", &job->rank, &job->problem);
  readCount(env, "WORLD_SIZE", &job->world_size, &job->problem);
  job->local_rank = job->local_world_size = job->node_rank = -1;  // unknown until said
  localsFromLauncherAround(env, job);
  readCount(env, "LOCAL_RANK", &job->local_rank, &job->problem);
  readCount(env, "LOCAL_WORLD_SIZE", &job->local_world_size, &job->problem);
  readCount(env, "GROUP_RANK", &job->node_rank, &job->problem);
  oneProcessIsOneNode(job);
  if (job->node_rank < 0 && job->local_world_size > 0) {
    if (job->local_world_size == job->world_size) {
      job->node_rank = 0;  // one node, by the job's own count
    } else if (job->local_rank >= 0 && job->local_rank == job->rank % job->local_world_size) {
      job->node_rank = job->rank / job->local_world_size;  // ranks fill nodes in order (MPI's)
    }
  }
  // torchrun's --rdzv_id defaults to "none" (a uuid with --standalone), and a hand-set job has
  // none: the rendezvous address and port tell apart jobs on different hosts; on one node SLURM's
  // job id two jobs of the cluster that chose the same address and port (a static --master_port,
  // MASTER_ADDR 127.0.0.1), and the restart counts separate runs. Over several nodes rank 0's run
  // label separates them (labelRun), and SLURM's ids are left out: each node's torchrun may come
  // from its own srun step, or from ssh without them, and the id must be the same on all.
  const bool oneNode = job->local_world_size == job->world_size;
  std::string id = value(env, "TORCHELASTIC_RUN_ID");
  if (id.empty() || id == "none") id.clear();
  const std::string addr = value(env, "MASTER_ADDR"), port = value(env, "MASTER_PORT");
  if (!port.empty()) {
    if (!id.empty()) id += "-";
    if (!addr.empty()) id += "addr-" + addr + "-";
    id += "port" + port;
  }
  if (id.empty()) id = "ppid" + std::to_string(parentPid);
  if (const std::string slurmJob = value(env, "SLURM_JOB_ID"); oneNode && !slurmJob.empty()) {
    id += "-slurm" + slurmJob;
    const std::string step = value(env, "SLURM_STEP_ID"),
                      requeue = value(env, "SLURM_RESTART_COUNT");
    if (!step.empty()) id += "." + step;
    if (!requeue.empty() && requeue != "0") id += "-requeue" + requeue;
  }
  readCount(env, "TORCHELASTIC_RESTART_COUNT", &job->restart, &job->problem);
  job->token_id = "torchrun-" + safeName(id);
  // One node has one agent, whose restart count every rank shares: it names the run. Over several
  // nodes it does not (each agent counts its own failures): rank 0's tracerun names the run.
  job->run_from_rank0 = !oneNode;
  job->job_id = job->token_id;
  if (!job->run_from_rank0 && job->restart > 0)
    job->job_id += "-restart" + std::to_string(job->restart);
}

void detectSlurm(const EnvMap& env, OuterJob* job) {
  job->launcher = "slurm";
  readCount(env, "SLURM_PROCID", &job->rank, &job->problem);
  // The step's count: `srun -E` (--preserve-env) keeps the allocation's SLURM_NTASKS.
  readCount(env, "SLURM_STEP_NUM_TASKS", &job->world_size, &job->problem);
  readCount(env, "SLURM_LOCALID", &job->local_rank, &job->problem);
  readCount(env, "SLURM_NODEID", &job->node_rank, &job->problem);
  std::string perNode = value(env, "SLURM_STEP_TASKS_PER_NODE");
  if (perNode.empty()) perNode = value(env, "SLURM_TASKS_PER_NODE");
  const std::vector<int> counts = expandTaskCounts(perNode);
  job->local_world_size = static_cast<size_t>(job->node_rank) < counts.size()
                              ? counts[static_cast<size_t>(job->node_rank)]
                              : job->local_rank + 1;
  const std::string step = value(env, "SLURM_STEP_ID");
  // A requeued job (a node failed) runs again under its id: its earlier run's shards are not its.
  const std::string restart = value(env, "SLURM_RESTART_COUNT");
  readCount(env, "SLURM_RESTART_COUNT", &job->restart, &job->problem);
  job->job_id =
      "slurm-" + safeName(value(env, "SLURM_JOB_ID") + "." + (step.empty() ? "0" : step) +
                          (restart.empty() || restart == "0" ? "" : "-restart" + restart));
  if (find(env, "MASTER_ADDR") == nullptr) {
    std::string list = value(env, "SLURM_STEP_NODELIST");
    if (list.empty()) list = value(env, "SLURM_JOB_NODELIST");
    if (list.empty()) list = value(env, "SLURM_NODELIST");
    std::string problem;
    const auto hosts = list.empty() ? std::vector<std::string>{} : expandHostList(list, &problem);
    if (!hosts.empty()) {
      job->program_env["MASTER_ADDR"] = hosts.front();
    } else if (job->problem.empty()) {
      job->problem = list.empty() ? "SLURM: no SLURM_STEP_NODELIST/SLURM_JOB_NODELIST to take "
                                    "MASTER_ADDR from; export MASTER_ADDR"
                                  : "SLURM: " + problem + "; export MASTER_ADDR";
    }
  }
}

void detectMpi(const EnvMap& env, long parentPid, OuterJob* job) {
  const bool ompi = find(env, "OMPI_COMM_WORLD_RANK") != nullptr;
  job->launcher = ompi ? "openmpi" : "pmi";
  readCount(env, ompi ? "OMPI_COMM_WORLD_RANK" : "PMI_RANK", &job->rank, &job->problem);
  readCount(env, ompi ? "OMPI_COMM_WORLD_SIZE" : "PMI_SIZE", &job->world_size, &job->problem);
  // Each PMI launcher names the local rank and size its own way: Hydra (MPICH) MPI_LOCALRANKID /
  // MPI_LOCALNRANKS, Cray PMI PMI_LOCAL_RANK / PMI_LOCAL_SIZE, HPE PALS PALS_LOCAL_RANKID /
  // PALS_LOCAL_SIZE, MVAPICH2 MV2_COMM_WORLD_LOCAL_RANK / _SIZE. With none of them nothing says
  // which ranks share a node (one node was assumed: LOCAL_RANK = the global rank on every node):
  // the local rank, size and node stay unknown, the ranks measure their clocks, and MASTER_ADDR
  // must be given.
  static constexpr std::pair<const char*, const char*> kPmiLocals[] = {
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"PMI_LOCAL_RANK", "PMI_LOCAL_SIZE"},
      {"PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE"},
      {"MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"}};
  const char* localRank = ompi ? "OMPI_COMM_WORLD_LOCAL_RANK" : nullptr;
  const char* localSize = ompi ? "OMPI_COMM_WORLD_LOCAL_SIZE" : nullptr;
  for (const auto& [r, n] : kPmiLocals) {
    if (!ompi && localRank == nullptr && find(env, r) != nullptr && find(env, n) != nullptr) {
      localRank = r;
      localSize = n;
    }
  }
  job->local_rank = job->local_world_size = -1;
  if (localRank != nullptr) {
    job->local_rank = job->rank;
    job->local_world_size = job->world_size;
    readCount(env, localRank, &job->local_rank, &job->problem);
    readCount(env, localSize, &job->local_world_size, &job->problem);
  }
  oneProcessIsOneNode(job);
  // MPI names no node index. rank / local size is one only where the ranks fill the nodes in order
  // (mpirun's default, --map-by slot), which each rank can check on itself: its local rank is then
  // rank % local size. Under --map-by node (rank r on node r % N) it is not (rank 1 is node 1's
  // local rank 0): the node is unknown, and the rank measures its clock against rank 0's.
  job->node_rank = job->local_world_size > 0 && job->local_rank == job->rank % job->local_world_size
                       ? job->rank / job->local_world_size
                       : -1;
  if (!ompi && find(env, "PALS_NODEID") != nullptr) {
    readCount(env, "PALS_NODEID", &job->node_rank, &job->problem);  // PALS says it outright
  }
  const bool oneNode = job->local_world_size == job->world_size;
  if (find(env, "MASTER_ADDR") == nullptr) {
    if (oneNode) {
      job->program_env["MASTER_ADDR"] = "127.0.0.1";  // every rank on this node
    } else if (job->problem.empty()) {
      job->problem = job->launcher +
                     ": the ranks span several nodes and MASTER_ADDR is not set; pass it "
                     "(mpirun -x MASTER_ADDR=HOST -x MASTER_PORT=PORT)";
    }
  }
  std::string id = value(env, ompi ? "OMPI_MCA_ess_base_jobid" : "PMI_KVSNAME");
  if (id.empty()) id = value(env, "PMIX_NAMESPACE");
  if (id.empty() && !oneNode) {
    // The parent process differs from node to node (each has its own daemon): every node would
    // get a directory (and a derived port) of its own. The rendezvous address names the job.
    const std::string port = value(env, "MASTER_PORT");
    if (port.empty() && job->problem.empty()) {
      job->problem = job->launcher +
                     ": the ranks span several nodes and the launcher names no job (no " +
                     (ompi ? "OMPI_MCA_ess_base_jobid" : "PMI_KVSNAME") +
                     " or PMIX_NAMESPACE); pass MASTER_ADDR and MASTER_PORT";
    }
    id = "addr-" + value(env, "MASTER_ADDR") + "-" + port;
  }
  if (id.empty()) id = "ppid" + std::to_string(parentPid);
  job->job_id = job->launcher + "-" + safeName(id);
}

}  // namespace

// ---- detectOuterJob -----------------------------------------------------------------------------

OuterJob detectOuterJob(const EnvMap& env, long parentPid) {
  OuterJob job;
  // The launcher nearest the process first: torchrun's variables, then Open MPI's (in the
  // environment before exec only under mpirun), then SLURM's, then PMI's. mpirun or MPICH inside
  // an sbatch allocation leaves SLURM's variables around (the batch step's, or those of the srun
  // that started its node daemons: SLURM_PROCID is then the node's index); a PMI_SIZE other than
  // SLURM's count is the MPI launcher's (srun --mpi=pmi2 sets both alike).
  const bool ompi =
      find(env, "OMPI_COMM_WORLD_RANK") != nullptr && find(env, "OMPI_COMM_WORLD_SIZE") != nullptr;
  const bool pmi = find(env, "PMI_RANK") != nullptr && find(env, "PMI_SIZE") != nullptr;
  // Only an srun step is a SLURM launch: SLURM_STEP_NUM_TASKS is set for a step's tasks alone,
  // while an sbatch script also sees SLURM_PROCID=0 and the allocation's SLURM_NTASKS (a lone
  // tracerun there is one process, not rank 0 of N: it would wait for ranks that never come).
  const char* slurmCount = "SLURM_STEP_NUM_TASKS";
  const bool slurm = find(env, "SLURM_PROCID") != nullptr && find(env, slurmCount) != nullptr;
  // Decided on the count, which every rank shares: a choice made on the rank could split one job
  // (a batch step's SLURM_PROCID is 0 on every rank of an mpiexec inside it).
  const bool pmiIsNotSlurms = pmi && slurm && value(env, "PMI_SIZE") != value(env, slurmCount);
  if (find(env, "RANK") != nullptr && find(env, "WORLD_SIZE") != nullptr) {
    detectTorchrun(env, parentPid, &job);
  } else if (ompi) {
    detectMpi(env, parentPid, &job);
  } else if (slurm && !pmiIsNotSlurms) {
    detectSlurm(env, &job);
    if (pmi && job.problem.empty() && value(env, "PMI_RANK") != value(env, "SLURM_PROCID")) {
      job.problem = "PMI_RANK=" + value(env, "PMI_RANK") +
                    " and SLURM_PROCID=" + value(env, "SLURM_PROCID") +
                    " disagree (an MPI launcher inside a SLURM step of the same size?); export "
                    "RANK and WORLD_SIZE to say which";
    }
  } else if (pmi) {
    detectMpi(env, parentPid, &job);
  } else {
    return job;
  }
  if (job.problem.empty() && (job.world_size < 1 || job.rank >= job.world_size)) {
    job.problem = job.launcher + ": rank " + std::to_string(job.rank) + " is outside a world of " +
                  std::to_string(job.world_size);
  }
  if (job.problem.empty() && job.local_world_size == 0) {
    job.problem = job.launcher + ": a local world of 0 ranks";
  }
  if (job.problem.empty() && job.local_rank >= 0 && job.local_world_size > 0 &&
      job.local_rank >= job.local_world_size) {
    job.problem = job.launcher + ": local rank " + std::to_string(job.local_rank) + " is outside " +
                  std::to_string(job.local_world_size) + " local ranks";
  }
  if (!job.problem.empty()) return job;
  if (job.token_id.empty()) job.token_id = job.job_id;
  auto setDefault = [&](const char* name, const std::string& v) {
    if (find(env, name) == nullptr && job.program_env.count(name) == 0) job.program_env[name] = v;
  };
  setDefault("RANK", std::to_string(job.rank));
  setDefault("WORLD_SIZE", std::to_string(job.world_size));
  // Unknown local values: tracerun itself treats the node as unknown (the rank measures its
  // clock), but the program gets what it got before, right on one node: LOCAL_RANK = RANK and
  // LOCAL_WORLD_SIZE = WORLD_SIZE (scripts read os.environ["LOCAL_RANK"] whenever RANK is set).
  setDefault("LOCAL_RANK", std::to_string(job.local_rank >= 0 ? job.local_rank : job.rank));
  setDefault("LOCAL_WORLD_SIZE",
             std::to_string(job.local_world_size > 0 ? job.local_world_size : job.world_size));
  if (job.node_rank >= 0) setDefault("GROUP_RANK", std::to_string(job.node_rank));
  setDefault("MASTER_ADDR", "127.0.0.1");
  setDefault("MASTER_PORT", std::to_string(portForJob(job.job_id)));
  return job;
}

}  // namespace tracerun::launcher
