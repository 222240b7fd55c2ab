// RawShardWriter: drains a Session's rings into a raw shard with writev, one block per contiguous
// ring run. The only file work of a traced process that writes raw; no SQL here.
#include "tracerun/core/raw_shard_writer.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "tracerun/core/clock.h"

namespace tracerun::core {

namespace {

// A pass that drained at least this many records goes again at once: the rings fill faster than
// one interval's worth.
constexpr size_t kBusyPassRecords = 16384;
// The reserve grows by at least this much (or an eighth of itself) at a time: one fallocate per
// step, not per block.
constexpr uint64_t kReserveStep = uint64_t{16} << 10;
// Kept free under a file-size limit for the closing blocks (drop count, stats, meta).
constexpr uint64_t kClosingSlack = uint64_t{4} << 10;

std::string hostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

void appendU32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
void appendString(std::string& out, const std::string& s) {
  appendU32(out, static_cast<uint32_t>(s.size()));
  out += s;
}

}  // namespace

RawShardWriter::RawShardWriter(Session& session, RawShardOptions options)
    : session_(session), opt_(std::move(options)) {
  if (opt_.path.empty()) throw std::runtime_error("raw shard writer: no output path given");
  if (opt_.host.empty()) opt_.host = hostName();
  if (opt_.pid == 0) opt_.pid = static_cast<int64_t>(::getpid());
  if (opt_.origin_ns == 0) opt_.origin_ns = nowNs();
  if (opt_.drain_interval_ms <= 0) opt_.drain_interval_ms = 1;
  opt_.max_block_records = std::clamp<size_t>(opt_.max_block_records, 1, kMaxBlockRecords);
  if (::unlink(opt_.path.c_str()) != 0 && errno != ENOENT) {
    throw std::runtime_error(opt_.path +
                             ": cannot replace the existing file: " + std::strerror(errno));
  }
  fd_ = ::open(opt_.path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) throw std::runtime_error(opt_.path + ": cannot create: " + std::strerror(errno));
  RawFileHeader h;
  std::memcpy(h.magic, kRawMagic, sizeof kRawMagic);
  h.origin_ns = opt_.origin_ns;
  h.pid = opt_.pid;
  h.clock_offset_ns = opt_.clock_offset_ns;
  h.rank = opt_.rank;
  h.world_size = opt_.world_size;
  if (::write(fd_, &h, sizeof h) != static_cast<ssize_t>(sizeof h)) {
    const int e = errno;
    ::close(fd_);
    fd_ = -1;
    throw std::runtime_error(opt_.path + ": cannot write: " + std::strerror(e));
  }
  offset_ = sizeof h;
  if (!opt_.reserve_path.empty()) {
    const char* problem = nullptr;
    int e = 0;
    if (::unlink(opt_.reserve_path.c_str()) != 0 && errno != ENOENT) {
      e = errno;
      problem = ": cannot replace the existing file: ";
    } else {
      reserveFd_ = ::open(opt_.reserve_path.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
      if (reserveFd_ < 0) {
        e = errno;
        problem = ": cannot create: ";
      }
    }
    if (problem != nullptr) {  // no destructor runs for a constructor that throws: close the file
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error(opt_.reserve_path + problem + std::strerror(e));
    }
    rlimit limit{};
    if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      sizeLimit_ = static_cast<uint64_t>(limit.rlim_cur);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  // Options, not meta rows: the \x01 prefix (raw_convert.cpp). Small, and needed by any conversion:
  // written like the closing blocks, whatever the room.
  writeMeta("\x01host", opt_.host, /*closing=*/true);
  writeMeta("\x01command", opt_.command, /*closing=*/true);
}

RawShardWriter::~RawShardWriter() {
  try {
    close();
  } catch (...) {
  }
  if (fd_ >= 0) ::close(fd_);
  releaseReserve();
}

void RawShardWriter::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_ || thread_.joinable()) return;
  thread_ = std::thread([this] { threadMain(); });
}

void RawShardWriter::threadMain() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto interval = std::chrono::milliseconds(opt_.drain_interval_ms);
  size_t drained = 0;
  while (!stop_) {
    if (drained < kBusyPassRecords) {
      cv_.wait_for(lock, interval, [this] { return stop_; });
    } else {
      // Busy: give flush() and close() a chance at the lock between passes.
      lock.unlock();
      std::this_thread::yield();
      lock.lock();
    }
    if (stop_) break;
    drained = pass();
  }
}

void RawShardWriter::flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!closed_) pass();
}

