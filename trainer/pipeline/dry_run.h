// --dry-run-costs F_MS,B_MS[,W_MS]: a PipelineCompute that sleeps instead of computing (each chunk
// F/v and (B+W)/v per microbatch; zb-h1's split backward B and W) and hands on zeros of the real
// shapes, so the real schedule and real messages show a schedule's bubbles apart from machine load.
// It trains nothing.
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

 private:
  double forward_ms_, backward_ms_, weight_ms_;
  PipelineShape shape_;
  int pp_rank_;
  std::vector<int64_t> activation_shape_;
  at::TensorOptions options_;
};

}  // namespace gpttrain
