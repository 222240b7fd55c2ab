// TraceData: every question the viewer asks of a trace, answered through trace/ (never SQL);
// implemented in trace_data_timeline.cpp over trace::Timeline (the level-of-detail summaries; reads
// what is on screen).
// One instance per thread (it owns its SQLite connections); it draws nothing and knows no ImGui.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/lod.h"
#include "tracerun/trace/analysis/gpu_launch.h"
#include "tracerun/trace/analysis/restarts.h"
#include "tracerun/trace/reader.h"

namespace tracerun::viewer {

// A row of the timeline. Memory rows are synthetic: one per rank with memory events (id < 0).
// So are queue rows: one under each GPU stream track (kind kCounter, id < 0, queue_of the
// stream's track id), its queue length (trace/analysis/gpu.h, gpuQueueLength).
struct TrackInfo {
  int64_t id = 0;
  int rank = 0;
  core::TrackKind kind = core::TrackKind::kThread;
  std::string name;
  int64_t events = 0;
  int max_depth = 0;                // deepest span depth known at open (0 when unknown)
  std::optional<int64_t> queue_of;  // a queue row: its GPU stream track's id
  // A counter row of a rank of an earlier attempt (a restart followed it): its rank's last event,
  // past which the row holds no value; INT64_MAX otherwise.
  int64_t held_until_ns = INT64_MAX;
  bool counter() const {
    return kind == core::TrackKind::kCounter || kind == core::TrackKind::kMemory;
  }
};

// A primitive with its dominant span (the span itself when count == 1).
struct DrawItem {
  Primitive prim;
  LodSpan span;
};

struct TrackWindow {
  int64_t track = 0;
  LodWindow window;
  std::vector<DrawItem> items;         // span tracks
  std::vector<CounterColumn> counter;  // counter and memory tracks
  double lo = 0, hi = 0;               // counter value range seen in the window
  int max_depth = 0;                   // deepest depth among the spans read
};

struct SpanRef {
  int64_t id = 0, track = 0, start = 0, end = 0;
  int depth = 0;
  core::StringId name = 0;
};

struct ChildStat {
  std::string name;
  int64_t count = 0, total_ns = 0;
};

struct SpanDetails {
  trace::SpanRow span;
  int rank = 0;
  std::string track_name, name, detail, category;
  int64_t self_ns = 0;
  // (key, value as shown): the number, or the string for string-valued keys
  // (vocab::arg::isStringValued, e.g. a kernel's mangled_name and short_name).
  std::vector<std::pair<std::string, std::string>> args;
  std::vector<trace::SpanRow> parents;  // outermost first
  std::vector<std::string> parent_names;
  int64_t children = 0, children_ns = 0;
  std::vector<ChildStat> child_stats;  // by total time, largest first
  struct Flow {
    core::FlowKind kind;
    bool outgoing;
    SpanRef other;
    std::string other_name;
  };
  std::vector<Flow> flows;
  // A kernel's, copy's or set's launch as analyzeGpu times it (trace/analysis/gpu_launch.h): its
  // launch API call, else its launching op's start; nullopt for other spans or when unknown.
  std::optional<trace::analysis::GpuLaunch> launch;
};

struct Step {
  int rank = 0;
  int64_t start = 0, end = 0, number = -1;
};

// Thrown out of a query when `cancel` turned true.
struct Cancelled {};

class TraceData {
 public:
  static TraceData open(const std::string& path);  // throws trace::TraceError
  ~TraceData();
  TraceData(TraceData&&) noexcept;
  TraceData& operator=(TraceData&&) noexcept;

  const std::string& path() const { return path_; }
  const std::string& str(core::StringId id) const;
  size_t stringCount() const;
  const std::vector<trace::RankInfo>& ranks() const { return ranks_; }
  const std::vector<TrackInfo>& tracks() const { return tracks_; }
  std::pair<int64_t, int64_t> timeRange() const { return range_; }
  const trace::EventCounts& counts() const { return counts_; }
  const TrackInfo* track(int64_t id) const;

  // What to draw for one track over the window (span tracks folded, counters reduced; a queue
  // row's series is read once, on its first window, and kept).
  TrackWindow window(int64_t track, const LodWindow& w) const;
  std::optional<SpanRef> spanById(int64_t id, int rank, const std::atomic<bool>& cancel) const;
  SpanDetails details(const SpanRef& s) const;
  // Spans whose name contains `needle`, in start order, across all ranks.
  std::vector<SpanRef> find(const std::string& needle, size_t limit,
                            const std::atomic<bool>& cancel) const;
  std::vector<Step> steps(const std::atomic<bool>& cancel) const;
  // The elastic "restart" instants with their rounds' world sizes (analysis/restarts.h).
  std::vector<trace::analysis::RestartMark> restarts() const;

 private:
  struct Impl;
  TraceData();
  std::unique_ptr<Impl> impl_;
  std::string path_;
  std::vector<trace::RankInfo> ranks_;
  std::vector<TrackInfo> tracks_;
  std::pair<int64_t, int64_t> range_{0, 0};
  trace::EventCounts counts_;
};

std::string categoryLabel(core::Category c);

}  // namespace tracerun::viewer
