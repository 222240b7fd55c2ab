// Names of trace/'s shared enums, and printable(): the escaping every TraceError message gets.
#include "tracerun/trace/error.h"

#include "utf8.h"

namespace tracerun::trace {

std::string printable(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  std::string out;
  out.reserve(n);
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    const size_t len = c >= 0x80 ? utf8Length(p + i, n - i) : 0;
    const bool c1 = len == 2 && c == 0xC2 && p[i + 1] < 0xA0;  // U+0080..U+009F
    if (len == 0 || c1) {
      escape(c);
      ++i;
      continue;
    }
    out.append(bytes.data() + i, len);
    i += len;
  }
  return out;
}

const char* severityName(Severity s) noexcept {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
  }
  return "unknown";
}

}  // namespace tracerun::trace
