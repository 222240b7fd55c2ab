// `tracerun merge -o run.db SHARD...`: rank shards into one trace on rank 0's clock, for shards a
// launcher could not merge itself (a killed job). A thin front to trace::mergeShards.
#include <cstdio>

#include "commands.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/merge.h"
#include "tracerun/trace/reader.h"

namespace tracerun::tools {

namespace {

struct MergeCommandOptions {
  std::string output;
  std::vector<std::string> shards;
  bool allow_incomplete = false;
  bool attempts = false;
  bool quiet = false;
};

int runMerge(const MergeCommandOptions& o) {
  const int64_t t0 = core::nowNs();
  std::vector<trace::MergeInput> inputs;
  for (const auto& s : o.shards) {
    inputs.push_back({s});
    if (!o.attempts) continue;
    inputs.back().attempt = trace::attemptOfShard(s);
    if (inputs.back().attempt < 0) {
      std::fprintf(stderr,
                   "tracerun merge: %s: --attempts needs each shard in a directory attemptN (as "
                   "tracerun writes OUTPUT.shards/attemptN/rankR.db)\n",
                   s.c_str());
      return kExitUsage;
    }
  }
  Progress progress("merging", !o.quiet);
  trace::MergeOptions options;
  options.output = o.output;
  options.progress = [&](size_t done, size_t total) {
    progress.update(total ? double(done) / double(total) : 1.0);
  };
  const trace::MergeResult result = trace::mergeShards(inputs, options, o.allow_incomplete);
  progress.done();
  if (!result.memory_summary_error.empty()) {
    std::fprintf(stderr,
                 "tracerun merge: %s: the memory tab's summary was not stored (%s); traceview "
                 "replays the memory events instead\n",
                 o.output.c_str(), result.memory_summary_error.c_str());
  }
  // Records of a shard's raw file that could not be converted are not in the output: one line
  // each, and the exit says data is missing (the raw file is untouched: merge again once the
  // cause, a full disk say, is gone).
  int rawLost = 0;
  for (const auto& s : result.shards) {
    if (s.raw_problem.empty()) continue;
    ++rawLost;
    std::fprintf(stderr,
                 "tracerun merge: %s.raw: its records could not be converted (%s); merged "
                 "without them, the file is kept\n",
                 s.path.c_str(), s.raw_problem.c_str());
  }
  if (!o.quiet) {
    const auto reader = trace::TraceReader::open(o.output);
    const auto c = reader.counts();
    int errors = 0;
    for (const auto& s : reader.stats()) errors += s.severity == trace::Severity::kError;
    std::printf("wrote %s: %zu ranks, %lld spans, %lld events in all in %s%s\n", o.output.c_str(),
                reader.ranks().size(), static_cast<long long>(c.spans),
                static_cast<long long>(c.spans + c.instants + c.counters + c.memory + c.flows),
                formatDuration(core::nowNs() - t0).c_str(),
                errors ? " (stats with severity error: see tracerun info)" : "");
  }
  return rawLost > 0 ? kExitLostData : kExitOk;
}

}  // namespace

Command addMergeCommand(CLI::App& parent) {
  auto opts = std::make_shared<MergeCommandOptions>();
  CLI::App* app = parent.add_subcommand(
      "merge", "Merge rank shards into one trace on rank 0's clock (the launcher does this)");
  app->add_option("-o,--output", opts->output, "the merged trace to write")->required();
  app->add_option("shards", opts->shards, "rank shard files")->required();
  app->add_flag("--allow-incomplete", opts->allow_incomplete,
                "merge shards whose writer never finished, and skip unreadable ones (recorded in "
                "stats)");
  app->add_flag("--attempts", opts->attempts,
                "shards of several attempts (restarts, elastic rounds) into one file: each "
                "shard's attempt is N of its directory attemptN");
  app->add_flag("-q,--quiet", opts->quiet, "no progress and no summary line");
  return {app, [opts] {
            // Errors name the shard themselves; others are about the output.
            return withPath(opts->output, [&] { return runMerge(*opts); });
          }};
}

}  // namespace tracerun::tools
