// ShardWriter: the drain thread that turns a Session's per-thread records into the rows of one
// SQLite shard, plus what is written once at close (strings, tracks, ranks, aggregates, stats,
// indexes). It never merges shards, never reads a trace back, and never runs SQL on the hot path.
//
// Sections: per-track and per-buffer state · Impl: construction · drain pass · span chunks ·
//           transactions · close · ShardWriter forwarding
#include "tracerun/trace/shard_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "flat_map.h"
#include "span_chunks.h"
#include "sqlite_util.h"
#include "summaries.h"
#include "tracerun/core/clock.h"
#include "tracerun/trace/schema.h"

#ifndef TRACERUN_VERSION
#define TRACERUN_VERSION "unknown"
#endif

namespace tracerun::trace {

namespace {

using core::EventId;
using core::Record;
using core::RecordKind;
using core::StringId;
using core::TrackId;

constexpr int64_t kMaxTxnAgeNs = 1'000'000'000;  // commit at least this often while recording
// A pass that drained at least this many records goes again at once instead of sleeping: the
// rings are filling faster than one interval's worth.
constexpr size_t kBusyPassRecords = 16384;
// Rows per multi-row INSERT (spans, memory): a quarter less CPU per row than one statement per
// row (performance.md, "Trace writer").
constexpr size_t kRowBatch = 32;

// A span waiting in its track's chunk. Times are relative to the origin.
struct PendingSpan {
  int64_t start = 0;
  int64_t end = 0;
  int64_t seq = -1;
  StringId name = 0;
  StringId detail = 0;
  uint32_t argsBegin = 0;  // into TrackState::chunkArgs
  uint16_t argsCount = 0;
  uint16_t depth = 0;
  uint8_t category = 0;
};

struct TrackState {
  TrackId id = 0;
  std::vector<PendingSpan> chunk;
  std::vector<core::ArgsRecord::Arg> chunkArgs;
  uint64_t epoch = 0;  // bumped each time the chunk is written
  int64_t events = 0;  // spans, instants and counter samples
  int64_t longestSpan = 0;
  int64_t longestChunk = 0;
};

// Per producer buffer: the last span seen, so the ArgsRecord that follows can find it.
struct BufferState {
  EventId lastSpan = 0;
  TrackState* lastTrack = nullptr;
  uint64_t lastEpoch = 0;
  uint32_t lastIndex = 0;
};

struct Aggregate {
  int64_t count = 0;
  int64_t total = 0;
  int64_t self = 0;
};

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

void removeIfExists(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    throw TraceError(path + ": cannot replace the existing file: " + std::strerror(errno));
  }
}

// "row, row, ..." n times, for a multi-row INSERT's VALUES.
std::string repeatedRows(const std::string& row, size_t n) {
  std::string rows = row;
  for (size_t i = 1; i < n; ++i) rows += ", " + row;
  return rows;
}

// Binds one memory row at parameters base+1..base+10 (op and scope 0 as NULL).
void bindMemory(sql::Stmt& st, int base, int64_t rank, int64_t ts, const core::MemoryRecord& m) {
  st.bind(base + 1, rank).bind(base + 2, ts).bind(base + 3, int64_t{m.device_type});
  st.bind(base + 4, int64_t{m.device_index}).bind(base + 5, static_cast<int64_t>(m.ptr));
  st.bind(base + 6, m.bytes).bind(base + 7, m.total).bind(base + 8, int64_t(m.category));
  if (m.op) {
    st.bind(base + 9, int64_t{m.op});
  } else {
    st.bindNull(base + 9);
  }
  if (m.scope) {
    st.bind(base + 10, int64_t{m.scope});
  } else {
    st.bindNull(base + 10);
  }
}

// Binds one spans row at parameters base+1..base+7 (id, track, start, duration, packed, detail,
// seq; detail 0 and seq < 0 as NULL).
void bindSpan(sql::Stmt& st, int base, int64_t id, TrackId track, const PendingSpan& p) {
  st.bind(base + 1, id).bind(base + 2, int64_t{track}).bind(base + 3, p.start);
  st.bind(base + 4, p.end - p.start).bind(base + 5, schema::packSpan(p.name, p.depth, p.category));
  if (p.detail) {
    st.bind(base + 6, int64_t{p.detail});
  } else {
    st.bindNull(base + 6);
  }
  if (p.seq >= 0) {
    st.bind(base + 7, p.seq);
  } else {
    st.bindNull(base + 7);
  }
}
}  // namespace

