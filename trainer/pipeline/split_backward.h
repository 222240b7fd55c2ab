// zb-h1's split backward on a real autograd graph: B computes the stage input's gradient and, on
// its way, keeps the gradient that reaches every node where the input's path and a weight's path
// part; W then runs only the weights' paths from those kept gradients, so no gradient on the
// input's path is computed twice. Not the schedule (tracerun/schedule/zb_h1.h) nor the executor.
//
// The boundary may be a leaf (a received activation) or an inner tensor with weights beneath it
// (the first stage's embedded input): W then also starts from the boundary's own node with B's
// result. Where the graph does not allow a split (no boundary; a weight-only node reachable from
// two parting nodes, as a tied embedding on a stage that is first and last, would be run twice), W
// falls back to one full backward of the retained graph, which is correct and only slower.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace gpttrain {

struct SplitBackwardState;  // the parting nodes and what B delivered to them (split_backward.cpp)

class SplitBackward {
 public:
  // Finds the parting nodes of the graph from `output` back to `input` and the weights, and hooks
  // them to keep what B delivers to them. `input` undefined: nothing to split.
  SplitBackward(const at::Tensor& output, const at::Tensor& input);
  ~SplitBackward();
  SplitBackward(const SplitBackward&) = delete;
  SplitBackward& operator=(const SplitBackward&) = delete;

  // B: the gradient of `input` from `seed` on `output` (the graph is kept for W).
  at::Tensor backwardInput(const at::Tensor& output, const at::Tensor& seed,
                           const at::Tensor& input);
  // W: accumulates the weights' gradients (their AccumulateGrad hooks fire, as in a backward).
  // Returns false when W must instead be one full backward (see above); the caller runs it.
  bool backwardWeight();

  // How many parting nodes W starts from (0 when it falls back): for tests and the docs.
  size_t partingNodes() const;

 private:
  std::shared_ptr<SplitBackwardState> state_;  // the hooks hold it weakly: no cycle via the graph
};

}  // namespace gpttrain
