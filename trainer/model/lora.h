// LoRA (Hu et al. 2021) adapters on the tensor-parallel linears: y = x W^T + b + (alpha / r) x A^T
// B^T with A [r, in] and B [out, r] trainable, W and b frozen. TP-aware as Megatron's LoRA: on a
// column-parallel linear B is split like W's output rows and A replicated; on a row-parallel linear
// A is split like W's input columns and B replicated. It does not freeze the base model (frozen.h)
// and does not choose which linears get adapters beyond reading --lora-targets.
#pragma once

#include "model/params.h"
#include "parallel/mappings.h"

#include <string>
#include <vector>

namespace gpttrain {

struct LoraConfig {
  int rank = 0;        // r; 0: no adapters
  double alpha = 0.0;  // the update is scaled by alpha / r
  // Which linears of each layer get adapters: any of "qkv", "proj", "fc1", "fc2" (config.cpp
  // checks the names).
  std::vector<std::string> targets{"qkv", "proj", "fc1", "fc2"};
  // A testing aid (--lora-init-b normal): B drawn like A instead of zeros, so that A's gradient is
  // not zero at step 1 and step 1's loss is no longer the base model's.
  bool init_b_normal = false;

  bool on() const { return rank > 0; }
  double scale() const { return alpha / rank; }
  // This config when `target` is one of targets, else an off one (rank 0).
  LoraConfig forTarget(const std::string& target) const;
};

// A parameter created by a LoRA adapter ("<linear>.lora_a" / "<linear>.lora_b").
bool isLoraParameter(const std::string& name);

// The adapter of one linear: its parameters registered in `params` as NAME.lora_a and NAME.lora_b,
// their full tensors drawn from (seed, name) as every parameter is, then split over TP.
// forward(x) returns the update (alpha / r) x A^T B^T in the layout the base linear's output has
// (see tp_layers.h), with the collectives that layout needs; an off adapter is never called.
// This rank's base parameters with every adapter merged in: NAME.weight + (alpha / r) B A for each
// NAME that has NAME.lora_a and NAME.lora_b in `params` (entries or frozen entries), the others as
// they are; no adapter itself. Names are the base model's ("layers.0.attn.qkv.weight").
std::vector<std::pair<std::string, at::Tensor>> mergedBaseParameters(const ParamSet& params,
                                                                     double scale);

class LoraAdapter {
 public:
  enum class Kind { kColumn, kRow };
  LoraAdapter() = default;
  LoraAdapter(ParamSet& params, const std::string& name, Kind kind, int64_t in_full,
              int64_t out_full, const LoraConfig& config, GroupPtr tp, bool sp);
  bool on() const { return a_.defined(); }
  at::Tensor forward(const at::Tensor& x) const;

 private:
  Kind kind_ = Kind::kColumn;
  at::Tensor a_,
      b_;  // column: A [r, in] replicated, B [out / tp, r]; row: A [r, in / tp], B [out, r]
  double scale_ = 0.0;
  GroupPtr tp_;
  bool sp_ = false;
  // The adapter as a module in traces ("<linear>.lora", vocab.h): parameters on this rank and over
  // all TP shards (all of them trainable).
  std::string path_;
  int64_t local_ = 0, logical_ = 0;
};

}  // namespace gpttrain