class ShardWriter::Impl {
 public:
  Impl(core::Session& session, ShardOptions options);
  ~Impl();

  void start();
  void flush();
  void drain();
  void close();
  void setStat(const std::string& name, int64_t value, Severity severity);
  void setMeta(const std::string& key, const std::string& value);
  WriterCounts counts() const;
  const std::string& path() const { return opt_.path; }

 private:
  void createSchema();
  void prepare();
  void threadMain();
  std::unique_lock<std::mutex> lockFromCaller() const;

  // Drain pass (mu_ held): every buffer, then strings; commits when a transaction is big or old.
  // Returns the number of records drained.
  size_t pass();
  void handle(core::ThreadBuffer& b, BufferState& st, const Record& r);
  void handleSpan(core::ThreadBuffer& b, BufferState& st, const core::SpanRecord& s);
  void handleArgs(BufferState& st, const core::ArgsRecord& a);
  TrackState& trackState(TrackId id);
  TrackId counterTrack(StringId name);
  void noteTime(int64_t start, int64_t end) {
    firstNs_ = std::min(firstNs_, start);
    lastNs_ = std::max(lastNs_, end);
  }

  void writeChunk(TrackState& t);
  void writePendingChunks();  // and the pending memory rows
  void writePendingMemory();
  void writeStrings();

  void ensureTxn();
  void rowWritten() {
    if (++txnRows_ >= opt_.transaction_rows) commit();
  }
  void commit();

  void finish();  // everything close() writes after the last pass
  std::vector<sql::Stmt*> statements() {
    return {&insSpan_,    &insSpanBatch_, &insChunk_,       &insArg_,  &insInstant_,
            &insCounter_, &insMemory_,    &insMemoryBatch_, &insFlow_, &insString_};
  }
  void releaseConnection() {
    for (sql::Stmt* s : statements()) *s = sql::Stmt();
    db_ = sql::Db();
  }

  template <typename Fn>
  void guarded(Fn&& fn);  // runs fn, keeping the first error; rethrows it

  core::Session& session_;
  ShardOptions opt_;
  const int64_t origin_;

  sql::Db db_;
  sql::Stmt insSpan_, insSpanBatch_, insChunk_, insArg_, insInstant_, insCounter_, insMemory_,
      insMemoryBatch_, insFlow_, insString_;
  std::vector<core::MemoryRecord> pendingMemory_;  // up to kRowBatch rows not yet inserted

  mutable std::mutex mu_;  // guards everything below (and the connection)
  // Callers blocked on mu_, so that a busy drain thread lets them in.
  mutable std::atomic<int> waiters_{0};
  std::condition_variable cv_;
  std::thread thread_;
  bool stop_ = false;
  bool closed_ = false;
  std::exception_ptr error_;

  bool inTxn_ = false;
  size_t txnRows_ = 0;
  int64_t txnStartNs_ = 0;
  int64_t lastChunkFlushNs_ = core::nowNs();

  int64_t nextSpanId_ = 1;
  size_t stringsPersisted_ = 0;
  std::vector<std::unique_ptr<TrackState>> tracks_;                     // by track id (dense)
  std::unordered_map<TrackId, std::unique_ptr<TrackState>> farTracks_;  // ids too large for tracks_
  std::unordered_map<uint32_t, BufferState> buffers_;                   // by ThreadBuffer::index
  std::unordered_map<StringId, TrackId> counterTracks_;
  // A pending chunk in span order; SpanOrder::id is the arrival index until ids are handed out.
  std::vector<chunks::SpanOrder> keys_;

  FlatMap<Aggregate> aggregates_{1024};  // key: (name << 8 | category) + 1
  FlatMap<int64_t> childTime_{1024};     // parent EventId -> summed child durations

  int64_t firstNs_ = std::numeric_limits<int64_t>::max();
  int64_t lastNs_ = std::numeric_limits<int64_t>::min();
  WriterCounts counts_;
  uint64_t clipped_ = 0;
  uint64_t orphanArgs_ = 0;
  std::map<std::string, std::pair<int64_t, Severity>> userStats_;
  std::map<std::string, std::string> userMeta_;
};

// ---------------------------------------------------------------------------------------------
// construction

