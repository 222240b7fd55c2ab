// traceview --script FILE: a text file of input events keyed by frame number, replayed frame by
// frame (drive_script.cpp) so GUI tests where timing is not the point need no xdotool and no
// sleeps. This file only reads the text into events (and says file:line for a bad line); it
// touches no window and no ImGui. The format is in docs/viewer.md ("Scripted input").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tracerun::viewer {

struct ScriptEvent {
  enum class Kind {
    kMove,        // x, y: the mouse to window coordinates
    kPress,       // button: a mouse button goes down
    kRelease,     // button: and up
    kWheel,       // amount: the wheel (positive: away from the user, zoom in)
    kKeyDown,     // key (GLFW code), with its modifiers
    kKeyUp,       // key
    kType,        // text: characters into the focused field
    kTab,         // text: a tab's --view word to the front
    kSettle,      // hold the script until the viewer settled (its data arrived)
    kScreenshot,  // text: the frame as a PNG
    kDumpLayout,  // text: the timeline's geometry (--dump-layout's text) to a file
    kDumpView,    // text: the front tab's numbers (--dump-view's text) to a file
    kQuit,
  };
  int64_t frame = 0;  // frames counted from the first settled frame; a settle's wait not counted
  Kind kind = Kind::kQuit;
  float x = 0, y = 0, amount = 0;
  int button = 0;  // 0 left, 1 right, 2 middle
  int key = 0;     // GLFW key code
  std::string text;
  int line = 0;  // in the file, from 1
};

// The events in the order to apply them (by frame; a line's order kept within a frame). `click`,
// `key` and `drag` lines become their presses, moves and releases; "+N" counts from the previous
// line's last event (a click's release, a drag's end). Throws std::runtime_error
// "FILE:LINE: what is wrong" for a malformed line, "FILE: cannot read it" for a missing file.
std::vector<ScriptEvent> parseScript(const std::string& text, const std::string& file);
std::vector<ScriptEvent> readScript(const std::string& file);

// GLFW's code for a key name ("a", "F12", "Return", "Left", "minus"...); -1 when unknown.
int scriptKeyCode(const std::string& name);

}  // namespace tracerun::viewer
