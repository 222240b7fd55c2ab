// UTF-8 validation shared by trace/'s writers of text (the Chrome export's JSON strings and the
// escaping of error messages). Private to trace/; not a general Unicode library.
#pragma once

#include <cstddef>
#include <string>

namespace tracerun::trace {

// Length of the valid UTF-8 sequence at p (at most `avail` bytes), 0 when invalid (overlong
// forms, surrogates and code points above U+10FFFF are invalid).
inline size_t utf8Length(const unsigned char* p, size_t avail) {
  const unsigned char c = p[0];
  size_t len = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlong forms
    if (c == 0xED) hi = 0x9F;  // no surrogates
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

// The longest prefix of s of at most max_bytes that does not cut a UTF-8 sequence in two (a
// column that shortens a name must not leave half a character).
inline std::string utf8Prefix(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;  // a continuation byte
  return s.substr(0, n);
}

}  // namespace tracerun::trace
