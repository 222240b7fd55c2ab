// Where --offload-optimizer keeps a rank's optimizer states (fp32 master weights and AdamW moments
// of its ZeRO shards), one region per gradient bucket: in pinned host memory (ZeRO-Offload,
// "cpu", CUDA only) or in a file under a directory (ZeRO-Infinity, "nvme:DIR", nvme_store.cpp),
// read and written by a thread of its own. Each store accounts its bytes on an offload device of
// the trace (tracerun_annotate_offload_memory). It does not update anything
// (offload_optimizer.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace gpttrain {

class OffloadStore {
 public:
  virtual ~OffloadStore() = default;
  // Host memory where bucket b's region can be updated in place (pinned host memory), or null
  // when it must be read into a buffer and written back (files).
  virtual float* inPlace(size_t b) = 0;
  // Copies region b (floatsOf(b) floats) into dst / from src on the store's I/O thread; the
  // future is ready once done (and rethrows its error). dst/src must outlive it.
  virtual std::future<void> readAsync(size_t b, float* dst) = 0;
  virtual std::future<void> writeAsync(size_t b, const float* src) = 0;
  // Region b as a 1-D float CPU tensor that aliases the store (checkpoints): reading it reads the
  // stored values, writing it changes them. Pinned memory: a view of the buffer; files: a shared
  // mapping of the file's region, unmapped when the last tensor using it is freed. Only while no
  // transfer is in flight (between optimizer steps).
  virtual at::Tensor view(size_t b) = 0;
  int64_t floatsOf(size_t b) const { return floats_[b]; }
  int64_t bytes() const;

 protected:
  explicit OffloadStore(std::vector<int64_t> floats) : floats_(std::move(floats)) {}
  OffloadStore(const OffloadStore&) = delete;
  OffloadStore& operator=(const OffloadStore&) = delete;
  std::vector<int64_t> floats_;  // per bucket
};

// A file DIR/gpttrain-states.rank<R>.<pid> holding every region back to back (created, and
// removed by the destructor). Throws std::runtime_error naming the path when it cannot.
std::unique_ptr<OffloadStore> makeNvmeStore(const std::string& dir, int rank,
                                            std::vector<int64_t> floats_per_bucket);
// Pinned host memory (a libtorch with CUDA; throws elsewhere).
std::unique_ptr<OffloadStore> makePinnedStore(std::vector<int64_t> floats_per_bucket);

}  // namespace gpttrain
