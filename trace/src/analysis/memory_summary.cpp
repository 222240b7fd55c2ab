// The stored per-category memory summary (see memory_summary.h): its encoding, writing (replayed
// through analyzeMemory and buildMemorySeries, never classified here) and reading back into
// MemorySeries. Not the series' reduction (memory_live.cpp) and not drawing.
//
// Sections: encoding · replay · writing · reading
#include "tracerun/trace/analysis/memory_summary.h"

#include "tracerun/trace/schema.h"

#include <sqlite3.h>

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <thread>

#include "span_select.h"
#include "tracerun/trace/error.h"

namespace tracerun::trace::analysis {

namespace {

using core::MemoryCategory;

// ---------------------------------------------------------------------------------------------
// encoding

void putVarint(std::string& out, int64_t v) {
  uint64_t z = (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);  // zigzag
  while (z >= 0x80) {
    out.push_back(static_cast<char>((z & 0x7f) | 0x80));
    z >>= 7;
  }
  out.push_back(static_cast<char>(z));
}

struct Cursor {
  const unsigned char* p;
  const unsigned char* end;
  bool ok = true;

  int64_t varint() {
    uint64_t z = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (p == end) break;
      const unsigned char b = *p++;
      z |= static_cast<uint64_t>(b & 0x7f) << shift;
      if ((b & 0x80) == 0) return static_cast<int64_t>(z >> 1) ^ -static_cast<int64_t>(z & 1);
    }
    ok = false;
    return 0;
  }
  uint8_t byte() {
    if (p == end) {
      ok = false;
      return 0;
    }
    return *p++;
  }
};

// ---------------------------------------------------------------------------------------------
// replay

struct RankSummary {
  int rank = 0;
  std::vector<MemorySeries> series;
  std::vector<MemoryCategory> categories;
  bool any = false;  // the rank has memory events
};

RankSummary replayRank(const TraceReader& reader, int rank, const std::atomic<bool>* cancel) {
  MemoryOptions mo;
  mo.rank = rank;
  mo.timeline_points = 0;
  mo.top_allocations = 0;
  mo.keep_categories = true;
  mo.replay = false;  // buildMemorySeries replays (peak included)
  MemoryAnalysis analysis = analyzeMemory(reader, mo);
  RankSummary out;
  out.rank = rank;
  auto it = analysis.categories.find(rank);
  if (it == analysis.categories.end() || (cancel != nullptr && cancel->load())) return out;
  out.any = true;
  out.series = buildMemorySeries(reader, analysis, rank, cancel);
  // By device (type, index), as MemoryAnalysis::devices.
  std::stable_sort(out.series.begin(), out.series.end(),
                   [](const MemorySeries& a, const MemorySeries& b) {
                     return a.device_type != b.device_type ? a.device_type < b.device_type
                                                           : a.device_index < b.device_index;
                   });
  out.categories = std::move(it->second);
  return out;
}

// ---------------------------------------------------------------------------------------------
// writing

struct RawDb {
  struct Close {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
  };
  struct Finalize {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  using Stmt = std::unique_ptr<sqlite3_stmt, Finalize>;
  std::unique_ptr<sqlite3, Close> db;
  std::string path;

  RawDb(const std::string& p, int flags) : path(p) {
    sqlite3* raw = nullptr;
    const int rc = sqlite3_open_v2(p.c_str(), &raw, flags, nullptr);
    db.reset(raw);
    if (rc != SQLITE_OK) fail("cannot open");
    sqlite3_busy_timeout(raw, 5000);
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw TraceError(path + ": " + what + ": " + (db ? sqlite3_errmsg(db.get()) : "out of memory"));
  }
  void exec(const std::string& sql) const {
    if (sqlite3_exec(db.get(), sql.c_str(), nullptr, nullptr, nullptr) != SQLITE_OK) fail(sql);
  }
  Stmt prepare(const std::string& sql) const {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db.get(), sql.c_str(), -1, &s, nullptr) != SQLITE_OK) fail(sql);
    return Stmt(s);
  }
  void run(const Stmt& s) const {
    if (sqlite3_step(s.get()) != SQLITE_DONE) fail("writing the memory summary");
    sqlite3_reset(s.get());
    sqlite3_clear_bindings(s.get());
  }
};

