// drawRestartMarks and restartTooltip (restart_overlay.h).
#include "timeline/restart_overlay.h"

#include <imgui.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/palette.h"
#include "data/time_axis.h"

namespace tracerun::viewer {

const trace::analysis::RestartMark* drawRestartMarks(
    RestartCanvas& c, const std::vector<trace::analysis::RestartMark>& marks) {
  const trace::analysis::RestartMark* hit = nullptr;
  int64_t labelledRound = -1;
  float labelRight = -1e9f;
  for (const auto& m : marks) {
    const double t = static_cast<double>(m.ts_ns);
    if (t < c.axis.t0 || t > c.axis.t1) continue;
    const float x = std::floor(c.axis.xOf(t)) + 0.5f;
    c.dl->AddLine(ImVec2(x, c.top), ImVec2(x, c.bottom), palette::kRestart, 2);
    ++c.primitives;
    if (c.mouse_here && std::fabs(c.mouse_x - x) <= 3 && c.mouse_y >= c.top &&
        c.mouse_y <= c.bottom)
      hit = &m;
    if (c.dump != nullptr) {
      char b[160];
      std::snprintf(b, sizeof b, "instant restart %d %.2f %lld %lld %lld\n", m.rank, x - c.axis.x,
                    static_cast<long long>(m.round), static_cast<long long>(m.world),
                    static_cast<long long>(m.prev_world));
      *c.dump += b;
    }
    // One label per round (its ranks restart microseconds apart), where it does not overlap.
    if (m.round == labelledRound || x + 3 < labelRight) continue;
    labelledRound = m.round;
    const char* text = m.label.c_str();
    const ImVec2 size = ImGui::CalcTextSize(text);
    // Right of the line, or left of it where it would run past the track area.
    const float right = c.axis.x + c.axis.w;
    const ImVec2 at(x + 4 + size.x > right ? std::max(c.axis.x, x - 4 - size.x) : x + 4, c.top + 2);
    c.dl->AddRectFilled(ImVec2(at.x - 2, at.y - 1), ImVec2(at.x + size.x + 2, at.y + size.y + 1),
                        palette::kRestartLabel);
    c.dl->AddText(at, palette::kText, text);
    c.primitives += 2;
    labelRight = at.x + size.x + 8;
  }
  return hit;
}

void restartTooltip(const trace::analysis::RestartMark& m, int64_t origin) {
  ImGui::BeginTooltip();
  ImGui::TextUnformatted(m.label.c_str());
  ImGui::Text("rank %d began round %lld at %s", m.rank, static_cast<long long>(m.round),
              durationText(m.ts_ns - origin).c_str());
  if (m.world < 0)
    ImGui::TextDisabled("no elastic_round_%lld_world row in this trace",
                        static_cast<long long>(m.round));
  ImGui::TextDisabled("an earlier round's ranks: the rows labelled with its attempt");
  ImGui::EndTooltip();
}

}  // namespace tracerun::viewer
