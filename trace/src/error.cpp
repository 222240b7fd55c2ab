// Names of trace/'s shared enums.
#include "tracerun/trace/error.h"

namespace tracerun::trace {

const char* severityName(Severity s) noexcept {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "unknown";
}

}  // namespace tracerun::trace
