// The one exception type of trace/: its message is a complete line for the user, naming the file
// and the problem ("run.db: not a tracerun trace (no meta table)").
#pragma once

#include <stdexcept>
#include <string>

namespace tracerun::trace {

class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Severity : int { kInfo = 0, kWarning = 1, kError = 2 };
const char* severityName(Severity s) noexcept;

}  // namespace tracerun::trace
