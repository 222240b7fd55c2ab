// TraceReader: validates a trace file before SQLite sees it, then answers the layers' queries with
// prepared statements. Read-only; never writes, repairs or migrates a file.
//
// Sections: file checks (header, size) · Impl (open, strings, statements) · range queries ·
//           whole-table queries · TraceReader forwarding
#include "tracerun/trace/reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>
#include <new>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "file_check.h"
#include "span_chunks.h"
#include "sqlite_util.h"
#include "tracerun/trace/schema.h"

namespace tracerun::trace {

namespace {

// A problem this file found itself (as opposed to an SQLite failure), passed on unchanged.
class CheckFailed : public TraceError {
 public:
  using TraceError::TraceError;
};

bool isCorruption(sqlite3* db) {
  const int code = sqlite3_errcode(db) & 0xff;
  return code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
}

// The span order of every result (span_chunks.h).
bool spanLess(const SpanRow& a, const SpanRow& b) {
  return chunks::spanLess(a, b);
}

// Where the tracerun_spans() aggregate puts the rows of one chunk. Rows come from SQLite through
// an aggregate rather than as result rows because a range query's time is SQLite handing out
// values: one sqlite3_step and one sqlite3_column_* call per column per row cost as much as the
// decoding itself; the aggregate gets each row's values in one call.
struct SpanSink {
  std::vector<SpanRow>* out = nullptr;
  int64_t track = 0;
  int64_t t0 = std::numeric_limits<int64_t>::min(), t1 = std::numeric_limits<int64_t>::max();
  int64_t first_id = 0;  // id of the chunk's first row, when ids are not read
  int64_t rows = 0;      // rows seen, in the window or not
};

// tracerun_spans(start_ns, dur_ns, packed, detail, seq [, id]): appends the row to the active
// sink when it overlaps the window. Without id, the row's id is chunks::idAt(first_id, position):
// the chunk contract's id rule, which holds when the chunk's ids are dense (the caller checks) and
// SQLite scans the rowid range in ascending order (it does unless PRAGMA reverse_unordered_selects,
// which this reader never sets).
void collectSpan(sqlite3_context* ctx, int argc, sqlite3_value** v) {
  SpanSink* sink = *static_cast<SpanSink**>(sqlite3_user_data(ctx));
  if (!sink || argc < 5) {
    sqlite3_result_error(ctx, "tracerun_spans: not called by a TraceReader range query", -1);
    return;
  }
  const int64_t position = sink->rows++;
  const int64_t start = sqlite3_value_int64(v[0]);
  const int64_t dur = sqlite3_value_int64(v[1]);
  int64_t end = 0;
  if (__builtin_add_overflow(start, dur, &end)) {  // only in a damaged file
    end = dur > 0 ? std::numeric_limits<int64_t>::max() : std::numeric_limits<int64_t>::min();
  }
  if (start > sink->t1 || end < sink->t0) return;
  const int64_t packed = sqlite3_value_int64(v[2]);
  SpanRow r;
  r.id = argc > 5 ? sqlite3_value_int64(v[5]) : chunks::idAt(sink->first_id, position);
  r.track = sink->track;
  r.start_ns = start;
  r.dur_ns = dur;
  r.depth = schema::packedDepth(packed);
  r.category = static_cast<core::Category>(schema::packedCategory(packed));
  r.name = schema::packedName(packed);
  r.detail = static_cast<core::StringId>(sqlite3_value_int64(v[3]));  // NULL reads as 0: none
  r.seq = sqlite3_value_type(v[4]) == SQLITE_NULL ? -1 : sqlite3_value_int64(v[4]);
  try {
    sink->out->push_back(r);
  } catch (const std::bad_alloc&) {
    sqlite3_result_error_nomem(ctx);  // an exception must not unwind through SQLite
  }
}

void finishSpans(sqlite3_context* ctx) {
  sqlite3_result_null(ctx);
}

// Makes a sink the active one for one statement and restores the previous one (a callback of
// forEachSpan may run another query on the same reader).
class ActiveSink {
 public:
  ActiveSink(SpanSink*& slot, SpanSink* sink) : slot_(slot), previous_(slot) { slot_ = sink; }
  ~ActiveSink() { slot_ = previous_; }
  ActiveSink(const ActiveSink&) = delete;
  ActiveSink& operator=(const ActiveSink&) = delete;

