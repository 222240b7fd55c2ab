// Chrome trace-event JSON export (loads in Perfetto and chrome://tracing), streamed to disk so
// memory stays flat whatever the trace size. Reads only through TraceReader.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tracerun/trace/reader.h"

namespace tracerun::trace {

struct ChromeExportStats {
  int64_t spans = 0, instants = 0, counters = 0, flows = 0, memory = 0;
};

// Spans become complete ("X") events with pid = rank and tid = track; instants "i"; counters and
// per-rank live memory "C"; flows "s"/"f" pairs bound to the enclosing slices. Times in
// microseconds (fractional) from the trace origin.
ChromeExportStats exportChrome(const TraceReader& reader, const std::string& outPath,
                               const std::function<void(double)>& progress = {});

}  // namespace tracerun::trace
