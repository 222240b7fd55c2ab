// The time ruler's arithmetic and the time texts of flags and labels: tick spacing on a 1-2-5
// ladder, labels in sensible units, "1.5ms" style parsing. Pure; no ImGui.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tracerun::viewer {

struct Tick {
  int64_t t = 0;  // ns
  bool major = false;
  std::string label;  // major ticks only
};

// Ticks in [t0, t1] for a ruler `width_px` wide, major ticks at least `min_major_px` apart (on a
// 1-2-5 ladder of ns), four minor ticks between majors. Labels are relative to `origin`.
std::vector<Tick> rulerTicks(int64_t t0, int64_t t1, double width_px, double min_major_px,
                             int64_t origin = 0);

// The major tick step the ruler would use (ns).
int64_t majorStep(double ns_per_px, double min_major_px);

// "0", "250 ns", "1.5 us", "12 ms", "3.25 s": short, for ruler labels (step picks the precision).
std::string timeLabel(int64_t t, int64_t step);
// "1.234 ms": a duration for tooltips and panels.
std::string durationText(int64_t ns);

// "1500", "1500ns", "1.5us", "2ms", "0.5s" → ns; nullopt when not a time.
std::optional<int64_t> parseTime(const std::string& text);

}  // namespace tracerun::viewer
