// traceview --script's parser (viewer/src/drivers/script.h) without a window: a script's lines
// become the presses, moves and releases the format (docs/viewer.md) says, in frame order; a
// malformed line is one error naming file:line. Replaying them in a window is tested beside the GUI
// tests.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "drivers/script.h"

using tracerun::viewer::parseScript;
using tracerun::viewer::ScriptEvent;
using Kind = ScriptEvent::Kind;

namespace {

std::string errorOf(const std::string& text) {
  try {
    parseScript(text, "in.txt");
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("script: clicks, keys and drags expand to presses and releases in frame order",
          "[viewer][script]") {
  const auto ev = parseScript(
      "# a comment\n"
      "0 move 10 20\n"
      "+2 click          # at frame 2, released at 3\n"
      "+1 key ctrl+f\n"
      "10 drag 0 0 100 50 4\n"
      "+0 settle\n"
      "+1 type aten::mm\n"
      "+0 screenshot out dir/a b.png\n",
      "in.txt");
  // (frame, kind) of every event, as the file's lines say.
  const std::vector<std::pair<int64_t, Kind>> want{
      {0, Kind::kMove},       {2, Kind::kPress},    {3, Kind::kRelease}, {4, Kind::kKeyDown},
      {4, Kind::kKeyDown},    {5, Kind::kKeyUp},    {5, Kind::kKeyUp},   {10, Kind::kMove},
      {10, Kind::kPress},     {11, Kind::kMove},    {12, Kind::kMove},   {13, Kind::kMove},
      {14, Kind::kMove},      {15, Kind::kRelease}, {15, Kind::kSettle}, {16, Kind::kType},
      {16, Kind::kScreenshot}};
  REQUIRE(ev.size() == want.size());
  for (size_t i = 0; i < ev.size(); ++i) {
    INFO(i);
    CHECK(ev[i].frame == want[i].first);
    CHECK(ev[i].kind == want[i].second);
  }
  CHECK(ev[3].key == 341);  // GLFW_KEY_LEFT_CONTROL first, then F ('F')
  CHECK(ev[4].key == 'F');
  CHECK(ev[5].key == 'F');  // released in reverse order
  CHECK(ev[11].x == Approx(75));
  CHECK(ev[11].y == Approx(37.5));
  CHECK(ev[15].text == "aten::mm");
  CHECK(ev[16].text == "out dir/a b.png");
  CHECK(ev[16].line == 8);
}

TEST_CASE("script: a malformed line is one error naming file and line", "[viewer][script]") {
  CHECK(errorOf("0 move 1 2\n1 jump\n") ==
        "in.txt:2: unknown event 'jump' (move, press, release, click, drag, wheel, key, keydown, "
        "keyup, type, tab, settle, screenshot, dump-layout, dump-view, quit)");
  CHECK(errorOf("\n\n0 move 1\n") == "in.txt:3: expected move X Y");
  CHECK(errorOf("0 move 1 y\n") == "in.txt:1: Y: not a number: 'y'");
  CHECK(errorOf("5 click\n3 click\n") == "in.txt:2: frame 3 is before the previous line's 5");
  CHECK(errorOf("x click\n") == "in.txt:1: expected a frame number (N or +N) first, not 'x'");
  CHECK(errorOf("0 key ctrl+nope\n") == "in.txt:1: unknown key 'nope'");
  CHECK(errorOf("0 click sideways\n") ==
        "in.txt:1: unknown mouse button 'sideways' (left, right, middle)");
  CHECK(errorOf("0 drag 0 0 1 1 0\n") == "in.txt:1: FRAMES: expected 1 to 10000");
  CHECK(errorOf("7\n") == "in.txt:1: expected an event after the frame number");
  CHECK(errorOf("0 screenshot\n") == "in.txt:1: expected screenshot WORD|FILE");
  CHECK(errorOf("0 quit now\n") == "in.txt:1: expected quit");
  CHECK(errorOf("0 move 1 2\n+1 quit\n").empty());
}

TEST_CASE("script: key names map to GLFW's key codes", "[viewer][script]") {
  using tracerun::viewer::scriptKeyCode;
  // Codes from GLFW/glfw3.h.
  CHECK(scriptKeyCode("a") == 65);
  CHECK(scriptKeyCode("Z") == 90);
  CHECK(scriptKeyCode("7") == 55);
  CHECK(scriptKeyCode("F1") == 290);
  CHECK(scriptKeyCode("F12") == 301);
  CHECK(scriptKeyCode("Return") == 257);
  CHECK(scriptKeyCode("Escape") == 256);
  CHECK(scriptKeyCode("Left") == 263);
  CHECK(scriptKeyCode("PageDown") == 267);
  CHECK(scriptKeyCode("shift") == 340);
  CHECK(scriptKeyCode("F0") == -1);
  CHECK(scriptKeyCode("hyper") == -1);
}