 private:
  SpanSink*& slot_;
  SpanSink* previous_;
};

}  // namespace

class TraceReader::Impl {
 public:
  explicit Impl(const std::string& path) : path_(path) {}

  void open();

  // Runs fn, turning an SQLite failure on a damaged file into "PATH: corrupted file (...)".
  template <typename Fn>
  auto guarded(Fn&& fn) const -> decltype(fn()) {
    try {
      return fn();
    } catch (const CheckFailed&) {
      throw;
    } catch (const TraceError&) {
      if (db_.get() && isCorruption(db_.get())) {
        throw TraceError(path_ + ": corrupted file (" + sqlite3_errmsg(db_.get()) + ")");
      }
      throw;
    }
  }

  int64_t longestChunk(int64_t track) const {
    auto it = longestChunk_.find(track);
    return it == longestChunk_.end() ? -1 : it->second;
  }

  std::vector<SpanRow> spans(int64_t track, int64_t t0, int64_t t1) const;
  void forEachSpan(int64_t track, const std::function<void(const SpanRow&)>& fn) const;
  std::vector<std::pair<int64_t, int64_t>> chunkRanges(int64_t track) const;
  // Appends the spans with ids in [first, last] that overlap sink's window to sink.out, in id
  // order.
  void readChunk(int64_t first, int64_t last, SpanSink& sink) const;

  std::string path_;
  sql::Db db_;
  int version_ = 0;
  bool hasAttempts_ = false;  // the attempts table (files written since it was added)
  std::vector<std::string> strings_;
  std::unordered_map<int64_t, int64_t> longestChunk_;  // track -> tracks.longest_chunk_ns
  // The sink tracerun_spans() appends to; its registration holds this member's address.
  mutable SpanSink* activeSink_ = nullptr;

