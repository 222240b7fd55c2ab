// --offload-optimizer cpu's store (offload_store.h): every region in one pinned host buffer,
// updated in place by the CPU (ZeRO-Offload), accounted on the trace's "cpu-offload" device (the
// pinned allocator is CUDA's, which no traced allocator sees). Needs a libtorch with CUDA: on
// Debian's CPU-only build allocating pinned memory throws. Not tested here (no GPU; the GPU test
// is tests/gpu's).
#include "optim/offload_store.h"

#include <torch/torch.h>
#include <tracerun/annotate.h>

#include <cstring>

namespace gpttrain {
namespace {

constexpr int kPinned = static_cast<int>(tracerun::OffloadDevice::kPinnedHost);
constexpr int kOptimizerState = static_cast<int>(tracerun::MemoryCategory::kOptimizerState);

class PinnedStore final : public OffloadStore {
 public:
  explicit PinnedStore(std::vector<int64_t> floats) : OffloadStore(std::move(floats)) {
    int64_t offset = 0;
    for (int64_t f : floats_) {
      offsets_.push_back(offset);
      offset += f;
    }
    buffer_ = at::zeros({offset}, at::TensorOptions(at::kFloat).pinned_memory(true));
    annotate(+1);
  }
  ~PinnedStore() override { annotate(-1); }

  float* inPlace(size_t b) override { return buffer_.data_ptr<float>() + offsets_[b]; }
  std::future<void> readAsync(size_t b, float* dst) override {
    std::memcpy(dst, inPlace(b), size_t(floats_[b]) * sizeof(float));
    return ready();
  }
  std::future<void> writeAsync(size_t b, const float* src) override {
    std::memcpy(inPlace(b), src, size_t(floats_[b]) * sizeof(float));
    return ready();
  }
  at::Tensor view(size_t b) override { return buffer_.narrow(0, offsets_[b], floats_[b]); }

 private:
  static std::future<void> ready() {
    std::promise<void> p;
    p.set_value();
    return p.get_future();
  }
  void annotate(int sign) {
    if (&tracerun_annotate_offload_memory == nullptr) return;
    int64_t total = sign > 0 ? 0 : bytes();
    for (size_t b = 0; b < floats_.size(); ++b) {
      const int64_t n = floats_[b] * int64_t(sizeof(float));
      total += sign * n;
      tracerun_annotate_offload_memory(b + 1, sign * n, kPinned, -1, kOptimizerState, total);
    }
  }

  at::Tensor buffer_;
  std::vector<int64_t> offsets_;  // per bucket, floats into buffer_
};

}  // namespace

std::unique_ptr<OffloadStore> makePinnedStore(std::vector<int64_t> floats_per_bucket) {
  return std::make_unique<PinnedStore>(std::move(floats_per_bucket));
}

}  // namespace gpttrain
