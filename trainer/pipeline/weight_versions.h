// PipeDream-2BW's double-buffered weights: two versions of every parameter of a stage (the second
// one allocated as parameter memory), which one the model computes with, and the delayed update
// that forms a new version. It does not schedule (schedule_2bw.h) or reduce gradients.
//
// Batch b runs on version V_b, held in buffer (b + parity) % 2; V_0 = V_1 = the initial weights.
// update(b) forms V_{b+2} = V_{b+1} - update(grad f(V_b)) in V_b's buffer: it copies V_{b+1} there
// and runs the optimizer on it with the gradient the parameters hold (computed on V_b).
#pragma once

#include "data_parallel/dp_strategy.h"
#include "model/params.h"

#include <functional>
#include <string>
#include <vector>

namespace gpttrain {

class WeightVersions {
 public:
  // Takes the parameters' current values as both versions (call under the parameter memory tag:
  // the second buffer is allocated here).
  explicit WeightVersions(ParamSet& params);
  WeightVersions(const WeightVersions&) = delete;
  WeightVersions& operator=(const WeightVersions&) = delete;

  // Points every parameter at batch b's version (no copy; autograd's saved tensors of other
  // batches are not disturbed). Call before each forward and backward of batch b.
  void use(int64_t batch);
  // Forms V_{b+2} in V_b's buffer: copies V_{b+1} there, points the parameters at it and calls
  // `step` (clipping and the optimizer's step on the parameters' gradients). Autograd's version
  // counters of the parameters are left as they were, so batch b + 1's pending backwards (whose
  // saved tensors are V_{b+1}'s) still run.
  void update(int64_t batch, const std::function<void()>& step);
  // Parameter `i`'s buffer of batch b's version.
  at::Tensor& version(size_t i, int64_t batch) { return buffers_[(batch + parity_) & 1][i]; }
  // Checkpoint tensors: "param.<name>" for batch `next_batch`'s version and "param_next.<name>"
  // for the one after (the two a drained pipeline holds).
  NamedTensors checkpointTensors(int64_t next_batch);
  // After loading checkpointTensors(0) for a run that continues at `next_batch`: renumber the
  // buffers so the loaded "param" buffer is next_batch's version.
  void resumeAt(int64_t next_batch) { parity_ = next_batch & 1; }
  // Bytes of the second version (the memory 2bw adds to the parameters).
  int64_t extraBytes() const;

 private:
  ParamSet& params_;
  std::vector<at::Tensor> buffers_[2];
  int64_t parity_ = 0;
};

}  // namespace gpttrain