void bindBlob(const RawDb::Stmt& s, int i, const std::string& b) {
  sqlite3_bind_blob(s.get(), i, b.data(), static_cast<int>(b.size()), SQLITE_TRANSIENT);
}

void writeRank(const RawDb& db, const RawDb::Stmt& insBlock, const RawDb::Stmt& insAlloc,
               const RankSummary& r) {
  if (!r.any) return;
  std::string levels, events;
  for (const MemorySeries& s : r.series) {
    for (size_t b = 0; b < s.block_start.size(); ++b) {
      const size_t i0 = b * MemorySeries::kBlock;
      const size_t i1 = std::min(s.size(), i0 + MemorySeries::kBlock);
      const Levels end = b + 1 < s.block_start.size() ? s.block_start[b + 1] : s.levelsAfter(i1);
      levels.clear();
      for (const Levels* l : {&s.block_lo[b], &s.block_hi[b], &end}) {
        for (int64_t v : *l) putVarint(levels, v);
      }
      events.clear();
      int64_t prev = s.ts[i0];
      for (size_t i = i0; i < i1; ++i) {
        putVarint(events, s.ts[i] - prev);  // non-decreasing: a small count of ns
        prev = s.ts[i];
        putVarint(events, s.delta[i]);
        events.push_back(static_cast<char>(s.stack[i]));
      }
      sqlite3_stmt* st = insBlock.get();
      sqlite3_bind_int64(st, 1, s.rank);
      sqlite3_bind_int64(st, 2, s.device_type);
      sqlite3_bind_int64(st, 3, s.device_index);
      sqlite3_bind_int64(st, 4, static_cast<int64_t>(b));
      sqlite3_bind_int64(st, 5, s.ts[i0]);
      sqlite3_bind_int64(st, 6, s.ts[i1 - 1]);
      sqlite3_bind_int64(st, 7, static_cast<int64_t>(i1 - i0));
      bindBlob(insBlock, 8, levels);
      bindBlob(insBlock, 9, events);
      db.run(insBlock);
    }
  }
  std::string cats;
  cats.reserve(r.categories.size());
  for (MemoryCategory c : r.categories) cats.push_back(static_cast<char>(c));
  sqlite3_bind_int64(insAlloc.get(), 1, r.rank);
  bindBlob(insAlloc, 2, cats);
  db.run(insAlloc);
}

// ---------------------------------------------------------------------------------------------
// reading

MemorySeries& seriesFor(std::vector<MemorySeries>& out, int rank, int type, int index) {
  if (out.empty() || out.back().rank != rank || out.back().device_type != type ||
      out.back().device_index != index) {
    MemorySeries s;
    s.rank = rank;
    s.device_type = type;
    s.device_index = index;
    out.push_back(std::move(s));
  }
  return out.back();
}

// The peak (memory_live.h: the highest total after an event, the first such) from the blocks'
// maxima, then a replay of the one block that reaches it.
void findPeak(MemorySeries& s) {
  size_t best = s.block_hi.size();
  for (size_t b = 0; b < s.block_hi.size(); ++b) {
    if (s.block_hi[b].back() > s.peak_bytes) {
      s.peak_bytes = s.block_hi[b].back();
      best = b;
    }
  }
  if (best == s.block_hi.size()) return;
  Levels l = s.block_start[best];
  const size_t i1 = std::min(s.size(), (best + 1) * MemorySeries::kBlock);
  for (size_t i = best * MemorySeries::kBlock; i < i1; ++i) {
    for (size_t k = s.stack[i]; k < l.size(); ++k) l[k] = satAdd(l[k], s.delta[i]);
    if (l.back() != s.peak_bytes) continue;
    s.peak_ts_ns = s.ts[i];
    for (int k = 0; k < kStackCount; ++k) {
      at(s.at_peak, kStackOrder[k]) = l[static_cast<size_t>(k)] - (k > 0 ? l[k - 1] : 0);
    }
    return;
  }
}

}  // namespace

