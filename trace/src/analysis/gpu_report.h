// The report's gpu section (see gpu.h for the numbers, docs/report.md for the keys): formatted
// here so that report_text.cpp and report_json.cpp each add it with one call. Formats a built
// GpuAnalysis; computes nothing, reads no trace. Callers show it only when analysis.present().
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "tracerun/trace/analysis/gpu.h"

namespace tracerun::trace::analysis {

// The section as text lines (each ending in '\n'), the top `top_kernels` kernels.
std::string gpuReportText(const GpuAnalysis& g, size_t top_kernels = 15);
// The section as one JSON object: devices (streams, idle, launch), kernels (every one),
// stragglers.
nlohmann::ordered_json gpuReportJson(const GpuAnalysis& g);

}  // namespace tracerun::trace::analysis
