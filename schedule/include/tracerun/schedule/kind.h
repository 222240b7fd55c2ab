// The pipeline schedules tracerun knows, and their words: the one place "gpipe", "1f1b",
// "interleaved", "zb-h1", "2bw" and "chimera" are spelled (gpttrain's --schedule, the trace
// analysis' inferred schedule, the report, tracedot and traceview). Names only: no action lists.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tracerun::schedule {

enum class ScheduleKind {
  kGpipe,        // all forwards, then all backwards
  kOneFOneB,     // PipeDream-Flush: warm-up forwards, then one forward / one backward, cool-down
  kInterleaved,  // Megatron's virtual pipeline: 1F1B over v chunks per rank (m a multiple of p)
  kZbH1,         // zero bubble ZB-H1 (Qi et al. 2023): backward split into B and W (zb_h1.h)
  kTwoBw,        // PipeDream-2BW: 1F1B without flushes over many steps (two_bw.h)
  kChimera,      // Li & Hoefler: a down and an up pipeline over the same ranks (chimera.h)
};

// "gpipe", "1f1b", "interleaved", "zb-h1", "2bw", "chimera".
const char* scheduleName(ScheduleKind kind);
// Every kind's word, in the order above (for a command line's list of choices).
std::vector<std::string> scheduleWords();
// The kind of a word; std::nullopt for anything else.
std::optional<ScheduleKind> findScheduleKind(const std::string& word);
// The kind of a word; throws std::invalid_argument ("unknown pipeline schedule 'x'") otherwise.
ScheduleKind parseScheduleKind(const std::string& word);

}  // namespace tracerun::schedule
