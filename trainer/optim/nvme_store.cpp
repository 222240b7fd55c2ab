// --offload-optimizer nvme:DIR's store (offload_store.h): one file per rank, regions read and
// written with pread/pwrite by one I/O thread of its own, so its spans ("offload_nvme_read",
// "offload_nvme_write", with bytes) make a track of their own in the trace and overlap the update
// running on the training thread; a counter gives each transfer's GB/s. It does not use O_DIRECT:
// the kernel's page cache may hold the data, but the process's own memory does not (but for the
// regions a checkpoint maps while it saves or loads them: view()).
#include "optim/offload_store.h"

#include <tracerun/annotate.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace gpttrain {

int64_t OffloadStore::bytes() const {
  int64_t n = 0;
  for (int64_t f : floats_) n += f * int64_t(sizeof(float));
  return n;
}

namespace {

constexpr int kNvme = static_cast<int>(tracerun::OffloadDevice::kNvme);
constexpr int kOptimizerState = static_cast<int>(tracerun::MemoryCategory::kOptimizerState);

void offloadMemory(uint64_t block, int64_t bytes, int64_t total) {
  if (&tracerun_annotate_offload_memory != nullptr) {
    tracerun_annotate_offload_memory(block, bytes, kNvme, -1, kOptimizerState, total);
  }
}

class NvmeStore final : public OffloadStore {
 public:
  NvmeStore(const std::string& dir, int rank, std::vector<int64_t> floats)
      : OffloadStore(std::move(floats)),
        path_(dir + "/gpttrain-states.rank" + std::to_string(rank) + "." +
              std::to_string(::getpid())) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("cannot create");
    int64_t offset = 0;
    for (int64_t f : floats_) {
      offsets_.push_back(offset);
      offset += f * int64_t(sizeof(float));
    }
    if (::ftruncate(fd_, offset) != 0) fail("cannot size");
    int64_t total = 0;
    for (size_t b = 0; b < floats_.size(); ++b) {
      total += floats_[b] * int64_t(sizeof(float));
      offloadMemory(b + 1, floats_[b] * int64_t(sizeof(float)), total);
    }
    worker_ = std::thread([this] { run(); });
  }

  ~NvmeStore() override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_one();
    worker_.join();
    int64_t total = bytes();
    for (size_t b = 0; b < floats_.size(); ++b) {
      total -= floats_[b] * int64_t(sizeof(float));
      offloadMemory(b + 1, -floats_[b] * int64_t(sizeof(float)), total);
    }
    ::close(fd_);
    ::unlink(path_.c_str());
  }

  float* inPlace(size_t) override { return nullptr; }

  // Each request is also a short span on the caller's track ("offload_nvme_post", bucket, write):
  // the order in which the training thread asks for transfers, which no scheduling changes (the
  // I/O spans themselves start when the I/O thread gets a core).
  std::future<void> readAsync(size_t b, float* dst) override {
    const tracerun::Scope posted("offload_nvme_post", {{"bucket", int64_t(b)}, {"write", 0}});
    return post([this, b, dst] { transfer(b, dst, /*write=*/false); });
  }
  std::future<void> writeAsync(size_t b, const float* src) override {
    const tracerun::Scope posted("offload_nvme_post", {{"bucket", int64_t(b)}, {"write", 1}});
    return post([this, b, src] { transfer(b, const_cast<float*>(src), /*write=*/true); });
  }

  // A shared mapping of region b (from the page boundary below it): stores through it reach the
  // same page cache pread/pwrite use, so the next read sees them.
  at::Tensor view(size_t b) override {
    const int64_t bytes = floats_[b] * int64_t(sizeof(float));
    if (bytes == 0) return at::empty({0}, at::kFloat);
    const int64_t page = ::sysconf(_SC_PAGESIZE);
    const int64_t start = offsets_[b] / page * page, skip = offsets_[b] - start;
    const size_t length = size_t(skip + bytes);
    void* base = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, off_t(start));
    if (base == MAP_FAILED) fail("cannot map");
    return at::from_blob(
        static_cast<char*>(base) + skip, {floats_[b]},
        [base, length](void*) { ::munmap(base, length); }, at::TensorOptions(at::kFloat));
  }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw std::runtime_error(std::string("--offload-optimizer: ") + what + " '" + path_ +
                             "': " + std::strerror(errno));
  }

  std::future<void> post(std::function<void()> fn) {
    std::packaged_task<void()> task(std::move(fn));
    std::future<void> done = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(task));
    }
    wake_.notify_one();
    return done;
  }

  void run() {
    while (true) {
      std::packaged_task<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  // One region, whole, with pread/pwrite (looping over short transfers).
  void transfer(size_t b, float* data, bool write) {
    const int64_t bytes = floats_[b] * int64_t(sizeof(float));
    tracerun::Scope scope(write ? "offload_nvme_write" : "offload_nvme_read",
                          {{"bucket", int64_t(b)}, {"bytes", bytes}});
    const auto start = std::chrono::steady_clock::now();
    auto* p = reinterpret_cast<char*>(data);
    int64_t done = 0;
    while (done < bytes) {
      const ssize_t n = write ? ::pwrite(fd_, p + done, size_t(bytes - done), offsets_[b] + done)
                              : ::pread(fd_, p + done, size_t(bytes - done), offsets_[b] + done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail(write ? "cannot write" : "cannot read");
      done += n;
    }
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s > 0) tracerun::counter(write ? "nvme_write_GBps" : "nvme_read_GBps", bytes / s / 1e9);
  }

  std::string path_;
  int fd_ = -1;
  std::vector<int64_t> offsets_;  // per bucket, bytes into the file
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace

std::unique_ptr<OffloadStore> makeNvmeStore(const std::string& dir, int rank,
                                            std::vector<int64_t> floats_per_bucket) {
  return std::make_unique<NvmeStore>(dir, rank, std::move(floats_per_bucket));
}

}  // namespace gpttrain
