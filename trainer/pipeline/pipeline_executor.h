// The one executor of pipeline schedules: runs a rank's action list (schedule.h) for one step,
// receiving and sending activations and gradients over the pipeline group and calling a
// PipelineCompute for each forward and backward. It knows neither the model nor the optimizer.
//
// Annotated: every forward/backward as a phase scope with (stage = pipeline rank, chunk,
// microbatch); every send and receive as a scope with (peer global rank, bytes, microbatch, chunk).
#pragma once

#include "parallel/collectives.h"
#include "pipeline/schedule.h"

#include <vector>

namespace gpttrain {

// What one forward or backward computes. Threading: called on the executor's thread only.
class PipelineCompute {
 public:
  virtual ~PipelineCompute() = default;
  // `input`: the received activation (a leaf that requires grad), undefined on the first virtual
  // stage. Returns the activation to send on, or on the last virtual stage the loss.
  virtual at::Tensor forward(int chunk, int microbatch, const at::Tensor& input) = 0;
  // `output`: what forward returned; `grad`: the received gradient of it, undefined on the last
  // virtual stage. Returns the gradient of `input` (undefined when input is).
  virtual at::Tensor backward(int chunk, int microbatch, const at::Tensor& input,
                              const at::Tensor& output, const at::Tensor& grad) = 0;
  // The split backward (zb-h1). backwardInput: the gradient of `input` only (undefined when input
  // is), keeping the graph for backwardWeight, which then accumulates the weights' gradients
  // (where the data-parallel hooks fire). Same arguments as backward. A computation that never
  // runs a zb-h1 list (2bw's) keeps these, which throw std::logic_error.
  virtual at::Tensor backwardInput(int chunk, int microbatch, const at::Tensor& input,
                                   const at::Tensor& output, const at::Tensor& grad);
  virtual void backwardWeight(int chunk, int microbatch, const at::Tensor& input,
                              const at::Tensor& output, const at::Tensor& grad);
  // 2bw (schedule_2bw.h): the weight version a microbatch's forward and backward use (annotated
  // when >= 0), and the update an kApplyUpdate action runs for `batch`.
  virtual int64_t weightVersion(int /*microbatch*/) const { return -1; }
  virtual void applyUpdate(int /*batch*/) {}
};

// The executor's own clock, per step (steady clock, nanoseconds summed).
struct PipelineStepStats {
  int64_t compute_ns = 0;    // inside forward and backward
  int64_t recv_wait_ns = 0;  // blocked in receives
  int max_in_flight = 0;     // microbatch-chunks forwarded and not yet backwarded (zb-h1: W'd)
};

// Runs `actions` (this rank's list, schedule.h) to the end, then waits for its sends.
// `activation_shape`: the shape of every activation and gradient exchanged; receive buffers are
// allocated on `device` (where `compute` works). Requires every rank of `pp` to run its own list
// for the same shape and schedule.
PipelineStepStats runPipelineStep(const std::vector<Action>& actions, Group& pp,
                                  const std::vector<int64_t>& activation_shape,
                                  torch::Device device, PipelineCompute& compute);

}  // namespace gpttrain