ShardWriter::Impl::Impl(core::Session& session, ShardOptions options)
    : session_(session),
      opt_(std::move(options)),
      origin_(opt_.origin_ns != 0 ? opt_.origin_ns : core::nowNs()) {
  if (opt_.path.empty()) throw TraceError("shard writer: no output path given");
  if (opt_.host.empty()) opt_.host = hostName();
  if (opt_.pid == 0) opt_.pid = static_cast<int64_t>(getpid());
  if (opt_.flush_interval_ms <= 0) opt_.flush_interval_ms = 1;
  if (opt_.chunk_rows == 0) opt_.chunk_rows = chunks::kChunkRows;
  if (opt_.transaction_rows == 0) opt_.transaction_rows = 1;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) removeIfExists(opt_.path + suffix);
  db_ = sql::Db(opt_.path, sql::Db::Mode::kCreatePrivate);  // 0600, never through a symlink
  createSchema();
  prepare();
}

ShardWriter::Impl::~Impl() {
  try {
    close();
  } catch (...) {
    // close() already kept the error; a destructor must not throw.
  }
}

void ShardWriter::Impl::createSchema() {
  // The schema and meta go into the main file before WAL is switched on, so even a copy of the
  // main file alone, taken while recording, reads as "incomplete" rather than "not a trace".
  // synchronous=OFF: a shard is rewritten from scratch by a new run; an OS crash mid-run loses
  // the shard either way, and an application crash cannot corrupt a WAL database.
  db_.exec("PRAGMA synchronous = OFF");
  db_.exec("BEGIN");
  for (const auto& sql : schema::createStatements()) db_.exec(sql);
  sql::Stmt meta(db_, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)");
  auto put = [&](const char* k, const std::string& v) {
    meta.bind(1, std::string_view(k)).bind(2, std::string_view(v));
    meta.run();
  };
  put("magic", schema::kMagic);
  put("schema_version", std::to_string(schema::kSchemaVersion));
  put("kind", "shard");
  put("complete", "0");
  put("origin_ns", std::to_string(origin_));
  put("world_size", std::to_string(opt_.world_size));
  put("command", opt_.command);
  put("created_unix_s", std::to_string(static_cast<int64_t>(std::time(nullptr))));
  put("tracerun_version", TRACERUN_VERSION);
  meta = sql::Stmt();
  // The ranks row goes in now (times filled at close), so a shard whose process died still says
  // which rank wrote it and with what clock offset.
  sql::Stmt rank(db_,
                 "INSERT INTO ranks (rank, host, pid, clock_offset_ns, start_ns, end_ns) "
                 "VALUES (?, ?, ?, ?, NULL, NULL)");
  rank.bind(1, int64_t{opt_.rank}).bind(2, std::string_view(opt_.host)).bind(3, opt_.pid);
  rank.bind(4, opt_.clock_offset_ns);
  rank.run();
  rank = sql::Stmt();
  db_.exec("COMMIT");
  db_.exec("PRAGMA user_version = " + std::to_string(schema::kSchemaVersion));
  db_.exec(opt_.wal ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode = MEMORY");
}

void ShardWriter::Impl::prepare() {
  const std::string insertSpans =
      "INSERT INTO spans (id, track, start_ns, dur_ns, packed, detail, seq) VALUES ";
  const std::string spanRow = "(?, ?, ?, ?, ?, ?, ?)";
  insSpan_ = sql::Stmt(db_, insertSpans + spanRow);
  insSpanBatch_ = sql::Stmt(db_, insertSpans + repeatedRows(spanRow, kRowBatch));
  insChunk_ = sql::Stmt(db_,
                        "INSERT INTO span_chunks (track, min_start_ns, max_end_ns, first_id, "
                        "last_id) VALUES (?, ?, ?, ?, ?)");
  insArg_ = sql::Stmt(db_, "INSERT INTO args (span, key, value) VALUES (?, ?, ?)");
  insInstant_ = sql::Stmt(db_,
                          "INSERT INTO instants (track, ts_ns, category, name, detail, value) "
                          "VALUES (?, ?, ?, ?, ?, ?)");
  insCounter_ = sql::Stmt(db_, "INSERT INTO counters (track, ts_ns, value) VALUES (?, ?, ?)");
  const std::string insertMemory =
      "INSERT INTO memory (rank, ts_ns, device_type, device_index, ptr, bytes, total, category, "
      "op, "
      "scope) VALUES ";
  const std::string memoryRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  insMemory_ = sql::Stmt(db_, insertMemory + memoryRow);
  insMemoryBatch_ = sql::Stmt(db_, insertMemory + repeatedRows(memoryRow, kRowBatch));
  pendingMemory_.reserve(kRowBatch);
  insFlow_ = sql::Stmt(db_,
                       "INSERT INTO flows (kind, src_track, src_ts_ns, dst_track, dst_ts_ns) "
                       "VALUES (?, ?, ?, ?, ?)");
  insString_ = sql::Stmt(db_, "INSERT OR REPLACE INTO strings (id, value) VALUES (?, ?)");
}

void ShardWriter::Impl::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || thread_.joinable()) return;
  thread_ = std::thread([this] { threadMain(); });
}