const MemorySeries* MemoryCategorySummary::primary(int rank) const {
  // MemoryAnalysis::primary's rule, applied to the rank's devices.
  MemoryAnalysis devices;
  std::vector<const MemorySeries*> of;
  for (const MemorySeries& s : series) {
    if (s.rank != rank) continue;
    DeviceMemory d;
    d.rank = s.rank;
    d.device_type = s.device_type;
    d.device_index = s.device_index;
    devices.devices.push_back(d);
    of.push_back(&s);
  }
  const DeviceMemory* p = devices.primary(rank);
  return p == nullptr ? nullptr : of[static_cast<size_t>(p - devices.devices.data())];
}

MemoryCategorySummary replayMemorySummary(const TraceReader& reader, int rank,
                                          const std::atomic<bool>* cancel) {
  MemoryCategorySummary out;
  for (const RankInfo& r : reader.ranks()) {
    if (rank >= 0 && r.rank != rank) continue;
    if (cancel != nullptr && cancel->load()) break;
    RankSummary s = replayRank(reader, r.rank, cancel);
    if (!s.any) continue;
    for (MemorySeries& x : s.series) out.series.push_back(std::move(x));
    out.categories[r.rank] = std::move(s.categories);
  }
  return out;
}

void writeMemorySummary(const std::string& path) {
  std::vector<int> ranks;
  {
    const TraceReader reader = TraceReader::open(path);
    for (const RankInfo& r : reader.ranks()) ranks.push_back(r.rank);
  }
  const RawDb db(path, SQLITE_OPEN_READWRITE);
  db.exec("BEGIN");
  db.exec(std::string("DELETE FROM meta WHERE key = '") + kMemorySummaryMetaKey + "'");
  db.exec("DROP TABLE IF EXISTS memory_category_blocks");
  db.exec("DROP TABLE IF EXISTS memory_category_allocations");
  for (const std::string& sql : schema::createStatements()) {  // the schema owns their columns
    if (sql.rfind("CREATE TABLE memory_category_", 0) == 0) db.exec(sql);
  }
  db.exec("COMMIT");
  const auto insBlock = db.prepare(
      "INSERT INTO memory_category_blocks (rank, device_type, device_index, block, first_ts_ns, "
      "last_ts_ns, count, levels, events) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
  const auto insAlloc =
      db.prepare("INSERT INTO memory_category_allocations (rank, categories) VALUES (?, ?)");
  // Ranks in waves of one per core, each replayed through its own reader (a SQLite connection is
  // per thread) while this connection holds no lock, then written in one transaction: the memory
  // held is one wave's series. The meta key comes last: a partial summary is never read.
  const size_t n =
      std::min<size_t>(ranks.size(), std::max(1u, std::thread::hardware_concurrency()));
  for (size_t w = 0; w < ranks.size(); w += n) {
    const size_t count = std::min(n, ranks.size() - w);
    std::vector<RankSummary> done(count);
    std::vector<std::string> errors(count);
    std::atomic<size_t> next{0};
    const auto work = [&] {
      for (size_t i = next++; i < count; i = next++) {
        try {
          done[i] = replayRank(TraceReader::open(path), ranks[w + i], nullptr);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      }
    };
    std::vector<std::thread> threads;
    for (size_t i = 1; i < count; ++i) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors) {
      if (!e.empty()) throw TraceError(e);
    }
    db.exec("BEGIN");
    for (const RankSummary& r : done) writeRank(db, insBlock, insAlloc, r);
    db.exec("COMMIT");
  }
  db.exec(std::string("INSERT OR REPLACE INTO meta (key, value) VALUES ('") +
          kMemorySummaryMetaKey + "', '" + kMemorySummaryVersion + "')");
}

std::optional<MemoryCategorySummary> storedMemorySummary(const TraceReader& reader, int rank) {
  if (reader.meta(kMemorySummaryMetaKey) != kMemorySummaryVersion) return std::nullopt;
  const RawDb db(reader.path(), SQLITE_OPEN_READONLY);
  const std::string where = rank >= 0 ? " WHERE rank = ?1" : "";
  const auto blocks = db.prepare(
      "SELECT rank, device_type, device_index, block, first_ts_ns, count, levels, events FROM "
      "memory_category_blocks" +
      where + " ORDER BY rank, device_type, device_index, block");
  const auto allocs =
      db.prepare("SELECT rank, categories FROM memory_category_allocations" + where);
  if (rank >= 0) {
    sqlite3_bind_int64(blocks.get(), 1, rank);
    sqlite3_bind_int64(allocs.get(), 1, rank);
  }
  const auto damaged = [&](const std::string& what) {
    return TraceError(reader.path() + ": memory_category_blocks: " + what +
                      " (the stored memory summary is damaged; merge the run again)");
  };
  MemoryCategorySummary out;
  out.stored = true;
  sqlite3_stmt* s = blocks.get();
  int rc;
  size_t current = SIZE_MAX;  // the series of the previous row
  Levels prevEnd{};           // the levels after its previous block
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    MemorySeries& m = seriesFor(out.series, static_cast<int>(sqlite3_column_int64(s, 0)),
                                static_cast<int>(sqlite3_column_int64(s, 1)),
                                static_cast<int>(sqlite3_column_int64(s, 2)));
    if (out.series.size() - 1 != current) {
      current = out.series.size() - 1;
      prevEnd = Levels{};
    }
    const int64_t block = sqlite3_column_int64(s, 3);
    const int64_t count = sqlite3_column_int64(s, 5);
    if (block != static_cast<int64_t>(m.block_start.size()) || count < 1 ||
        count > static_cast<int64_t>(MemorySeries::kBlock) ||
        m.size() != static_cast<size_t>(block) * MemorySeries::kBlock) {
      throw damaged("rank " + std::to_string(m.rank) + " block " + std::to_string(block) +
                    " out of sequence");
    }
    const auto blob = [&](int col) {
      const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(s, col));
      return Cursor{p, p + sqlite3_column_bytes(s, col)};
    };
    Cursor lv = blob(6);
    Levels lo{}, hi{}, end{};
    for (Levels* l : {&lo, &hi, &end}) {
      for (int64_t& v : *l) v = lv.varint();
    }
    Cursor ev = blob(7);
    int64_t ts = sqlite3_column_int64(s, 4);
    for (int64_t i = 0; i < count; ++i) {
      ts += ev.varint();
      m.ts.push_back(ts);
      m.delta.push_back(ev.varint());
      m.stack.push_back(ev.byte());
      if (m.stack.back() >= kStackCount) ev.ok = false;
    }
    if (!lv.ok || !ev.ok || lv.p != lv.end || ev.p != ev.end) {
      throw damaged("rank " + std::to_string(m.rank) + " block " + std::to_string(block) +
                    " does not decode");
    }
    m.block_start.push_back(prevEnd);
    m.block_lo.push_back(lo);
    m.block_hi.push_back(hi);
    // The stored end must be the start replayed through the block's events.
    Levels l = prevEnd;
    for (size_t i = m.size() - static_cast<size_t>(count); i < m.size(); ++i) {
      for (size_t k = m.stack[i]; k < l.size(); ++k) l[k] = satAdd(l[k], m.delta[i]);
    }
    if (l != end) {
      throw damaged("rank " + std::to_string(m.rank) + " block " + std::to_string(block) +
                    " does not add up");
    }
    prevEnd = end;
  }
  if (rc != SQLITE_DONE) db.fail("reading memory_category_blocks");
  while ((rc = sqlite3_step(allocs.get())) == SQLITE_ROW) {
    const int r = static_cast<int>(sqlite3_column_int64(allocs.get(), 0));
    const auto* p = static_cast<const unsigned char*>(sqlite3_column_blob(allocs.get(), 1));
    const int n = sqlite3_column_bytes(allocs.get(), 1);
    auto& cats = out.categories[r];
    cats.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      if (p[i] >= static_cast<unsigned char>(MemoryCategory::kCount)) {
        throw damaged("rank " + std::to_string(r) + " allocation category out of range");
      }
      cats.push_back(static_cast<MemoryCategory>(p[i]));
    }
  }
  if (rc != SQLITE_DONE) db.fail("reading memory_category_allocations");
  for (MemorySeries& m : out.series) findPeak(m);
  return out;
}

MemoryCategorySummary memorySummary(const TraceReader& reader, int rank,
                                    const std::atomic<bool>* cancel) {
  try {
    if (auto stored = storedMemorySummary(reader, rank)) return std::move(*stored);
  } catch (const TraceError&) {
    // A damaged stored summary: the events are still there; replay them.
  }
  return replayMemorySummary(reader, rank, cancel);
}

}  // namespace tracerun::trace::analysis
