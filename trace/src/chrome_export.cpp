// Chrome trace-event JSON export (chrome_export.h), streamed through a large stdio buffer so memory
// stays flat whatever the trace size. Reads only through TraceReader; no analysis of its own and no
// Perfetto protobuf.
//
// Sections: JSON writing · lanes (keeping X events nested per tid) · event writers · the export's
// steps · exportChrome
#include "tracerun/trace/chrome_export.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/core/tracks.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/error.h"
#include "tracerun/trace/format.h"
#include "utf8.h"

namespace tracerun::trace {

namespace {

// ---- JSON writing -------------------------------------------------------------------------------

class JsonOut {
 public:
  // Writes `path`; messages name `shown` (the file the user asked for).
  JsonOut(const std::string& path, const std::string& shown) : path_(shown) {
    file_ = std::fopen(path.c_str(), "wb");
    if (!file_) throw TraceError(shown + ": cannot write: " + std::strerror(errno));
    buffer_ = std::make_unique<char[]>(kBufferSize);
    std::setvbuf(file_, buffer_.get(), _IOFBF, kBufferSize);
  }
  ~JsonOut() {
    if (file_) std::fclose(file_);
  }
  JsonOut(const JsonOut&) = delete;
  JsonOut& operator=(const JsonOut&) = delete;

  void raw(std::string_view s) { std::fwrite(s.data(), 1, s.size(), file_); }
  void ch(char c) { std::fputc(c, file_); }

  // A JSON string: quotes, escapes, and invalid UTF-8 replaced by U+FFFD.
  void str(std::string_view s) {
    ch('"');
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    const size_t n = s.size();
    size_t run = 0;  // start of the pending run of bytes that need no escaping
    auto flush = [&](size_t i) {
      if (i > run) std::fwrite(p + run, 1, i - run, file_);
    };
    for (size_t i = 0; i < n;) {
      const unsigned char c = p[i];
      if (c >= 0x20 && c != '"' && c != '\\' && c < 0x80) {
        ++i;
        continue;
      }
      if (c >= 0x80) {
        const size_t len = utf8Length(p + i, n - i);
        if (len > 0) {
          i += len;
          continue;
        }
        flush(i);
        raw("\\ufffd");
        run = ++i;
        continue;
      }
      flush(i);
      switch (c) {
        case '"':
          raw("\\\"");
          break;
        case '\\':
          raw("\\\\");
          break;
        case '\n':
          raw("\\n");
          break;
        case '\t':
          raw("\\t");
          break;
        case '\r':
          raw("\\r");
          break;
        case '\b':
          raw("\\b");
          break;
        case '\f':
          raw("\\f");
          break;
        default: {
          char esc[8];
          std::snprintf(esc, sizeof esc, "\\u%04x", c);
          raw(esc);
        }
      }
      run = ++i;
    }
    flush(n);
    ch('"');
  }

  void i64(int64_t v) {
    char b[24];
    const int len = std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
    std::fwrite(b, 1, static_cast<size_t>(len), file_);
  }
  // Nanoseconds as microseconds with three decimals (exact: no floating point).
  void us(int64_t ns) {
    char b[32];
    const bool negative = ns < 0;
    const uint64_t a = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    const int len = std::snprintf(b, sizeof b, "%s%llu.%03llu", negative ? "-" : "",
                                  static_cast<unsigned long long>(a / 1000),
                                  static_cast<unsigned long long>(a % 1000));
    std::fwrite(b, 1, static_cast<size_t>(len), file_);
  }
  void f64(double v) {
    char b[32];
    const int len = std::snprintf(b, sizeof b, "%.17g", v);
    std::fwrite(b, 1, static_cast<size_t>(len), file_);
  }

  // Starts the next element of the traceEvents array.
  void nextEvent() {
    if (events_++) raw(",\n");
  }

  // Flushes and closes; throws when anything failed to reach the disk.
  void finish() {
    const bool bad = std::ferror(file_) != 0;
    const int err = errno;
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (bad || closed != 0) {
      throw TraceError(path_ + ": write failed: " + std::strerror(bad ? err : errno));
    }
  }

 private:
  static constexpr size_t kBufferSize = size_t{1} << 20;

  std::string path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<char[]> buffer_;
  int64_t events_ = 0;
};

// ---- lanes --------------------------------------------------------------------------------------

// Chrome and Perfetto need the X events of one tid to nest. Spans that overlap without nesting
// (collectives on an async lane) go to extra lanes, each shown as its own thread. A span fits a
// lane when every open span there either ended or contains it.
class Lanes {
 public:
  size_t place(int64_t start, int64_t end) {
    for (size_t i = 0;; ++i) {
      if (i == lanes_.size()) lanes_.emplace_back();
      auto& open = lanes_[i];
      while (!open.empty() && open.back() <= start) open.pop_back();
      if (open.empty() || end <= open.back()) {
        open.push_back(end);
        return i;
      }
    }
  }
  size_t count() const { return lanes_.size(); }

