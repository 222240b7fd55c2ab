// The raw shard: the append-only file a traced process writes instead of SQLite
// (docs/trace-format.md, "The raw shard"). This header owns the format: the file header, the block
// header, the block kinds and their payloads, and the reader that walks a file. It does not write
// files (raw_shard_writer.h) and does not build SQLite (trace/raw_convert.h).
//
// Layout: one RawFileHeader, then blocks. A block is one RawBlockHeader followed by
// payload_bytes of payload, appended with one write; a file cut inside its last block (a kill,
// a full disk) reads up to the last whole block and reports the cut bytes.
//
// Sections: constants · headers · payloads · RawReader
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tracerun/core/records.h"

namespace tracerun::core {

// ---- constants ----------------------------------------------------------------------------------

inline constexpr char kRawMagic[8] = {'T', 'R', 'R', 'A', 'W', 'S', 'H', 'D'};
inline constexpr uint32_t kRawVersion = 1;
inline constexpr uint32_t kRawBlockMagic = 0x4B425254;  // "TRBK" little-endian
// A block payload larger than this is a corrupt header, not data (rings are far smaller).
inline constexpr uint64_t kRawMaxPayload = uint64_t{1} << 32;

enum class RawBlockKind : uint16_t {
  kRecords = 1,  // count 64-byte core::Records of one thread buffer (track, buffer, tid)
  kStrings = 2,  // count strings with ids first, first+1, ...: each u32 length + bytes
  kTracks = 3,   // count tracks: each RawTrack + name bytes
  kMeta = 4,     // one meta key/value: u32 length + key, u32 length + value
  kStat = 5,     // one stats row: value in `first`, severity in `buffer`; payload: the name
  kDropped = 6,  // records dropped so far (rings full, or not written): the total in `first`
  kEnd = 7,      // the writer closed the file: everything recorded is in it
};

// ---- headers ------------------------------------------------------------------------------------

struct RawFileHeader {
  char magic[8] = {};
  uint32_t version = kRawVersion;
  uint32_t header_bytes = sizeof(RawFileHeader);
  int64_t origin_ns = 0;  // CLOCK_MONOTONIC origin the SQLite shard's times are relative to
  int64_t pid = 0;
  int64_t clock_offset_ns = 0;
  int32_t rank = 0;
  int32_t world_size = 1;
  uint64_t reserved[2] = {};
};
static_assert(sizeof(RawFileHeader) == 64);

struct RawBlockHeader {
  uint32_t magic = kRawBlockMagic;
  RawBlockKind kind = RawBlockKind::kRecords;
  uint16_t pad = 0;
  uint32_t payload_bytes = 0;
  uint32_t count = 0;   // records, strings or tracks in the payload
  TrackId track = 0;    // kRecords: the buffer's thread track
  uint32_t buffer = 0;  // kRecords: ThreadBuffer::index; kStat: the severity
  int64_t first = 0;    // kRecords: the thread's OS id; kStrings: first id; kStat, kDropped: value
};
static_assert(sizeof(RawBlockHeader) == 32);

// ---- payloads -----------------------------------------------------------------------------------

struct RawTrack {
  TrackId id = 0;
  uint8_t kind = 0;  // core::TrackKind
  uint8_t pad[3] = {};
  int64_t tid = 0;
  uint32_t name_bytes = 0;
  uint32_t pad2 = 0;
};
static_assert(sizeof(RawTrack) == 24);

// ---- RawReader ----------------------------------------------------------------------------------

struct RawBlock {
  RawBlockHeader header;
  const unsigned char* payload = nullptr;  // valid while the reader lives
};

// Reads a raw shard through a read-only mapping. Throws std::runtime_error naming the file when
// it cannot be opened or its header is not a raw shard of this version; a bad block header or a
// block cut short ends the walk there, and cutBytes() says how much was left unread.
class RawReader {
 public:
  explicit RawReader(const std::string& path);
  ~RawReader();
  RawReader(const RawReader&) = delete;
  RawReader& operator=(const RawReader&) = delete;

  const RawFileHeader& header() const noexcept { return header_; }
  // The next whole block, false at the end of the file or at a cut.
  bool next(RawBlock* block) noexcept;
  void rewind() noexcept {
    offset_ = sizeof(RawFileHeader);
    cutBytes_ = 0;
  }
  uint64_t cutBytes() const noexcept { return cutBytes_; }  // bytes after the last whole block
  uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

  // Payload helpers: a u32-length-prefixed string at *pos (advanced past it), or false when it
  // runs past end.
  static bool readString(const unsigned char*& pos, const unsigned char* end,
                         std::string_view* out) noexcept;

 private:
  std::string path_;
  RawFileHeader header_;
  const unsigned char* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  uint64_t cutBytes_ = 0;
};

}  // namespace tracerun::core
