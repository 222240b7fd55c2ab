// The per-rank status file the launcher's status line reads (TRACERUN_STATUS, "%r" -> rank):
// the latest step, loss and tokens/s from the annotation counters. Not part of the trace. Its
// temporary file is created anew (O_EXCL, never through a symlink, 0600) beside it each time.
#pragma once

#include <string>

namespace tracerun::interpose {

// A TRACERUN_OUTPUT or TRACERUN_STATUS pattern with "%r" replaced by `rank` and "%%" by "%" (the
// launcher doubles the "%" of a user's output name); any other "%" stays as it is.
std::string expandRank(const std::string& pattern, int rank);

// Called by tracerun_annotate_counter for every sample while capturing. Stores the value when the
// name is one the status line shows (step, loss, tokens_per_s); never does I/O itself (a
// background thread rewrites the file every 0.5 s). A no-op when TRACERUN_STATUS is not set.
void noteStatusCounter(const char* name, double value) noexcept;

}  // namespace tracerun::interpose
