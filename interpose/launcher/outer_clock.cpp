// Clock offsets across the nodes of an outer job (outer_clock.h): rank 0's serving thread, the
// other nodes' ranks' exchanges, the clock.rankR records and the stats the merge writes from them.
//
// Sections: port and token · server · the run's label · exchange · records
#include "outer_clock.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>

#include "clock_sync.h"
#include "rendezvous.h"

namespace tracerun::launcher {

// ---- port and token -----------------------------------------------------------------------------

int outerClockPort(const OuterJob& job) {
  const auto it = job.program_env.find("MASTER_PORT");
  const char* set = std::getenv("MASTER_PORT");
  const std::string port = it != job.program_env.end() ? it->second : set ? set : "";
  return std::atoi(port.c_str()) + 1;
}

bool measuresOuterClock(const OuterJob& job) {
  return job.local_world_size != job.world_size && job.rank != 0 && job.node_rank != 0;
}

std::string outerClockToken(const OuterJob& job) {
  const char* token = std::getenv(kJobTokenVariable);
  return token != nullptr && *token != '\0' ? token
         : job.token_id.empty()             ? job.job_id
                                            : job.token_id;
}

namespace {

std::string masterAddr(const OuterJob& job) {
  const auto it = job.program_env.find("MASTER_ADDR");
  const char* set = std::getenv("MASTER_ADDR");
  return it != job.program_env.end() ? it->second : set ? set : "127.0.0.1";
}

}  // namespace

// ---- server -------------------------------------------------------------------------------------

OuterClockServer::OuterClockServer(const OuterJob& job) {
  // A MASTER_ADDR name that is loopback here (Debian maps the host's own name to 127.0.1.1) names
  // another address on the other nodes: listening on it alone, rank 0 was out of their reach and
  // every other node's clock went unmeasured. Every interface then, as the program's own TCPStore
  // listens (an address given as an IP literal is still listened on alone).
  std::string addr = masterAddr(job);
  if (nameResolvesToLoopback(addr)) {
    std::fprintf(stderr,
                 "tracerun: note: MASTER_ADDR %s is a loopback address on rank 0's host; the "
                 "clock exchange listens on every interface (port %d) so the other nodes reach "
                 "it\n",
                 addr.c_str(), outerClockPort(job));
    addr = "0.0.0.0";
  }
  thread_ = std::thread([this, addr = std::move(addr), port = outerClockPort(job),
                         token = outerClockToken(job), label = job.run_label] {
    try {
      // Any number of clients (each rank on another node, twice; every rank once more for the
      // run label where rank 0 names the run), until the destructor says stop.
      serveClock(
          addr, port, INT_MAX, INT_MAX / 2, token, nullptr, [this] { return stop_.load(); }, label);
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "tracerun: warning: rank 0 cannot serve the clock exchange (%s); ranks on other "
                   "nodes keep offset 0, marked unmeasured in the trace\n",
                   e.what());
    }
  });
}

OuterClockServer::~OuterClockServer() {
  stop_ = true;
  thread_.join();
}

// ---- the run's label ----------------------------------------------------------------------------

void labelRun(OuterJob* job) {
  if (!job->run_from_rank0) return;
  if (job->rank == 0) {
    // A new tracerun process each run: its pid and start time name the run on this host.
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    const uint64_t mixed =
        (static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<uint64_t>(ts.tv_nsec)) ^
        (static_cast<uint64_t>(::getpid()) << 40);
    job->run_label = static_cast<int64_t>(mixed & 0x7fffffffffffffffULL) | 1;
  } else {
    const char* override = std::getenv("TRACERUN_OUTER_CLOCK_TIMEOUT_S");
    const int timeout_s =
        override != nullptr && *override != '\0' ? std::max(0, std::atoi(override)) : 30;
    try {
      job->run_label =
          queryRunLabel(masterAddr(*job), outerClockPort(*job), timeout_s, outerClockToken(*job));
    } catch (const std::exception& e) {
      std::fprintf(stderr,
                   "tracerun: warning: rank %d: rank 0 did not say which run this is (%s); this "
                   "rank's shard goes where its own restart count (%d) says, which the other "
                   "nodes' ranks may not share\n",
                   job->rank, e.what(), job->restart);
      job->run_label = 0;
    }
  }
  if (job->run_label > 0) {
    char text[24];
    std::snprintf(text, sizeof text, "-run%llx", static_cast<unsigned long long>(job->run_label));
    job->job_id += text;
  } else if (job->restart > 0) {
    job->job_id += "-restart" + std::to_string(job->restart);
  }
}