void ShardWriter::Impl::threadMain() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto interval = std::chrono::milliseconds(opt_.flush_interval_ms);
  size_t drained = 0;
  while (!stop_) {
    if (drained < kBusyPassRecords) {
      cv_.wait_for(lock, interval, [this] { return stop_; });
    } else if (waiters_.load(std::memory_order_relaxed) > 0) {
      // Busy, but flush() or close() is waiting for the lock: let it in.
      cv_.wait_for(lock, std::chrono::milliseconds(1), [this] { return stop_; });
    }
    if (stop_ || error_) {
      drained = 0;
      continue;
    }
    try {
      drained = pass();
    } catch (...) {
      error_ = std::current_exception();  // kept for flush()/close(); writing stops here
    }
  }
}

template <typename Fn>
void ShardWriter::Impl::guarded(Fn&& fn) {
  if (error_) std::rethrow_exception(error_);
  try {
    fn();
  } catch (...) {
    error_ = std::current_exception();
    throw;
  }
}

// ---------------------------------------------------------------------------------------------
// drain pass

size_t ShardWriter::Impl::pass() {
  size_t drained = 0;
  session_.forEachBuffer([&](core::ThreadBuffer& b) {
    BufferState& st = buffers_[b.index];
    drained += b.ring.drain([&](const Record* r, size_t n) {
      for (size_t i = 0; i < n; ++i) handle(b, st, r[i]);
    });
  });
  // Chunks of quiet tracks would otherwise wait for chunk_rows spans: write them out at least
  // every kMaxTxnAgeNs, so a process that dies loses at most about that much.
  const int64_t now = core::nowNs();
  if (now - lastChunkFlushNs_ > kMaxTxnAgeNs) {
    writePendingChunks();
    lastChunkFlushNs_ = now;
  }
  if (session_.strings().size() > stringsPersisted_) writeStrings();
  if (inTxn_ && now - txnStartNs_ > kMaxTxnAgeNs) commit();
  return drained;
}

TrackState& ShardWriter::Impl::trackState(TrackId id) {
  constexpr TrackId kDenseLimit = 1u << 16;
  if (id < kDenseLimit) {
    if (id >= tracks_.size()) tracks_.resize(id + 1);
    auto& slot = tracks_[id];
    if (!slot) {
      slot = std::make_unique<TrackState>();
      slot->id = id;
    }
    return *slot;
  }
  auto& slot = farTracks_[id];
  if (!slot) {
    slot = std::make_unique<TrackState>();
    slot->id = id;
  }
  return *slot;
}

TrackId ShardWriter::Impl::counterTrack(StringId name) {
  auto it = counterTracks_.find(name);
  if (it != counterTracks_.end()) return it->second;
  const TrackId id =
      session_.tracks().findOrAdd(core::TrackKind::kCounter, 0, session_.strings().get(name));
  counterTracks_.emplace(name, id);
  return id;
}

