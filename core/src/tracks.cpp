// TrackRegistry: a mutex-protected list; lookups by name are linear (there are tens of tracks).
#include "tracerun/core/tracks.h"

namespace tracerun::core {

const char* trackKindName(TrackKind k) noexcept {
  switch (k) {
    case TrackKind::kThread: return "thread";
    case TrackKind::kAsync: return "async";
    case TrackKind::kStream: return "stream";
    case TrackKind::kCounter: return "counter";
    case TrackKind::kMemory: return "memory";
    case TrackKind::kCount: break;
  }
  return "unknown";
}

TrackId TrackRegistry::add(TrackKind kind, int64_t tid, std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto id = static_cast<TrackId>(tracks_.size() + 1);
  tracks_.push_back(TrackInfo{id, kind, tid, std::move(name)});
  return id;
}

TrackId TrackRegistry::findOrAdd(TrackKind kind, int64_t tid, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& t : tracks_) {
    if (t.kind == kind && t.tid == tid && t.name == name) return t.id;
  }
  const auto id = static_cast<TrackId>(tracks_.size() + 1);
  tracks_.push_back(TrackInfo{id, kind, tid, name});
  return id;
}

size_t TrackRegistry::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tracks_.size();
}

std::vector<TrackInfo> TrackRegistry::since(size_t first) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (first >= tracks_.size()) return {};
  return {tracks_.begin() + static_cast<std::ptrdiff_t>(first), tracks_.end()};
}

}  // namespace tracerun::core
