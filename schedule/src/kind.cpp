// The schedule words (see kind.h): one table, read both ways; nothing about what a schedule does.
#include "tracerun/schedule/kind.h"

#include <stdexcept>
#include <utility>

namespace tracerun::schedule {
namespace {

constexpr std::pair<ScheduleKind, const char*> kWords[] = {
    {ScheduleKind::kGpipe, "gpipe"},
    {ScheduleKind::kOneFOneB, "1f1b"},
    {ScheduleKind::kInterleaved, "interleaved"},
    {ScheduleKind::kZbH1, "zb-h1"},
    {ScheduleKind::kTwoBw, "2bw"},
    {ScheduleKind::kChimera, "chimera"},
};

}  // namespace

const char* scheduleName(ScheduleKind kind) {
  for (const auto& [k, word] : kWords) {
    if (k == kind) return word;
  }
  return "?";
}

std::vector<std::string> scheduleWords() {
  std::vector<std::string> out;
  for (const auto& entry : kWords) out.emplace_back(entry.second);
  return out;
}

std::optional<ScheduleKind> findScheduleKind(const std::string& word) {
  for (const auto& [kind, w] : kWords) {
    if (word == w) return kind;
  }
  return std::nullopt;
}

ScheduleKind parseScheduleKind(const std::string& word) {
  if (auto kind = findScheduleKind(word)) return *kind;
  throw std::invalid_argument("unknown pipeline schedule '" + word + "'");
}

}  // namespace tracerun::schedule
