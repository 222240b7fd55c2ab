// Activation recomputation (--recompute full|selective): runs a function of one tensor without
// keeping the activations inside it; backward re-runs it -- annotated as the phase
// "recompute_forward" -- with the dropout generators and autocast as they were, then
// backpropagates through the re-run. Parameters the function uses get their gradients accumulated
// directly, by a nested backward (like torch.utils.checkpoint's reentrant variant), so gradient
// hooks fire as usual. It does not choose what to recompute (see model.h).
#pragma once

#include "parallel/tp_layers.h"

#include <functional>
#include <memory>

namespace gpttrain {

// Called around the forward and the re-run (ZeRO-3 gathers and frees parameters there).
struct RecomputeHooks {
  std::function<void()> before_forward, after_forward;  // around the first forward
  std::function<void()> before_rerun, after_backward;   // around the re-run and its backward
};

// fn(input) with recomputation in backward. `what` and `index` name the scope ("layer", 3);
// `bf16_autocast`: the forward runs under bf16 autocast (the re-run will too, CPU or CUDA autocast
// by the device of `input`). Without grad
// mode (evaluation) it is just fn(input). `*count` is incremented at each re-run (null: not
// counted).
at::Tensor recomputed(const char* what, int64_t index, const at::Tensor& input,
                      std::function<at::Tensor(const at::Tensor&)> fn, DropoutRng* rng,
                      bool bf16_autocast, std::shared_ptr<int64_t> count,
                      RecomputeHooks hooks = {});

}  // namespace gpttrain