void ShardWriter::Impl::handle(core::ThreadBuffer& b, BufferState& st, const Record& r) {
  switch (r.kind()) {
    case RecordKind::kSpan:
      handleSpan(b, st, r.as<core::SpanRecord>());
      return;
    case RecordKind::kArgs:
      handleArgs(st, r.as<core::ArgsRecord>());
      return;
    case RecordKind::kInstant: {
      const auto s = r.as<core::InstantRecord>();
      const TrackId track = s.track ? s.track : b.track;
      const int64_t ts = s.ts_ns - origin_;
      ensureTxn();
      insInstant_.bind(1, int64_t{track}).bind(2, ts).bind(3, int64_t(s.category));
      insInstant_.bind(4, int64_t{s.name});
      if (s.detail) {
        insInstant_.bind(5, int64_t{s.detail});
      } else {
        insInstant_.bindNull(5);
      }
      insInstant_.bind(6, s.value);
      insInstant_.run();
      ++trackState(track).events;
      noteTime(ts, ts);
      ++counts_.instants;
      rowWritten();
      return;
    }
    case RecordKind::kCounter: {
      const auto s = r.as<core::CounterRecord>();
      const TrackId track = counterTrack(s.name);
      const int64_t ts = s.ts_ns - origin_;
      ensureTxn();
      insCounter_.bind(1, int64_t{track}).bind(2, ts).bind(3, s.value);
      insCounter_.run();
      ++trackState(track).events;
      noteTime(ts, ts);
      ++counts_.counters;
      rowWritten();
      return;
    }
    case RecordKind::kMemory: {
      const auto s = r.as<core::MemoryRecord>();
      const int64_t ts = s.ts_ns - origin_;
      ensureTxn();
      pendingMemory_.push_back(s);
      if (pendingMemory_.size() == kRowBatch) writePendingMemory();
      noteTime(ts, ts);
      ++counts_.memory;
      rowWritten();
      return;
    }
    case RecordKind::kFlow: {
      const auto s = r.as<core::FlowRecord>();
      ensureTxn();
      insFlow_.bind(1, int64_t(s.flow)).bind(2, int64_t{s.src_track ? s.src_track : b.track});
      insFlow_.bind(3, s.src_ts_ns - origin_);
      insFlow_.bind(4, int64_t{s.dst_track ? s.dst_track : b.track});
      insFlow_.bind(5, s.dst_ts_ns - origin_);
      insFlow_.run();
      ++counts_.flows;
      rowWritten();
      return;
    }
    default:
      ++counts_.unknown;
      return;
  }
}

void ShardWriter::Impl::handleSpan(core::ThreadBuffer& b, BufferState& st,
                                   const core::SpanRecord& s) {
  const TrackId track = s.track ? s.track : b.track;
  TrackState& t = trackState(track);
  // A full chunk is written only when the next span arrives, so the ArgsRecord that follows the
  // last span of a chunk still finds it pending.
  if (t.chunk.size() >= opt_.chunk_rows) writeChunk(t);

  int64_t dur = s.end_ns - s.start_ns;
  if (dur < 0) {
    dur = 0;
    ++clipped_;
  }
  // Self time: children complete before their parent, so their durations are summed under the
  // parent's id and taken out when the parent arrives.
  if (s.parent != 0) childTime_[s.parent] += dur;
  const int64_t children = s.id != 0 ? childTime_.take(s.id) : 0;
  // spans.packed holds 4 bits of category: a value no enum names is stored (and counted) as
  // kOther rather than aliased onto another category.
  const auto category = static_cast<uint8_t>(
      s.category < core::Category::kCount ? s.category : core::Category::kOther);
  Aggregate& agg = aggregates_[((uint64_t{s.name} << 8) | uint64_t{category}) + 1];
  ++agg.count;
  agg.total += dur;
  agg.self += std::max<int64_t>(0, dur - children);

  PendingSpan p;
  p.start = s.start_ns - origin_;
  p.end = p.start + dur;
  p.seq = s.seq;
  p.name = s.name;
  p.detail = s.detail;
  p.depth = s.depth;
  p.category = category;
  p.argsBegin = static_cast<uint32_t>(t.chunkArgs.size());
  t.chunk.push_back(p);
  ++t.events;
  t.longestSpan = std::max(t.longestSpan, dur);
  noteTime(p.start, p.end);
  ++counts_.spans;

  st.lastSpan = s.id;
  st.lastTrack = &t;
  st.lastEpoch = t.epoch;
  st.lastIndex = static_cast<uint32_t>(t.chunk.size() - 1);
}

