// Tensor-parallel building blocks: column- and row-parallel linears, the vocab-parallel
// embedding and cross-entropy, and the TP-aware dropout generators. Shapes are [seq, batch, ...].
// They do not decide the model's structure (see model.h).
#pragma once

#include "model/lora.h"
#include "model/params.h"
#include "parallel/mappings.h"

namespace gpttrain {

// Dropout masks: `replicated` is seeded alike on every TP rank (for activations every TP rank
// holds in full), `sharded` differently per TP rank (for split heads and sequence shards). Both
// are generators of `device` (masks are drawn where the activations are): CUDA generators on a CUDA
// device, CPU generators otherwise. A CUDA run therefore draws other masks than a CPU run.
struct DropoutRng {
  at::Generator replicated;
  at::Generator sharded;
};
DropoutRng makeDropoutRng(uint64_t seed, int tp_rank, int dp_rank, torch::Device device);
// Inverted dropout drawing its mask from `gen`; the identity when p == 0 or gen is null (eval).
at::Tensor dropout(const at::Tensor& x, double p, at::Generator* gen);

// y = x A^T + b with A's rows (outputs) split over TP. Input: replicated x (sp: x split along the
// sequence, gathered here). Output: this rank's output columns, never gathered. With `lora` on, a
// LoRA adapter (lora.h) adds its update to y: B split like A's rows, its A replicated.
class ColumnParallelLinear {
 public:
  ColumnParallelLinear(ParamSet& params, const std::string& name, int64_t in, int64_t out_full,
                       double stddev, GroupPtr tp, bool sp, const LoraConfig& lora = LoraConfig());
  at::Tensor forward(const at::Tensor& x) const;

 private:
  at::Tensor weight_, bias_;
  GroupPtr tp_;
  bool sp_;
  LoraAdapter lora_;
};

// y = x A^T + b with A's columns (inputs) split over TP. Input: this rank's input columns.
// Output: the sum over TP, replicated (sp: reduce-scattered along the sequence); b added after.
// With `lora` on, a LoRA adapter adds its update: its A split like A's columns, B replicated.
class RowParallelLinear {
 public:
  RowParallelLinear(ParamSet& params, const std::string& name, int64_t in_full, int64_t out,
                    double stddev, GroupPtr tp, bool sp, const LoraConfig& lora = LoraConfig());
  at::Tensor forward(const at::Tensor& x) const;

 private:
  at::Tensor weight_, bias_;
  GroupPtr tp_;
  bool sp_;
  LoraAdapter lora_;
};

// Token embedding with the vocabulary split over TP. forward returns this rank's partial sum
// (zero rows for tokens outside its range); the caller reduces it (all-reduce or reduce-scatter).
class VocabParallelEmbedding {
 public:
  VocabParallelEmbedding(ParamSet& params, const std::string& name, int64_t vocab, int64_t hidden,
                         double stddev, GroupPtr tp);
  at::Tensor forwardPartial(const at::Tensor& tokens) const;
  const at::Tensor& weight() const { return weight_; }

 private:
  at::Tensor weight_;
  GroupPtr tp_;
  int64_t vocab_start_, vocab_end_;
};

// Per-row cross-entropy of logits whose last dim (the vocabulary) is split over TP, without
// gathering them. logits [N, V/tp], targets [N] (global ids) -> losses [N], equal on all TP ranks.
at::Tensor vocabParallelCrossEntropy(const at::Tensor& logits, const at::Tensor& targets,
                                     const GroupPtr& tp);

}  // namespace gpttrain