size_t RawShardWriter::pass() {
  size_t drained = 0;
  session_.forEachBuffer([&](ThreadBuffer& b) {
    // The names before the records that use them: every string and track a record names was
    // registered before the record was pushed, so the names registered once `published` is read
    // cover the records up to it. A file cut between two blocks (a kill) then never holds a
    // record whose name it lacks.
    const uint64_t published = b.ring.published();
    writeNewNames();
    drained += b.ring.drainTo(published, [&](const Record* r, size_t n) { writeRecords(b, r, n); });
  });
  writeNewNames();  // those registered since (a pass with no records, the closing pass)
  const uint64_t dropped = session_.dropped() + lost_;
  if (dropped != droppedWritten_) {
    RawBlockHeader h;
    h.kind = RawBlockKind::kDropped;
    h.first = static_cast<int64_t>(dropped);
    if (writeBlock(h, nullptr, 0, closed_)) droppedWritten_ = dropped;  // see close()
  }
  return drained;
}

void RawShardWriter::writeRecords(const ThreadBuffer& b, const Record* r, size_t n) {
  // A ring run larger than a block holds (its payload size is a u32: a TRACERUN_BUFFER_MB of 4096
  // drains 4 GiB runs) goes as several blocks.
  while (n > opt_.max_block_records) {
    writeRecords(b, r, opt_.max_block_records);
    r += opt_.max_block_records;
    n -= opt_.max_block_records;
  }
  if (failed()) {
    lost_ += n;
    return;
  }
  RawBlockHeader h;
  h.kind = RawBlockKind::kRecords;
  h.count = static_cast<uint32_t>(n);
  h.track = b.track;
  h.buffer = b.index;
  h.first = b.tid;
  writeBlock(h, r, n * kRecordSize);
  if (failed()) {
    lost_ += n;
  } else {
    records_ += n;
  }
}

void RawShardWriter::writeNewNames() {
  // After a failed write they wait for close(), which writes them (records written before the
  // failure may name strings registered since).
  if (session_.strings().size() > stringsWritten_) writeStrings();
  if (session_.tracks().size() > tracksWritten_) writeTracks();
}

void RawShardWriter::writeStrings() {
  const auto fresh = session_.strings().since(stringsWritten_);
  scratch_.clear();
  for (const auto& s : fresh) appendString(scratch_, s);
  RawBlockHeader h;
  h.kind = RawBlockKind::kStrings;
  h.count = static_cast<uint32_t>(fresh.size());
  h.first = static_cast<int64_t>(stringsWritten_);
  if (writeBlock(h, scratch_.data(), scratch_.size(), closed_)) stringsWritten_ += fresh.size();
}

void RawShardWriter::writeTracks() {
  const auto fresh = session_.tracks().since(tracksWritten_);
  scratch_.clear();
  for (const auto& t : fresh) {
    RawTrack rt;
    rt.id = t.id;
    rt.kind = static_cast<uint8_t>(t.kind);
    rt.tid = t.tid;
    rt.name_bytes = static_cast<uint32_t>(t.name.size());
    scratch_.append(reinterpret_cast<const char*>(&rt), sizeof rt);
    scratch_ += t.name;
  }
  RawBlockHeader h;
  h.kind = RawBlockKind::kTracks;
  h.count = static_cast<uint32_t>(fresh.size());
  if (writeBlock(h, scratch_.data(), scratch_.size(), closed_)) tracksWritten_ += fresh.size();
}

void RawShardWriter::writeMeta(const std::string& key, const std::string& value, bool closing) {
  std::string payload;
  appendString(payload, key);
  appendString(payload, value);
  RawBlockHeader h;
  h.kind = RawBlockKind::kMeta;
  h.count = 1;
  writeBlock(h, payload.data(), payload.size(), closing);
}

