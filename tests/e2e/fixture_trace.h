// A real trace made the way capture makes one: per rank a core::Session whose producer threads push
// nested spans (with args), instants, counters, memory events and flows, drained by a
// trace::ShardWriter; the rank shards are then merged with known clock offsets. Returns what it
// generated so tests can compare independently of the reader. Not a benchmark: sizes are small.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tracerun::fixture {

struct Options {
  std::string dir;                // shards rank<R>.db and the merged file are written here
  std::string merged = "run.db";  // "" = do not merge
  int ranks = 3;
  int threads = 3;            // producer threads per rank (at least 1)
  int roots_per_thread = 30;  // root spans per thread; each has a random subtree
  int max_depth = 3;
  // Per rank: this rank's clock minus rank 0's. Missing entries are 0.
  std::vector<int64_t> clock_offsets_ns = {0, 2'000'000, -1'500'000, 7'000'000};
  uint64_t seed = 1;
};

// Times below are "global": rank 0's CLOCK_MONOTONIC. Rank R's records carry global + offset[R].
struct Span {
  int rank = 0;
  std::string track;  // thread or async lane name
  std::string name, detail;
  int category = 0;
  int64_t start = 0, end = 0;
  int depth = 0;
  long parent = -1;  // index into Generated::spans, -1 for a root
  int64_t seq = -1;
  std::vector<std::pair<std::string, int64_t>> args;
};
struct Instant {
  int rank = 0;
  std::string track, name;
  int64_t ts = 0, value = 0;
};
struct Counter {
  int rank = 0;
  std::string name;
  int64_t ts = 0;
  double value = 0;
};
struct Memory {
  int rank = 0;
  int64_t ts = 0, bytes = 0, total = 0;
  int device_type = 0, device_index = -1;
};
struct Flow {
  int rank = 0;
  int kind = 0;
  std::string src_track, dst_track;
  int64_t src_ts = 0, dst_ts = 0;  // starts of the two spans it links
};

struct Generated {
  std::vector<std::string> shards;  // one per rank, in rank order
  std::string merged;               // "" when not merged
  std::vector<int64_t> offsets;     // per rank
  std::vector<Span> spans;
  std::vector<Instant> instants;
  std::vector<Counter> counters;
  std::vector<Memory> memory;
  std::vector<Flow> flows;
};

// Names used, including ones that need JSON escaping and one with invalid UTF-8.
const std::vector<std::string>& spanNames();

// Writes the shards (and the merged file); throws std::exception on failure.
Generated writeFixture(const Options& options);

}  // namespace tracerun::fixture