  // Statements reused by the frequent queries (a TraceReader is used from one thread at a time).
  // Each runs to completion before any callback, so a callback may use them too.
  mutable sql::Stmt chunksInWindow_, chunkSpans_, chunkSpansWithIds_, chunksOfTrack_;
  mutable sql::Stmt argsInRange_;
};

// ---------------------------------------------------------------------------------------------
// open

void TraceReader::Impl::open() {
  filecheck::checkFile(path_);
  db_ = sql::Db(path_, sql::Db::Mode::kReadOnly);
  guarded([&] {
    std::map<std::string, std::string> meta;
    try {
      meta = filecheck::readTraceMeta(db_);
    } catch (const TraceError& e) {
      throw CheckFailed(e.what());
    }
    version_ = std::stoi(meta["schema_version"]);  // readTraceMeta checked it is a number
    if (meta["complete"] != "1") {
      throw CheckFailed(path_ + ": incomplete trace (the writer did not finish)");
    }

    sql::Stmt count(db_, "SELECT count(*), max(id) FROM strings");
    count.step();
    const int64_t n = count.i64(0);
    const int64_t maxId = count.isNull(1) ? -1 : count.i64(1);
    if (maxId >= n * 4 + 1024) {  // ids are dense; a huge one means a damaged table
      throw CheckFailed(path_ + ": corrupted file (string id " + std::to_string(maxId) +
                        " out of range)");
    }
    strings_.assign(static_cast<size_t>(maxId + 1), std::string());
    sql::Stmt strings(db_, "SELECT id, value FROM strings");
    while (strings.step()) {
      const int64_t id = strings.i64(0);
      if (id >= 0 && id <= maxId) strings_[static_cast<size_t>(id)] = strings.text(1);
    }

    sql::Stmt attempts(db_,
                       "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = "
                       "'attempts'");
    hasAttempts_ = attempts.step() && attempts.i64(0) > 0;

    sql::Stmt tracks(db_, "SELECT id, longest_chunk_ns FROM tracks");
    while (tracks.step()) longestChunk_[tracks.i64(0)] = tracks.i64(1);

    // DIRECTONLY: the file's own views and triggers (untrusted) cannot call it.
    if (sqlite3_create_function_v2(db_.get(), "tracerun_spans", -1, SQLITE_UTF8 | SQLITE_DIRECTONLY,
                                   &activeSink_, nullptr, collectSpan, finishSpans,
                                   nullptr) != SQLITE_OK) {
      db_.fail("cannot register tracerun_spans()");
    }

    chunksInWindow_ = sql::Stmt(db_,
                                "SELECT first_id, last_id FROM span_chunks WHERE track = ?1 AND "
                                "min_start_ns BETWEEN ?2 AND ?3 AND max_end_ns >= ?4 ORDER BY "
                                "min_start_ns, first_id");
    // The columns a SpanRow needs, hot ones first, and no id: reading the rowid costs as much as
    // a column, and a chunk's ids are consecutive.
    chunkSpans_ = sql::Stmt(db_,
                            "SELECT tracerun_spans(start_ns, dur_ns, packed, detail, seq) FROM "
                            "spans WHERE id BETWEEN ?1 AND ?2");
    chunkSpansWithIds_ = sql::Stmt(db_,
                                   "SELECT tracerun_spans(start_ns, dur_ns, packed, detail, seq, "
                                   "id) FROM spans WHERE id BETWEEN ?1 AND ?2");
    argsInRange_ = sql::Stmt(db_,
                             "SELECT span, key, value FROM args WHERE span BETWEEN ?1 AND ?2 "
                             "ORDER BY span, rowid");
    chunksOfTrack_ = sql::Stmt(db_,
                               "SELECT min_start_ns, first_id, last_id FROM span_chunks WHERE "
                               "track = ?1 ORDER BY min_start_ns, first_id");
  });
}

// ---------------------------------------------------------------------------------------------
// range queries

std::vector<SpanRow> TraceReader::Impl::spans(int64_t track, int64_t t0, int64_t t1) const {
  std::vector<SpanRow> out;
  if (t0 > t1) return out;
  // Chunks are indexed by their earliest start; a chunk overlapping [t0, t1] starts no earlier
  // than t0 minus the widest chunk of the track.
  const int64_t widest = longestChunk(track);
  const int64_t lo =
      widest >= 0 ? chunks::earliestStartReaching(t0, widest) : std::numeric_limits<int64_t>::min();
  auto& chunks = chunksInWindow_;
  chunks.reset();
  chunks.bind(1, track).bind(2, lo).bind(3, t1).bind(4, t0);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  while (chunks.step()) ranges.emplace_back(chunks.i64(0), chunks.i64(1));
  chunks.reset();

  // One allocation for the result: the chunks' sizes bound it (capped: a damaged file's id range
  // may be anything).
  uint64_t bound = 0;
  for (const auto& [first, last] : ranges) {
    if (last >= first) bound += static_cast<uint64_t>(last) - static_cast<uint64_t>(first) + 1;
  }
  out.reserve(static_cast<size_t>(std::min<uint64_t>(bound, uint64_t{1} << 20)));

  SpanSink sink;
  sink.out = &out;
  sink.track = track;
  sink.t0 = t0;
  sink.t1 = t1;
  for (const auto& [first, last] : ranges) {
    const size_t runStart = out.size();
    readChunk(first, last, sink);
    // Every chunk is in span order (the chunk contract, span_chunks.h); only a damaged or
    // hand-edited file breaks that, so a cheap check guards the merge below. Chunks come in
    // min_start order but overlap in time (a long span sorts first in a chunk written after its
    // children): merge the new run into the rows it overlaps, not into all rows so far.
    const auto runBegin = out.begin() + static_cast<std::ptrdiff_t>(runStart);
    if (!std::is_sorted(runBegin, out.end(), spanLess)) std::sort(runBegin, out.end(), spanLess);
    if (runStart > 0 && runStart < out.size() && spanLess(out[runStart], out[runStart - 1])) {
      const auto from = std::upper_bound(out.begin(), runBegin, out[runStart], spanLess);
      std::inplace_merge(from, runBegin, out.end(), spanLess);
    }
  }
  return out;
}

void TraceReader::Impl::readChunk(int64_t first, int64_t last, SpanSink& sink) const {
  const size_t begin = sink.out->size();
  ActiveSink active(activeSink_, &sink);
  sink.first_id = first;
  sink.rows = 0;
  chunkSpans_.reset();
  chunkSpans_.bind(1, first).bind(2, last);
  chunkSpans_.step();  // an aggregate: one row, after every span of the chunk went to the sink
  chunkSpans_.reset();
  // Distinct integer ids in [first, last], as many as the range holds: every id is there, so
  // the id rule names each row.
  if (chunks::idsDense(first, last, sink.rows)) return;
  // Gaps (a damaged or hand-edited file): read the ids.
  sink.out->resize(begin);
  chunkSpansWithIds_.reset();
  chunkSpansWithIds_.bind(1, first).bind(2, last);
  chunkSpansWithIds_.step();
  chunkSpansWithIds_.reset();
}

std::vector<std::pair<int64_t, int64_t>> TraceReader::Impl::chunkRanges(int64_t track) const {
  auto& chunks = chunksOfTrack_;
  chunks.reset();
  chunks.bind(1, track);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  while (chunks.step()) ranges.emplace_back(chunks.i64(1), chunks.i64(2));
  chunks.reset();
  return ranges;
}

void TraceReader::Impl::forEachSpan(int64_t track,
                                    const std::function<void(const SpanRow&)>& fn) const {
  // Chunks overlap in time, so this is a merge (span_chunks.h).
  auto& stmt = chunksOfTrack_;
  stmt.reset();
  stmt.bind(1, track);
  std::vector<chunks::ChunkRef> list;
  while (stmt.step()) list.push_back({stmt.i64(0), stmt.i64(1), stmt.i64(2)});
  stmt.reset();

  SpanSink sink;
  sink.track = track;
  chunks::mergeChunks<SpanRow>(
      list,
      [&](const chunks::ChunkRef& c, std::vector<SpanRow>& rows) {
        sink.out = &rows;
        readChunk(c.first_id, c.last_id, sink);
      },
      fn);
}

// ---------------------------------------------------------------------------------------------
// TraceReader forwarding and whole-table queries

TraceReader::TraceReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TraceReader::~TraceReader() = default;
TraceReader::TraceReader(TraceReader&&) noexcept = default;
TraceReader& TraceReader::operator=(TraceReader&&) noexcept = default;

TraceReader TraceReader::open(const std::string& path) {
  auto impl = std::make_unique<Impl>(path);
  impl->open();
  return TraceReader(std::move(impl));
}

const std::string& TraceReader::path() const {
  return impl_->path_;
}
int TraceReader::schemaVersion() const {
  return impl_->version_;
}
size_t TraceReader::stringCount() const {
  return impl_->strings_.size();
}

const std::string& TraceReader::str(core::StringId id) const {
  static const std::string kEmpty;
  return id < impl_->strings_.size() ? impl_->strings_[id] : kEmpty;
}

std::string TraceReader::meta(const std::string& key) const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_, "SELECT value FROM meta WHERE key = ?1");
    s.bind(1, std::string_view(key));
    return s.step() ? s.text(0) : std::string();
  });
}

