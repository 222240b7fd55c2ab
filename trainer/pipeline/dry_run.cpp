// Sleeping stand-ins for forward and backward, and the dry run's virtual clock (see dry_run.h).
#include "pipeline/dry_run.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <thread>

namespace gpttrain {
namespace {

// A time in ns travels as three 21-bit pieces in float32 elements (exact: float has 24 bits of
// mantissa), so a message's stamp is exact up to 2^63 ns whatever the wire's float format.
constexpr int kStampElements = 3;
constexpr int64_t kPiece = int64_t(1) << 21;

int64_t toNs(double ms) {
  return static_cast<int64_t>(std::llround(ms * 1e6));
}

void stamp(at::Tensor& t, int64_t ns) {
  const at::Tensor pieces =
      at::tensor({static_cast<float>(ns / (kPiece * kPiece)),
                  static_cast<float>((ns / kPiece) % kPiece), static_cast<float>(ns % kPiece)},
                 at::kFloat);
  t.view({-1}).narrow(0, 0, kStampElements).copy_(pieces);
}

// The sender's virtual time a received tensor carries.
int64_t stampOf(const at::Tensor& message) {
  const at::Tensor p =
      message.detach().reshape({-1}).narrow(0, 0, kStampElements).to(at::kCPU, at::kDouble);
  const double* v = p.data_ptr<double>();
  return (static_cast<int64_t>(v[0]) * kPiece + static_cast<int64_t>(v[1])) * kPiece +
         static_cast<int64_t>(v[2]);
}

}  // namespace

DryRunCompute::DryRunCompute(double forward_ms, double backward_ms, double weight_ms,
                             const PipelineShape& shape, int pp_rank,
                             std::vector<int64_t> activation_shape, torch::Device device)
    : forward_ns_(toNs(forward_ms / shape.chunks)),
      backward_ns_(toNs(backward_ms / shape.chunks)),
      weight_ns_(toNs(weight_ms / shape.chunks)),
      shape_(shape),
      pp_rank_(pp_rank),
      activation_shape_(std::move(activation_shape)),
      options_(at::TensorOptions().device(device)) {
  int64_t elements = 1;
  for (int64_t d : activation_shape_) elements *= d;
  if (elements < kStampElements) {
    throw std::invalid_argument("the dry run needs activations of at least 3 elements");
  }
}

void DryRunCompute::run(int64_t cost_ns, const at::Tensor& message) {
  if (message.defined()) now_ns_ = std::max(now_ns_, stampOf(message));
  std::this_thread::sleep_until(std::chrono::steady_clock::now() +
                                std::chrono::nanoseconds(cost_ns));
  now_ns_ += cost_ns;
  busy_ns_ += cost_ns;
}

at::Tensor DryRunCompute::stamped() const {
  at::Tensor t = at::zeros(activation_shape_, options_.dtype(at::kFloat));
  stamp(t, now_ns_);
  return t;
}

at::Tensor DryRunCompute::forward(int chunk, int, const at::Tensor& input) {
  run(forward_ns_, input);
  const bool last = chunk * shape_.stages + pp_rank_ == shape_.virtualStages() - 1;
  return last ? at::zeros({}, options_) : stamped();
}

at::Tensor DryRunCompute::backward(int, int, const at::Tensor& input, const at::Tensor&,
                                   const at::Tensor& grad) {
  run(backward_ns_ + weight_ns_, grad);
  return input.defined() ? stamped() : at::Tensor();
}

at::Tensor DryRunCompute::backwardInput(int, int, const at::Tensor& input, const at::Tensor&,
                                        const at::Tensor& grad) {
  run(backward_ns_, grad);
  return input.defined() ? stamped() : at::Tensor();
}

void DryRunCompute::backwardWeight(int, int, const at::Tensor&, const at::Tensor&,
                                   const at::Tensor&) {
  run(weight_ns_, at::Tensor());
}

}  // namespace gpttrain
