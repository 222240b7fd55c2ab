// The report as tables for people (`tracerun report`): formats a built Report (report.h) and
// computes nothing; reads no trace.
#pragma once

#include <string>

#include "tracerun/trace/analysis/report.h"

namespace tracerun::trace::analysis {

std::string reportText(const Report& report);

}  // namespace tracerun::trace::analysis