std::vector<RankInfo> TraceReader::ranks() const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                impl_->hasAttempts_
                    ? "SELECT r.rank, host, pid, clock_offset_ns, r.start_ns, r.end_ns, "
                      "coalesce(a.attempt, 0), r.rank - coalesce(a.rank_offset, 0) FROM ranks r "
                      "LEFT JOIN attempts a ON r.rank BETWEEN a.rank_offset AND a.rank_offset + "
                      "a.world_size - 1 ORDER BY r.rank"
                    : "SELECT rank, host, pid, clock_offset_ns, start_ns, end_ns, 0, rank FROM "
                      "ranks ORDER BY rank");
    std::vector<RankInfo> out;
    while (s.step()) {
      RankInfo r;
      r.rank = static_cast<int>(s.i64(0));
      r.host = s.text(1);
      r.pid = s.i64(2);
      r.clock_offset_ns = s.i64(3);
      r.start_ns = s.i64(4);
      r.end_ns = s.i64(5);
      r.attempt = static_cast<int>(s.i64(6));
      r.attempt_rank = static_cast<int>(s.i64(7));
      out.push_back(std::move(r));
    }
    return out;
  });
}

std::vector<AttemptInfo> TraceReader::attempts() const {
  std::vector<AttemptInfo> out;
  if (impl_->hasAttempts_) {
    impl_->guarded([&] {
      sql::Stmt s(impl_->db_,
                  "SELECT attempt, world_size, start_ns, end_ns FROM attempts ORDER BY attempt");
      while (s.step()) {
        AttemptInfo a;
        a.attempt = static_cast<int>(s.i64(0));
        a.world_size = static_cast<int>(s.i64(1));
        a.start_ns = s.isNull(2) ? 0 : s.i64(2);
        a.end_ns = s.isNull(3) ? 0 : s.i64(3);
        out.push_back(a);
      }
    });
  }
  if (!out.empty()) return out;
  AttemptInfo one;  // a shard or an older file: one attempt
  const std::string world = meta("world_size");
  const bool number =
      !world.empty() && world.size() < 9 && std::all_of(world.begin(), world.end(), [](char c) {
        return std::isdigit(static_cast<unsigned char>(c));
      });
  one.world_size = number ? std::stoi(world) : static_cast<int>(ranks().size());
  std::tie(one.start_ns, one.end_ns) = timeRange();
  out.push_back(one);
  return out;
}

