// Deterministic samples from a text file or a synthetic sequence (see data.h).
#include "data/data.h"

#include <fstream>
#include <iterator>
#include <stdexcept>

namespace gpttrain {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

uint64_t sampleHash(uint64_t seed, Split split, uint64_t index) {
  return mix(mix(seed ^ (split == Split::kTrain ? 0x7472616eULL : 0x76616cULL)) + index);
}

}  // namespace

TokenSource TokenSource::synthetic(int vocab, uint64_t seed) {
  TokenSource s;
  s.vocab_ = vocab;
  s.seed_ = seed;
  return s;
}

TokenSource TokenSource::fromFile(const std::string& path, double val_fraction, int seq_len,
                                  uint64_t seed) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read --data file '" + path + "'");
  TokenSource s;
  s.seed_ = seed;
  s.bytes_.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  s.train_end_ = static_cast<size_t>(double(s.bytes_.size()) * (1.0 - val_fraction));
  const size_t need = size_t(seq_len) + 2;
  if (s.train_end_ < need || (val_fraction > 0 && s.bytes_.size() - s.train_end_ < need)) {
    throw std::runtime_error("--data file '" + path + "' has " + std::to_string(s.bytes_.size()) +
                             " bytes: too short for --seq-len " + std::to_string(seq_len) +
                             " in both the train and validation splits");
  }
  return s;
}

void TokenSource::sample(Split split, uint64_t index, int seq_len, int64_t* out) const {
  const uint64_t h = sampleHash(seed_, split, index);
  if (synthetic()) {
    const int64_t step = 1 + int64_t(mix(h) % 7);
    int64_t x = int64_t(h % uint64_t(vocab_));
    for (int t = 0; t <= seq_len; ++t) {
      out[t] = x;
      x = (x + step) % vocab_;
    }
    return;
  }
  const size_t begin = split == Split::kTrain ? 0 : train_end_;
  const size_t end = split == Split::kTrain ? train_end_ : bytes_.size();
  const size_t span = end - begin - size_t(seq_len);  // >= 2 (checked in fromFile)
  const size_t offset = begin + size_t(h % span);
  for (int t = 0; t <= seq_len; ++t) out[t] = bytes_[offset + size_t(t)];
}

}  // namespace gpttrain
