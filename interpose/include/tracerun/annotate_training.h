// tracerun's one-call memory categories for torch::nn programs: tracerun::tagTraining(model,
// optimizer) tags the storages of the model's parameters, their gradients and the optimizer's
// state, so a C++ program needs no per-tensor MemoryTag (issue 33). Beside annotate.h because it
// needs libtorch's nn and optim headers, which annotate.h (included by trainer/) must not pull in.
// Steps: each step() of libtorch's own optimizers ends a step (interpose/src/optimizer_steps.h);
// tagTraining also calls tracerun::trainingBegins (annotate.h), so a call before the training loop
// has the first step marked too. A program may still mark its steps with tracerun::Step.
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
// - The closed form: each call also records what the optimizer holds (its class, parameter bytes
//   and states per parameter: Adam / AdamW 2, SGD with momentum 1, plain SGD 0; another optimizer
//   gets no line) as a zero-length "model_states" phase, from which the Memory tab draws
//   "AdamW: P + G + 2P" (trace/analysis/memory_live.h). Needs scopes captured; one optimizer of
//   each class per program (the line takes the last record of each class).
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

#include <algorithm>
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

// What `optimizer` holds, for the Memory tab's closed form (trace/analysis/memory_live.h): its
// class, and over its param groups the parameter count and bytes, the states it keeps per parameter
// (Adam / AdamW 2, 3 with amsgrad; SGD 1 with momentum, 0 without; the largest among its groups;
// -1 for another optimizer) and their bytes (each state is the parameter's size), recorded as a
// zero-length "model_states" phase (core/vocabulary.h).
inline void recordModelStates(const torch::optim::Optimizer& optimizer) {
  using namespace torch::optim;
  if (&tracerun_annotate_scope_begin == nullptr) return;
  const char* name = dynamic_cast<const AdamW*>(&optimizer)  ? "AdamW"
                     : dynamic_cast<const Adam*>(&optimizer) ? "Adam"
                     : dynamic_cast<const SGD*>(&optimizer)  ? "SGD"
                                                             : "optimizer";
  int64_t params = 0, paramBytes = 0, states = 0, stateBytes = 0;
  for (const auto& group : optimizer.param_groups()) {
    const OptimizerOptions& o = group.options();
    int64_t k = -1;
    if (const auto* w = dynamic_cast<const AdamWOptions*>(&o)) k = w->amsgrad() ? 3 : 2;
    if (const auto* a = dynamic_cast<const AdamOptions*>(&o)) k = a->amsgrad() ? 3 : 2;
    if (const auto* g = dynamic_cast<const SGDOptions*>(&o)) k = g->momentum() != 0 ? 1 : 0;
    int64_t n = 0, b = 0;
    for (const at::Tensor& p : group.params()) {
      n += p.numel();
      b += p.numel() * static_cast<int64_t>(p.element_size());
    }
    params += n;
    paramBytes += b;
    states = k < 0 || states < 0 ? -1 : std::max(states, k);
    stateBytes += k > 0 ? k * b : 0;
  }
  const tracerun_annotate_arg args[4] = {{vocab::arg::kParams, params},
                                         {vocab::arg::kParamBytes, paramBytes},
                                         {vocab::arg::kStates, states},
                                         {vocab::arg::kStateBytes, states < 0 ? -1 : stateBytes}};
  const int64_t token = tracerun_annotate_scope_begin(static_cast<int>(ScopeKind::kPhase),
                                                      vocab::phase::kModelStates, name, args, 4);
  if (token > 0) tracerun_annotate_scope_end(token, nullptr);
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
  detail::recordModelStates(optimizer);
  trainingBegins();  // last: the model_states phase above must not open the first step
}

}  // namespace tracerun
