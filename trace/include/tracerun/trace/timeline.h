// Timeline: the queries an interactive reader (traceview's data thread) asks of a trace, answered
// from the level-of-detail summaries and the indexes so that each reads what is on screen, never a
// whole track: what to draw for a track at R ns per pixel, the depth of each track, a span with its
// parent and children, flows in a window with span ids at both ends, name search with next and
// previous, and counter / memory series reduced to min/max per bucket. It does not draw, does not
// hold the trace in memory and never writes to the trace file.
//
// Contract:
// - open() checks the file as TraceReader::open does (same one-line TraceErrors). A file without
//   the summaries (no meta `summaries` of this version: a shard, or a trace written before they
//   existed or before memory_lod / counter_lod; merge writes them) gets them built at open into a
//   private
//   temporary database (SQLite's anonymous temp file, deleted at close): the trace file stays
//   untouched and read-only; options.progress reports (done, total) work and may cancel
//   (returning false makes open throw TraceError "<path>: cancelled").
// - Threading: a Timeline (its own SQLite connections) is used by one thread at a time; open one
//   per thread. Nothing here calls back except options.progress, on the opening thread.
// - Times are ns relative to the file's origin, as everywhere in trace/ (reader.h).
// - Results are in a stated order and are exactly what a brute-force scan of the spans computes
//   from the definitions below (tests/trace/timeline_test.cpp checks that).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace {

struct TimelineOptions {
  // Summaries being built at open for an older trace: (done, total) in work units (spans and
  // counter and memory samples, each read twice). Return false to cancel. May be empty.
  std::function<bool(int64_t done, int64_t total)> progress;
};

// ---- drawing a track ----------------------------------------------------------------------------
//
// Definition. For a request (track, [t0, t1], ns_per_px = R) let W be the bucket width: the largest
// power of 4 (in ns) not above R (W = 1 for R < 4). Per depth, every span starting in bucket
// b = floor(start / W) belongs to b; a bucket is visible when the extent of its spans
// [first start, latest end] overlaps [t0, t1]. Each visible bucket gives one item: a kSpan item
// for its dominant (longest; ties: earlier start, then lower id) span when that span is at least
// kMinSpanPixels * R long, else a kFold. Consecutive kFold items of a depth are then merged while
// the next one's start is less than R after the latest end so far. So an item stands for whole
// buckets; a column of R ns holds at most kMaxItemsPerColumn items per depth, whatever the size.

inline constexpr double kMinSpanPixels = 3.0;
inline constexpr int kMaxItemsPerColumn = 5;

struct DrawRequest {
  int64_t track = 0;
  int64_t t0 = 0, t1 = 0;
  double ns_per_px = 1;
  int min_depth = 0;
  int max_depth = std::numeric_limits<int>::max();
};

struct DrawItem {
  enum class Kind : uint8_t { kSpan, kFold };
  Kind kind = Kind::kFold;
  int depth = 0;
  // kSpan: the span's start and end. kFold: the earliest start and the latest end of its spans.
  int64_t start_ns = 0, end_ns = 0;
  int64_t count = 0;    // spans it stands for (a kSpan item: 1 plus its bucket's other spans)
  int64_t busy_ns = 0;  // their summed durations
  // The dominant span: for kSpan the span drawn, for kFold the longest one folded ("N spans",
  // coloured by it).
  int64_t span_id = 0;
  int64_t span_start_ns = 0, span_dur_ns = 0;
  core::StringId name = 0;
  core::Category category = core::Category::kOp;
};

struct DrawList {
  std::vector<DrawItem> items;  // by depth, then start
  int64_t bucket_ns = 1;        // W
  bool from_summaries = false;  // read from the stored levels (false: folded from the spans)
};

// ---- span details, flows, search, series -------------------------------------------------------

struct TrackDepth {
  int64_t track = 0;
  int max_depth = -1;  // deepest span; -1: no spans
  int64_t spans = 0;
};

struct SpanDetail {
  SpanRow span;
  std::optional<SpanRow> parent;  // the enclosing span on its track at depth - 1
  std::vector<SpanRow> children;  // depth + 1 inside it, in span order, at most max_children
  int64_t child_count = 0;        // all of them
  std::vector<ArgRow> args;
};

// A flow whose two ends are resolved to spans: the span of the end's track starting at the end's
// time (the shallowest, when several start there); 0 when no span starts there.
struct FlowLink {
  FlowRow flow;
  int64_t src_span = 0, dst_span = 0;
};