std::vector<TrackRow> TraceReader::tracks() const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                "SELECT id, rank, kind, tid, name, event_count, longest_span_ns FROM tracks ORDER "
                "BY id");
    std::vector<TrackRow> out;
    while (s.step()) {
      TrackRow t;
      t.id = s.i64(0);
      t.rank = static_cast<int>(s.i64(1));
      t.kind = static_cast<core::TrackKind>(s.i64(2));
      t.tid = s.i64(3);
      t.name = s.text(4);
      t.event_count = s.i64(5);
      t.longest_span_ns = s.i64(6);
      out.push_back(std::move(t));
    }
    return out;
  });
}

EventCounts TraceReader::counts() const {
  return impl_->guarded([&] {
    auto one = [&](const char* sql) {
      sql::Stmt s(impl_->db_, sql);
      return s.step() ? s.i64(0) : 0;
    };
    EventCounts c;
    // spans from the chunk index: counting 10M rows would take a scan. total() (a double) rather
    // than sum(), which fails with "integer overflow" on a damaged chunk row; clamped to int64.
    {
      sql::Stmt s(
          impl_->db_,
          "SELECT total(last_id - first_id + 1) FROM span_chunks WHERE last_id >= first_id");
      const double n = s.step() ? s.f64(0) : 0;
      c.spans = n < 9.2e18 ? static_cast<int64_t>(n) : std::numeric_limits<int64_t>::max();
    }
    c.args = one("SELECT count(*) FROM args");
    c.instants = one("SELECT count(*) FROM instants");
    c.counters = one("SELECT count(*) FROM counters");
    c.memory = one("SELECT count(*) FROM memory");
    c.flows = one("SELECT count(*) FROM flows");
    return c;
  });
}

std::pair<int64_t, int64_t> TraceReader::timeRange() const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_, "SELECT min(start_ns), max(end_ns) FROM ranks");
    if (!s.step() || s.isNull(0)) return std::pair<int64_t, int64_t>(0, 0);
    return std::pair<int64_t, int64_t>(s.i64(0), s.i64(1));
  });
}

std::vector<SpanRow> TraceReader::spans(int64_t track, int64_t t0, int64_t t1) const {
  return impl_->guarded([&] { return impl_->spans(track, t0, t1); });
}

