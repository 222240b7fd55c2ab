// --dry-run-costs F_MS,B_MS[,W_MS]: a PipelineCompute that sleeps instead of computing (each chunk
// F/v and (B+W)/v per microbatch; zb-h1's split backward B and W) and hands on zeros of the real
// shapes, so the real schedule and real messages show a schedule's bubbles apart from the model's
// arithmetic. It trains nothing.
//
// It also keeps a virtual clock, the dry run's measurement: each rank's time starts at 0, an
// action advances it by its cost, and a message carries its sender's time (stamped into the first
// three elements of the zeros it sends), which the receiver's time cannot be earlier than. So the
// bubble comes from the real executor's order and the real messages, never from how long a sleep
// or a wake-up took on a loaded machine; the sleeps only give the trace its shape on the wall
// clock. Not a replay of an action list (tracerun_schedule's replay.h is the one).
#pragma once

#include "pipeline/pipeline_executor.h"

namespace gpttrain {

class DryRunCompute : public PipelineCompute {
 public:
  // Per-microbatch costs of the whole rank (split over its shape.chunks chunks) and the exchanged
  // shape, its zeros made on `device`. The last virtual stage returns a scalar zero "loss".
  // backward_ms: B (the input gradient), weight_ms: W; an unsplit backward sleeps B + W.
  DryRunCompute(double forward_ms, double backward_ms, double weight_ms, const PipelineShape& shape,
                int pp_rank, std::vector<int64_t> activation_shape, torch::Device device);
  at::Tensor forward(int chunk, int microbatch, const at::Tensor& input) override;
  at::Tensor backward(int chunk, int microbatch, const at::Tensor& input, const at::Tensor& output,
                      const at::Tensor& grad) override;
  at::Tensor backwardInput(int chunk, int microbatch, const at::Tensor& input,
                           const at::Tensor& output, const at::Tensor& grad) override;
  void backwardWeight(int chunk, int microbatch, const at::Tensor& input, const at::Tensor& output,
                      const at::Tensor& grad) override;

  // The virtual clock (ns since this object began): when this rank's last action ended, and the
  // sum of its actions' costs.
  int64_t virtualEndNs() const { return now_ns_; }
  int64_t virtualBusyNs() const { return busy_ns_; }

 private:
  // The action's cost on the virtual clock, after waiting for `message` (a received tensor, or
  // undefined) and sleeping the cost on the wall clock.
  void run(int64_t cost_ns, const at::Tensor& message);
  // Zeros of the activation shape carrying the virtual time.
  at::Tensor stamped() const;

  int64_t forward_ns_, backward_ns_, weight_ns_;
  PipelineShape shape_;
  int pp_rank_;
  std::vector<int64_t> activation_shape_;
  at::TensorOptions options_;
  int64_t now_ns_ = 0, busy_ns_ = 0;
};

}  // namespace gpttrain
