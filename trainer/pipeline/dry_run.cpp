// Sleeping stand-ins for forward and backward (see dry_run.h).
#include "pipeline/dry_run.h"

#include <chrono>
#include <thread>

namespace gpttrain {
namespace {

void sleepMs(double ms) {
  std::this_thread::sleep_until(std::chrono::steady_clock::now() +
                                std::chrono::microseconds(static_cast<int64_t>(ms * 1000.0)));
}

}  // namespace

DryRunCompute::DryRunCompute(double forward_ms, double backward_ms, double weight_ms,
                             const PipelineShape& shape, int pp_rank,
                             std::vector<int64_t> activation_shape, torch::Device device)
    : forward_ms_(forward_ms / shape.chunks),
      backward_ms_(backward_ms / shape.chunks),
      weight_ms_(weight_ms / shape.chunks),
      shape_(shape),
      pp_rank_(pp_rank),
      activation_shape_(std::move(activation_shape)),
      options_(at::TensorOptions().device(device)) {}

at::Tensor DryRunCompute::forward(int chunk, int, const at::Tensor&) {
  sleepMs(forward_ms_);
  const bool last = chunk * shape_.stages + pp_rank_ == shape_.virtualStages() - 1;
  return last ? at::zeros({}, options_) : at::zeros(activation_shape_, options_);
}

at::Tensor DryRunCompute::backward(int, int, const at::Tensor& input, const at::Tensor&,
                                   const at::Tensor&) {
  sleepMs(backward_ms_ + weight_ms_);
  return input.defined() ? at::zeros(activation_shape_, options_) : at::Tensor();
}

at::Tensor DryRunCompute::backwardInput(int, int, const at::Tensor& input, const at::Tensor&,
                                        const at::Tensor&) {
  sleepMs(backward_ms_);
  return input.defined() ? at::zeros(activation_shape_, options_) : at::Tensor();
}

void DryRunCompute::backwardWeight(int, int, const at::Tensor&, const at::Tensor&,
                                   const at::Tensor&) {
  sleepMs(weight_ms_);
}

}  // namespace gpttrain
