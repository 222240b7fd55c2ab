// Clock offsets of an outer job's ranks (torchrun, srun or mpirun started them) across nodes, with
// no tracerun agent: rank 0's tracerun answers time requests on MASTER_ADDR:MASTER_PORT+1 while the
// job runs; every rank on another node asks at its start and at its end, and leaves what it
// measured in the job directory (clock.rankR) for the rank that merges. The NTP-style estimate is
// clock_sync.h's (measureClock); detection is outer_job.h's; the merge is outer_launch.cpp's.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "outer_job.h"
#include "tracerun/trace/merge.h"

namespace tracerun::launcher {

// One exchange's result: this rank's clock minus rank 0's, |error| <= rtt_ns / 2.
struct ClockReading {
  bool measured = false;
  int64_t offset_ns = 0;
  int64_t rtt_ns = 0;
  int64_t at_ns = 0;  // this rank's clock when it was taken
};

struct RankClock {
  ClockReading start, end;
};

// MASTER_PORT + 1: the program's store listens on MASTER_PORT itself, and rank 0 binds this port
// before it starts the program, so no socket of the job (Gloo's are ephemeral) takes it later.
int outerClockPort(const OuterJob& job);

// Whether this rank measures: the job spans several nodes and this rank is not rank 0 and not known
// to be on rank 0's node (an unknown node measures: a rank beside rank 0 then reads ~0, exactly).
bool measuresOuterClock(const OuterJob& job);

// Rank 0 of a job over several nodes (or whose nodes are unknown): serves time requests, and the
// run label (OuterJob::run_label), from a thread until destroyed. Never throws; a port it cannot
// bind gets one warning line (the others then record "unmeasured").
class OuterClockServer {
 public:
  explicit OuterClockServer(const OuterJob& job);
  ~OuterClockServer();
  OuterClockServer(const OuterClockServer&) = delete;
  OuterClockServer& operator=(const OuterClockServer&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// The job's token for the exchange: TRACERUN_JOB_TOKEN when set, else the job id's part every
// run shares (OuterJob::token_id).
std::string outerClockToken(const OuterJob& job);

// Where rank 0's tracerun names the run (OuterJob::run_from_rank0: torchrun over several nodes,
// whose agents count restarts each their own): rank 0 makes a label (its pid and start time,
// new every run) and serves it with the clock (OuterClockServer); every other rank asks for it
// (up to 30 s, TRACERUN_OUTER_CLOCK_TIMEOUT_S overrides) before it picks its shard directory.
// job_id gains "-run<label in hex>", the same on every rank of one run; where rank 0 cannot be
// asked, one warning line and the rank's own "-restart<N>" as before. Nothing for other jobs.
void labelRun(OuterJob* job);

// One exchange with rank 0 (16 round trips, the smallest RTT kept), giving up after timeout_s
// (TRACERUN_OUTER_CLOCK_TIMEOUT_S overrides it). On failure: one warning line naming `when`, and
// a reading with measured = false. At the end (`at_end`) rank 0 may have left already (its
// program ended first and nothing kept it, or a stop signal): a refused connection then gives up
// at once instead of spending the timeout in the launcher's kill window.
ClockReading measureOuterClock(const OuterJob& job, const char* when, int timeout_s,
                               bool at_end = false);

// clock.rankR in the job directory (written whole, then renamed into place).
void writeRankClock(const std::string& dir, int rank, const RankClock& clock);
// False when the rank left no record (it runs on rank 0's node: offset 0 is exact).
bool readRankClock(const std::string& dir, int rank, RankClock* clock);

// The merged trace's word on a rank's clock (stats rows, docs/launcher.md): clock_offset_error_ns
// and clock_offset_rtt_ns, or clock_offset_unmeasured (a warning); with both readings
// clock_drift_ns (end minus start offset) and clock_drift_ppb, else clock_end_unmeasured.
std::vector<trace::MergeStat> clockStats(const RankClock& clock);

}  // namespace tracerun::launcher
