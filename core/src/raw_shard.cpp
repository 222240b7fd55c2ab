// RawReader: walks a raw shard's blocks through a read-only mapping, stopping at the first block
// that is cut short or whose header is not a block header. Writes nothing.
#include "tracerun/core/raw_shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tracerun::core {

RawReader::RawReader(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error(path + ": cannot open: " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw std::runtime_error(path + ": cannot stat: " + std::strerror(e));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ < sizeof(RawFileHeader)) {
    ::close(fd);
    throw std::runtime_error(path + ": not a tracerun raw shard (shorter than its header)");
  }
  void* map = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) throw std::runtime_error(path + ": cannot map: " + std::strerror(errno));
  data_ = static_cast<const unsigned char*>(map);
  std::memcpy(&header_, data_, sizeof header_);
  if (std::memcmp(header_.magic, kRawMagic, sizeof kRawMagic) != 0) {
    ::munmap(const_cast<unsigned char*>(data_), size_);
    throw std::runtime_error(path + ": not a tracerun raw shard (bad magic)");
  }
  if (header_.version != kRawVersion || header_.header_bytes != sizeof(RawFileHeader)) {
    ::munmap(const_cast<unsigned char*>(data_), size_);
    throw std::runtime_error(path + ": raw shard version " + std::to_string(header_.version) +
                             ", this tracerun reads version " + std::to_string(kRawVersion));
  }
  offset_ = sizeof(RawFileHeader);
}

RawReader::~RawReader() {
  if (data_ != nullptr) ::munmap(const_cast<unsigned char*>(data_), size_);
}

bool RawReader::next(RawBlock* block) noexcept {
  if (offset_ >= size_) return false;
  const uint64_t left = size_ - offset_;
  if (left < sizeof(RawBlockHeader)) {
    cutBytes_ = left;
    return false;
  }
  RawBlockHeader h;
  std::memcpy(&h, data_ + offset_, sizeof h);
  const uint64_t need = sizeof(RawBlockHeader) + uint64_t{h.payload_bytes};
  if (h.magic != kRawBlockMagic || need > left ||
      (h.kind == RawBlockKind::kRecords && uint64_t{h.count} * kRecordSize != h.payload_bytes)) {
    cutBytes_ = left;
    return false;
  }
  block->header = h;
  block->payload = data_ + offset_ + sizeof(RawBlockHeader);
  offset_ += need;
  return true;
}

bool RawReader::readString(const unsigned char*& pos, const unsigned char* end,
                           std::string_view* out) noexcept {
  uint32_t n = 0;
  if (end - pos < static_cast<std::ptrdiff_t>(sizeof n)) return false;
  std::memcpy(&n, pos, sizeof n);
  if (static_cast<uint64_t>(end - pos) - sizeof n < n) return false;
  *out = std::string_view(reinterpret_cast<const char*>(pos + sizeof n), n);
  pos += sizeof n + n;
  return true;
}

}  // namespace tracerun::core
