// Escaping for Graphviz (see escape.h).
#include "escape.h"

#include <cstdio>

namespace tracerun::dot {

namespace {

constexpr const char* kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
size_t utf8Sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  const uint32_t minimum = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

// Calls emit(char) for ASCII bytes and appends valid multi-byte sequences (or U+FFFD) to out.
template <typename Emit>
void eachChar(const std::string& text, std::string& out, Emit emit) {
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8Sequence(text, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
    } else if (n == 1) {
      emit(text[i]);
      ++i;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
}

}  // namespace

std::string htmlText(const std::string& text, bool lineBreaks) {
  std::string out;
  out.reserve(text.size() + 16);
  eachChar(text, out, [&](char c) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '{':
        out += "&#123;";
        break;
      case '}':
        out += "&#125;";
        break;
      case '|':
        out += "&#124;";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += lineBreaks ? "<BR ALIGN=\"LEFT\"/>" : " ";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          out += ' ';
        } else {
          out += c;
        }
    }
  });
  return out;
}

std::string attributeText(const std::string& text, bool forId) {
  std::string out;
  out.reserve(text.size() + 16);
  eachChar(text, out, [&](char c) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '\\':
        out += forId ? "\\\\" : "\\\\\\\\";
        break;
      case '\n':
        out += "&#10;";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
          out += ' ';
        } else {
          out += c;
        }
    }
  });
  return out;
}

std::string hexColor(uint8_t r, uint8_t g, uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", r, g, b);
  return buf;
}

}  // namespace tracerun::dot
