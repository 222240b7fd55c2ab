// Every attempt's shards into one output (attempts_merge.h): the inputs, the guarded merge, the
// loss report and the merge-by-hand line. Removes nothing.
#include "attempts_merge.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "launch.h"
#include "supervisor.h"

namespace tracerun::launcher {

namespace {

int rankOfShard(const std::string& path) {
  const auto at = path.rfind("/rank");
  return std::atoi(path.c_str() + (at == std::string::npos ? 0 : at + 5));
}

std::string dirOf(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

}  // namespace

void addAttemptShards(std::vector<trace::MergeInput>& inputs, const std::vector<std::string>& paths,
                      std::optional<int64_t> clockOffsetNs) {
  for (const auto& path : paths) {
    trace::MergeInput in{path};
    in.attempt = trace::attemptOfShard(path);
    if (in.attempt < 0) throw std::logic_error(path + ": a shard outside an attemptN directory");
    in.has_offset = clockOffsetNs.has_value();
    in.clock_offset_ns = clockOffsetNs.value_or(0);
    inputs.push_back(std::move(in));
  }
}

AttemptsMerge mergeAttempts(Supervisor& supervisor, std::vector<trace::MergeInput> inputs,
                            const std::string& output) {
  // Attempt order, then numeric rank order (rank10 after rank9), so that the merge-by-hand
  // command lists the directories as the merge read them.
  std::stable_sort(inputs.begin(), inputs.end(),
                   [](const trace::MergeInput& a, const trace::MergeInput& b) {
                     if (a.attempt != b.attempt) return a.attempt < b.attempt;
                     return rankOfShard(a.path) < rankOfShard(b.path);
                   });
  AttemptsMerge out;
  for (const auto& in : inputs) {
    const std::string dir = dirOf(in.path);
    if (std::find(out.dirs.begin(), out.dirs.end(), dir) == out.dirs.end()) {
      out.dirs.push_back(dir);
    }
  }
  const MergeGuard guard(supervisor, output, out.dirs);  // the merge completes (supervisor.h)
  try {
    trace::MergeOptions mo;
    mo.output = output;
    out.result = trace::mergeShards(inputs, mo, /*allow_incomplete=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tracerun: merging the shards in %s failed: %s; %s\n",
                 listPaths(out.dirs).c_str(), e.what(), keptShardsHint(output, out.dirs).c_str());
    return out;
  }
  out.lost = reportMergeLoss(*out.result, output, out.dirs);
  return out;
}

}  // namespace tracerun::launcher