// A place in the time order of search matches: (start, track, id).
struct MatchPosition {
  int64_t start_ns = 0, track = 0, span_id = 0;
};

// Min/max of a counter's samples or of a device's live memory (memory.total) per bucket: the
// bucket width is the largest power of 4 not above the asked width; buckets are aligned to
// multiples of it and listed only when they hold samples of [t0, t1]; `last` is the last sample in
// (ts_ns, rowid) order. Exactly what reducing every sample of the window computes; read from the
// series summaries (memory_lod, counter_lod) where the series stores a level no wider than the
// bucket width (the coarsest such level, merged up), and from the samples themselves at the
// window's edges (buckets partly outside [t0, t1]) and when zoomed in finer than the stored levels.
struct SeriesBucket {
  int64_t start_ns = 0, end_ns = 0;  // [start, end)
  int64_t count = 0;
  double min = 0, max = 0;
  double last = 0;  // the last sample in the bucket
};

struct Series {
  std::vector<SeriesBucket> buckets;  // by time
  int64_t bucket_ns = 1;
  bool has_before = false;  // a sample before t0 exists (its value, the last before t0: before)
  double before = 0;
  bool from_summaries = false;  // some buckets came from a stored level (false: all from samples)
};

struct MemoryDevice {
  int rank = 0;
  int device_type = 0, device_index = -1;
};

class Timeline {
 public:
  static Timeline open(const std::string& path, const TimelineOptions& options = {});
  ~Timeline();
  Timeline(Timeline&&) noexcept;
  Timeline& operator=(Timeline&&) noexcept;

  // The same file through the plain reader (tracks, ranks, strings, spans...).
  const TraceReader& reader() const;
  // Whether the summaries were built at open (an older trace) rather than read from the file.
  bool summariesBuiltAtOpen() const;

  // Every track with spans, by track id; and one track's deepest depth (-1: none).
  std::vector<TrackDepth> trackDepths() const;
  int maxDepth(int64_t track) const;

  // What to draw (definition above).
  DrawList draw(const DrawRequest& request) const;

  // A span by id, with its parent and children; nullopt when no span has the id.
  std::optional<SpanDetail> span(int64_t id, size_t max_children = 1000) const;

  // The spans of one track at one depth starting in [t0, t1], by start then id; read from the
  // finest stored summary level, so a sparse depth (steps at depth 0 over dense ops below) costs
  // its own spans, not the track's.
  std::vector<SpanRow> spansAtDepth(int64_t track, int depth, int64_t t0, int64_t t1) const;

  // Flows with at least one end in [t0, t1], in the flows' recorded order.
  std::vector<FlowLink> flows(int64_t t0, int64_t t1) const;

  // Name search. namesMatching: the string ids of span names containing `text` (ASCII
  // case-insensitive), by id. matchCount: how many spans carry one of them, over the whole trace.
  // nextMatch / previousMatch: the first match after / the last before a position, across all
  // ranks and tracks, in (start, track, id) order (nullopt at the end). matches: every match
  // starting in [t0, t1] in that order, at most `limit`.
  std::vector<core::StringId> namesMatching(const std::string& text) const;
  int64_t matchCount(const std::vector<core::StringId>& names) const;
  // The tracks holding at least one match, by id (from the name buckets).
  std::vector<int64_t> matchTracks(const std::vector<core::StringId>& names) const;
  std::optional<SpanRow> nextMatch(const std::vector<core::StringId>& names,
                                   const MatchPosition& after) const;
  std::optional<SpanRow> previousMatch(const std::vector<core::StringId>& names,
                                       const MatchPosition& before) const;
  std::vector<SpanRow> matches(const std::vector<core::StringId>& names, int64_t t0, int64_t t1,
                               size_t limit) const;

  // Series over [t0, t1] at about ns_per_bucket per bucket.
  Series counterSeries(int64_t track, int64_t t0, int64_t t1, int64_t ns_per_bucket) const;
  std::vector<MemoryDevice> memoryDevices() const;
  // Spans, memory events and counter samples from the summaries (exact; a few rows read), for a
  // viewer's header at open. TraceReader::counts() counts memory and flow rows, which reads their
  // tables (a quarter of the benchmark trace); here args, instants and flows are -1 (not counted).
  EventCounts summaryCounts() const;
  Series memorySeries(const MemoryDevice& device, int64_t t0, int64_t t1,
                      int64_t ns_per_bucket) const;

 private:
  class Impl;
  explicit Timeline(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tracerun::trace
