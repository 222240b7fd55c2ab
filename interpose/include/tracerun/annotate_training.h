// tracerun's one-call memory categories for torch::nn programs: tracerun::tagTraining(model,
// optimizer) tags the storages of the model's parameters, their gradients and the optimizer's
// state, so a C++ program needs no per-tensor MemoryTag (issue 33). Beside annotate.h because it
// needs libtorch's nn and optim headers, which annotate.h (included by trainer/) must not pull in.
// Not the step marker: a C++ program marks each step with tracerun::Step (annotate.h).
//
// How it works: each defined tensor's storage base address goes to libtracerun's
// tracerun_annotate_tag_memory (annotate_abi.h); the analysis then gives that allocation the
// category for its whole life (from its allocation to its free), however late the tag comes.
// Without libtracerun, or when it does not capture memory, each call costs a branch.
//
// Contract
// - Call tagTraining(model, optimizer) after each optimizer.step() (after the first one at least:
//   the optimizer's state exists from then on; gradients made with set_to_none are new blocks
//   every step, tagged by the call of their step). Any thread; cost: one pass over the
//   parameters, one C call per device.
// - Optimizer state: Adam, AdamW, SGD, RMSprop and Adagrad (libtorch's own param states); another
//   optimizer's state stays as the analysis classifies it from lifetimes (usually "other").
// - Inputs: tagTraining does not see the batches; tagMemory({inputs, targets},
//   MemoryCategory::kInput) once per batch gives them PyTorch's "input" category.
// - CPU tensors only: a CUDA block's tag needs the device's live bytes, which only the Python hooks
//   (torch.cuda.memory_stats) and the CUDA capture know; CUDA tensors are skipped.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/optimizer.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <cstdint>
#include <vector>

#include "tracerun/annotate.h"

namespace tracerun {

// Tags the storages of the defined CPU tensors among `tensors` with `category`.
inline void tagMemory(const std::vector<at::Tensor>& tensors, MemoryCategory category) {
  if (&tracerun_annotate_tag_memory == nullptr) return;
  std::vector<uint64_t> ptrs;
  ptrs.reserve(tensors.size());
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || !t.device().is_cpu() || !t.has_storage()) continue;
    const void* base = t.storage().data();
    if (base != nullptr) ptrs.push_back(reinterpret_cast<uint64_t>(base));
  }
  if (ptrs.empty()) return;
  tracerun_annotate_tag_memory(ptrs.data(), static_cast<int>(ptrs.size()), 0, -1,
                               static_cast<int>(category), -1);
}

namespace detail {

// The tensors of one of libtorch's parameter states (undefined ones are skipped by tagMemory).
inline void stateTensors(const torch::optim::OptimizerParamState& s, std::vector<at::Tensor>& out) {
  using namespace torch::optim;
  if (const auto* a = dynamic_cast<const AdamParamState*>(&s)) {
    out.insert(out.end(), {a->exp_avg(), a->exp_avg_sq(), a->max_exp_avg_sq()});
  } else if (const auto* w = dynamic_cast<const AdamWParamState*>(&s)) {
    out.insert(out.end(), {w->exp_avg(), w->exp_avg_sq(), w->max_exp_avg_sq()});
  } else if (const auto* g = dynamic_cast<const SGDParamState*>(&s)) {
    out.push_back(g->momentum_buffer());
  } else if (const auto* r = dynamic_cast<const RMSpropParamState*>(&s)) {
    out.insert(out.end(), {r->square_avg(), r->momentum_buffer(), r->grad_avg()});
  } else if (const auto* d = dynamic_cast<const AdagradParamState*>(&s)) {
    out.push_back(d->sum());
  }
}

}  // namespace detail

// Tags the model's parameters (children included), the gradients of the optimizer's parameters
// and the optimizer's state. See the contract above.
inline void tagTraining(const torch::nn::Module& model, const torch::optim::Optimizer& optimizer) {
  if (&tracerun_annotate_tag_memory == nullptr || !capturing()) return;
  tagMemory(model.parameters(/*recurse=*/true), MemoryCategory::kParameter);
  std::vector<at::Tensor> params, grads;
  for (const auto& group : optimizer.param_groups()) {
    for (const at::Tensor& p : group.params()) {
      params.push_back(p);
      grads.push_back(p.grad());
    }
  }
  tagMemory(params, MemoryCategory::kParameter);
  tagMemory(grads, MemoryCategory::kGradient);
  std::vector<at::Tensor> state;
  for (const auto& entry : optimizer.state()) {
    if (entry.second) detail::stateTensors(*entry.second, state);
  }
  tagMemory(state, MemoryCategory::kOptimizerState);
}

}  // namespace tracerun
