// ParamSet: deterministic full-tensor initialisation and TP sharding (see params.h).
#include "model/params.h"

#include <ATen/CPUGeneratorImpl.h>

namespace gpttrain {

uint64_t stableHash(const std::string& text, uint64_t seed) {
  uint64_t h = 1469598103934665603ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

at::Tensor ParamSet::add(const std::string& name, std::vector<int64_t> full_shape, int split_dim,
                         Init init, double stddev) {
  at::Tensor full;
  switch (init) {
    case Init::kZeros:
      full = at::zeros(full_shape);
      break;
    case Init::kOnes:
      full = at::ones(full_shape);
      break;
    case Init::kNormal: {
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(stableHash(name, seed_));
      full = at::empty(full_shape).normal_(0.0, stddev, gen);
      break;
    }
  }
  at::Tensor shard = full;
  if (split_dim >= 0 && tp_size_ > 1) {
    TORCH_CHECK(full.size(split_dim) % tp_size_ == 0, name, ": dimension ", split_dim,
                " is not divisible by tp ", tp_size_);
    shard = full.chunk(tp_size_, split_dim)[tp_rank_].clone();
  }
  shard = shard.to(device_, dtype_);  // the tensor itself on the CPU in fp32
  shard.set_requires_grad(true);
  entries_.push_back(ParamEntry{name, shard, split_dim, full.dim() >= 2, false});
  return shard;
}

int64_t ParamSet::numel() const {
  int64_t n = 0;
  for (const auto& e : entries_) n += e.tensor.numel();
  return n;
}

}  // namespace gpttrain