 private:
  std::vector<std::vector<int64_t>> lanes_;  // per lane, the ends of its open spans (a stack)
};

// Lane 0 of a track is the track id itself; extra lanes get fresh tids above every track id (kept
// small: Perfetto reads tids as 32-bit).
class LaneTids {
 public:
  explicit LaneTids(int64_t maxTrack)
      : next_(maxTrack < std::numeric_limits<int64_t>::max() ? maxTrack + 1 : 0) {}
  int64_t tid(int64_t track, size_t lane) {
    if (lane == 0) return track;
    const auto [it, added] = extra_.try_emplace({track, lane}, next_);
    if (added && next_ < std::numeric_limits<int64_t>::max()) ++next_;
    return it->second;
  }

 private:
  std::map<std::pair<int64_t, size_t>, int64_t> extra_;
  int64_t next_;
};

struct PairHash {
  size_t operator()(const std::pair<int64_t, int64_t>& p) const noexcept {
    return std::hash<int64_t>()(p.first) * 1000003u ^ std::hash<int64_t>()(p.second);
  }
};

// ---- event writers ------------------------------------------------------------------------------

void metaEvent(JsonOut& out, const char* name, int64_t pid, int64_t tid, const char* argKey,
               const std::string* text, int64_t number) {
  out.nextEvent();
  out.raw("{\"ph\":\"M\",\"name\":\"");
  out.raw(name);
  out.raw("\",\"pid\":");
  out.i64(pid);
  out.raw(",\"tid\":");
  out.i64(tid);
  out.raw(",\"args\":{\"");
  out.raw(argKey);
  out.raw("\":");
  if (text) {
    out.str(*text);
  } else {
    out.i64(number);
  }
  out.raw("}}");
}

void spanEvent(JsonOut& out, const TraceReader& r, const SpanRow& s, int rank, int64_t tid,
               const ArgRow* args, size_t nargs) {
  out.nextEvent();
  out.raw("{\"ph\":\"X\",\"name\":");
  out.str(r.str(s.name));
  out.raw(",\"cat\":\"");
  out.raw(core::categoryName(s.category));
  out.raw("\",\"pid\":");
  out.i64(rank);
  out.raw(",\"tid\":");
  out.i64(tid);
  out.raw(",\"ts\":");
  out.us(s.start_ns);
  out.raw(",\"dur\":");
  out.us(s.dur_ns);
  if (s.detail != 0 || s.seq >= 0 || nargs > 0) {
    out.raw(",\"args\":{");
    bool first = true;
    auto key = [&](std::string_view k) {
      if (!first) out.ch(',');
      first = false;
      out.str(k);
      out.ch(':');
    };
    if (s.detail != 0) {
      key("detail");
      out.str(r.str(s.detail));
    }
    if (s.seq >= 0) {
      key("seq");
      out.i64(s.seq);
    }
    for (size_t i = 0; i < nargs; ++i) {
      const std::string& k = r.str(args[i].key);
      key(k);
      if (vocab::arg::isStringValued(k)) {  // the value is a strings.id: show the string
        out.str(r.str(static_cast<core::StringId>(args[i].value)));
      } else {
        out.i64(args[i].value);
      }
    }
    out.ch('}');
  }
  out.ch('}');
}

void instantEvent(JsonOut& out, const TraceReader& r, const InstantRow& i, int rank) {
  out.nextEvent();
  out.raw("{\"ph\":\"i\",\"s\":\"t\",\"name\":");
  out.str(r.str(i.name));
  out.raw(",\"cat\":\"");
  out.raw(core::categoryName(i.category));
  out.raw("\",\"pid\":");
  out.i64(rank);
  out.raw(",\"tid\":");
  out.i64(i.track);
  out.raw(",\"ts\":");
  out.us(i.ts_ns);
  out.raw(",\"args\":{\"value\":");
  out.i64(i.value);
  if (i.detail != 0) {
    out.raw(",\"detail\":");
    out.str(r.str(i.detail));
  }
  out.raw("}}");
}

void counterEvent(JsonOut& out, const std::string& name, int rank, int64_t tid, int64_t ts,
                  const char* series, double value) {
  out.nextEvent();
  out.raw("{\"ph\":\"C\",\"name\":");
  out.str(name);
  out.raw(",\"pid\":");
  out.i64(rank);
  out.raw(",\"tid\":");
  out.i64(tid);
  out.raw(",\"ts\":");
  out.us(ts);
  out.raw(",\"args\":{\"");
  out.raw(series);
  out.raw("\":");
  out.f64(value);
  out.raw("}}");
}

void flowEvent(JsonOut& out, const char* ph, int64_t id, core::FlowKind kind, int rank, int64_t tid,
               int64_t ts) {
  out.nextEvent();
  out.raw("{\"ph\":\"");
  out.raw(ph);
  out.raw("\",\"id\":");
  out.i64(id);
  out.raw(",\"name\":\"");
  out.raw(core::flowKindName(kind));
  out.raw("\",\"cat\":\"flow\",\"pid\":");
  out.i64(rank);
  out.raw(",\"tid\":");
  out.i64(tid);
  out.raw(",\"ts\":");
  out.us(ts);
  if (ph[0] == 'f') out.raw(",\"bp\":\"e\"");
  out.ch('}');
}

// Splits [lo, hi] into `n` windows, plus one below and one above, so row-returning queries stay
// small and nothing outside the recorded range is lost. Offsets are unsigned: a damaged file's
// range may be all of int64; when its first time is after its last, one window covers everything.
std::vector<std::pair<int64_t, int64_t>> windows(int64_t lo, int64_t hi, int64_t n) {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<std::pair<int64_t, int64_t>> out;
  if (lo > hi) {
    out.push_back({kMin, kMax});
    return out;
  }
  if (lo > kMin) out.push_back({kMin, lo - 1});
  const uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  uint64_t width = range / static_cast<uint64_t>(std::max<int64_t>(1, n));
  if (width < std::numeric_limits<uint64_t>::max()) ++width;  // at least 1, never wrapping to 0
  for (uint64_t off = 0;;) {
    const uint64_t last = range - off < width ? range : off + width - 1;
    out.push_back({static_cast<int64_t>(static_cast<uint64_t>(lo) + off),
                   static_cast<int64_t>(static_cast<uint64_t>(lo) + last)});
    if (last == range) break;
    off = last + 1;
  }
  if (hi < kMax) out.push_back({hi + 1, kMax});
  return out;
}

// Writes to a temporary file renamed over the target at the end, so a failed export never leaves
// a half-written file behind; special files (/dev/stdout, pipes) are written directly.
class Destination {
 public:
  explicit Destination(const std::string& path) : path_(path) {
    struct stat st;
    direct_ = ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
    writing_ = direct_ ? path : path + ".tmp";
  }
  ~Destination() {
    if (!done_ && !direct_) std::remove(writing_.c_str());
  }
  Destination(const Destination&) = delete;
  Destination& operator=(const Destination&) = delete;
  const std::string& writing() const noexcept { return writing_; }
  void commit() {
    if (!direct_ && std::rename(writing_.c_str(), path_.c_str()) != 0) {
      throw TraceError(path_ + ": cannot write: " + std::strerror(errno));
    }
    done_ = true;
  }

