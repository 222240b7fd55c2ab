// The model's parameters as one explicit list with what parallelism needs to know about each:
// name, how it is split over tensor-parallel ranks, whether weight decay applies. Deterministic
// initialisation of a rank's shard from the full tensor, on the device the rank computes on. It
// does not hold gradients' buffers.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace gpttrain {

struct ParamEntry {
  std::string name;    // "layers.0.attn.qkv.weight"
  at::Tensor tensor;   // this rank's shard, requires_grad
  int split_dim = -1;  // dimension split over TP ranks; -1: replicated on every TP rank
  bool decay = false;  // AdamW weight decay applies (matrices, not biases or norms)
  // A copy of a parameter another pipeline stage also holds (the last stage's tied embedding):
  // updated alike, but counted once in the gradient norm and in gradient dumps.
  bool duplicate = false;
};

enum class Init { kNormal, kZeros, kOnes };

class ParamSet {
 public:
  // Every parameter (and every buffer the model derives from this set) lives on `device`, in
  // `dtype` (fp32, or bf16 working parameters under --precision bf16-mixed).
  ParamSet(uint64_t seed, int tp_rank, int tp_size, torch::Device device,
           at::ScalarType dtype = at::kFloat)
      : seed_(seed), tp_rank_(tp_rank), tp_size_(tp_size), device_(device), dtype_(dtype) {}

  // Creates the full tensor on the CPU from a generator seeded by (seed, name) -- the same on
  // every layout and every device --, keeps this rank's shard of `split_dim` (-1: all of it),
  // moves it to the device in the set's dtype (bf16: the fp32 values rounded once), registers it.
  at::Tensor add(const std::string& name, std::vector<int64_t> full_shape, int split_dim, Init init,
                 double stddev = 0.0);

  // The trainable parameters: what gradients, buckets, optimizers and checkpoints see.
  std::vector<ParamEntry>& entries() { return entries_; }
  const std::vector<ParamEntry>& entries() const { return entries_; }
  // Parameters moved out of entries() by freezeBaseParameters (model/frozen.h): requires_grad
  // false, no gradient, no optimizer state; the model still computes with them.
  std::vector<ParamEntry>& frozenEntries() { return frozen_; }
  const std::vector<ParamEntry>& frozenEntries() const { return frozen_; }
  int tpRank() const { return tp_rank_; }
  int tpSize() const { return tp_size_; }
  torch::Device device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }
  int64_t numel() const;

 private:
  uint64_t seed_;
  int tp_rank_;
  int tp_size_;
  torch::Device device_;
  at::ScalarType dtype_;
  std::vector<ParamEntry> entries_;
  std::vector<ParamEntry> frozen_;
};

// 64-bit FNV-1a, stable across builds (std::hash is not).
uint64_t stableHash(const std::string& text, uint64_t seed);

}  // namespace gpttrain