// Claims the conversion's room for `blockBytes` more of raw file (see the header's contract): the
// reserve grows to room_base + room_ratio x the raw size, by steps; under a file-size limit the
// shard the conversion writes (shard_base_bytes + that room) and the raw file must both stay
// under it. False (said once) when the block must not be written.
bool RawShardWriter::claimRoom(uint64_t blockBytes) {
  if (reserveFd_ < 0) return true;
  const uint64_t raw = offset_ + blockBytes;
  const auto need =
      opt_.room_base + static_cast<uint64_t>(opt_.room_ratio * static_cast<double>(raw));
  if (sizeLimit_ != 0 &&
      (opt_.shard_base_bytes + need > sizeLimit_ || raw + kClosingSlack > sizeLimit_)) {
    stop("writing " + opt_.path + " stopped: its shard would outgrow the file-size limit (" +
         std::to_string(sizeLimit_) + " bytes); later events are dropped and counted");
    return false;
  }
  if (need <= reserved_) return true;
  uint64_t target = need + std::max(kReserveStep, need / 8);
  if (sizeLimit_ != 0) target = std::min(target, sizeLimit_ - opt_.shard_base_bytes);
  int e = ::posix_fallocate(reserveFd_, 0, static_cast<off_t>(target));
  if (e != 0 && target > need) {  // the step did not fit: the room itself may
    target = need;
    e = ::posix_fallocate(reserveFd_, 0, static_cast<off_t>(target));
  }
  if (e != 0) {
    stop("writing " + opt_.path + " stopped: no room left to convert it into its shard (" +
         std::strerror(e) + "); later events are dropped and counted");
    return false;
  }
  reserved_ = target;
  return true;
}

// Says `line` once and stops writing records.
void RawShardWriter::stop(const std::string& line) {
  if (failed()) return;
  failed_.store(true, std::memory_order_relaxed);
  failure_ = line;
  std::fprintf(stderr, "tracerun: %s\n", line.c_str());
}

void RawShardWriter::releaseReserve() {
  if (reserveFd_ < 0) return;
  ::close(reserveFd_);
  reserveFd_ = -1;
  ::unlink(opt_.reserve_path.c_str());
}

// One block with one writev. A short or failed write cuts the file back to its last whole block
// and stops the records; `closing` blocks are still tried once the reserve is released, until one
// fails too (see the header's contract).
bool RawShardWriter::writeBlock(RawBlockHeader h, const void* payload, size_t bytes, bool closing) {
  if (dead_ || fd_ < 0 || (failed() && !closing)) return false;
  const size_t total = sizeof h + bytes;
  if (!closing && !claimRoom(total)) return false;
  h.payload_bytes = static_cast<uint32_t>(bytes);
  iovec iov[2] = {{&h, sizeof h}, {const_cast<void*>(payload), bytes}};
  size_t done = 0;
  while (done < total) {
    const ssize_t w =
        done == 0 ? ::writev(fd_, iov, bytes > 0 ? 2 : 1)
                  : ::write(fd_,
                            done < sizeof h ? reinterpret_cast<const char*>(&h) + done
                                            : static_cast<const char*>(payload) + (done - sizeof h),
                            done < sizeof h ? sizeof h - done : total - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const int e = w < 0 ? errno : ENOSPC;
      // Cut back to the last whole block. Where that fails the file ends inside this block, and a
      // block written after it would be read as its rest: nothing more is written (the reader
      // drops the torn tail and reports it).
      if (::ftruncate(fd_, static_cast<off_t>(offset_)) != 0 ||
          ::lseek(fd_, static_cast<off_t>(offset_), SEEK_SET) < 0) {
        dead_ = true;
      }
      if (closing) dead_ = true;  // no room even for them: nothing more
      stop("writing " + opt_.path + " failed: " + std::strerror(e) +
           "; later events are dropped and counted");
      return false;
    }
    done += static_cast<size_t>(w);
  }
  offset_ += total;
  return true;
}

void RawShardWriter::setStat(const std::string& name, int64_t value, StatSeverity severity) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_[name] = {value, severity};
}

void RawShardWriter::setMeta(const std::string& key, const std::string& value) {
  std::lock_guard<std::mutex> lock(mu_);
  meta_[key] = value;
}

void RawShardWriter::close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  pass();
  releaseReserve();  // the conversion's room, and the closing blocks' (see the header)
  closed_ = true;
  pass();  // the closing pass: strings, tracks and the drop count, even after a failure
  // Capture sources' stats first, then the callers' (which win a name clash at conversion).
  auto putStat = [&](const std::string& name, int64_t value, StatSeverity sev) {
    RawBlockHeader h;
    h.kind = RawBlockKind::kStat;
    h.first = value;
    h.buffer = static_cast<uint32_t>(sev);
    writeBlock(h, name.data(), name.size(), /*closing=*/true);
  };
  for (const auto& st : session_.stats()) putStat(st.name, st.value, st.severity);
  for (const auto& [name, v] : stats_) putStat(name, v.first, v.second);
  for (const auto& [key, value] : meta_) writeMeta(key, value, /*closing=*/true);
  RawBlockHeader end;
  end.kind = RawBlockKind::kEnd;
  end.first = static_cast<int64_t>(records_);
  writeBlock(end, nullptr, 0);
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

}  // namespace tracerun::core
