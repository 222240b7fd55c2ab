// Training samples: byte-level tokens from a text file (train/validation split) or a synthetic,
// learnable sequence. Sample i of a split is a pure function of (seed, split, i), so a step's
// global batch is the same set of samples on every layout. No tensors, no downloads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpttrain {

enum class Split { kTrain, kValidation };

class TokenSource {
 public:
  // --data synthetic: sample i walks x_{t+1} = (x_t + c_i) mod vocab from a random start.
  static TokenSource synthetic(int vocab, uint64_t seed);
  // --data FILE: its bytes are the tokens; the last val_fraction of the file is the validation
  // split. Throws std::runtime_error naming the file when it is unreadable or too short.
  static TokenSource fromFile(const std::string& path, double val_fraction, int seq_len,
                              uint64_t seed);

  // Writes seq_len + 1 tokens of sample `index` of `split` to out (inputs are out[0..seq_len),
  // targets out[1..seq_len]).
  void sample(Split split, uint64_t index, int seq_len, int64_t* out) const;

  bool synthetic() const { return bytes_.empty(); }
  // Whether the validation split can hold a sample of seq_len + 1 tokens.
  bool hasValidation(int seq_len) const {
    return synthetic() || bytes_.size() - train_end_ >= size_t(seq_len) + 2;
  }
  size_t trainBytes() const { return train_end_; }

 private:
  TokenSource() = default;

  int vocab_ = 256;
  uint64_t seed_ = 0;
  std::vector<uint8_t> bytes_;
  size_t train_end_ = 0;
};

// Global sample index of microbatch `micro` (of M per step), element `b` (of B), on data-parallel
// rank `dp_rank`: step * G + dp_rank * (M * B) + micro * B + b with G = M * B * DP.
inline uint64_t sampleIndex(uint64_t step, int global_batch, int dp_rank, int microbatches,
                            int micro_batch, int micro, int b) {
  return step * uint64_t(global_batch) + uint64_t(dp_rank) * microbatches * micro_batch +
         uint64_t(micro) * micro_batch + b;
}

}  // namespace gpttrain
