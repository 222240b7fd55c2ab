// Names of trace/'s shared enums, and printable(): the escaping every TraceError message gets.
#include "tracerun/trace/error.h"

namespace tracerun::trace {

namespace {

// Length of the valid UTF-8 sequence at p (at most `avail` bytes), 0 when invalid (overlong
// forms, surrogates and code points above U+10FFFF are invalid).
size_t utf8Length(const unsigned char* p, size_t avail) {
  const unsigned char c = p[0];
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (avail < len || p[1] < lo || p[1] > hi) return 0;
  for (size_t k = 2; k < len; ++k) {
    if ((p[k] & 0xC0) != 0x80) return 0;
  }
  return len;
}

}  // namespace

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
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "unknown";
}

}  // namespace tracerun::trace