void TraceReader::forEachSpan(int64_t track, const std::function<void(const SpanRow&)>& fn) const {
  impl_->guarded([&] { impl_->forEachSpan(track, fn); });
}

std::vector<ArgRow> TraceReader::args(int64_t span) const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_, "SELECT span, key, value FROM args WHERE span = ?1 ORDER BY rowid");
    s.bind(1, span);
    std::vector<ArgRow> out;
    while (s.step()) {
      out.push_back({s.i64(0), static_cast<core::StringId>(s.i64(1)), s.i64(2)});
    }
    return out;
  });
}

std::vector<ArgRow> TraceReader::argsOfTrack(int64_t track) const {
  return impl_->guarded([&] {
    auto ranges = impl_->chunkRanges(track);
    std::sort(ranges.begin(), ranges.end());
    sql::Stmt s(impl_->db_,
                "SELECT span, key, value FROM args WHERE span BETWEEN ?1 AND ?2 ORDER BY span, "
                "rowid");
    std::vector<ArgRow> out;
    for (const auto& [first, last] : ranges) {
      s.reset();
      s.bind(1, first).bind(2, last);
      while (s.step()) {
        out.push_back({s.i64(0), static_cast<core::StringId>(s.i64(1)), s.i64(2)});
      }
    }
    return out;
  });
}

std::vector<ArgRow> TraceReader::argsOfSpans(const std::vector<int64_t>& ids) const {
  // Ids closer than this share one range query: a query costs about as much as reading this many
  // spans' arguments (a track's picked spans often come in runs: a phase and its scopes).
  constexpr uint64_t kGap = 64;
  return impl_->guarded([&] {
    std::vector<ArgRow> out;
    auto& s = impl_->argsInRange_;
    size_t i = 0;
    while (i < ids.size()) {
      size_t j = i + 1;
      while (j < ids.size() &&
             static_cast<uint64_t>(ids[j]) - static_cast<uint64_t>(ids[j - 1]) <= kGap)
        ++j;
      s.reset();
      s.bind(1, ids[i]).bind(2, ids[j - 1]);
      size_t k = i;  // the next wanted id: rows between wanted ids are skipped
      while (s.step()) {
        const int64_t span = s.i64(0);
        while (k < j && ids[k] < span) ++k;
        if (k == j) break;
        if (ids[k] == span) out.push_back({span, static_cast<core::StringId>(s.i64(1)), s.i64(2)});
      }
      s.reset();
      i = j;
    }
    return out;
  });
}

std::vector<InstantRow> TraceReader::instants(int64_t track, int64_t t0, int64_t t1) const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                "SELECT track, ts_ns, category, name, detail, value FROM instants WHERE track = ?1 "
                "AND ts_ns BETWEEN ?2 AND ?3 ORDER BY ts_ns, rowid");
    s.bind(1, track).bind(2, t0).bind(3, t1);
    std::vector<InstantRow> out;
    while (s.step()) {
      InstantRow r;
      r.track = s.i64(0);
      r.ts_ns = s.i64(1);
      r.category = static_cast<core::Category>(s.i64(2));
      r.name = static_cast<core::StringId>(s.i64(3));
      r.detail = s.isNull(4) ? 0 : static_cast<core::StringId>(s.i64(4));
      r.value = s.i64(5);
      out.push_back(r);
    }
    return out;
  });
}

std::vector<CounterRow> TraceReader::counters(int64_t track, int64_t t0, int64_t t1) const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                "SELECT track, ts_ns, value FROM counters WHERE track = ?1 AND ts_ns BETWEEN ?2 "
                "AND ?3 ORDER BY ts_ns, rowid");
    s.bind(1, track).bind(2, t0).bind(3, t1);
    std::vector<CounterRow> out;
    while (s.step()) out.push_back({s.i64(0), s.i64(1), s.f64(2)});
    return out;
  });
}

std::vector<MemoryRow> TraceReader::memory(int rank, int64_t t0, int64_t t1) const {
  std::vector<MemoryRow> out;
  forEachMemory(rank, t0, t1, [&](const MemoryRow& r) { out.push_back(r); });
  return out;
}