 private:
  std::string path_, writing_;
  bool direct_ = false, done_ = false;
};

// ---- the export's steps ---------------------------------------------------------------------

// Reports the share of the trace's rows written so far (0..1) to the caller's callback.
class ExportProgress {
 public:
  ExportProgress(const EventCounts& counts, const std::function<void(double)>& report)
      // Summed as doubles: a damaged span_chunks row may make counts.spans INT64_MAX.
      : total_(std::max(1.0, double(counts.spans) + double(counts.instants) +
                                 double(counts.counters) + double(counts.memory) +
                                 double(counts.flows))),
        report_(report) {}

  void advance(int64_t n) {
    done_ += double(n);
    if (report_) report_(std::min(1.0, done_ / total_));
  }

 private:
  double total_, done_ = 0;
  const std::function<void(double)>& report_;
};

// Where a span that did not fit its track's first lane went: (track, start) -> its lane's tid.
using MovedSpans = std::unordered_map<std::pair<int64_t, int64_t>, int64_t, PairHash>;

void refuseExportOverItself(const TraceReader& reader, const std::string& outPath) {
  struct stat source, target;
  if (::stat(reader.path().c_str(), &source) == 0 && ::stat(outPath.c_str(), &target) == 0 &&
      source.st_dev == target.st_dev && source.st_ino == target.st_ino) {
    throw TraceError(outPath + ": is the trace being exported; choose another output file");
  }
}

// Every rank that has a rank row or a track, in rank order.
std::set<int> processesOf(const std::vector<RankInfo>& ranks, const std::vector<TrackRow>& tracks) {
  std::set<int> processes;
  for (const auto& r : ranks) processes.insert(r.rank);
  for (const auto& t : tracks) processes.insert(t.rank);
  return processes;
}

// Processes and threads: names and sort order.
void writeNames(JsonOut& out, const std::vector<RankInfo>& ranks,
                const std::vector<TrackRow>& tracks, const std::set<int>& processes) {
  std::map<int, const RankInfo*> rankInfo;
  for (const auto& r : ranks) rankInfo[r.rank] = &r;
  for (int rank : processes) {
    std::string name = "rank " + std::to_string(rank);
    const auto it = rankInfo.find(rank);
    if (it != rankInfo.end()) {
      name += " (" + (it->second->host.empty() ? std::string("?") : it->second->host) + ", pid " +
              std::to_string(it->second->pid) + ")";
    }
    metaEvent(out, "process_name", rank, 0, "name", &name, 0);
    metaEvent(out, "process_sort_index", rank, 0, "sort_index", nullptr, rank);
  }
  for (const auto& t : tracks) {
    if (t.kind == core::TrackKind::kCounter) continue;  // counters are per process in Chrome
    std::string name = t.name;
    if (t.tid != 0 && t.kind == core::TrackKind::kThread)
      name += " (tid " + std::to_string(t.tid) + ")";
    metaEvent(out, "thread_name", t.rank, t.id, "name", &name, 0);
    metaEvent(out, "thread_sort_index", t.rank, t.id, "sort_index", nullptr, t.id);
  }
}

// One track's spans in start order; lanes keep them nested, each extra lane a named thread.
void writeTrackSpans(JsonOut& out, const TraceReader& reader, const TrackRow& t, LaneTids& laneTids,
                     MovedSpans& moved, ExportProgress& progress, ChromeExportStats& stats) {
  const auto args = reader.argsOfTrack(t.id);  // ordered by span id
  auto argsOf = [&](int64_t span, size_t* n) -> const ArgRow* {
    const auto lo = std::lower_bound(args.begin(), args.end(), span,
                                     [](const ArgRow& a, int64_t id) { return a.span < id; });
    auto hi = lo;
    while (hi != args.end() && hi->span == span) ++hi;
    *n = static_cast<size_t>(hi - lo);
    return *n ? &*lo : nullptr;
  };
  Lanes lanes;
  int64_t n = 0;
  reader.forEachSpan(t.id, [&](const SpanRow& s) {
    const size_t lane = lanes.place(s.start_ns, s.end_ns());
    const int64_t tid = laneTids.tid(t.id, lane);
    if (lane > 0) moved.emplace(std::make_pair(t.id, s.start_ns), tid);
    size_t nargs = 0;
    const ArgRow* a = argsOf(s.id, &nargs);
    spanEvent(out, reader, s, t.rank, tid, a, nargs);
    if (++n % 65536 == 0) progress.advance(65536);
  });
  progress.advance(n % 65536);
  stats.spans += n;
  for (size_t lane = 1; lane < lanes.count(); ++lane) {
    const std::string name = t.name + " #" + std::to_string(lane + 1);
    const int64_t tid = laneTids.tid(t.id, lane);
    metaEvent(out, "thread_name", t.rank, tid, "name", &name, 0);
    metaEvent(out, "thread_sort_index", t.rank, tid, "sort_index", nullptr, t.id);
  }
}

// Instants and counter samples, track by track, window by window.
void writeInstantsAndCounters(JsonOut& out, const TraceReader& reader,
                              const std::vector<TrackRow>& tracks,
                              const std::vector<std::pair<int64_t, int64_t>>& timeWindows,
                              ExportProgress& progress, ChromeExportStats& stats) {
  for (const auto& t : tracks) {
    for (const auto& [t0, t1] : timeWindows) {
      if (t.kind == core::TrackKind::kCounter) {
        const auto rows = reader.counters(t.id, t0, t1);
        for (const auto& c : rows) {
          if (!std::isfinite(c.value)) continue;  // JSON has no NaN or infinity
          counterEvent(out, t.name, t.rank, t.id, c.ts_ns, "value", c.value);
          ++stats.counters;
        }
        progress.advance(static_cast<int64_t>(rows.size()));
      }
      const auto rows = reader.instants(t.id, t0, t1);
      for (const auto& i : rows) instantEvent(out, reader, i, t.rank);
      stats.instants += static_cast<int64_t>(rows.size());
      progress.advance(static_cast<int64_t>(rows.size()));
    }
  }
}

// Live memory per rank and device, as counters.
void writeMemory(JsonOut& out, const TraceReader& reader, const std::set<int>& processes,
                 const std::vector<std::pair<int64_t, int64_t>>& timeWindows,
                 ExportProgress& progress, ChromeExportStats& stats) {
  for (int rank : processes) {
    std::map<std::pair<int, int>, std::string> names;
    for (const auto& [t0, t1] : timeWindows) {
      const auto rows = reader.memory(rank, t0, t1);
      for (const auto& m : rows) {
        auto& name = names[{m.device_type, m.device_index}];
        if (name.empty())
          name = "memory " + deviceName(m.device_type, m.device_index, DeviceSpelling::kTitle);
        counterEvent(out, name, rank, 0, m.ts_ns, "live bytes", double(m.total));
      }
      stats.memory += static_cast<int64_t>(rows.size());
      progress.advance(static_cast<int64_t>(rows.size()));
    }
  }
}

// Flows: "s" on the source slice, "f" bound to the enclosing destination slice.
void writeFlows(JsonOut& out, const TraceReader& reader, const std::vector<TrackRow>& tracks,
                const MovedSpans& moved, ExportProgress& progress, ChromeExportStats& stats) {
  std::unordered_map<int64_t, int> rankOf;
  for (const auto& t : tracks) rankOf[t.id] = t.rank;
  auto tidAt = [&](int64_t track, int64_t ts) {
    const auto it = moved.find({track, ts});
    return it == moved.end() ? track : it->second;
  };
  const auto flows = reader.flows();
  int64_t flowId = 0;
  for (const auto& f : flows) {
    const auto src = rankOf.find(f.src_track);
    const auto dst = rankOf.find(f.dst_track);
    if (src == rankOf.end() || dst == rankOf.end()) continue;  // ends on a track nobody described
    ++flowId;
    flowEvent(out, "s", flowId, f.kind, src->second, tidAt(f.src_track, f.src_ts_ns), f.src_ts_ns);
    flowEvent(out, "f", flowId, f.kind, dst->second, tidAt(f.dst_track, f.dst_ts_ns), f.dst_ts_ns);
    ++stats.flows;
  }
  progress.advance(static_cast<int64_t>(flows.size()));
}

// The closing of the event list and the trace's metadata.
void writeMetadata(JsonOut& out, const TraceReader& reader) {
  out.raw("\n],\n\"displayTimeUnit\":\"ns\",\n\"metadata\":{\"source\":");
  out.str(reader.path());
  for (const char* key :
       {"kind", "origin_ns", "world_size", "traced_ranks", "command", "tracerun_version"}) {
    out.raw(",");
    out.str(key);
    out.ch(':');
    out.str(reader.meta(key));
  }
  out.raw(",\"schema_version\":");
  out.i64(reader.schemaVersion());
  out.raw(",\"time_unit\":\"ts and dur in microseconds from origin_ns\"}}\n");
}

}  // namespace

// ---- exportChrome -------------------------------------------------------------------------------

ChromeExportStats exportChrome(const TraceReader& reader, const std::string& outPath,
                               const std::function<void(double)>& progress) {
  const auto ranks = reader.ranks();
  const auto tracks = reader.tracks();
  const auto counts = reader.counts();
  const auto [first, last] = reader.timeRange();
  ExportProgress work(counts, progress);
  // About 256k rows per window query, whatever the trace size.
  const int64_t nWindows =
      1 + std::max({counts.instants, counts.counters, counts.memory}) / (int64_t{1} << 18);
  const auto timeWindows = windows(first, last, nWindows);

  refuseExportOverItself(reader, outPath);
  Destination dest(outPath);
  JsonOut out(dest.writing(), outPath);
  ChromeExportStats stats;
  int64_t maxTrack = 0;
  for (const auto& t : tracks) maxTrack = std::max(maxTrack, t.id);
  LaneTids laneTids(maxTrack);

  out.raw("{\"traceEvents\":[\n");
  const std::set<int> processes = processesOf(ranks, tracks);
  writeNames(out, ranks, tracks, processes);
  MovedSpans moved;
  for (const auto& t : tracks) {
    if (t.kind != core::TrackKind::kCounter) {
      writeTrackSpans(out, reader, t, laneTids, moved, work, stats);
    }
  }
  writeInstantsAndCounters(out, reader, tracks, timeWindows, work, stats);
  writeMemory(out, reader, processes, timeWindows, work, stats);
  writeFlows(out, reader, tracks, moved, work, stats);
  writeMetadata(out, reader);
  out.finish();
  dest.commit();
  if (progress) progress(1.0);
  return stats;
}

}  // namespace tracerun::trace
