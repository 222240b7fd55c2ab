// convertRawShard: two walks over a raw shard. The first collects what the records refer to
// (strings, tracks, meta, stats, the drop count, whether it ended); the second feeds each
// thread's records into a replay buffer of a fresh Session that a ShardWriter drains.
// No capture code and no merge here.
#include "tracerun/trace/raw_convert.h"

#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <unordered_map>
#include <vector>

#include "file_check.h"
#include "sqlite_util.h"
#include "tracerun/core/raw_shard.h"
#include "tracerun/core/session.h"
#include "tracerun/trace/shard_writer.h"

namespace tracerun::trace {

namespace {

constexpr size_t kReplayRing = size_t{1} << 16;  // records per replay buffer between drains

struct RawContents {
  std::vector<std::string> strings;  // by id
  std::vector<core::TrackInfo> tracks;
  std::map<std::string, std::string> meta;
  std::string host, command;
  std::vector<std::pair<std::string, std::pair<int64_t, Severity>>> stats;  // in file order
  uint64_t dropped = 0;
  bool ended = false;
};

void readStrings(const core::RawBlock& b, RawContents& c, const std::string& path) {
  const unsigned char* pos = b.payload;
  const unsigned char* end = b.payload + b.header.payload_bytes;
  if (b.header.first != static_cast<int64_t>(c.strings.size())) {
    throw TraceError(path + ": raw shard strings out of order (block for id " +
                     std::to_string(b.header.first) + " after " + std::to_string(c.strings.size()) +
                     " strings)");
  }
  for (uint32_t i = 0; i < b.header.count; ++i) {
    std::string_view s;
    if (!core::RawReader::readString(pos, end, &s)) {
      throw TraceError(path + ": raw shard string block runs past its end");
    }
    c.strings.emplace_back(s);
  }
}

void readTracks(const core::RawBlock& b, RawContents& c, const std::string& path) {
  const unsigned char* pos = b.payload;
  const unsigned char* end = b.payload + b.header.payload_bytes;
  for (uint32_t i = 0; i < b.header.count; ++i) {
    core::RawTrack rt;
    if (end - pos < static_cast<std::ptrdiff_t>(sizeof rt)) {
      throw TraceError(path + ": raw shard track block runs past its end");
    }
    std::memcpy(&rt, pos, sizeof rt);
    pos += sizeof rt;
    if (static_cast<uint64_t>(end - pos) < rt.name_bytes) {
      throw TraceError(path + ": raw shard track block runs past its end");
    }
    c.tracks.push_back(
        core::TrackInfo{rt.id, static_cast<core::TrackKind>(rt.kind), rt.tid,
                        std::string(reinterpret_cast<const char*>(pos), rt.name_bytes)});
    pos += rt.name_bytes;
  }
}

RawContents collect(core::RawReader& r, const std::string& path) {
  RawContents c;
  core::RawBlock b;
  while (r.next(&b)) {
    const unsigned char* pos = b.payload;
    const unsigned char* end = b.payload + b.header.payload_bytes;
    switch (b.header.kind) {
      case core::RawBlockKind::kStrings:
        readStrings(b, c, path);
        break;
      case core::RawBlockKind::kTracks:
        readTracks(b, c, path);
        break;
      case core::RawBlockKind::kMeta: {
        std::string_view k, v;
        if (!core::RawReader::readString(pos, end, &k) ||
            !core::RawReader::readString(pos, end, &v)) {
          throw TraceError(path + ": raw shard meta block runs past its end");
        }
        if (k == "\x01host") {
          c.host = v;
        } else if (k == "\x01command") {
          c.command = v;
        } else {
          c.meta[std::string(k)] = v;
        }
        break;
      }
      case core::RawBlockKind::kStat:
        c.stats.push_back({std::string(reinterpret_cast<const char*>(pos), end - pos),
                           {b.header.first, static_cast<Severity>(b.header.buffer)}});
        break;
      case core::RawBlockKind::kDropped:
        c.dropped = static_cast<uint64_t>(b.header.first);
        break;
      case core::RawBlockKind::kEnd:
        c.ended = true;
        break;
      default:
        break;  // kRecords: the second walk; unknown kinds are skipped whole
    }
  }
  return c;
}

// Registers the recorded strings and tracks in `session` under their recorded ids.
void registerNames(core::Session& session, const RawContents& c, const std::string& path) {
  for (size_t i = 0; i < c.strings.size(); ++i) {
    if (session.strings().intern(c.strings[i]) != i) {
      throw TraceError(path + ": raw shard string " + std::to_string(i) + " is a duplicate");
    }
  }
  for (const auto& t : c.tracks) {
    if (session.tracks().add(t.kind, t.tid, t.name) != t.id) {
      throw TraceError(path + ": raw shard track " + std::to_string(t.id) + " out of order");
    }
  }
}

}  // namespace

namespace {
void replay(core::RawReader& reader, const RawContents& c, const std::string& dbPath,
            RawConversion& out);
}  // namespace

std::string rawShardPath(const std::string& dbPath) {
  return dbPath + ".raw";
}

std::string rawReservePath(const std::string& dbPath) {
  return dbPath + ".raw-reserve";
}

bool rawIsLeftover(const std::string& dbPath) {
  try {
    filecheck::checkFile(dbPath);
    const sql::Db db(dbPath, sql::Db::Mode::kReadOnly);
    auto meta = filecheck::readTraceMeta(db);
    return meta["kind"] != "merged" && meta["complete"] == "1";
  } catch (const TraceError&) {
    return false;
  }
}

RawConversion convertRawShard(const std::string& rawPath, const std::string& dbPath) {
  std::unique_ptr<core::RawReader> reader;
  try {
    reader = std::make_unique<core::RawReader>(rawPath);
  } catch (const std::runtime_error& e) {
    throw TraceError(e.what());
  }
  const RawContents c = collect(*reader, rawPath);
  RawConversion out;
  out.cut_bytes = reader->cutBytes();
  out.ended = c.ended && out.cut_bytes == 0;
  out.dropped = c.dropped;

  // In place (see the header): the placeholder's room is the new shard's, and nothing but the
  // shard grows. The raw file is not touched, so a failure here loses nothing.
  replay(*reader, c, dbPath, out);
  return out;
}

namespace {

void replay(core::RawReader& reader, const RawContents& c, const std::string& dbPath,
            RawConversion& out) {
  const std::string& rawPath = reader.path();
  core::Session session(kReplayRing);
  registerNames(session, c, rawPath);
  const core::RawFileHeader& h = reader.header();
  ShardOptions opt;
  opt.path = dbPath;
  opt.rank = h.rank;
  opt.world_size = h.world_size;
  opt.host = c.host;
  opt.pid = h.pid;
  opt.clock_offset_ns = h.clock_offset_ns;
  opt.command = c.command;
  opt.origin_ns = h.origin_ns;
  opt.complete = out.ended;
  opt.wal = false;  // the journal in memory: no disk space beside the shard (see the header)
  ShardWriter writer(session, opt);
  for (const auto& [k, v] : c.meta) writer.setMeta(k, v);

  // Second walk: each records block into its thread's replay buffer, draining all buffers
  // whenever one would overflow (the writer drains every buffer in one pass).
  struct Replay {
    core::ThreadBuffer* buffer = nullptr;
    size_t pending = 0;
  };
  std::unordered_map<uint32_t, Replay> replays;
  auto drainAll = [&] {
    writer.drain();
    for (auto& [index, rp] : replays) rp.pending = 0;
  };
  reader.rewind();
  core::RawBlock b;
  while (reader.next(&b)) {
    if (b.header.kind != core::RawBlockKind::kRecords) continue;
    Replay& rp = replays[b.header.buffer];
    if (rp.buffer == nullptr) {
      rp.buffer = &session.replayBuffer(b.header.track, b.header.first, b.header.buffer);
    }
    const unsigned char* records = b.payload;  // 64-byte records, not necessarily aligned
    size_t n = b.header.count;
    while (n > 0) {
      const size_t room = rp.buffer->ring.capacity() - rp.pending;
      if (room == 0) {
        drainAll();
        continue;
      }
      const size_t take = n < room ? n : room;
      for (size_t i = 0; i < take; ++i) {
        core::Record slot;
        std::memcpy(slot.bytes, records + i * core::kRecordSize, core::kRecordSize);
        rp.buffer->ring.tryPush(slot);
      }
      rp.pending += take;
      records += take * core::kRecordSize;
      n -= take;
      out.records += take;
    }
  }
  drainAll();

  for (const auto& [name, v] : c.stats) writer.setStat(name, v.first, v.second);
  writer.setStat("dropped_events", static_cast<int64_t>(c.dropped),
                 c.dropped > 0 ? Severity::kError : Severity::kInfo);
  if (out.cut_bytes > 0) {
    writer.setStat("raw_truncated_bytes", static_cast<int64_t>(out.cut_bytes), Severity::kWarning);
  }
  writer.close();
}

}  // namespace

}  // namespace tracerun::trace
