// The report as one JSON object (`tracerun report --json`; docs/report.md lists its keys): formats
// a built Report (report.h) and computes nothing; reads no trace.
#pragma once

#include <string>

#include "tracerun/trace/analysis/report.h"

namespace tracerun::trace::analysis {

// Invalid UTF-8 in names is replaced, never an error.
std::string reportJson(const Report& report, int indent = 2);

}  // namespace tracerun::trace::analysis
