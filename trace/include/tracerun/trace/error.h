// The one exception type of trace/: its message is a complete line for the user, naming the file
// and the problem ("run.db: not a tracerun trace (no meta table)").
//
// Messages often quote a damaged file (a name, a meta value, SQLite's text about its schema), so a
// TraceError keeps only printable text: printable() below is applied to every message, and each
// front end may print what() as it is.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace tracerun::trace {

// `bytes` with every byte that could act on a terminal or break a line written as \xNN: control
// bytes (below 0x20 and 0x7f), bytes that are not part of valid UTF-8, and the C1 controls
// U+0080..U+009F. Valid UTF-8 text (ü, 名前) and backslashes stay as they are, so applying it
// twice gives the same text as once.
std::string printable(std::string_view bytes);

class TraceError : public std::runtime_error {
 public:
  explicit TraceError(const std::string& message) : std::runtime_error(printable(message)) {}
  explicit TraceError(const char* message) : TraceError(std::string(message)) {}
};

enum class Severity : int { kInfo = 0, kWarning = 1, kError = 2 };
const char* severityName(Severity s) noexcept;

}  // namespace tracerun::trace