void ShardWriter::Impl::handleArgs(BufferState& st, const core::ArgsRecord& a) {
  TrackState* t = st.lastTrack;
  if (a.owner == 0 || a.owner != st.lastSpan || !t || t->epoch != st.lastEpoch) {
    ++orphanArgs_;  // capture must push a span and its args with tryPushPair
    return;
  }
  PendingSpan& p = t->chunk[st.lastIndex];
  // Several ArgsRecords may follow one span; they stay contiguous because nothing else is added to
  // this track's chunkArgs in between unless another span arrived (which resets lastSpan).
  if (p.argsBegin + p.argsCount != t->chunkArgs.size()) {
    ++orphanArgs_;
    return;
  }
  const int n = std::min<int>(a.count, 3);
  for (int i = 0; i < n; ++i) t->chunkArgs.push_back(a.args[i]);
  p.argsCount = static_cast<uint16_t>(p.argsCount + n);
  counts_.args += static_cast<uint64_t>(n);
}

// ---------------------------------------------------------------------------------------------
// span chunks

void ShardWriter::Impl::writeChunk(TrackState& t) {
  if (t.chunk.empty()) return;
  // The chunk contract (span_chunks.h): spans in span order, ids consecutive in that order.
  keys_.clear();
  for (size_t i = 0; i < t.chunk.size(); ++i) {
    keys_.push_back({t.chunk[i].start, t.chunk[i].depth, static_cast<int64_t>(i)});
  }
  std::sort(keys_.begin(), keys_.end());
  ensureTxn();
  chunks::ChunkExtent extent;
  const int64_t firstId = nextSpanId_;
  // Full batches of kRowBatch rows through one statement, the rest one by one.
  for (size_t first = 0; first < keys_.size(); first += kRowBatch) {
    const size_t n = std::min(kRowBatch, keys_.size() - first);
    for (size_t i = 0; i < n; ++i) {
      const PendingSpan& p = t.chunk[static_cast<size_t>(keys_[first + i].id)];
      const int64_t id = chunks::idAt(firstId, static_cast<int64_t>(first + i));
      bindSpan(n == kRowBatch ? insSpanBatch_ : insSpan_,
               n == kRowBatch ? static_cast<int>(7 * i) : 0, id, t.id, p);
      if (n != kRowBatch) insSpan_.run();
      for (uint32_t a = 0; a < p.argsCount; ++a) {
        const auto& arg = t.chunkArgs[p.argsBegin + a];
        insArg_.bind(1, id).bind(2, int64_t{arg.key}).bind(3, arg.value);
        insArg_.run();
      }
      extent.add(t.id, id, {p.start, p.depth, id}, p.end);
    }
    if (n == kRowBatch) insSpanBatch_.run();
  }
  nextSpanId_ = extent.last_id + 1;
  insChunk_.bind(1, int64_t{t.id}).bind(2, extent.min_start).bind(3, extent.max_end);
  insChunk_.bind(4, extent.first_id).bind(5, extent.last_id);
  insChunk_.run();
  t.longestChunk = std::max(t.longestChunk, extent.width());
  txnRows_ += t.chunk.size() + t.chunkArgs.size();
  t.chunk.clear();
  t.chunkArgs.clear();
  ++t.epoch;
  rowWritten();
}

void ShardWriter::Impl::writePendingChunks() {
  for (auto& t : tracks_) {
    if (t) writeChunk(*t);
  }
  for (auto& [id, t] : farTracks_) writeChunk(*t);
  writePendingMemory();
}

void ShardWriter::Impl::writePendingMemory() {
  if (pendingMemory_.empty()) return;
  ensureTxn();
  const bool full = pendingMemory_.size() == kRowBatch;
  for (size_t i = 0; i < pendingMemory_.size(); ++i) {
    const core::MemoryRecord& m = pendingMemory_[i];
    bindMemory(full ? insMemoryBatch_ : insMemory_, full ? static_cast<int>(10 * i) : 0, opt_.rank,
               m.ts_ns - origin_, m);
    if (!full) insMemory_.run();
  }
  if (full) insMemoryBatch_.run();
  pendingMemory_.clear();
}

void ShardWriter::Impl::writeStrings() {
  const auto fresh = session_.strings().since(stringsPersisted_);
  ensureTxn();
  for (const auto& s : fresh) {
    insString_.bind(1, static_cast<int64_t>(stringsPersisted_++)).bind(2, std::string_view(s));
    insString_.run();
  }
  rowWritten();
}

// ---------------------------------------------------------------------------------------------
// transactions

void ShardWriter::Impl::ensureTxn() {
  if (inTxn_) return;
  db_.exec("BEGIN");
  inTxn_ = true;
  txnRows_ = 0;
  txnStartNs_ = core::nowNs();
}

