// The --script parser (script.h): one event a line, "FRAME COMMAND ARGS", '#' comments.
#include "drivers/script.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

namespace tracerun::viewer {

namespace {

using Kind = ScriptEvent::Kind;

// GLFW 3 key codes (GLFW/glfw3.h), so the parser needs no GLFW.
const std::map<std::string, int>& namedKeys() {
  static const std::map<std::string, int> keys{
      {"space", 32},        {"minus", 45},      {"equal", 61},   {"escape", 256},
      {"esc", 256},         {"return", 257},    {"enter", 257},  {"tab", 258},
      {"backspace", 259},   {"delete", 261},    {"right", 262},  {"left", 263},
      {"down", 264},        {"up", 265},        {"pageup", 266}, {"page_up", 266},
      {"pagedown", 267},    {"page_down", 267}, {"home", 268},   {"end", 269},
      {"kp_subtract", 333}, {"kp_add", 334},    {"shift", 340},  {"ctrl", 341},
      {"control", 341},     {"alt", 342}};
  return keys;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

struct LineError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

float number(const std::string& s, const char* what) {
  char* end = nullptr;
  const float v = std::strtof(s.c_str(), &end);
  if (s.empty() || *end != '\0') throw LineError(std::string(what) + ": not a number: '" + s + "'");
  return v;
}

int button(const std::vector<std::string>& a, size_t i) {
  if (a.size() <= i || a[i] == "left") return 0;
  if (a[i] == "right") return 1;
  if (a[i] == "middle") return 2;
  throw LineError("unknown mouse button '" + a[i] + "' (left, right, middle)");
}

void arity(const std::vector<std::string>& a, size_t lo, size_t hi, const char* usage) {
  if (a.size() - 1 < lo || a.size() - 1 > hi) throw LineError(std::string("expected ") + usage);
}

// "ctrl+shift+f": the modifiers' and the key's codes, the key last.
std::vector<int> chord(const std::string& spec) {
  std::vector<int> codes;
  std::stringstream s(spec);
  std::string part;
  while (std::getline(s, part, '+')) {
    const int c = scriptKeyCode(part);
    if (c < 0) throw LineError("unknown key '" + part + "'");
    codes.push_back(c);
  }
  if (codes.empty()) throw LineError("expected a key");
  return codes;
}

// One line's events (frame f), appended to `out`.
void parseLine(const std::vector<std::string>& a, int64_t f, int line,
               std::vector<ScriptEvent>& out) {
  const auto ev = [&](Kind k, int64_t frame) -> ScriptEvent& {
    ScriptEvent e;
    e.frame = frame;
    e.kind = k;
    e.line = line;
    out.push_back(e);
    return out.back();
  };
  const std::string& c = a[0];
  if (c == "move") {
    arity(a, 2, 2, "move X Y");
    auto& e = ev(Kind::kMove, f);
    e.x = number(a[1], "X");
    e.y = number(a[2], "Y");
  } else if (c == "press" || c == "release") {
    arity(a, 0, 1, "press|release [left|right|middle]");
    ev(c == "press" ? Kind::kPress : Kind::kRelease, f).button = button(a, 1);
  } else if (c == "click") {
    arity(a, 0, 1, "click [left|right|middle]");
    ev(Kind::kPress, f).button = button(a, 1);
    ev(Kind::kRelease, f + 1).button = button(a, 1);
  } else if (c == "drag") {
    arity(a, 4, 5, "drag X0 Y0 X1 Y1 [FRAMES]");
    const float x0 = number(a[1], "X0"), y0 = number(a[2], "Y0");
    const float x1 = number(a[3], "X1"), y1 = number(a[4], "Y1");
    const int n = a.size() > 5 ? static_cast<int>(number(a[5], "FRAMES")) : 10;
    if (n < 1 || n > 10000) throw LineError("FRAMES: expected 1 to 10000");
    auto& m = ev(Kind::kMove, f);
    m.x = x0, m.y = y0;
    ev(Kind::kPress, f).button = 0;
    for (int i = 1; i <= n; ++i) {
      auto& e = ev(Kind::kMove, f + i);
      e.x = x0 + (x1 - x0) * static_cast<float>(i) / static_cast<float>(n);
      e.y = y0 + (y1 - y0) * static_cast<float>(i) / static_cast<float>(n);
    }
    ev(Kind::kRelease, f + n + 1).button = 0;
  } else if (c == "wheel") {
    arity(a, 1, 1, "wheel AMOUNT");
    ev(Kind::kWheel, f).amount = number(a[1], "AMOUNT");
  } else if (c == "key" || c == "keydown" || c == "keyup") {
    arity(a, 1, 1, "key|keydown|keyup KEY (e.g. ctrl+f, F12, Return)");
    const std::vector<int> codes = chord(a[1]);
    if (c != "keyup")
      for (int k : codes) ev(Kind::kKeyDown, f).key = k;
    if (c != "keydown")
      for (auto k = codes.rbegin(); k != codes.rend(); ++k)
        ev(Kind::kKeyUp, c == "key" ? f + 1 : f).key = *k;
  } else if (c == "type" || c == "tab" || c == "screenshot" || c == "dump-layout" ||
             c == "dump-view") {
    if (a.size() < 2) throw LineError("expected " + c + (c == "type" ? " TEXT" : " WORD|FILE"));
    std::string rest = a[1];
    for (size_t i = 2; i < a.size(); ++i) rest += " " + a[i];
    const Kind k = c == "type"          ? Kind::kType
                   : c == "tab"         ? Kind::kTab
                   : c == "screenshot"  ? Kind::kScreenshot
                   : c == "dump-layout" ? Kind::kDumpLayout
                                        : Kind::kDumpView;
    ev(k, f).text = rest;
  } else if (c == "settle" || c == "quit") {
    arity(a, 0, 0, c.c_str());
    ev(c == "settle" ? Kind::kSettle : Kind::kQuit, f);
  } else {
    throw LineError("unknown event '" + c +
                    "' (move, press, release, click, drag, wheel, key, keydown, keyup, type, tab, "
                    "settle, screenshot, dump-layout, dump-view, quit)");
  }
}

}  // namespace

int scriptKeyCode(const std::string& name) {
  if (name.size() == 1) {
    const unsigned char ch = static_cast<unsigned char>(name[0]);
    if (std::isalpha(ch)) return std::toupper(ch);  // GLFW_KEY_A.. are 'A'..
    if (std::isdigit(ch)) return ch;                // GLFW_KEY_0.. are '0'..
    if (ch == '-') return 45;
    if (ch == '=') return 61;
  }
  const std::string l = lower(name);
  if (l.size() >= 2 && l[0] == 'f' && std::all_of(l.begin() + 1, l.end(), ::isdigit)) {
    const int n = std::atoi(l.c_str() + 1);
    if (n >= 1 && n <= 25) return 289 + n;  // GLFW_KEY_F1 = 290
  }
  const auto it = namedKeys().find(l);
  return it == namedKeys().end() ? -1 : it->second;
}

std::vector<ScriptEvent> parseScript(const std::string& text, const std::string& file) {
  std::vector<ScriptEvent> out;
  std::istringstream in(text);
  std::string raw;
  int line = 0;
  int64_t last = 0, lastEnd = 0;  // the previous line's frame and its last event's frame
  while (std::getline(in, raw)) {
    ++line;
    const size_t hash = raw.find('#');
    std::istringstream words(raw.substr(0, hash));
    std::vector<std::string> a;
    for (std::string w; words >> w;) a.push_back(w);
    if (a.empty()) continue;
    try {
      const std::string& fs = a[0];
      const bool rel = fs[0] == '+';
      char* end = nullptr;
      const long long n = std::strtoll(fs.c_str() + (rel ? 1 : 0), &end, 10);
      if (fs.size() == (rel ? 1u : 0u) || *end != '\0' || n < 0)
        throw LineError("expected a frame number (N or +N) first, not '" + fs + "'");
      const int64_t frame = rel ? lastEnd + n : n;
      if (frame < last)
        throw LineError("frame " + std::to_string(frame) + " is before the previous line's " +
                        std::to_string(last));
      if (a.size() < 2) throw LineError("expected an event after the frame number");
      last = frame;
      const size_t from = out.size();
      parseLine(std::vector<std::string>(a.begin() + 1, a.end()), frame, line, out);
      lastEnd = frame;
      for (size_t i = from; i < out.size(); ++i) lastEnd = std::max(lastEnd, out[i].frame);
    } catch (const LineError& e) {
      throw std::runtime_error(file + ":" + std::to_string(line) + ": " + e.what());
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ScriptEvent& x, const ScriptEvent& y) { return x.frame < y.frame; });
  return out;
}

std::vector<ScriptEvent> readScript(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file + ": cannot read the script");
  std::stringstream s;
  s << in.rdbuf();
  return parseScript(s.str(), file);
}

}  // namespace tracerun::viewer