// ---- exchange -----------------------------------------------------------------------------------

ClockReading measureOuterClock(const OuterJob& job, const char* when, int timeout_s, bool at_end) {
  const char* override = std::getenv("TRACERUN_OUTER_CLOCK_TIMEOUT_S");
  if (override != nullptr && *override != '\0') timeout_s = std::max(0, std::atoi(override));
  ClockReading reading;
  const std::string addr = masterAddr(job);
  const int port = outerClockPort(job);
  try {
    const ClockEstimate e =
        measureClock(addr, port, 16, timeout_s, outerClockToken(job), 0, nullptr, at_end);
    reading.measured = true;
    reading.offset_ns = e.offset_ns;
    reading.rtt_ns = e.rtt_ns;
  } catch (const std::exception& e) {
    std::fprintf(stderr,
                 "tracerun: warning: rank %d: clock offset to rank 0 not measured at %s (%s); "
                 "offset 0 kept, marked unmeasured in the trace\n",
                 job.rank, when, e.what());
  }
  reading.at_ns = agentClockNs();
  return reading;
}

// ---- records ------------------------------------------------------------------------------------

namespace {

std::string recordPath(const std::string& dir, int rank) {
  return dir + "/clock.rank" + std::to_string(rank);
}

}  // namespace

void writeRankClock(const std::string& dir, int rank, const RankClock& c) {
  const std::string path = recordPath(dir, rank);
  {
    std::ofstream out(path + ".part", std::ios::trunc);
    for (const ClockReading* r : {&c.start, &c.end}) {
      out << (r->measured ? 1 : 0) << ' ' << r->offset_ns << ' ' << r->rtt_ns << ' ' << r->at_ns
          << '\n';
    }
    if (!out.flush()) {
      std::fprintf(stderr, "tracerun: warning: cannot write %s.part\n", path.c_str());
      return;
    }
  }
  std::rename((path + ".part").c_str(), path.c_str());
}

bool readRankClock(const std::string& dir, int rank, RankClock* c) {
  std::ifstream in(recordPath(dir, rank));
  if (!in) return false;
  for (ClockReading* r : {&c->start, &c->end}) {
    int measured = 0;
    if (!(in >> measured >> r->offset_ns >> r->rtt_ns >> r->at_ns)) return false;
    r->measured = measured == 1;
  }
  return true;
}

std::vector<trace::MergeStat> clockStats(const RankClock& c) {
  using trace::Severity;
  if (!c.start.measured) return {{"clock_offset_unmeasured", 1, Severity::kWarning}};
  std::vector<trace::MergeStat> stats = {{"clock_offset_error_ns", c.start.rtt_ns / 2},
                                         {"clock_offset_rtt_ns", c.start.rtt_ns}};
  if (!c.end.measured) {
    stats.push_back({"clock_end_unmeasured", 1, Severity::kWarning});
    return stats;
  }
  const int64_t drift = c.end.offset_ns - c.start.offset_ns;
  const int64_t span = c.end.at_ns - c.start.at_ns;
  stats.push_back({"clock_drift_ns", drift});
  stats.push_back({"clock_end_error_ns", c.end.rtt_ns / 2});
  if (span > 0) {
    stats.push_back({"clock_drift_ppb", static_cast<int64_t>(static_cast<double>(drift) * 1e9 /
                                                             static_cast<double>(span))});
  }
  return stats;
}

}  // namespace tracerun::launcher