void ShardWriter::Impl::commit() {
  if (!inTxn_) return;
  writePendingMemory();  // a commit holds every memory row handled before it
  db_.exec("COMMIT");
  inTxn_ = false;
  txnRows_ = 0;
}

// ---------------------------------------------------------------------------------------------
// flush and close

std::unique_lock<std::mutex> ShardWriter::Impl::lockFromCaller() const {
  waiters_.fetch_add(1, std::memory_order_relaxed);
  std::unique_lock<std::mutex> lock(mu_);
  waiters_.fetch_sub(1, std::memory_order_relaxed);
  return lock;
}

void ShardWriter::Impl::flush() {
  auto lock = lockFromCaller();
  if (closed_) {
    if (error_) std::rethrow_exception(error_);
    return;
  }
  guarded([&] {
    pass();
    writePendingChunks();
    commit();
  });
}

void ShardWriter::Impl::drain() {
  auto lock = lockFromCaller();
  if (closed_) return;
  guarded([&] { pass(); });
}

void ShardWriter::Impl::close() {
  {
    auto lock = lockFromCaller();
    if (closed_) {
      if (error_) std::rethrow_exception(error_);
      return;
    }
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  try {
    guarded([&] { finish(); });
  } catch (...) {
    // Leave the file as it is (complete = 0); release the connection, then report.
    releaseConnection();
    throw;
  }
}

void ShardWriter::Impl::finish() {
  pass();
  writePendingChunks();
  if (session_.strings().size() > stringsPersisted_) writeStrings();
  ensureTxn();

  // tracks: every registered track, plus any id a record named that was never registered.
  sql::Stmt insTrack(db_,
                     "INSERT OR REPLACE INTO tracks (id, rank, kind, tid, name, event_count, "
                     "longest_span_ns, longest_chunk_ns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  auto putTrack = [&](TrackId id, core::TrackKind kind, int64_t tid, const std::string& name) {
    const TrackState* t = nullptr;
    if (id < tracks_.size()) {
      t = tracks_[id].get();
    } else if (auto it = farTracks_.find(id); it != farTracks_.end()) {
      t = it->second.get();
    }
    insTrack.bind(1, int64_t{id}).bind(2, int64_t{opt_.rank}).bind(3, int64_t(kind));
    insTrack.bind(4, tid).bind(5, std::string_view(name));
    insTrack.bind(6, t ? t->events : 0).bind(7, t ? t->longestSpan : 0);
    insTrack.bind(8, t ? t->longestChunk : 0);
    insTrack.run();
  };
  std::vector<bool> registered;
  for (const auto& info : session_.tracks().since(0)) {
    putTrack(info.id, info.kind, info.tid, info.name);
    if (info.id >= registered.size()) registered.resize(info.id + 1);
    registered[info.id] = true;
  }
  auto putUnregistered = [&](const TrackState& t) {
    if (t.id == 0 || (t.id < registered.size() && registered[t.id])) return;
    if (t.events == 0) return;
    putTrack(t.id, core::TrackKind::kAsync, 0, "track " + std::to_string(t.id));
  };
  for (const auto& t : tracks_) {
    if (t) putUnregistered(*t);
  }
  for (const auto& [id, t] : farTracks_) putUnregistered(*t);

  sql::Stmt insRank(db_,
                    "INSERT OR REPLACE INTO ranks (rank, host, pid, clock_offset_ns, start_ns, "
                    "end_ns) VALUES (?, ?, ?, ?, ?, ?)");
  insRank.bind(1, int64_t{opt_.rank}).bind(2, std::string_view(opt_.host)).bind(3, opt_.pid);
  insRank.bind(4, opt_.clock_offset_ns);
  if (firstNs_ <= lastNs_) {
    insRank.bind(5, firstNs_).bind(6, lastNs_);
  } else {
    insRank.bindNull(5).bindNull(6);
  }
  insRank.run();

  sql::Stmt insAgg(db_,
                   "INSERT INTO aggregates (rank, name, category, count, total_ns, self_ns) "
                   "VALUES (?, ?, ?, ?, ?, ?)");
  aggregates_.forEach([&](uint64_t key, const Aggregate& a) {
    const uint64_t k = key - 1;
    insAgg.bind(1, int64_t{opt_.rank}).bind(2, static_cast<int64_t>(k >> 8));
    insAgg.bind(3, static_cast<int64_t>(k & 0xff)).bind(4, a.count).bind(5, a.total);
    insAgg.bind(6, a.self);
    insAgg.run();
  });

  sql::Stmt insStat(db_,
                    "INSERT OR REPLACE INTO stats (rank, name, value, severity) VALUES (?, ?, ?, "
                    "?)");
  auto putStat = [&](const std::string& name, int64_t value, Severity sev) {
    insStat.bind(1, int64_t{opt_.rank}).bind(2, std::string_view(name)).bind(3, value);
    insStat.bind(4, int64_t(sev));
    insStat.run();
  };
  const auto dropped = static_cast<int64_t>(session_.dropped());
  putStat("dropped_events", dropped, dropped > 0 ? Severity::kError : Severity::kInfo);
  putStat("unknown_records", static_cast<int64_t>(counts_.unknown),
          counts_.unknown > 0 ? Severity::kWarning : Severity::kInfo);
  if (clipped_ > 0) putStat("clipped_spans", static_cast<int64_t>(clipped_), Severity::kWarning);
  if (orphanArgs_ > 0) {
    putStat("orphan_args", static_cast<int64_t>(orphanArgs_), Severity::kWarning);
  }
  // Capture sources' stats (Session::setStat), then the writer's own callers' (which win).
  static_assert(static_cast<int>(core::StatSeverity::kError) == static_cast<int>(Severity::kError));
  for (const auto& st : session_.stats()) {
    putStat(st.name, st.value, static_cast<Severity>(static_cast<int>(st.severity)));
  }
  for (const auto& [name, v] : userStats_) putStat(name, v.first, v.second);

  sql::Stmt insMeta(db_, "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)");
  for (const auto& [key, value] : userMeta_) {
    insMeta.bind(1, std::string_view(key)).bind(2, std::string_view(value));
    insMeta.run();
  }
  commit();

  // The level-of-detail summaries over the spans just written (summaries.h), when asked for.
  if (opt_.summaries) {
    db_.exec("BEGIN");
    lod::build(db_, {});
    db_.exec(std::string("INSERT OR REPLACE INTO meta (key, value) VALUES ('summaries', '") +
             lod::kSummariesVersion + "')");
    db_.exec("COMMIT");
  }

  // Indexes once, at the end; then mark the file complete, last of all.
  db_.exec("BEGIN");
  for (const auto& sql : schema::indexStatements()) db_.exec(sql);
  if (opt_.complete) db_.exec("UPDATE meta SET value = '1' WHERE key = 'complete'");
  db_.exec("COMMIT");
  db_.exec("PRAGMA user_version = " + std::to_string(schema::kSchemaVersion));

  insTrack = sql::Stmt();
  insRank = sql::Stmt();
  insAgg = sql::Stmt();
  insStat = sql::Stmt();
  insMeta = sql::Stmt();
  for (sql::Stmt* s : statements()) *s = sql::Stmt();
  db_.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db_.exec("PRAGMA journal_mode = DELETE");  // one self-contained file from here on
  db_ = sql::Db();
}

void ShardWriter::Impl::setStat(const std::string& name, int64_t value, Severity severity) {
  auto lock = lockFromCaller();
  userStats_[name] = {value, severity};
}

void ShardWriter::Impl::setMeta(const std::string& key, const std::string& value) {
  auto lock = lockFromCaller();
  userMeta_[key] = value;
}

WriterCounts ShardWriter::Impl::counts() const {
  auto lock = lockFromCaller();
  return counts_;
}

// ---------------------------------------------------------------------------------------------
// ShardWriter forwarding

ShardWriter::ShardWriter(core::Session& session, ShardOptions options)
    : impl_(std::make_unique<Impl>(session, std::move(options))) {}
ShardWriter::~ShardWriter() = default;
void ShardWriter::start() {
  impl_->start();
}
void ShardWriter::flush() {
  impl_->flush();
}
void ShardWriter::drain() {
  impl_->drain();
}
void ShardWriter::close() {
  impl_->close();
}
void ShardWriter::setStat(const std::string& name, int64_t value, Severity severity) {
  impl_->setStat(name, value, severity);
}
void ShardWriter::setMeta(const std::string& key, const std::string& value) {
  impl_->setMeta(key, value);
}
WriterCounts ShardWriter::counts() const {
  return impl_->counts();
}
const std::string& ShardWriter::path() const {
  return impl_->path();
}

}  // namespace tracerun::trace