void TraceReader::forEachMemory(int rank, int64_t t0, int64_t t1,
                                const std::function<void(const MemoryRow&)>& fn) const {
  impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                "SELECT rank, ts_ns, device_type, device_index, ptr, bytes, total, category, op, "
                "scope FROM memory WHERE rank = ?1 AND ts_ns BETWEEN ?2 AND ?3 ORDER BY ts_ns, "
                "rowid");
    s.bind(1, int64_t{rank}).bind(2, t0).bind(3, t1);
    while (s.step()) {
      MemoryRow r;
      r.rank = static_cast<int>(s.i64(0));
      r.ts_ns = s.i64(1);
      r.device_type = static_cast<int>(s.i64(2));
      r.device_index = static_cast<int>(s.i64(3));
      r.ptr = static_cast<uint64_t>(s.i64(4));
      r.bytes = s.i64(5);
      r.total = s.i64(6);
      r.category = static_cast<core::MemoryCategory>(s.i64(7));
      r.op = s.isNull(8) ? 0 : static_cast<core::StringId>(s.i64(8));
      r.scope = s.isNull(9) ? 0 : static_cast<core::StringId>(s.i64(9));
      fn(r);
    }
  });
}

std::vector<FlowRow> TraceReader::flows() const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                "SELECT kind, src_track, src_ts_ns, dst_track, dst_ts_ns FROM flows ORDER BY "
                "rowid");
    std::vector<FlowRow> out;
    while (s.step()) {
      FlowRow r;
      r.kind = static_cast<core::FlowKind>(s.i64(0));
      r.src_track = s.i64(1);
      r.src_ts_ns = s.i64(2);
      r.dst_track = s.i64(3);
      r.dst_ts_ns = s.i64(4);
      out.push_back(r);
    }
    return out;
  });
}

std::vector<AggregateRow> TraceReader::aggregates() const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_,
                "SELECT rank, name, category, count, total_ns, self_ns FROM aggregates ORDER BY "
                "rank, total_ns DESC, name, category");
    std::vector<AggregateRow> out;
    while (s.step()) {
      AggregateRow r;
      r.rank = static_cast<int>(s.i64(0));
      r.name = static_cast<core::StringId>(s.i64(1));
      r.category = static_cast<core::Category>(s.i64(2));
      r.count = s.i64(3);
      r.total_ns = s.i64(4);
      r.self_ns = s.i64(5);
      out.push_back(r);
    }
    return out;
  });
}

std::vector<StatRow> TraceReader::stats() const {
  return impl_->guarded([&] {
    sql::Stmt s(impl_->db_, "SELECT rank, name, value, severity FROM stats ORDER BY rank, name");
    std::vector<StatRow> out;
    while (s.step()) {
      StatRow r;
      r.rank = static_cast<int>(s.i64(0));
      r.name = s.text(1);
      r.value = s.i64(2);
      r.severity = static_cast<Severity>(s.i64(3));
      out.push_back(std::move(r));
    }
    return out;
  });
}

void TraceReader::inOneReadTransaction(const std::function<void()>& fn) const {
  sqlite3* db = impl_->db_.get();
  if (sqlite3_get_autocommit(db) == 0) {  // already inside one
    fn();
    return;
  }
  impl_->guarded([&] { impl_->db_.exec("BEGIN"); });
  try {
    fn();
  } catch (...) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);  // a read: nothing to undo
    throw;
  }
  impl_->guarded([&] { impl_->db_.exec("COMMIT"); });
}

void TraceReader::quickCheck() const {
  impl_->guarded([&] {
    sql::Stmt s(impl_->db_, "PRAGMA quick_check");
    if (!s.step())
      throw CheckFailed(impl_->path_ + ": corrupted file (quick_check gave no answer)");
    const std::string first = s.text(0);
    if (first != "ok") throw CheckFailed(impl_->path_ + ": corrupted file (" + first + ")");
  });
}

}  // namespace tracerun::trace
